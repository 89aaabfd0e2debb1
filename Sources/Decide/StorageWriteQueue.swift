import Foundation

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
final class StorageWriteQueue: @unchecked Sendable {
    let capacityCommits: Int
    /// Guards everything below; `broadcast` wakes the writer, admitters and durability waiters.
    private let condition = NSCondition()
    private var pending: [StorageBatch] = []
    private var reserved = 0
    private var appended: UInt64 = 0
    private var durable: UInt64 = 0
    private var flushTarget: UInt64 = 0
    /// Set when the store failed or closed: refuses admission, wakes waiters.
    private var stopError: StorageError?
    /// The writer exits once it sees this with nothing pending.
    private var stopping = false
    private var writerRunning = false
    /// Tests hold the writer here to observe what waits for it.
    private var paused = false
    /// True for strict durability: the writer takes work as soon as there is any.
    private let eager: Bool

    init(capacityCommits: Int, eager: Bool) {
        precondition(capacityCommits >= 1, "a write queue holds at least one commit")
        self.capacityCommits = capacityCommits
        self.eager = eager
    }

    // MARK: the commit path

    func admit() -> StorageError? {
        condition.lock()
        defer { condition.unlock() }
        while stopError == nil && pending.count + reserved >= capacityCommits {
            condition.broadcast()  // the writer takes a full queue without waiting for its interval
            condition.wait()
        }
        if let stopError { return stopError }
        reserved += 1
        return nil
    }

    func cancelAdmission() {
        condition.lock()
        precondition(reserved > 0, "cancelAdmission without admit")
        reserved -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Queues `batch`; returns its ticket. After `fail` or `stop` the batch is dropped (the
    /// ticket then never becomes durable; waiters get the error).
    func append(_ batch: StorageBatch) -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        precondition(reserved > 0, "append without admit")
        reserved -= 1
        appended += 1
        guard stopError == nil else { return appended }
        let wasEmpty = pending.isEmpty
        pending.append(batch)
        if eager || wasEmpty || pending.count + reserved >= capacityCommits { condition.broadcast() }
        return appended
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
    /// the queue is full or the queue is stopping), then takes every pending batch with the
    /// ticket of the last. Returns nil when the writer must exit.
    func take(dueAt due: Date) -> (batches: [StorageBatch], lastTicket: UInt64)? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if pending.isEmpty || (paused && !stopping) {
                if stopping { return nil }
                condition.wait()
                continue
            }
            let urgent = eager || stopping || flushTarget > durable || pending.count + reserved >= capacityCommits
            if urgent || Date() >= due {
                let batches = pending
                pending.removeAll(keepingCapacity: true)
                condition.broadcast()  // admitters waiting for space
                // Every batch appended so far is taken now (or was dropped by `fail`).
                return (batches, appended)
            }
            _ = condition.wait(until: due)   // timed out or signalled: the loop re-checks either way
        }
    }

    /// Holds the writer before its next transaction (true) or lets it go (false). For tests.
    func setPaused(_ value: Bool) {
        condition.lock()
        paused = value
        condition.broadcast()
        condition.unlock()
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
        if stopError == nil { stopError = error }
        pending.removeAll()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    /// Stops admitting; the writer exits once what is queued is written (or at once when
    /// `dropPending`, as a crash would). Waits for the writer to exit.
    func stop(with error: StorageError, dropPending: Bool) {
        condition.lock()
        if stopError == nil { stopError = error }
        if dropPending { pending.removeAll() }
        stopping = true
        condition.broadcast()
        while writerRunning { condition.wait() }
        condition.unlock()
    }

    func writerExited() {
        condition.lock()
        writerRunning = false
        condition.broadcast()
        condition.unlock()
    }
}
