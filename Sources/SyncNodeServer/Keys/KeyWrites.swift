import Decide
import DecideCore

/// The work behind the Redis-protocol writes that need to know what a key held (SET with
/// NX, XX or GET; SETNX, GETSET, GETDEL, DEL, UNLINK, MSET, SETEX): every write of one command
/// is part of one decision (the command's own, or its MULTI block's), so it commits with one
/// version and applies whole on every replica. Conditions are judged on this node's state
/// when the decision runs (docs/operations.md).
struct KeyWrites: Sendable {
    enum Condition: Sendable {
        case always
        /// Only when the key holds no value (NX).
        case ifAbsent
        /// Only when the key holds a value (XX).
        case ifPresent
    }

    /// What the decision found and did; read after `decide` returns.
    final class Outcome: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        /// The values the keys held before, in `writes` order (nil: none).
        var previous: [PackedBytes?] = []
        /// Whether the condition held and the writes were made.
        var wrote = false
        /// Deletes of keys that held a value (DEL's reply).
        var deleted = 0
    }

    /// When the written values expire (SET EX / PX / EXAT / PXAT / KEEPTTL, SETEX, PSETEX).
    enum Expiry: Sendable, Equatable {
        /// This one (`WriteExpiry.never` for none).
        case given(WriteExpiry)
        /// The expiry the key's live value had, if any (KEEPTTL).
        case keep

        static let never = Expiry.given(.never)
    }

    /// (key, new value or nil to delete).
    let writes: [(StateKey, PackedBytes?)]
    let condition: Condition
    /// Deletes only keys that hold a value (DEL): no tombstone for a key that has none.
    let deleteOnlyLive: Bool
    let expiry: Expiry
    /// The written values belong to this node (SET ... OWNED; docs/consistency.md, "Node-owned keys").
    let owned: Bool
    let outcome = Outcome()

    init(writes: [(StateKey, PackedBytes?)], condition: Condition = .always, deleteOnlyLive: Bool = false, expiry: Expiry = .never,
         owned: Bool = false) {
        self.writes = writes
        self.condition = condition
        self.deleteOnlyLive = deleteOnlyLive
        self.expiry = expiry
        self.owned = owned
    }

    /// The writes, through `access` (alone, or as one command of a MULTI … EXEC block).
    func apply(_ access: inout KeyAccess) {
        var previous: [PackedBytes?] = []
        var previousExpiry: [UInt64?] = []
        // Whether each key held something: a value, or (a plain key) a set or hash of its name.
        var held: [Bool] = []
        previous.reserveCapacity(writes.count)
        held.reserveCapacity(writes.count)
        for (key, _) in writes {
            let entry = access.entry(key)
            previous.append(entry?.value)
            held.append(entry?.value != nil || access.kind(key) != nil)
            if expiry == .keep { previousExpiry.append(entry?.expiresAtMilliseconds) }
        }
        outcome.previous = previous
        switch condition {
        case .always: break
        case .ifAbsent: guard !held.contains(true) else { return }
        case .ifPresent: guard !held.contains(false) else { return }
        }
        outcome.wrote = true
        var deletedKeys = Set<StateKey>()
        for (index, (key, value)) in writes.enumerated() {
            if value == nil && deleteOnlyLive {
                guard held[index], deletedKeys.insert(key).inserted else { continue }
                outcome.deleted += 1
            }
            guard let value else {
                access.set(nil, into: key)
                continue
            }
            let resolved: WriteExpiry
            switch expiry {
            case .given(let given): resolved = given
            case .keep: resolved = previousExpiry[index].map { .at(milliseconds: $0) } ?? .never
            }
            access.set(value, into: key, expiry: resolved, owned: owned)
        }
    }
}
