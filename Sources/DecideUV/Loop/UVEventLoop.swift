import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One libuv loop on one thread of its own. Other threads hand it closures through a locked
/// queue and wake it through an eventfd; no Swift concurrency runs on the loop thread.
///
/// Lifecycle: `start` spawns the thread; `stop(finalTask:)` queues a last task (which must
/// close every handle it knows of) and refuses all later work; the loop then closes its wakeup
/// handle, `uv_run` returns once every close callback ran, and `join` waits for the thread.
///
/// The task queue holds what API calls hand over (listen, connect, close, over-limit notices,
/// the last coalesced per link); frames never go through it, so it stays as long as the callers'
/// own bursts of calls. Wakeups are coalesced: one eventfd write per loop turn at most, made
/// after the lock is let go.
///
/// Why an eventfd of its own and not `uv_async_send`: libuv 1.44's async handle marks itself
/// busy around the sender's eventfd write, and the woken loop thread spins until the sender's
/// system call returns (it can wake first, on the other core). Under `redis-benchmark` SETs
/// into a linked syncnode, that spin was a tenth of the transport thread's samples
/// (docs/design/0014-syncnode-loop-turn.md, "The rest of a request's cost").
final class UVEventLoop: @unchecked Sendable {
    /// Bytes asked of the kernel per read by a reader on a loop, unless configured otherwise:
    /// one buffer per reader, shared by all its connections (the transport's reactor, and a
    /// `UVStreamServer` by default).
    static let defaultReadBufferBytes = 64 * 1024

    /// The loop. Touch it only on the loop thread (or before `start` / after `join`).
    let loop: UnsafeMutablePointer<uv_loop_t>
    /// Watches `wakeupDescriptor` on the loop.
    fileprivate let wakeup: UnsafeMutablePointer<uv_poll_t>
    /// A non-blocking eventfd: written to wake the loop, read empty by the loop before it takes
    /// the queued tasks. Open for the object's life, so a waker never writes to a closed one.
    fileprivate let wakeupDescriptor: Int32
    fileprivate var unstartedClosed = false
    fileprivate struct Pending {
        var tasks: [@Sendable () -> Void] = []
        var accepting = true
        var wakeupSent = false
    }
    fileprivate let pending = Mutex(Pending())
    private var thread = pthread_t()
    fileprivate var threadStarted = false
    private var joined = false
    /// Called on the loop thread after each batch of tasks: the transport flushes its writes here.
    private let afterTasks: () -> Void

    init(afterTasks: @escaping () -> Void) throws(UVTransportError) {
        self.afterTasks = afterTasks
        loop = .allocate(capacity: 1)
        wakeup = .allocate(capacity: 1)
        let status = uv_loop_init(loop)
        guard status == 0 else {
            loop.deallocate()
            wakeup.deallocate()
            throw .system("uv_loop_init: \(UVError.text(status))")
        }
        wakeupDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeupDescriptor >= 0 else {
            let error = errno
            precondition(uv_loop_close(loop) == 0, "uv_loop_close of an empty loop failed")
            loop.deallocate()
            wakeup.deallocate()
            throw .system("eventfd: \(String(cString: strerror(error)))")
        }
        var pollStatus = uv_poll_init(loop, wakeup, wakeupDescriptor)
        if pollStatus == 0 {
            wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            pollStatus = uv_poll_start(wakeup, Int32(UV_READABLE.rawValue)) { handle, status, _ in
                let this = Unmanaged<UVEventLoop>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
                this.woken(status: status)
            }
        }
        precondition(pollStatus == 0, "uv_poll on the wakeup eventfd failed: \(UVError.text(pollStatus))")
    }

    deinit {
        precondition(!threadStarted || joined, "UVEventLoop released without join")
        close(wakeupDescriptor)
        wakeup.deallocate()
        loop.deallocate()
    }

