/// The binary encoding of deltas and entry batches (docs/replication.md §6, "Messages").
///
/// Layout: `u8 format (= 1)`, `u8 kind` (1 delta, 2 entry batch), then the body, all integers
/// little-endian, lengths and counts as LEB128 varints.
/// - delta: `u64 timestamp`, `str node`, `varint n`, n × (`str name`, `bytes element`, value).
/// - entry batch: `varint n`, n × (`str name`, `bytes element`, `u64 timestamp`, `str node`,
///   value).
/// - value: `u8 flags`: 0 a tombstone; otherwise bit 0 (set), bit 1 the value expires, bit 2
///   the writing node owns it; then `bytes value`, and `u64 expiresAtMilliseconds`
///   (1 ... 2^48 - 1) when bit 1 is set. Any other flags byte is refused (`invalidFlag`); a
///   node older than expiring and owned keys refuses every flags byte but 0 and 1, so a
///   cluster is upgraded before it uses them.
///
/// Guarantees: `decode(encode(x)) == x`; any other input, including every truncation of a
/// valid encoding and any length over `WireLimits`, throws a `WireDecodeError`.
@usableFromInline
package struct WireCodec: Sendable {
    /// Upper bounds the decoder enforces before it allocates (`WireLimits`).
    package typealias Limits = WireLimits

    public static let format: UInt8 = 1
    public static let deltaKind: UInt8 = 1
    public static let entryBatchKind: UInt8 = 2

    public let limits: Limits

    public init(limits: WireLimits = WireLimits()) { self.limits = limits }

    /// The fixed part of the size a node bounds a decision by (`maxDecisionBytes`), for a
    /// decision of the node whose id has `nodeBytes` bytes; each write adds
    /// `maxEncodedEntryBytes` (its encoding as a catch-up entry, which carries the version).
    @inlinable
    package static func decisionHeaderBytes(nodeBytes: Int) -> Int { 16 + nodeBytes }

    /// The most bytes one entry takes in an entry batch, from the sizes of its parts: the
    /// parts themselves, the timestamp, presence flag and expiry, and four lengths as 5-byte
    /// varints.
    @inlinable
    public static func maxEncodedEntryBytes(nameBytes: Int, elementBytes: Int, nodeBytes: Int, valueBytes: Int) -> Int {
        nameBytes + elementBytes + nodeBytes + valueBytes + 8 + 1 + 8 + 4 * 5
    }

    public func encode(_ delta: Delta) -> [UInt8] {
        encode(delta, afterTypeByte: nil)
    }

    /// `delta`'s encoding, after `type` when one is given (a message that carries a delta is
    /// its type byte and then this): one allocation of the exact size, written in place.
    package func encode(_ delta: Delta, afterTypeByte type: UInt8?) -> [UInt8] {
        encodeDelta(version: delta.version, count: delta.writes.count, afterTypeByte: type) { index, visit in
            let write = delta.writes[index]
            visit(write.key, write.packedValue, write.expiresAtMilliseconds, write.ownedByWriter)
        }
    }

    /// A delta's part a caller hands over for each write, borrowed for the call: the key, the
    /// value (nil: a delete), its expiry instant and whether its writer owns it.
    package typealias WriteParts = (_ key: StateKey, _ value: PackedBytes?, _ expiresAt: UInt64?, _ owned: Bool) -> Void

    /// The encoding of the delta of `count` writes at `version`, after `type` when one is given,
    /// from writes a caller holds in its own form (a node's pending writes: no `Delta` is built):
    /// `write(index, visit)` calls `visit` with the parts of write `index`, the same ones each
    /// time. The same bytes `encode(_:)` writes for the same delta. Given `maxBytes`, at least
    /// the encoding's size, the writes are visited once, into scratch memory of that size;
    /// without, twice: to size the encoding, then to write it.
    package func encodeDelta(version: Version, count: Int, afterTypeByte type: UInt8?, maxBytes: Int? = nil,
                             write: (_ index: Int, _ visit: WriteParts) -> Void) -> [UInt8] {
        var encoded: [UInt8] = []
        withEncodedDelta(version: version, count: count, afterTypeByte: type, maxBytes: maxBytes, write: write) {
            encoded = [UInt8](copying: $0)
        }
        return encoded
    }

    /// `encodeDelta`, the encoding lent to `body` from the scratch memory it was written in,
    /// for a caller that copies it elsewhere anyway (a link's outbox): no array. Not generic
    /// over a result: a generic function of this module called from another is not
    /// specialised there, and looked its types up at run time (about 500 instructions a call).
    package func withEncodedDelta(version: Version, count: Int, afterTypeByte type: UInt8?, maxBytes: Int? = nil,
                                  write: (_ index: Int, _ visit: WriteParts) -> Void,
                                  _ body: (UnsafeRawBufferPointer) -> Void) {
        var bytes = maxBytes ?? 0
        if maxBytes == nil {
            bytes = (type == nil ? 0 : 1) + 2 + 8 + Self.stringBytes(version.node) + WireCursor.varintBytes(UInt64(count))
            for index in 0..<count {
                write(index) { key, value, expiresAt, _ in
                    bytes += Self.stringBytes(key.name) + WireCursor.varintBytes(UInt64(key.elementCount)) + key.elementCount + 1
                    if let value {
                        bytes += WireCursor.varintBytes(UInt64(value.count)) + value.count
                        if expiresAt != nil { bytes += 8 }
                    }
                }
            }
        }
        // Written in scratch memory (on the stack when small) and copied into the array in one
        // piece: the standard library's initialisers that hand out an array's uninitialised
        // storage are not specialised, and looked up the storage type at run time for more
        // than the copy costs.
        return withUnsafeTemporaryAllocation(byteCount: bytes, alignment: 8) { buffer in
            var cursor = WireCursor(buffer)
            if let type { cursor.writeUInt8(type) }
            cursor.writeUInt8(Self.format)
            cursor.writeUInt8(Self.deltaKind)
            cursor.writeUInt64(version.timestamp.rawValue)
            cursor.writeString(version.node)
            cursor.writeVarint(UInt64(count))
            for index in 0..<count {
                write(index) { key, value, expiresAt, owned in
                    Self.writeKey(key, into: &cursor)
                    Self.writeValue(value, expiresAt: expiresAt, owned: owned, into: &cursor)
                }
            }
            precondition(maxBytes != nil || cursor.remaining == 0, "WireCodec: a delta's computed size was too large")
            return body(UnsafeRawBufferPointer(rebasing: buffer[..<(bytes - cursor.remaining)]))
        }
    }

    /// At least the bytes of the delta whose node id has `nodeBytes` bytes and whose writes
    /// have `decisionBytes` (`Node.decisionBytes`: each write's catch-up entry, which carries the
    /// node id and more, is larger than its part of a delta), after a type byte.
    package static func maxDeltaBytes(decisionBytes: Int) -> Int { decisionBytes + 8 }

    /// The bytes a string takes: its length as a varint, then its UTF-8.
    private static func stringBytes(_ text: String) -> Int {
        let count = text.utf8.count
        return WireCursor.varintBytes(UInt64(count)) + count
    }

    /// Decodes the delta that starts at byte `position` of `bytes` and runs to their end (a
    /// frame's payload after its type byte is read in place, not copied out first).
    public func decodeDelta(_ bytes: [UInt8], from position: Int = 0) throws(WireDecodeError) -> Delta {
        var recent = RecentWireStrings()
        return try withWireBytes(bytes) { raw throws(WireDecodeError) in try decodeDelta(raw, from: position, recent: &recent) }
    }

    /// `decodeDelta`, reusing the node id and collection name of `recent` where the bytes say
    /// the same (the same result, without building and validating them again), and leaving
    /// this delta's in `recent` for the next one.
    package func decodeDelta(_ bytes: UnsafeRawBufferPointer, from position: Int = 0, recent: inout RecentWireStrings) throws(WireDecodeError) -> Delta {
        var version: Version?
        var writes: [Delta.Write] = []
        try Self.withUTF8(of: recent.version?.node) { validNode throws(WireDecodeError) in
            try Self.withUTF8(of: recent.name?.text) { validName throws(WireDecodeError) in
                try walkDelta(bytes, from: position, validNode: validNode, validName: validName) { timestamp, node, count in
                    version = recent.version(timestamp: HLCTimestamp(rawValue: timestamp), node: node)
                    writes.reserveCapacity(count)
                } write: { name, element, value, _ in
                    writes.append(Self.write(name: name, element: element, value: value, recent: &recent))
                }
            }
        }
        return Delta(version: version!, writes: writes)
    }

    /// Lends the UTF-8 bytes of `text` for the call (nil for none), passing on `body`'s typed error.
    private static func withUTF8<Result>(of text: String?, _ body: (UnsafeRawBufferPointer?) throws(WireDecodeError) -> Result)
        throws(WireDecodeError) -> Result {
        guard var text else { return try body(nil) }
        let outcome: Swift.Result<Result, WireDecodeError> = text.withUTF8 { utf8 in
            do throws(WireDecodeError) { return .success(try body(UnsafeRawBufferPointer(utf8))) } catch { return .failure(error) }
        }
        return try outcome.get()
    }

    /// The write whose parts lie in a delta's bytes as `walkDelta` hands them over, its name's
    /// string reused from `recent` when the bytes are its.
    package static func write(name: UnsafeRawBufferPointer, element: UnsafeRawBufferPointer, value: WireValue?,
                              recent: inout RecentWireStrings) -> Delta.Write {
        let known = recent.name(utf8: name)
        return Delta.Write(key: StateKey(name: known.text, nameHash: known.hash, elementBytes: element),
                           packedValue: value.map { PackedBytes($0.bytes) }, expiresAtMilliseconds: value?.expiresAt,
                           ownedByWriter: value?.owned ?? false)
    }

    /// A present value as it lies in a delta's bytes: its bytes, expiry instant and ownership.
    package struct WireValue {
        package let bytes: UnsafeRawBufferPointer
        package let expiresAt: UInt64?
        package let owned: Bool
    }

    /// Reads the delta that starts at byte `position` of `bytes` and runs to their end, checking
    /// every rule (the one reader of deltas: `decodeDelta` builds a `Delta` from it, and
    /// `ReceivedDeltas` keeps where the parts lie). Calls `header` with the version's timestamp,
    /// the node id's bytes and the count of writes, then `write` for each write with its name,
    /// element and value (nil: a delete) as they lie in `bytes`; throws, having called them for
    /// a prefix, when anything is wrong. A node id or name equal to `validNode` or `validName`
    /// (or to the name of the write before) is not checked for UTF-8 again; `write` is told
    /// whether its name was (`sameName`), so a caller may reuse what it worked out from it.
    package func walkDelta(
        _ bytes: UnsafeRawBufferPointer, from position: Int, validNode: UnsafeRawBufferPointer?, validName: UnsafeRawBufferPointer?,
        header: (_ timestamp: UInt64, _ node: UnsafeRawBufferPointer, _ count: Int) -> Void,
        write: (_ name: UnsafeRawBufferPointer, _ element: UnsafeRawBufferPointer, _ value: WireValue?, _ sameName: Bool) -> Void
    ) throws(WireDecodeError) {
        var reader = WireReader(bytes, position: position)
        try readHeader(&reader, kind: Self.deltaKind)
        let timestamp = try reader.readUInt64("version.timestamp")
        let node = try reader.readUTF8InPlace("version.node", limit: limits.maxNodeIDBytes, known: validNode)
        let count = try reader.readCount("delta.count", limit: limits.maxEntriesPerMessage, minimumItemBytes: 3)
        header(timestamp, node, count)
        var lastName = validName
        for _ in 0..<count {
            let (name, sameName) = try reader.readUTF8InPlace("key.name", limit: limits.maxNameBytes, matching: lastName)
            lastName = name
            let element = try reader.readBytesInPlace("key.element", limit: limits.maxElementBytes)
            write(name, element, try readValue(&reader), sameName)
        }
        try reader.expectEnd()
    }

    public func encode(_ entries: [KeyedEntry]) -> [UInt8] {
        var writer = WireWriter(reservingCapacity: 8 + entries.count * 64)
        writer.writeUInt8(Self.format)
        writer.writeUInt8(Self.entryBatchKind)
        writer.writeVarint(UInt64(entries.count))
        for item in entries {
            Self.writeKey(item.key, into: &writer)
            writer.writeUInt64(item.entry.version.timestamp.rawValue)
            writer.writeString(item.entry.version.node)
            Self.writeValue(item.entry.packedValue, expiresAt: item.entry.expiresAtMilliseconds, owned: item.entry.ownedByWriter, into: &writer)
        }
        return writer.bytes
    }

    public func decodeEntries(_ bytes: [UInt8]) throws(WireDecodeError) -> [KeyedEntry] {
        try withWireBytes(bytes) { raw throws(WireDecodeError) in try decodeEntries(raw) }
    }

    /// `decodeEntries` over bytes read in place (a frame's payload after its header).
    package func decodeEntries(_ bytes: UnsafeRawBufferPointer) throws(WireDecodeError) -> [KeyedEntry] {
        var reader = WireReader(bytes)
        try readHeader(&reader, kind: Self.entryBatchKind)
        let count = try reader.readCount("entries.count", limit: limits.maxEntriesPerMessage, minimumItemBytes: 12)
        var entries: [KeyedEntry] = []
        entries.reserveCapacity(count)
        var recent = RecentWireStrings()
        for _ in 0..<count {
            let key = try readKey(&reader, recent: &recent)
            let version = try readVersion(&reader, recent: &recent)
            let value = try readValue(&reader)
            // A short value is copied from the frame into its place; a longer one into an array.
            entries.append(KeyedEntry(key: key, entry: Entry(version: version, packedValue: value.map { PackedBytes($0.bytes) },
                                                             expiresAtMilliseconds: value?.expiresAt, ownedByWriter: value?.owned ?? false)))
        }
        try reader.expectEnd()
        return entries
    }

    /// A key, as both encoders write it (`WireSink`: the delta's sized cursor, the batch's writer).
    private static func writeKey<Sink: WireSink>(_ key: StateKey, into sink: inout Sink) {
        sink.writeString(key.name)
        key.withElementBytes { sink.writeBytes($0) }
    }

    private static let presentFlag: UInt8 = 1
    private static let expiresFlag: UInt8 = 2
    private static let ownedFlag: UInt8 = 4

    /// A value (or a tombstone's 0 flags byte), as both encoders write it.
    private static func writeValue<Sink: WireSink>(_ value: PackedBytes?, expiresAt: UInt64?, owned: Bool, into sink: inout Sink) {
        guard let value else {
            sink.writeUInt8(0)
            return
        }
        sink.writeUInt8(Self.valueFlags(expiresAt: expiresAt, owned: owned))
        value.withUnsafeBytes { sink.writeBytes($0) }
        if let expiresAt { sink.writeUInt64(expiresAt) }
    }

    /// The flags byte of a present value.
    private static func valueFlags(expiresAt: UInt64?, owned: Bool) -> UInt8 {
        presentFlag | (expiresAt == nil ? 0 : expiresFlag) | (owned ? ownedFlag : 0)
    }

    private func readHeader(_ reader: inout WireReader, kind: UInt8) throws(WireDecodeError) {
        let format = try reader.readUInt8("format")
        guard format == Self.format else { throw .unsupportedFormat(format) }
        let found = try reader.readUInt8("kind")
        guard found == kind else { throw .unexpectedKind(expected: kind, found: found) }
    }

    /// A version; its node id and hash are `recent`'s when the bytes are its node id.
    private func readVersion(_ reader: inout WireReader, recent: inout RecentWireStrings) throws(WireDecodeError) -> Version {
        let timestamp = HLCTimestamp(rawValue: try reader.readUInt64("version.timestamp"))
        let node = try reader.readString("version.node", limit: limits.maxNodeIDBytes, reusing: recent.version?.node)
        let version = if node.reused, let known = recent.version {
            Version(timestamp: timestamp, node: known.node, nodeHash: known.nodeHash)
        } else {
            Version(timestamp: timestamp, node: node.text)
        }
        recent.remember(version, sameNode: node.reused)
        return version
    }

    /// A key; its name (and the name's hash) is `recent`'s when the bytes are that name.
    private func readKey(_ reader: inout WireReader, recent: inout RecentWireStrings) throws(WireDecodeError) -> StateKey {
        let name = try reader.readString("key.name", limit: limits.maxNameBytes, reusing: recent.name?.text)
        let nameHash = if name.reused, let known = recent.name { known.hash } else { StateKey.nameHash(name.text) }
        recent.remember(name: name.text, hash: nameHash, sameName: name.reused)
        let element = try reader.readBytesInPlace("key.element", limit: limits.maxElementBytes)
        return StateKey(name: name.text, nameHash: nameHash, elementBytes: element)
    }

    /// A value (nil: a tombstone's 0 flags byte), its bytes where they lie in the input.
    private func readValue(_ reader: inout WireReader) throws(WireDecodeError) -> WireValue? {
        let flags = try reader.readUInt8("value.present")
        guard flags != 0 else { return nil }
        guard flags & Self.presentFlag != 0, flags & ~(Self.presentFlag | Self.expiresFlag | Self.ownedFlag) == 0 else {
            throw .invalidFlag(field: "value.present", value: flags)
        }
        let bytes = try reader.readBytesInPlace("value.bytes", limit: limits.maxValueBytes)
        var expiresAt: UInt64?
        if flags & Self.expiresFlag != 0 {
            let instant = try reader.readUInt64("value.expiresAt")
            guard (1...HLCTimestamp.maxPhysicalMilliseconds).contains(instant) else {
                throw .outOfRange(field: "value.expiresAt", value: instant)
            }
            expiresAt = instant
        }
        return WireValue(bytes: bytes, expiresAt: expiresAt, owned: flags & Self.ownedFlag != 0)
    }
}
