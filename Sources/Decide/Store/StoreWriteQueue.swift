import DecideCore
import Foundation
import Synchronization

/// The bounded queue between a node's commit path and its storage writer thread, with the
/// bookkeeping of group commit.
///
/// Guarantees:
/// - at most `capacityCommits` commits are queued or admitted at once: `admit` waits while the
///   queue is full (back-pressure on `decide` and `apply`), so memory stays bounded when the
///   disk is slower than the commit rate; each commit holds at most `Configuration.limits`
///   writes (one decision, one delta or one catch-up batch);
/// - tickets increase with every append, and `durable` only grows: once `waitUntilDurable(t)`
///   returns nil, every commit with a ticket up to `t` is on disk;
/// - after `fail` or `stop`, nothing more is admitted and waiters are woken with the error.
final class StoreWriteQueue: @unchecked Sendable {
    let capacityCommits: Int
    /// Guards everything below; `broadcast` wakes the writer, admitters and durability waiters.
    private let condition = NSCondition()
    /// What every append changes, without a dynamic exclusivity check (`InPlace`; touched only
    /// under the lock): the next transaction's commits, coalesced as they are appended, and the
    /// number of commits ever appended (the last ticket).
    private struct Appended {
        var pending = GroupCommit()
        var count: UInt64 = 0
    }
    private let appendedState = InPlace(Appended())
    private var pending: GroupCommit {
        get { appendedState.value.pending }
        set { appendedState.value.pending = newValue }
    }
    private var appended: UInt64 { appendedState.value.count }
    /// Commits admitted and not yet taken by the writer (reserved or in `pending`): at most
    /// `capacityCommits`. Raised without the lock while there is room; lowered by the writer
    /// (under the lock) and by `cancelAdmission`.
    private let inFlight = Atomic<Int>(0)
    /// `stopError != nil`, readable without the lock: admission then takes the locked path.
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

    init(capacityCommits: Int, eager: Bool) {
        precondition(capacityCommits >= 1, "a write queue holds at least one commit")
        self.capacityCommits = capacityCommits
        self.eager = eager
    }

    deinit { appendedState.release() }

    // MARK: the commit path

    /// Reserves a slot for one commit, waiting while the queue is full; returns the store's
    /// error instead once it failed or closed. With room, it takes no lock.
    func admit() -> StorageError? {
        if !stopped.load(ordering: .acquiring), reserveSlot() { return nil }
        condition.lock()
        defer { condition.unlock() }
        while stopError == nil {
            if reserveSlot() { return nil }
            condition.broadcast()  // the writer takes a full queue without waiting for its interval
            condition.wait()
        }
        return stopError
    }

    /// Raises `inFlight` by one if that keeps it within the capacity.
    private func reserveSlot() -> Bool {
        var current = inFlight.load(ordering: .relaxed)
        while current < capacityCommits {
            let (exchanged, original) = inFlight.compareExchange(
                expected: current, desired: current + 1, successOrdering: .acquiring, failureOrdering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func cancelAdmission() {
        let before = inFlight.subtract(1, ordering: .releasing).oldValue
        precondition(before > 0, "cancelAdmission without admit")
        // An admitter waits only on a full queue; it re-checks under the lock, so taking the
        // lock here (after lowering the count) cannot miss it.
        if before >= capacityCommits {
            condition.lock()
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Queues one commit of `changeCount` changes (the i-th is `change(i)`) and the node's
    /// clock; returns its ticket. After `fail` or `stop` the commit is dropped (the ticket then
    /// never becomes durable; waiters get the error).
    func append(changeCount: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) -> UInt64 {
        append { $0.add(changeCount: changeCount, clock: clock, change: change) }
    }

    /// `append` for a commit of upserts, each key lent (`GroupCommit.addUpserts`).
    func appendUpserts(clock: HLCTimestamp, offering upserts: ((borrowing StateKey, consuming Entry) -> Void) -> Void) -> UInt64 {
        append { $0.addUpserts(clock: clock, offering: upserts) }
    }

    /// Queues one commit, which `add` adds to the pending group; returns its ticket.
    @inline(__always)
    private func append(_ add: (inout GroupCommit) -> Void) -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        let admitted = inFlight.load(ordering: .relaxed)
        precondition(admitted > appendedState.value.pending.commits, "append without admit")
        appendedState.value.count += 1
        let ticket = appendedState.value.count
        guard stopError == nil else {
            inFlight.subtract(1, ordering: .releasing)
            return ticket
        }
        let wasEmpty = appendedState.value.pending.isEmpty
        add(&appendedState.value.pending)
        if eager || wasEmpty || admitted >= capacityCommits { condition.broadcast() }
        return ticket
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
        let target = appended
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
            if pending.isEmpty {
                if stopping { return nil }
                condition.wait()
                continue
            }
            let urgent = eager || stopping || flushTarget > durable || inFlight.load(ordering: .relaxed) >= capacityCommits
            if urgent || Date() >= due {
                let group = pending
                pending = GroupCommit()
                inFlight.subtract(group.commits, ordering: .releasing)
                condition.broadcast()  // admitters waiting for space
                // Every commit appended so far is taken now (or was dropped by `fail`).
                return (group, appended)
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
        inFlight.subtract(pending.commits, ordering: .releasing)
        pending = GroupCommit()
        beginStopping(error)
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
