import Decide
import DecideCore
import DecideRESP

/// The work behind EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT and PERSIST (run as a decision of its
/// own, or as a step of a MULTI block's, through `KeyAccess`): renewing or ending a
/// key's lifetime is a write of its current value with the new expiry, so it replicates and
/// wins like any write (docs/consistency.md, "Expiring keys"); an owned value stays owned, by
/// this node from then on. Judged on this node's state when the decision runs, as Redis judges
/// it on the master.
struct KeyExpiry: Sendable {
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
        /// The error reply instead of the count.
        var refusal: String?
    }

    /// The reply: 1 when changed, 0 when not, or the refusal.
    func reply(into writer: inout RESPWriter) {
        if let refusal = outcome.refusal { writer.error(refusal) } else { writer.integer(outcome.changed ? 1 : 0) }
    }

    let key: StateKey
    let change: Change
    let condition: Condition
    let outcome = Outcome()

    /// The change, through `access` (alone, or as one command of a MULTI … EXEC block).
    func apply(_ access: inout KeyAccess) {
        guard let entry = access.entry(key), let value = entry.value else {
            if let kind = access.kind(key) { applyToCollection(of: kind, &access) }
            return
        }
        guard access.plainEntry(key)?.value != nil else {
            applyToCounter(&access)
            return
        }
        let current = entry.expiresAtMilliseconds
        switch change {
        case .persist:
            guard current != nil else { return }
            access.set(value, into: key, expiry: .never, owned: entry.owned)
        case .at(let instant):
            guard admits(instant, over: current) else { return }
            if instant <= access.nowMilliseconds {
                access.set(nil, into: key)
            } else {
                access.set(value, into: key, expiry: .at(milliseconds: instant), owned: entry.owned)
            }
        }
        outcome.changed = true
    }

    /// Whether `condition` lets an expiry at `instant` replace the key's `current` one (nil: none).
    private func admits(_ instant: UInt64, over current: UInt64?) -> Bool {
        switch condition {
        case .always: true
        case .ifNone: current == nil
        case .ifSome: current != nil
        case .ifGreater: current.map { instant > $0 } ?? false
        case .ifLess: instant < (current ?? .max)
        }
    }

    /// The change for a counter (`StorageWriter.giveLifetime`), or for a set, hash or sorted set
    /// (`KeyLifetime`): its lifetime given, renewed or ended as a whole; an instant not after the
    /// decision's time deletes it, as DEL does.
    private func applyToCounter(_ access: inout KeyAccess) {
        applyToWhole(&access) { expiry, access in access.write.giveLifetime(expiry, toCounterNamed: key.name) }
    }

    private func applyToCollection(of kind: KeyKind, _ access: inout KeyAccess) {
        applyToWhole(&access) { expiry, access in KeyLifetime.set(expiry, of: key, kind: kind, &access) }
    }

    /// What both share: the key's lifetime as a whole read once, and `give` called with the new
    /// one when the condition admits it.
    private func applyToWhole(_ access: inout KeyAccess, give: (WriteExpiry, inout KeyAccess) -> Void) {
        let current = KeyLifetime.instant(access, key)
        switch change {
        case .persist:
            guard current != nil else { return }
            give(.never, &access)
        case .at(let instant):
            guard admits(instant, over: current) else { return }
            if instant <= access.nowMilliseconds {
                access.set(nil, into: key)
            } else {
                give(.at(milliseconds: instant), &access)
            }
        }
        outcome.changed = true
    }
}
