import Decide
import DecideCore

/// The decision behind EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT and PERSIST: renewing or ending a
/// key's lifetime is a write of its current value with the new expiry, so it replicates and
/// wins like any write (docs/consistency.md, "Expiring keys"); an owned value stays owned, by
/// this node from then on. Judged on this node's state when the decision runs, as Redis judges
/// it on the master.
struct KeyExpiry: Decision {
    enum Change: Sendable {
        /// Expire at this hybrid-clock instant (Unix milliseconds); an instant not after the
        /// decision's time deletes the key, as Redis does.
        case at(milliseconds: UInt64)
        /// Never expire (PERSIST).
        case persist
    }

    /// Redis 7's EXPIRE options.
    enum Condition: Sendable {
        case always
        /// Only when the key has no expiry.
        case ifNone
        /// Only when the key has an expiry.
        case ifSome
        /// Only when the new expiry is later than the current one (no expiry counts as infinite).
        case ifGreater
        /// Only when the new expiry is earlier than the current one (no expiry counts as infinite).
        case ifLess
    }

    final class Outcome: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        /// Whether the key held a value and the change was made (Redis replies 1).
        var changed = false
    }

    let key: StateKey
    let change: Change
    let condition: Condition
    let outcome = Outcome()

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        guard let entry = read.entry(key), let value = entry.packedValue else { return .none }
        let current = entry.expiresAtMilliseconds
        switch change {
        case .persist:
            guard current != nil else { return .none }
            write.raw(packed: value, into: key, expiry: .never, ownedByThisNode: entry.ownedByWriter)
        case .at(let instant):
            switch condition {
            case .always: break
            case .ifNone: guard current == nil else { return .none }
            case .ifSome: guard current != nil else { return .none }
            case .ifGreater: guard let current, instant > current else { return .none }
            case .ifLess: guard instant < (current ?? .max) else { return .none }
            }
            if instant <= read.nowMilliseconds {
                write.raw(packed: nil, into: key)
            } else {
                write.raw(packed: value, into: key, expiry: .at(milliseconds: instant), ownedByThisNode: entry.ownedByWriter)
            }
        }
        outcome.changed = true
        return .none
    }
}
