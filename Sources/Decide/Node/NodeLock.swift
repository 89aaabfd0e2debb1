#if canImport(Glibc)
import Glibc
#endif

/// The lock around a node's `NodeCore`: a glibc mutex of the adaptive kind, which spins a few
/// rounds before it sleeps on a futex.
///
/// `Synchronization.Mutex` spins about a thousand rounds first and then sleeps on a
/// priority-inheriting futex. On a machine with fewer cores than threads that decide (fifty
/// writers on two cores in the library comparison), those spins take the core from the event
/// loop that would apply the peer's deltas (docs/benchmarks.md, "A lock that spins less").
///
/// Guarantees: mutual exclusion of `withLock` bodies; not recursive (a decision that decides
/// from inside its own lock deadlocks, as with `Mutex`); the value lives in the lock.
final class NodeLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Touched only inside `withLock`, under the mutex: no dynamic exclusivity check.
    @exclusivity(unchecked) private var value: Value

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
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
