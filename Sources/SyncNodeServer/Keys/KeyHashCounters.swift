import Decide
import DecideCore

/// The work behind HINCRBY: a change to a counter field of the hash the key names, a counter of
/// its own inside the hash's collection (its slots laid out as `CounterSlot` says), so that
/// HINCRBY of one field on different nodes at once all count, as INCR of one key does
/// (docs/operations.md, "Counter fields of a hash"; docs/design/0001-counters.md).
///
/// A field holding a plain value (HSET's) that is a whole number first has it taken over by the
/// field's counter, as INCR takes over a string: the value goes into a base slot keyed by the
/// value's version, which every node converting that same value writes alike, and the plain
/// field is deleted. Any other value is refused as Redis refuses it. A field reads as its plain
/// value when it has one, else as its counter's total (absent at 0).
struct KeyHashCounterChange: Sendable {
    /// What the decision found and did; read after `decide` returns.
    final class Outcome: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        /// The field's total after the change.
        var total: Int64 = 0
        /// The error reply instead of the total.
        var error: String?
    }

    let key: StateKey
    /// The field's element id (its JSON).
    let field: [UInt8]
    let amount: Int64
    let outcome = Outcome()

    /// Redis's reply for a field whose value is not a whole number in 64 bits.
    static let notAnInteger = "ERR hash value is not an integer"

    /// What field `key` (an element key of a hash) reads as when it holds no plain value: its
    /// counter's total as a stored number, nil when it has none or it is 0.
    static func value(_ read: StorageReader, field key: StateKey) -> PackedBytes? {
        guard read.holdsCompounds else { return nil }
        return KeyCounterChange.stored(read.counterTotal(ofField: key.element, ofHashNamed: key.name))
    }

    /// Runs the change through `access`. It may run twice, the first time in a batch the node
    /// refused (`WriteBatch`): the outcome starts over each time.
    func apply(_ access: inout KeyAccess) {
        outcome.total = 0
        outcome.error = nil
        if KeyKind.holdsOther(than: .hash, access, key) {
            outcome.error = KeySetChange.wrongType
            return
        }
        // A stale marker of an emptied key goes first: a new hash starts with no lifetime. A
        // live hash's lifetime reaches the field's slot by itself (`StorageWriter.change`).
        _ = KeyLifetime.inherited(&access, key, kind: .hash)
        let element = StateKey(name: key.name, element: field)
        if let held = access.plainEntry(element), let value = held.value {
            guard let number = ValueMapping.integer(value) else {
                outcome.error = Self.notAnInteger
                return
            }
            // A counter under the plain value (a concurrent HSET and HINCRBY leave both) is
            // reset first, as HSET would have had it seen it: the result is the value read plus
            // the amount.
            if Self.value(access.read, field: element) != nil {
                access.write.change(.reset, counterField: field, ofHashNamed: key.name)
            }
            let expiry = held.expiresAtMilliseconds.map { WriteExpiry.at(milliseconds: $0) } ?? .never
            if let version = access.storedVersion(element) {
                access.write.counterBase(ofField: field, ofHashNamed: key.name, from: version, value: number, expiry: expiry)
            } else {
                // Written earlier in this MULTI block: no other node has it, so it is simply added.
                access.write.change(.increment(by: number), counterField: field, ofHashNamed: key.name)
            }
            access.set(nil, into: element, resettingCounter: false)
        }
        outcome.total = access.write.change(.increment(by: amount), counterField: field, ofHashNamed: key.name)
    }
}
