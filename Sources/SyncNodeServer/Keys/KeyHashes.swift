import Decide
import DecideCore

/// The work behind HSET and HDEL, and what the keyspace commands read of a hash: a plain key
/// names the collection of that name, and its fields are that collection's elements, the
/// field's text as a JSON string for the id (so `HSET session user ann` writes the key
/// `session["user"]`, and a Swift `CollectionState` named `session` with `String` ids reads the
/// same fields). Each field is replaced last-writer-wins, on its own: two nodes writing two
/// fields of one hash at once keep both (docs/operations.md, "Hashes").
///
/// A field holds a plain value (HSET's) or a counter (HINCRBY's, `KeyHashCounterChange`); HSET
/// over a counter field resets its counter and HDEL deletes either.
///
/// A key holds a plain value, a counter, a set or a hash, never two: HSET on a key with another
/// kind answers WRONGTYPE, as GET, INCR and SADD on a hash do; SET and DEL over a hash replace it.
struct KeyHashChange: Sendable {
    /// What the decision found and did; read after `decide` returns.
    final class Outcome: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        /// Fields added (HSET: not in the hash before) or deleted (HDEL: in it before).
        var changed = 0
        /// The error reply instead (the key holds another kind).
        var error: String?
    }

    let key: StateKey
    /// (field id, new value); a nil value deletes the field (HDEL).
    let writes: [(field: [UInt8], value: PackedBytes?)]
    /// HSETNX: writes only fields that hold no value.
    var onlyAbsent = false
    let outcome = Outcome()

    /// Runs the change through `access`. It may run twice, the first time in a batch the node
    /// refused (`WriteBatch`): the outcome starts over each time.
    func apply(_ access: inout KeyAccess) {
        outcome.changed = 0
        outcome.error = nil
        if KeyKind.holdsOther(than: .hash, access, key) {
            outcome.error = KeySetChange.wrongType
            return
        }
        var seen = Set<[UInt8]>()
        let expiry = writes.contains { $0.value != nil } ? KeyLifetime.inherited(&access, key, kind: .hash) : .never
        for (field, value) in writes {
            let element = StateKey(name: key.name, element: field)
            let plain = access.plainEntry(element)?.value != nil
            // A counter field (HINCRBY's) is replaced by HSET and deleted by HDEL: its counter
            // is reset, this node's slot cancelling the total it saw (an observed reset: a
            // concurrent HINCRBY elsewhere still counts). Also under a plain value, which a
            // concurrent HSET and HINCRBY leave together, so that it does not surface later.
            let counted = KeyHashCounterChange.value(access.read, field: element) != nil
            let held = plain || counted
            if let value {
                if onlyAbsent && held { continue }
                if counted { access.write.change(.reset, counterField: field, ofHashNamed: key.name) }
                access.set(value, into: element, expiry: expiry)
                if !held, seen.insert(field).inserted { outcome.changed += 1 }
            } else if held {
                if counted { access.write.change(.reset, counterField: field, ofHashNamed: key.name) }
                if plain { access.set(nil, into: element) }
                outcome.changed += 1
            }
        }
    }
}
