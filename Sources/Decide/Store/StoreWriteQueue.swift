import DecideCore
import Foundation
import Synchronization

/// The bounded queue between a node's commit path and its storage writer thread, with the
/// bookkeeping of group commit.
///
/// Two locks. The queue's `condition` guards what waiters wait on (durable, flush target, stop)
/// and wakes them. The commits themselves (the pending group, the tickets, the admitted count)
/// are guarded by the *exclusion* the queue is started with: the node's own lock, which every
/// commit already holds when it admits and appends. So a commit takes no lock of the queue's
/// (docs/design/0016-group-commit.md, "The technique"); the writer takes the exclusion
/// to take the pending group. Lock order: `condition`, then the exclusion, never the reverse:
/// a committer wakes the writer (`wakeWriterIfAsked`) only after it released the exclusion.
///
/// Guarantees:
/// - at most `capacityCommits` commits are queued or admitted at once: admission reports a full
///   queue, and the committer waits (`waitForRoom`) without the exclusion (back-pressure on
///   `decide` and `apply`), so memory stays bounded when the disk is slower than the commit
///   rate; each commit holds at most `Configuration.limits` writes (one decision, one delta or
///   one catch-up batch);
/// - tickets increase with every append, and `durable` only grows: once `waitUntilDurable(t)`
///   returns nil, every commit with a ticket up to `t` is on disk;
/// - after `fail` or `stop`, nothing more is admitted and waiters are woken with the error.
final class StoreWriteQueue: @unchecked Sendable {
    let capacityCommits: Int
    /// Guards the waiters' state below; `broadcast` wakes the writer, admitters and durability
    /// waiters.
    private let condition = NSCondition()
    /// Set once by `start(exclusion:)`, before any commit; until then (a queue driven by tests
    /// alone) a lock of the queue's own.
    private var exclusive: StoreExclusion
    /// What the exclusion guards, without a dynamic exclusivity check (`InPlace`): the next
    /// transaction's commits, coalesced as they are appended; the number of commits ever
    /// appended (the last ticket); commits admitted and not yet taken by the writer (at most
    /// `capacityCommits`).
    private struct Commits {
        var pending = GroupCommit()
        var appended: UInt64 = 0
        var inFlight = 0
    }
    private let commits = InPlace(Commits())
    /// Set under the exclusion when a commit needs the writer or an admitter woken (a group
    /// began, a strict commit, a full queue, a slot given back to a full one); cleared by the
    /// one who wakes them.
    private let wakeAsked = Atomic<Bool>(false)
    /// `stopError != nil`, readable without a lock: `stopError` is written once before it is
    /// set and never again, so a reader that sees it set reads the error.
    private let stopped = Atomic<Bool>(false)
    private var durable: UInt64 = 0
    private var flushTarget: UInt64 = 0
    /// Set when the store failed or closed: refuses admission, wakes waiters.
    private var stopError: StorageError?
    /// The writer exits once it sees this with nothing pending.
    private var stopping = false
    private var writerRunning = false
    /// True for strict durability: the writer takes work as soon as there is any.
    private let eager: Bool

    /// Whether the exclusion reads the node's entries (set by `start`): only then are a hot
    /// key's writes left to be re-read (`GroupCommit.addTableUpserts`).
    private var rereads = false

    init(capacityCommits: Int, eager: Bool) {
        precondition(capacityCommits >= 1, "a write queue holds at least one commit")
        self.capacityCommits = capacityCommits
        self.eager = eager
        let own = Mutex(())
        exclusive = { body in own.withLock { _ in body { _ in nil } } }
    }

    deinit { commits.release() }

    /// Makes `exclusion` the lock that guards the commits: the node's, held by every call
    /// marked "holding the exclusion". Call once, before the writer starts and before any commit.
    func start(exclusion: @escaping StoreExclusion) {
        condition.lock()
        exclusive = exclusion
        condition.unlock()
        holdingExclusion { rereads = true }
    }

    /// Runs `body` holding the exclusion, returning its result.
    func holdingExclusion<Result>(_ body: () -> Result) -> Result {
        holdingExclusion { (_: StoredEntries) in body() }
    }

    /// Runs `body` holding the exclusion, with the node's stored entries, returning its result.
    func holdingExclusion<Result>(_ body: (StoredEntries) -> Result) -> Result {
        withoutActuallyEscaping(body) { body in
            var result: Result?
            exclusive { entries in result = body(entries) }
            return result!
        }
    }

