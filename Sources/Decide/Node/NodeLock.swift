import CDecideLock

/// The lock around a node's `NodeCore` (`CDecideLock`): a running thread takes it ahead of
/// sleeping ones while waits are short, and it is handed over in arrival order once a sleeper
/// has waited longer than its bound (`Node.Configuration.lockHandoffMicroseconds`).
///
/// `Synchronization.Mutex` sleeps on a priority-inheriting futex, which hands the lock to the
/// sleeper at every contended unlock: with fifty threads deciding on two cores, every such
/// unlock then waits for a context switch (docs/benchmarks.md, "A node lock that hands over
/// only to the starving"). A lock that never hands over (glibc's adaptive mutex, tried in stop
/// 37) let deciding threads starve the thread applying a peer's deltas for up to 174 ms.
///
/// Guarantees: mutual exclusion of `withLock` bodies; a thread that has waited longer than the
/// bound is served before every thread that arrives after it; not recursive (a decision that
/// decides from inside its own lock deadlocks, as with `Mutex`); the value lives in the lock.
final class NodeLock<Value>: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<decide_lock_t>
    /// Touched only inside `withLock`, under the lock: no dynamic exclusivity check.
    @exclusivity(unchecked) private var value: Value

    /// `handoffMicroseconds`: how long a thread may wait before the lock is handed to it
    /// (`Node.Configuration.lockHandoffMicroseconds`; negative counts as 0, and a bound past
    /// what nanoseconds in 64 bits hold as never).
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

    /// `withLock` ahead of every waiting thread (`decide_lock_urgent`): for the thread applying a
    /// peer's deltas, whose wait delays every other node's view of this one.
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

    /// Times the lock was handed over (to a thread past the bound, or an urgent one), and times
    /// a thread queued to sleep on it (it may be woken before it sleeps): for tests and
    /// diagnostics.
    var handoffs: UInt64 { decide_lock_handoffs(lock) }
    var sleeps: UInt64 { decide_lock_sleeps(lock) }
}
