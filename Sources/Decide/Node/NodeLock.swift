import CDecideLock

/// The lock around a node's `NodeCore` (`CDecideLock`): running threads take it ahead of
/// sleeping ones, one thread at a time spins on it while the rest sleep, and the longest sleeper
/// gets a turn once per bound (`Node.Configuration.lockHandoffMicroseconds`).
///
/// `Synchronization.Mutex` sleeps on a priority-inheriting futex, which hands the lock to the
/// sleeper at every contended unlock: with fifty threads deciding on two cores, every such
/// unlock then waits for a context switch (docs/design/0005-node-lock.md, "Alternatives tried
/// and not kept"). So did this lock while it handed over whenever a sleeper had waited past the
/// bound, which with fifty threads on two cores every sleeper has (docs/design/0005-node-lock.md,
/// "Measured"). A lock that never hands over (glibc's adaptive mutex) let deciding threads
/// starve the thread applying a peer's deltas for up to 174 ms.
///
/// Guarantees: mutual exclusion of `withLock` bodies; sleepers are served in arrival order, the
/// first of them woken by the first unlock after it has waited the bound since the queue last
/// moved, and then handed the lock ahead of every thread but an urgent one; the lock is handed
/// over at most once per bound, besides urgent requests; not recursive (a decision that decides
/// from inside its own lock deadlocks, as with `Mutex`); the value lives in the lock.
final class NodeLock<Value>: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<decide_lock_t>
    /// Touched only inside `withLock`, under the lock: no dynamic exclusivity check.
    @exclusivity(unchecked) private var value: Value

    /// `handoffMicroseconds`: how long the first sleeper waits, since the queue last moved,
    /// before it gets a turn (`Node.Configuration.lockHandoffMicroseconds`; negative counts as
    /// 0, and a bound past what nanoseconds in 64 bits hold as never).
    init(_ value: Value, handoffMicroseconds: Int) {
        lock = .allocate(capacity: 1)
        decide_lock_init(lock, min(UInt64(max(0, handoffMicroseconds)), UInt64.max / 1_000) * 1_000)
        self.value = value
    }

    deinit { lock.deallocate() }

    /// Runs `body` with the value, holding the lock.
    @inline(__always)
    func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try holding(DECIDE_LOCK_PLAIN, body)
    }

    /// `withLock` ahead of every waiting thread (`decide_lock_urgent`: it claims the lock, and the
    /// next unlock hands it over): for the thread applying a peer's deltas, whose wait delays
    /// every other node's view of this one.
    @inline(__always)
    func withUrgentLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try holding(DECIDE_LOCK_AS_URGENT, body)
    }

    /// `withLock` that does not race a thread an unlock has just woken (`decide_lock_polite`):
    /// for a chore that holds the lock in slices and takes it again after each, so a decision
    /// queued behind one slice gets in before the next.
    @inline(__always)
    func withPoliteLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try holding(DECIDE_LOCK_AS_POLITE, body)
    }

    /// Runs `body` holding the lock, taken in `manner` (`decide_lock_as`).
    @inline(__always)
    private func holding<Result, Failure: Error>(_ manner: Int, _ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        decide_lock_as(lock, Int32(manner))
        defer { decide_unlock(lock) }
        return try body(&value)
    }

    /// Times the lock was handed over (to a sleeper whose turn came, or an urgent one), and times
    /// a thread queued to sleep on it (it may be woken before it sleeps): for tests and
    /// diagnostics.
    var handoffs: UInt64 { decide_lock_handoffs(lock) }
    var sleeps: UInt64 { decide_lock_sleeps(lock) }
}
