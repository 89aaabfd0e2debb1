import Decide
import DecideCore

/// The work behind SADD and SREM, and what the keyspace commands read of a set: a plain key
/// names the `SetState` of that name (so a Swift service with `Element == String` reads the
/// same members), whose members are the client's strings stored as JSON strings, one for one
/// (docs/operations.md, "Sets"). An insert on one node and a remove of the same member on
/// another at once leave it in (docs/consistency.md, "Sets").
///
/// A key holds a plain value (a string or a counter), a set or a hash, never two: SADD or SREM
/// on a key of another kind answers WRONGTYPE, as GET and INCR on a set do; SET and DEL over a
/// set replace it.
struct KeySetChange: Sendable {
    /// What the decision found and did; read after `decide` returns.
    final class Outcome: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        /// Members added (SADD) or removed (SREM) that were not in / were in the set.
        var changed = 0
        /// The error reply instead (the key holds a value that is no set).
        var error: String?
    }

    let key: StateKey
    /// The members, as JSON strings.
    let members: [[UInt8]]
    /// SADD (true) or SREM.
    let inserting: Bool
    let outcome = Outcome()

    /// Redis's reply to a command on a key of another kind.
    static let wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

    /// The JSON a client's member string is stored as (a JSON string of its text), or nil for
    /// bytes that are not UTF-8.
    static func member(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        bytes.withUnsafeBytes { raw in ValueMapping.isUTF8(raw) ? ValueCoding.quoted(raw) : nil }
    }

    /// Runs the change through `access`. It may run twice, the first time in a batch the node
    /// refused (`WriteBatch`): the outcome starts over each time.
    func apply(_ access: inout KeyAccess) {
        outcome.changed = 0
        outcome.error = nil
        if KeyKind.holdsOther(than: .set, access, key) {
            outcome.error = Self.wrongType
            return
        }
        let expiry = inserting ? KeyLifetime.inherited(&access, key, kind: .set) : .never
        for member in members {
            let changed = inserting
                ? access.write.insert(member: member, intoSetNamed: key.name, expiry: expiry)
                : access.write.remove(member: member, fromSetNamed: key.name)
            if changed { outcome.changed += 1 }
        }
    }
}