    // MARK: the commit path

    /// Holding the exclusion: reserves a slot for one commit if there is room. Never waits.
    func admitHoldingExclusion() -> StoreAdmission {
        if stopped.load(ordering: .acquiring) { return .refused(stopError!) }
        if commits.value.inFlight < capacityCommits {
            commits.value.inFlight += 1
            return .admitted
        }
        // The writer takes a full queue without waiting for its interval.
        wakeAsked.store(true, ordering: .relaxed)
        return .full
    }

    /// Holding the exclusion: `admitHoldingExclusion` without the reason when it reserves no
    /// slot (the caller's `admit` finds it): no `StoreAdmission` to build and destroy.
    func tryAdmitHoldingExclusion() -> Bool {
        guard !stopped.load(ordering: .acquiring), commits.value.inFlight < capacityCommits else { return false }
        commits.value.inFlight += 1
        return true
    }

    /// Not holding the exclusion: waits until the queue may have room or the store stopped.
    func waitForRoom() {
        condition.lock()
        defer { condition.unlock() }
        while !stopped.load(ordering: .acquiring) && holdingExclusion({ commits.value.inFlight >= capacityCommits }) {
            condition.broadcast()
            condition.wait()
        }
    }

    /// Not holding the exclusion: reserves a slot, waiting while the queue is full; returns the
    /// store's error instead once it failed or closed.
    func admit() -> StorageError? {
        while true {
            switch holdingExclusion({ admitHoldingExclusion() }) {
            case .admitted: return nil
            case .refused(let error): return error
            case .full:
                wakeWriterIfAsked()
                waitForRoom()
            }
        }
    }

    /// Holding the exclusion: gives back a slot `admit` reserved, for a commit that wrote
    /// nothing.
    func cancelAdmissionHoldingExclusion() {
        precondition(commits.value.inFlight > commits.value.pending.commits, "cancelAdmission without admit")
        if commits.value.inFlight >= capacityCommits { wakeAsked.store(true, ordering: .relaxed) }
        commits.value.inFlight -= 1
    }

    /// Holding the exclusion: queues one commit of `changeCount` changes (the i-th is
    /// `change(i)`) and the node's clock; returns its ticket. After `fail` or `stop` the commit
    /// is dropped (the ticket then never becomes durable; waiters get the error).
    func appendHoldingExclusion(changeCount: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) -> UInt64 {
        append { $0.add(changeCount: changeCount, clock: clock, change: change) }
    }

    /// `appendHoldingExclusion` for a commit of upserts already merged into the node's table,
    /// each key lent and its entry built only when needed (`GroupCommit.addTableUpserts`; without
    /// a node's exclusion, every entry is built).
    func appendTableUpsertsHoldingExclusion(clock: HLCTimestamp, offering upserts: ((borrowing StateKey, () -> Entry) -> Void) -> Void) -> UInt64 {
        append { $0.addTableUpserts(clock: clock, rereading: rereads, offering: upserts) }
    }

    /// Holding the exclusion: adds the change feed's record of the change at `position` to the
    /// pending group, so that it is written in the same transaction as the entries committed
    /// around it. It takes a ticket of its own, so `flush` covers a change that wrote no entry
    /// (an expiry, an owner gone); it needs no admission (a record is at most one change's).
    func appendFeedHoldingExclusion(_ record: UnsafeRawBufferPointer, position: UInt64) {
        guard !stopped.load(ordering: .acquiring) else { return }
        let wasEmpty = commits.value.pending.isEmpty
        commits.value.pending.feed.append(record, position: position)
        commits.value.appended += 1
        if eager || wasEmpty { wakeAsked.store(true, ordering: .relaxed) }
    }

    /// Holding the exclusion: the stored feed rows below `position` go with the next group.
    func trimFeedHoldingExclusion(below position: UInt64) {
        guard !stopped.load(ordering: .acquiring) else { return }
        commits.value.pending.feed.trim(below: position)
    }