    /// Spawns the loop thread.
    func start() {
        precondition(!threadStarted && !unstartedClosed, "UVEventLoop.start called twice or after close")
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, nil, { raw in
            let this = Unmanaged<UVEventLoop>.fromOpaque(raw!).takeRetainedValue()
            this.run()
            return nil
        }, context)
        precondition(status == 0, "pthread_create failed: \(status)")
        threadStarted = true
    }

    private func run() {
        // A write coalesced while links stream sleeps on this thread (`FlushPacing`): let the
        // kernel end that sleep within a microsecond, not the default 50 µs late.
        _ = decide_set_timer_slack_nanoseconds(1_000)
        _ = uv_run(loop, UV_RUN_DEFAULT)
        let status = uv_loop_close(loop)
        precondition(status == 0, "a libuv handle outlived the transport's shutdown: \(UVError.text(status))")
    }

    /// True when called on the loop thread.
    var isLoopThread: Bool { threadStarted && !joined && pthread_equal(pthread_self(), thread) != 0 }

    /// Queues `task` for the loop thread. False (and the task dropped) once `stop` was called.
    @discardableResult
    func execute(_ task: @escaping @Sendable () -> Void) -> Bool {
        queueAndWake(task)
    }

    /// Wakes the loop so that `afterTasks` runs soon. False once `stop` was called.
    @discardableResult
    func wake() -> Bool {
        queueAndWake(nil)
    }

    /// Queues `task` (if any) and wakes the loop, unless `stop` was called (then false).
    private func queueAndWake(_ task: (@Sendable () -> Void)?) -> Bool {
        let (accepted, mustWake) = pending.withLock { state in
            guard state.accepting else { return (false, false) }
            if let task { state.tasks.append(task) }
            return (true, Self.claimWakeup(&state))
        }
        if mustWake { writeWakeup() }
        return accepted
    }

    /// Queues `finalTask` as the last task ever, then closes the wakeup handle after it.
    func stop(finalTask: @escaping @Sendable () -> Void) {
        let mustWake = pending.withLock { state in
            precondition(state.accepting, "UVEventLoop.stop called twice")
            state.tasks.append(finalTask)
            state.tasks.append { [self] in uv_close(decide_uv_poll_as_handle(wakeup), nil) }
            state.accepting = false
            return Self.claimWakeup(&state)
        }
        if mustWake { writeWakeup() }
    }

    /// Waits for the loop thread to end (after `stop`).
    func join() {
        precondition(threadStarted && !isLoopThread, "join from the loop thread")
        pthread_join(thread, nil)
        joined = true
    }

    /// Under the lock: whether this caller writes the wakeup (none is outstanding). The write
    /// itself comes after the lock is let go, so the woken loop does not wait for the waker's
    /// system call to return before it can take the tasks.
    private static func claimWakeup(_ state: inout Pending) -> Bool {
        guard !state.wakeupSent else { return false }
        state.wakeupSent = true
        return true
    }

    /// Makes the eventfd readable. A full counter (EAGAIN) is readable already.
    private func writeWakeup() {
        var one: UInt64 = 1
        while true {
            let written = Glibc.write(wakeupDescriptor, &one, 8)
            if written == 8 || (written < 0 && errno == EAGAIN) { return }
            precondition(written < 0 && errno == EINTR, "write to the wakeup eventfd failed: errno \(errno)")
        }
    }

    /// The eventfd is readable: empties it, then runs what was queued. Emptied first, so a wakeup
    /// written after the tasks are taken is seen by the next turn, never swallowed.
    private func woken(status: Int32) {
        precondition(status == 0, "polling the wakeup eventfd failed: \(UVError.text(status))")
        var counter: UInt64 = 0
        while Glibc.read(wakeupDescriptor, &counter, 8) < 0 && errno == EINTR {}
        runPending()
    }

    private func runPending() {
        let tasks = pending.withLock { state -> [@Sendable () -> Void] in
            state.wakeupSent = false
            let tasks = state.tasks
            state.tasks = []
            return tasks
        }
        for task in tasks { task() }
        afterTasks()
    }
}

/// libuv error codes as text.
enum UVError {
    static func text(_ status: Int32) -> String {
        String(cString: uv_err_name(status)) + " (" + String(cString: uv_strerror(status)) + ")"
    }
}

extension UVEventLoop {
    /// Releases the loop of a transport that never started (idempotent).
    func closeUnstarted() {
        precondition(!threadStarted, "closeUnstarted on a started loop")
        guard !unstartedClosed else { return }
        unstartedClosed = true
        pending.withLock { $0.accepting = false }
        uv_close(decide_uv_poll_as_handle(wakeup), nil)
        _ = uv_run(loop, UV_RUN_DEFAULT)
        let status = uv_loop_close(loop)
        precondition(status == 0, "uv_loop_close failed: \(UVError.text(status))")
    }
}
