import Decide
import DecideCore

/// The work behind INCR, INCRBY, DECR and DECRBY: a change to the counter named by the key
/// (a `CounterState` of that name, so a Swift service reads the same total), made in this
/// process's slot, so that changes on different nodes at once all count (docs/consistency.md,
/// "Counters"; docs/operations.md, "Counters").
///
/// A key holding a plain value that is a whole number first has it taken over by the counter:
/// the value goes into a base slot keyed by the value's version, which every node converting
/// that same value writes alike, and the plain value is deleted. Any other value is refused as
/// Redis refuses it.
struct KeyCounterChange: Sendable {
    /// What the decision found and did; read after `decide` returns.
    final class Outcome: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        /// The counter's total after the change.
        var total: Int64 = 0
        /// The error reply instead of the total (the key's value is no number).
        var error: String?
    }

    let key: StateKey
    let amount: Int64
    let outcome = Outcome()

    /// What plain key `name` reads as when it holds no value of its own: the total of the
    /// counter of that name as a stored number, nil when there is none or it is 0.
    static func heldTotal(_ read: StorageReader, name: String) -> PackedBytes? {
        guard read.holdsCompounds, read.mayHoldKinds(ofCollectionNamed: name).counter else { return nil }
        return stored(read.counterTotal(named: name))
    }

    /// What a counter's total reads as: the number as a stored (JSON) value, nil for 0 (a
    /// counter at 0 holds nothing).
    static func stored(_ total: Int64) -> PackedBytes? {
        total == 0 ? nil : PackedBytes(Array(String(total).utf8))
    }

    /// What `key` reads as for GET, EXISTS, TYPE and MGET: its value, or for a plain key with
    /// none, its counter's total (`heldTotal`).
    static func value(_ read: StorageReader, _ key: StateKey) -> PackedBytes? {
        if let value = read.entry(key)?.packedValue { return value }
        return key.elementCount == 0 ? heldTotal(read, name: key.name) : nil
    }

    /// Redis's reply for a value that is not a whole number in 64 bits.
    static let notAnInteger = "ERR value is not an integer or out of range"

    /// Runs the change through `access`. It may run twice, the first time in a batch the node
    /// refused (`WriteBatch`): the outcome starts over each time.
    func apply(_ access: inout KeyAccess) {
        outcome.total = 0
        outcome.error = nil
        if access.kind(key) != nil {
            outcome.error = KeySetChange.wrongType
            return
        }
        if let held = access.plainEntry(key), let value = held.value {
            guard let number = ValueMapping.integer(value) else {
                outcome.error = Self.notAnInteger
                return
            }
            // The string's lifetime goes over to the counter with its value, as INCR keeps a
            // key's TTL in Redis.
            let expiry = held.expiresAtMilliseconds.map { WriteExpiry.at(milliseconds: $0) } ?? .never
            if let version = access.storedVersion(key) {
                access.write.counterBase(named: key.name, from: version, value: number, expiry: expiry)
            } else {
                // Written earlier in this MULTI block: no other node has it, so it is simply added.
                access.write.change(.increment(by: number), counterNamed: key.name)
            }
            if expiry != .never { access.write.giveLifetime(expiry, toCounterNamed: key.name) }
            access.set(nil, into: key, resettingCounter: false)
        }
        outcome.total = access.write.change(.increment(by: amount), counterNamed: key.name)
    }
}