    /// Queues one commit, which `add` adds to the pending group; returns its ticket.
    @inline(__always)
    private func append(_ add: (inout GroupCommit) -> Void) -> UInt64 {
        precondition(commits.value.inFlight > commits.value.pending.commits, "append without admit")
        commits.value.appended += 1
        let ticket = commits.value.appended
        guard !stopped.load(ordering: .acquiring) else {
            commits.value.inFlight -= 1
            return ticket
        }
        let wasEmpty = commits.value.pending.isEmpty
        add(&commits.value.pending)
        if eager || wasEmpty { wakeAsked.store(true, ordering: .relaxed) }
        return ticket
    }

    /// Not holding the exclusion: wakes the writer and admitters if a commit asked for it since
    /// the last wake. One load when none did.
    @inline(__always)
    func wakeWriterIfAsked() {
        guard wakeAsked.load(ordering: .relaxed), wakeAsked.exchange(false, ordering: .acquiringAndReleasing) else { return }
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// The error the store stopped with (failed or closed), nil while it takes writes: one
    /// atomic load while it runs.
    var failure: StorageError? {
        guard stopped.load(ordering: .acquiring) else { return nil }
        condition.lock()
        defer { condition.unlock() }
        return stopError
    }

    func waitUntilDurable(_ ticket: UInt64) -> StorageError? {
        condition.lock()
        defer { condition.unlock() }
        while durable < ticket && stopError == nil { condition.wait() }
        return durable >= ticket ? nil : stopError
    }

    /// Asks the writer to write everything appended so far now, and waits for it.
    func flush() -> StorageError? {
        condition.lock()
        defer { condition.unlock() }
        let target = holdingExclusion { commits.value.appended }
        if target > flushTarget { flushTarget = target }
        condition.broadcast()
        while durable < target && stopError == nil { condition.wait() }
        return durable >= target ? nil : stopError
    }

    // MARK: the writer

    func writerStarted() {
        condition.lock()
        writerRunning = true
        condition.unlock()
    }

    /// Waits until there is work and it is due (at `due`, or at once when a flush is wanted,
    /// the queue is full or the queue is stopping), then takes every pending commit, coalesced,
    /// with the ticket of the last. Returns nil when the writer must exit.
    func take(dueAt due: Date) -> (group: GroupCommit, lastTicket: UInt64)? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let (empty, full) = holdingExclusion { (commits.value.pending.isEmpty, commits.value.inFlight >= capacityCommits) }
            if empty {
                if stopping { return nil }
                condition.wait()
                continue
            }
            let urgent = eager || stopping || flushTarget > durable || full
            if urgent || Date() >= due {
                // Every commit appended so far is taken now (or was dropped by `fail`).
                let taken = holdingExclusion { (entries: StoredEntries) -> (GroupCommit, UInt64) in
                    var group = commits.value.pending
                    commits.value.pending = GroupCommit()
                    commits.value.inFlight -= group.commits
                    // Under the node's lock, with every commit of the group in its table.
                    if group.needsReread { group.reread(from: entries) }
                    return (group, commits.value.appended)
                }
                condition.broadcast()  // admitters waiting for space
                return taken
            }
            _ = condition.wait(until: due)   // timed out or signalled: the loop re-checks either way
        }
    }

    func markDurable(_ ticket: UInt64) {
        condition.lock()
        if ticket > durable { durable = ticket }
        condition.broadcast()
        condition.unlock()
    }

    /// The store failed: drop what is queued, refuse everything from now on, wake every waiter.
    func fail(_ error: StorageError) {
        condition.lock()
        // Stopped first: a commit appended after the pending group is dropped below drops itself.
        beginStopping(error)
        holdingExclusion {
            commits.value.inFlight -= commits.value.pending.commits
            commits.value.pending = GroupCommit()
        }
        condition.unlock()
    }

    /// Stops admitting; the writer exits once what is queued is written. Waits for the writer
    /// to exit.
    func stop(with error: StorageError) {
        condition.lock()
        beginStopping(error)
        while writerRunning { condition.wait() }
        condition.unlock()
    }

    /// Call with the lock held: keeps `error` as the reason (the first one given wins), refuses
    /// admission from now on, and wakes every waiter and the writer, which exits once the
    /// queue is empty.
    private func beginStopping(_ error: StorageError) {
        if stopError == nil { stopError = error }
        stopped.store(true, ordering: .releasing)
        stopping = true
        condition.broadcast()
    }

    func writerExited() {
        condition.lock()
        writerRunning = false
        condition.broadcast()
        condition.unlock()
    }
}
