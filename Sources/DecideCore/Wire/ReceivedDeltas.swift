/// Peers' deltas as they arrived, each checked whole against the codec's rules when it was
/// added and kept as its bytes with the positions of its parts: a batch a node applies without
/// first building a `Delta` for each (its array of writes, its keys' and version's strings, the
/// message around it, and their release afterwards: docs/design/0015-the-replicated-update.md,
/// "The technique").
///
/// Guarantees: holds only deltas that `WireCodec.decodeDelta` accepts, and reads back exactly
/// what it would decode (`delta(at:)`); a delta that breaks any rule is not added, and `append`
/// throws the same error `decodeDelta` does. Holds what the caller adds until `removeAll`: the
/// replication engine applies and empties it at the end of every socket read, or sooner past
/// bounds of its own.
///
/// A class: a node applying the batch reads it from closures nested per delta and per write,
/// and a struct would be copied (its three arrays retained and released) into each. Its owner
/// touches it from one thread at a time (the replication engine: inside its transport's
/// delegate calls, which come one at a time), so the dynamic exclusivity checks of its
/// properties are left out.
package final class ReceivedDeltas {
    /// One held delta: where it came from, its version's timestamp, where its node id and
    /// writes are, and the sizes the engine checks.
    package struct Item {
        /// The caller's tag for where the delta came from (the replication engine: its link).
        package let source: UInt64
        package let timestamp: HLCTimestamp
        fileprivate let node: Range<Int>
        fileprivate let writes: Range<Int>
        /// How many writes the delta has.
        package var writeCount: Int { writes.count }
        /// `Node.decisionBytes` of the delta: what `maxDecisionBytes` bounds.
        package let decisionBytes: Int
    }

    /// One write of a held delta: its parts' positions in `bytes`, and its key's
    /// `StateKey.stableHash`.
    private struct Write {
        let name: Range<Int>
        let element: Range<Int>
        let keyHash: UInt64
        /// nil for a delete.
        let value: Range<Int>?
        let expiresAt: UInt64?
        let owned: Bool
    }

    private let codec: WireCodec
    /// The held deltas' bytes, in memory this object owns (`HeldBytes`).
    @exclusivity(unchecked) private var bytes = HeldBytes()
    @exclusivity(unchecked) private(set) package var items: [Item] = []
    @exclusivity(unchecked) private var writes: [Write] = []
    /// The `StateKey.nameHash` of the name of the write held last: a peer's writes name the
    /// same collection again and again, hashed once.
    @exclusivity(unchecked) private var lastNameHash: StableHash?

    package init(codec: WireCodec) {
        self.codec = codec
    }

    deinit { bytes.free() }

    /// Held deltas.
    package var count: Int { items.count }
    package var isEmpty: Bool { items.isEmpty }
    /// The memory the held deltas use: their bytes and the positions of their parts.
    package var byteCount: Int {
        bytes.count + items.count * MemoryLayout<Item>.stride + writes.count * MemoryLayout<Write>.stride
    }

    /// Checks the delta that starts at byte `position` of `frame` (a message's payload, its type
    /// byte before `position`) and holds a copy, tagged `source`; throws what `decodeDelta`
    /// throws for it, holding nothing. The node id and names of the held delta before are not
    /// checked for UTF-8 again when the bytes are the same.
    package func append(_ frame: UnsafeRawBufferPointer, from position: Int, source: UInt64) throws(WireDecodeError) {
        let base = bytes.count - position
        // The writes are appended to while the held bytes are read (the node id and name of the
        // delta before): moved out of `self` for that, so they stay uniquely referenced and
        // grow in place instead of being copied.
        var added = writes
        writes = []
        defer { writes = added }
        let firstWrite = added.count
        var timestamp: UInt64 = 0
        var node = 0..<0
        var decisionBytes = 0
        // Positions of the frame's parts, moved to where the copy will be in `bytes`.
        func place(_ part: UnsafeRawBufferPointer) -> Range<Int> {
            // An empty part (its bytes lent without an address) is empty anywhere.
            guard let start = part.baseAddress, let origin = frame.baseAddress, !part.isEmpty else { return 0..<0 }
            let offset = base + (start - origin)
            return offset..<offset + part.count
        }
        let previousNode = items.last?.node
        let previousName = items.last.flatMap { $0.writes.isEmpty ? nil : added[$0.writes.upperBound - 1].name }
        var nameHash = lastNameHash
        let held = bytes.buffer
        do throws(WireDecodeError) {
            try codec.walkDelta(frame, from: position, validNode: previousNode.map { UnsafeRawBufferPointer(rebasing: held[$0]) },
                                validName: previousName.map { UnsafeRawBufferPointer(rebasing: held[$0]) }) { stamp, nodeID, _ in
                timestamp = stamp
                node = place(nodeID)
                decisionBytes = WireCodec.decisionHeaderBytes(nodeBytes: nodeID.count)
            } write: { name, element, value, sameName in
                // The name's hash: the one before's when the walk found the same bytes (the
                // previous write's name, or the held delta's last), else computed.
                var hash: StableHash
                if sameName, let known = nameHash {
                    hash = known
                } else {
                    hash = StateKey.nameHash(utf8: name)
                    nameHash = hash
                }
                hash.combine(buffer: element)
                added.append(Write(name: place(name), element: place(element), keyHash: hash.value, value: value.map { place($0.bytes) },
                                   expiresAt: value?.expiresAt, owned: value?.owned ?? false))
                decisionBytes += WireCodec.maxEncodedEntryBytes(nameBytes: name.count, elementBytes: element.count,
                                                                nodeBytes: node.count, valueBytes: value?.bytes.count ?? 0)
            }
        } catch {
            added.removeSubrange(firstWrite...)
            throw error
        }
        bytes.append(UnsafeRawBufferPointer(rebasing: frame[position...]))
        lastNameHash = nameHash
        items.append(Item(source: source, timestamp: HLCTimestamp(rawValue: timestamp), node: node, writes: firstWrite..<added.count,
                          decisionBytes: decisionBytes))
    }

    /// Empties it, keeping its memory for the next batch while that is at most `keptBytes`
    /// (a larger batch's memory, bytes and positions alike, is given back).
    package func removeAll(keepingBytes keptBytes: Int = 1 << 20) {
        let keep = heldBytes <= keptBytes
        bytes.removeAll(keepingCapacity: keep)
        items.removeAll(keepingCapacity: keep)
        writes.removeAll(keepingCapacity: keep)
        lastNameHash = nil
    }

    /// The memory it holds now, in bytes (the capacity of its arrays).
    package var heldBytes: Int {
        bytes.capacity + items.capacity * MemoryLayout<Item>.stride + writes.capacity * MemoryLayout<Write>.stride
    }

    /// Reads held delta `index` in place: its node id, then each write's name, element, value
    /// (nil: a delete), as they lie in the held bytes (valid for the call), and key hash (the
    /// `StateKey.stableHash` of the name and element).
    package func read(_ index: Int, node: (UnsafeRawBufferPointer) -> Void,
                      write: (_ name: UnsafeRawBufferPointer, _ element: UnsafeRawBufferPointer, _ value: WireCodec.WireValue?,
                              _ keyHash: UInt64) -> Void) {
        let item = items[index]
        let held = bytes.buffer
        node(UnsafeRawBufferPointer(rebasing: held[item.node]))
        for position in item.writes {
            let part = writes[position]
            write(UnsafeRawBufferPointer(rebasing: held[part.name]), UnsafeRawBufferPointer(rebasing: held[part.element]),
                  part.value.map { WireCodec.WireValue(bytes: UnsafeRawBufferPointer(rebasing: held[$0]), expiresAt: part.expiresAt,
                                                       owned: part.owned) },
                  part.keyHash)
        }
    }

    /// The version timestamp of held delta `index`. Read through here, not `items`, on a hot
    /// path: another module's read of `items` pays a dynamic exclusivity check (about 76
    /// instructions a delta), which this module's reads leave out.
    package func timestamp(ofDelta index: Int) -> HLCTimestamp { items[index].timestamp }

    /// How many writes held delta `index` has (read through here for the reason above).
    package func writeCount(ofDelta index: Int) -> Int { items[index].writeCount }

    /// The key hash of write `write` (counted from 0) of held delta `index`.
    package func keyHash(ofWrite write: Int, ofDelta index: Int) -> UInt64 {
        writes[items[index].writes.lowerBound + write].keyHash
    }

    /// Held delta `index` as `decodeDelta` decodes it (strings reused from `recent` as there).
    package func delta(at index: Int, recent: inout RecentWireStrings) -> Delta {
        var version: Version?
        var writes: [Delta.Write] = []
        writes.reserveCapacity(items[index].writes.count)
        read(index) { node in
            version = recent.version(timestamp: items[index].timestamp, node: node)
        } write: { name, element, value, _ in
            writes.append(WireCodec.write(name: name, element: element, value: value, recent: &recent))
        }
        return Delta(version: version!, writes: writes)
    }
}

