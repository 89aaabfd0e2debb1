import Decide
import DecideCore

/// The work behind ZADD and ZREM, and what the keyspace commands read of a sorted set: a plain
/// key names the `SortedSetState` of that name (so a Swift service with `Member == String`
/// reads the same members), whose members are the client's strings stored as JSON strings, one
/// for one, each with its score replaced last-writer-wins on its own (docs/operations.md,
/// "Sorted sets").
///
/// A key holds one kind (`KeyKind`): ZADD or ZREM on a key of another kind answers WRONGTYPE,
/// as GET, SADD and HSET on a sorted set do; SET and DEL over a sorted set replace it.
struct KeySortedSetChange: Sendable {
    /// What the decision found and did; read after `decide` returns.
    final class Outcome: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        /// Members added (ZADD; with CH, added or given a new score) or removed (ZREM).
        var changed = 0
        /// The error reply instead (the key holds another kind).
        var error: String?
    }

    /// ZADD's NX / XX: write only members not in the set, or only those in it.
    enum Presence: Sendable { case any, absent, present }
    /// ZADD's GT / LT: update a member only to a greater, or only to a lesser, score.
    enum Direction: Sendable { case any, greater, less }

    let key: StateKey
    /// (member JSON, new score); a nil score removes the member (ZREM).
    let writes: [(member: [UInt8], score: Double?)]
    var presence = Presence.any
    var direction = Direction.any
    /// ZADD's CH: count members whose score changed, not only those added.
    var countsUpdates = false
    let outcome = Outcome()

    /// Runs the change through `access`. It may run twice, the first time in a batch the node
    /// refused (`WriteBatch`): the outcome starts over each time.
    func apply(_ access: inout KeyAccess) {
        outcome.changed = 0
        outcome.error = nil
        if KeyKind.holdsOther(than: .sortedSet, access, key) {
            outcome.error = KeySetChange.wrongType
            return
        }
        let expiry = KeyLifetime.inherited(&access, key, kind: .sortedSet)
        for (member, score) in writes {
            let held = access.read.score(of: member, inSortedSetNamed: key.name)
            guard let score else {
                if access.write.remove(member: member, fromSortedSetNamed: key.name) { outcome.changed += 1 }
                continue
            }
            switch presence {
            case .absent where held != nil, .present where held == nil: continue
            default: break
            }
            if let held {
                switch direction {
                case .greater where score <= held, .less where score >= held: continue
                default: break
                }
            }
            // Written even when the score is the same: the write is this client's, and must win
            // over an older concurrent ZREM or ZADD elsewhere, as a later write does.
            access.write.add(member: member, score: score, intoSortedSetNamed: key.name, expiry: expiry)
            if held == nil || (countsUpdates && held != score) { outcome.changed += 1 }
        }
    }
}
