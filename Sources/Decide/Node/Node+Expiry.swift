import Logging
import Synchronization

/// Expiring values and hidden owned values: what a node tells its observers and listeners when
/// a value's expiry instant passes or its owner stops being a live member.
extension Node {
    /// Tells observers and commit listeners (origin `.expired`) of every value
    /// whose expiry instant this node's `nowMilliseconds` has reached since the last call: once
    /// per value, on this node only (nothing is written or replicated: every replica does the
    /// same on its own clock). Returns how many. The replication engine calls it on every tick;
    /// a node without one runs it on a timer of its own every `expiryCheckIntervalMilliseconds`.
    @discardableResult
    package func expireDue() -> Int {
        // One instant for the whole call, reported `expirySliceValues` at a time with the
        // lock let go between batches: a million keys due at once do not stall decisions.
        var instant: UInt64?
        var total = 0
        while true {
            // Politely: a decision queued behind one batch goes before the next.
            let (count, more) = core.withPoliteLock { core -> (Int, Bool) in
                let now = instant ?? hybridNow(core)
                instant = now
                let expired = core.table.expire(dueAtMilliseconds: now, limit: Self.expirySliceValues)
                if !expired.isEmpty { reportExpired(core, expired) }
                return (expired.count, (core.table.nextExpiryMilliseconds ?? .max) <= now)
            }
            total += count
            if count > 0 {
                // A durable node's feed records of the expiry go to disk without an entry.
                if persists { store.wakeWriterIfAsked() }
                delivery.drain()
            }
            if !more { return total }
        }
    }

    /// Gives this node's slots of a counter the lifetime a peer gave that counter (its marker's
    /// instant), for the counters noted since the last call (`NodeCore.lifetimesToFollow`), at
    /// most `lifetimeFollowSliceNames` a call (the rest wait for the next: a removal that asks
    /// for every counter with a lifetime does not hold a tick for all of them): one decision a
    /// counter, made like any other, so it replicates. A live member's slots are written by it
    /// alone, so no change is lost (docs/design/0004-collection-lifetimes.md, "Counters"). The
    /// replication engine calls it on every tick, after `expireDue`. Returns how many slots it
    /// wrote.
    @discardableResult
    package func followLifetimes() -> Int {
        let names = core.withLock { $0.takeLifetimesToFollow(limit: Self.lifetimeFollowSliceNames) }
        guard !names.isEmpty else { return 0 }
        var total = 0
        // One warning a call, however many counters failed.
        var aborted = 0
        var firstAborted: (name: String, reason: String)?
        for name in names {
            let follow = FollowCounterLifetime(name: name)
            if case .aborted(let reason) = decide(follow) {
                aborted += 1
                if firstAborted == nil { firstAborted = (name, "\(reason)") }
            }
            total += follow.written.value
        }
        if let firstAborted {
            logger.warning("counter slots not given their counter's lifetime", metadata: [
                "counters": "\(aborted)", "first": "\(firstAborted.name)", "reason": "\(firstAborted.reason)"])
        }
        if total > 0 { logger.debug("counter slots given their counter's lifetime", metadata: ["slots": "\(total)", "counters": "\(names.count)"]) }
        return total
    }

    /// The most counters one `followLifetimes` call follows.
    package static let lifetimeFollowSliceNames = 1_024

    /// Call with the lock held: observers hear `expired` keys as absent, and listeners get one
    /// `.expired` delta per key (version: the expired entry's).
    func reportExpired(_ core: NodeCore, _ expired: [(key: StateKey, entry: Entry)]) {
        for item in expired { announce(core, item.key, entry: item.entry, present: false, origin: .expired, now: 0) }
    }

    /// Call with the lock held: `key`'s stored `entry` started (`present`) or stopped reading
    /// here without a write (it expired, its owner came or went). Observers hear the value or
    /// its absence; listeners get one delta of `origin` with the entry's version.
    func announce(_ core: NodeCore, _ key: StateKey, entry: Entry, present: Bool, origin: CommittedDelta.Origin, now: UInt64) {
        notifyObservers(core, key: key, entry: present ? entry : nil, decoded: nil, now: now)
        guard core.publishing else { return }
        let write = present ? Delta.Write(key: key, entry: entry) : Delta.Write(key: key, value: nil)
        core.publish(CommittedDelta(delta: Delta(version: entry.version, writes: [write]), origin: origin))
    }