/// The held deltas' bytes in memory their `ReceivedDeltas` owns and frees: read in place and
/// appended to without the retain and release an array's buffer takes around every use (two
/// atomics a delta as it is held, two more as it is applied:
/// docs/design/0009-atomics-off-the-hot-paths.md, "The receiving side"). A plain struct of the
/// owner's; it never copies itself.
private struct HeldBytes {
    private var base: UnsafeMutableRawPointer?
    private(set) var count = 0
    private(set) var capacity = 0

    /// The bytes held, valid until the next `append`, `removeAll` or `free`.
    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Appends a copy of `source`, growing the memory to at least twice its size when full.
    mutating func append(_ source: UnsafeRawBufferPointer) {
        guard let from = source.baseAddress, !source.isEmpty else { return }
        let needed = count + source.count
        if needed > capacity {
            let grown = max(needed, capacity * 2, 4_096)
            base = movedBytes(from: base, count: count, toCapacity: grown)
            capacity = grown
        }
        (base! + count).copyMemory(from: from, byteCount: source.count)
        count = needed
    }

    /// Empties it; gives the memory back unless `keepingCapacity`.
    mutating func removeAll(keepingCapacity: Bool) {
        count = 0
        if !keepingCapacity { free() }
    }

    /// Gives the memory back (the owner's `deinit`, or `removeAll`).
    mutating func free() {
        base?.deallocate()
        base = nil
        count = 0
        capacity = 0
    }
}
