import Decide
import DecideCore

/// The reads and writes of untyped keys that a keyspace command makes inside a decision.
///
/// A command alone reads the node's state (`StorageReader.entry`) and writes through the
/// decision's writer. The commands of a MULTI … EXEC block run one after another inside one
/// decision, and each must see what the ones before it wrote, as Redis runs them: then the
/// access is made `tracking`, and a key written earlier in the block reads as that write
/// (`StorageReader.entry` shows the stored state, without the decision's own writes).
///
/// Guarantees: `entry` and `value` answer as of the decision's instant (`nowMilliseconds`), a
/// value expired at it reading as absent; a tracking access answers for a key written through
/// it with that write.
struct KeyAccess {
    /// What a key holds as this access reads it.
    struct Held {
        /// The value (nil: a tombstone).
        var value: PackedBytes?
        /// When it expires (Unix milliseconds, hybrid clock), nil when it never does.
        var expiresAtMilliseconds: UInt64?
        /// Whether it is owned by the node that wrote it (docs/consistency.md, "Node-owned keys").
        var owned: Bool
    }

    let read: StorageReader
    let write: StorageWriter
    /// Whether reads see the writes made through this access (MULTI … EXEC).
    let tracking: Bool
    /// The decision's instant: lifetimes are measured from it.
    let nowMilliseconds: UInt64
    /// The keys written through this access when `tracking`, with what they now hold.
    private var written: [StateKey: Held] = [:]

    init(read: StorageReader, write: StorageWriter, tracking: Bool) {
        self.read = read
        self.write = write
        self.tracking = tracking
        self.nowMilliseconds = read.nowMilliseconds
    }

    /// What `key` holds: nil when it was never written or its value expired; a tombstone is
    /// `Held` with a nil value. A plain key with no value of its own that names a counter with a
    /// total other than 0 holds that total, as Redis's INCR leaves a string, and the counter's
    /// lifetime.
    func entry(_ key: StateKey) -> Held? {
        let plain = plainEntry(key)
        guard key.elementCount == 0, plain?.value == nil, let total = KeyCounterChange.heldTotal(read, name: key.name) else { return plain }
        return Held(value: total, expiresAtMilliseconds: read.lifetime(ofCollectionNamed: key.name), owned: false)
    }

    /// The version `key`'s stored value has (nil: none, or written through this access).
    func storedVersion(_ key: StateKey) -> Version? {
        if tracking, written[key] != nil { return nil }
        return read.entry(key)?.version
    }

    /// What `key` itself holds, without a counter of its name (see `entry`).
    func plainEntry(_ key: StateKey) -> Held? {
        if tracking, let held = written[key] {
            if let instant = held.expiresAtMilliseconds, instant <= nowMilliseconds { return nil }
            return held
        }
        guard let entry = read.entry(key) else { return nil }
        return Held(value: entry.packedValue, expiresAtMilliseconds: entry.expiresAtMilliseconds, owned: entry.ownedByWriter)
    }

    /// The value `key` holds, nil when none.
    func value(_ key: StateKey) -> PackedBytes? {
        entry(key)?.value
    }

    /// Before a plain key's SET or DEL: resets the counter of its name and empties the set, the
    /// hash and the sorted set of its name, as a SET or DEL over a Redis counter, set, hash or
    /// sorted set replaces it. O(1)
    /// for a name no collection, counter or set uses (every plain SET runs it, batched or not);
    /// `countingThisDecision` also looks for elements this decision wrote (a MULTI block's).
    static func replaceOtherKinds(of key: StateKey, read: StorageReader, write: StorageWriter, countingThisDecision: Bool = false) {
        guard key.elementCount == 0, read.storesElements(ofCollectionNamed: key.name, countingThisDecision: countingThisDecision) else { return }
        // The key's lifetime as a whole, this decision's writes applied (a MULTI block's EXPIRE).
        // A counter with one expires now, every node's slots with it (a reset would leave this
        // node's decrements behind the other slots' instant); one without is reset. Any other
        // kind's lifetime is deleted with it.
        // A hash's counter fields (HINCRBY's) are counters too, and go the same way.
        let lifetime = read.lifetime(ofCollectionNamed: key.name)
        let counted = read.counterTotal(named: key.name) != 0
        let countedFields = read.counterFields(ofHashNamed: key.name)
        if lifetime != nil, counted || !countedFields.isEmpty {
            let now = WriteExpiry.at(milliseconds: read.nowMilliseconds)
            write.giveLifetime(now, toCounterNamed: key.name)
            if !countedFields.isEmpty { write.giveLifetime(now, toCounterFieldsOfHashNamed: key.name) }
        } else {
            if counted { write.change(.reset, counterNamed: key.name) }
            for (field, _) in countedFields { write.change(.reset, counterField: field, ofHashNamed: key.name) }
            if lifetime != nil { write.raw(packed: nil, into: KeyLifetime.marker(of: key)) }
        }
        write.removeAll(fromSetNamed: key.name)
        if read.hasFields(ofHashNamed: key.name) { write.deleteFields(ofHashNamed: key.name) }
        if read.hasScoredMembers(ofSortedSetNamed: key.name) { write.removeAll(fromSortedSetNamed: key.name) }
    }

    /// The set, hash or sorted set plain key `key` names (`KeyKind`), this access's writes
    /// applied; nil for none.
    func kind(_ key: StateKey) -> KeyKind? {
        KeyKind.of(read, key)
    }

    /// Writes `value` (nil: deletes) into `key`. A plain key's write also resets the counter of
    /// its name and empties the set and the hash of its name, as a SET or DEL over a Redis
    /// counter, set or hash replaces it (`resettingCounter` false: not, for INCR taking the value
    /// over).
    mutating func set(_ value: PackedBytes?, into key: StateKey, expiry: WriteExpiry = .never, owned: Bool = false,
                      resettingCounter: Bool = true) {
        if resettingCounter { Self.replaceOtherKinds(of: key, read: read, write: write, countingThisDecision: true) }
        guard let value else {
            write.raw(packed: nil, into: key)
            if tracking { written[key] = Held(value: nil, expiresAtMilliseconds: nil, owned: false) }
            return
        }
        write.raw(packed: value, into: key, expiry: expiry, ownedByThisNode: owned)
        guard tracking else { return }
        // As the commit sets it, from the decision's instant (it commits at or after it).
        written[key] = Held(value: value, expiresAtMilliseconds: expiry.instant(atMilliseconds: nowMilliseconds), owned: owned)
    }
}
