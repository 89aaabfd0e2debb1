import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Detects the one misuse that would silently break determinism and memory safety: two threads
/// inside the simulation at the same time. Nested calls from the same thread (a delegate
/// callback that calls `send`) are fine; calls from different threads one after the other are
/// fine too (the lock orders their memory). Overlapping calls from two threads stop the process.
final class ThreadConfinement: Sendable {
    private struct State {
        var owner: UInt = 0
        var depth = 0
    }

    private let state = Mutex(State())

    /// Runs `body` as the simulation's only thread; a precondition fails if another thread is inside.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        let me = Self.currentThread()
        state.withLock { state in
            precondition(state.depth == 0 || state.owner == me,
                         "DecideSimulation is single-threaded: called from two threads at once (drive it from the thread that runs the scheduler)")
            state.owner = me
            state.depth += 1
        }
        defer { state.withLock { $0.depth -= 1 } }
        return try body()
    }

    private static func currentThread() -> UInt {
        #if canImport(Darwin)
        return UInt(bitPattern: pthread_self())
        #else
        return UInt(pthread_self())
        #endif
    }
}