    /// The replication engine's view of the cluster: `present` are the members linked to this
    /// node now (this node is added), `removed` the members removed for good (`forgotten`: the
    /// removals the engine keeps by id hash only). Owned values
    /// (`Entry.ownedByWriter`) of any other writer read as absent from now on; observers and
    /// listeners (`.ownerGone` / `.ownerBack`) hear of every key that disappears or returns,
    /// once per change. Without a call, every owner counts as present.
    package func setPresentOwners(_ present: Set<String>, removed: Set<String>,
                                  forgotten: ForgottenMembers = ForgottenMembers(capacity: 0)) {
        let changed = core.withLock { core -> Bool in
            let (appeared, disappeared) = core.setOwners(present: present, removed: removed, forgotten: forgotten)
            guard !appeared.isEmpty || !disappeared.isEmpty else { return false }
            let now = hybridNow(core)
            for (owners, origin) in [(disappeared, CommittedDelta.Origin.ownerGone), (appeared, .ownerBack)] where !owners.isEmpty {
                let entries = core.table.ownedEntries(of: owners).filter { !$0.entry.isExpired(atMilliseconds: now) }
                guard !entries.isEmpty else { continue }
                logger.info(origin == .ownerGone ? "owned keys of absent members read as absent" : "owned keys of returning members read again",
                            metadata: ["members": "\(owners.sorted())", "keys": "\(entries.count)"])
                for item in entries { announce(core, item.key, entry: item.entry, present: origin == .ownerBack, origin: origin, now: now) }
            }
            return true
        }
        if changed {
            if persists { store.wakeWriterIfAsked() }
            delivery.drain()
        }
    }

    /// Makes this node run `expireDue` on its own timer (a node without a replication engine);
    /// idempotent. A replication engine attached later stops it (`expiryDrivenExternally`).
    func startExpiryTimerIfNeeded() {
        guard !expiryDrivenExternally.load(ordering: .acquiring), !expiryTimerRunning.load(ordering: .acquiring) else { return }
        expiryTimer.withLock { timer in
            guard timer == nil, !expiryDrivenExternally.load(ordering: .acquiring) else { return }
            expiryTimerRunning.store(true, ordering: .releasing)
            timer = ReplicatorTimer(intervalMilliseconds: configuration.expiryCheckIntervalMilliseconds) { [weak self] in
                self?.expireDue()
            }
        }
    }

    /// The replication engine runs `expireDue` on its own ticks from now on (the simulator's
    /// ticks are virtual time, so expiry stays deterministic there): the node's own timer stops.
    package func driveExpiryExternally() {
        expiryDrivenExternally.store(true, ordering: .releasing)
        expiryTimer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }

    /// Values one batch of `expireDue` reports under the state lock (each is popped from the
    /// schedule, looked up and announced: one to two microseconds apiece here, so a batch holds
    /// the lock about half a millisecond). 1,024 held it past the 2 ms budget in about half of
    /// `make bench`'s runs; 512 in 2 of 16 runs of `DecideBench collection` (median longest
    /// decision 0.86 ms); 256 in 1 of 16 (median 0.65 ms), while decisions with no chore
    /// running reached 1.5 ms in the same runs: the rest is this 2-core machine's scheduling
    /// (docs/design/0017-table-wide-chores.md, "Measured").
    static let expirySliceValues = 256
}

/// `Node.followLifetimes`'s decision for one counter (`Transaction.followLifetime`).
struct FollowCounterLifetime: Decision {
    let name: String
    /// How many slots it wrote; read after `decide` returns, on the same thread.
    let written = Box()

    final class Box: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        var value = 0
    }

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        written.value = write.followLifetime(ofCounterNamed: name)
        return .none
    }
}
