#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The lock around a node's `NodeCore`: a glibc mutex of the adaptive kind, which spins a few
/// rounds before it sleeps on a futex.
///
/// `Synchronization.Mutex` spins about a thousand rounds first and then sleeps on a
/// priority-inheriting futex. On a machine with fewer cores than threads that decide (fifty
/// writers on two cores in the library comparison), those spins take the core from the event
/// loop that would apply the peer's deltas (docs/benchmarks.md, "A lock that spins less").
///
/// It does not hand the lock over: a thread that unlocks and locks again at once usually gets it
/// back before a waiter wakes. A chore that holds the lock in slices so decisions can run in
/// between (expiry, tombstone collection, a dump's read) calls `yieldToWaiters()` before each
/// slice, or a waiting decision would wait out the whole chore (`make bench`'s collection rows).
///
/// Guarantees: mutual exclusion of `withLock` bodies; not recursive (a decision that decides
/// from inside its own lock deadlocks, as with `Mutex`); the value lives in the lock; after
/// `yieldToWaiters()`, a thread that was waiting has held the lock (or about 10 ms passed).
final class NodeLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Touched only inside `withLock`, under the mutex: no dynamic exclusivity check.
    @exclusivity(unchecked) private var value: Value
    /// Threads blocked in `withLock` now.
    private let waiting = Atomic<Int>(0)
    /// How many times the lock was taken, raised under it: `yieldToWaiters` watches it move.
    private let taken = Atomic<UInt64>(0)

    init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        // PTHREAD_MUTEX_ADAPTIVE_NP (a GNU extension, 3): spin briefly, then sleep.
        pthread_mutexattr_settype(&attributes, 3)
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        if pthread_mutex_trylock(mutex) != 0 {
            waiting.add(1, ordering: .relaxed)
            pthread_mutex_lock(mutex)
            waiting.subtract(1, ordering: .relaxed)
        }
        // Only the holder writes it: a plain load and store, no read-modify-write.
        taken.store(taken.load(ordering: .relaxed) &+ 1, ordering: .releasing)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Called without the lock, between the slices of a chore: when a thread waits for the
    /// lock, gives up the processor until one has taken it (at most about 10 ms, so a chore
    /// always goes on). Returns at once when nobody waits.
    func yieldToWaiters() {
        guard waiting.load(ordering: .acquiring) > 0 else { return }
        let seen = taken.load(ordering: .acquiring)
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        while waiting.load(ordering: .acquiring) > 0 && taken.load(ordering: .acquiring) == seen {
            sched_yield()
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            if (now.tv_sec - start.tv_sec) * 1_000_000_000 + (now.tv_nsec - start.tv_nsec) > 10_000_000 { return }
        }
    }
}
