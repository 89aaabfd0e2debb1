import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One libuv loop on one thread of its own. Other threads hand it closures through a locked
/// queue and `uv_async_send`; no Swift concurrency runs on the loop thread.
///
/// Lifecycle: `start` spawns the thread; `stop(finalTask:)` queues a last task (which must
/// close every handle it knows of) and refuses all later work; the loop then closes its wakeup
/// handle, `uv_run` returns once every close callback ran, and `join` waits for the thread.
///
/// The task queue holds what API calls hand over (listen, connect, close, over-limit notices,
/// the last coalesced per link); frames never go through it, so it stays as long as the callers'
/// own bursts of calls. Wakeups are coalesced: one `uv_async_send` per loop turn at most.
final class UVEventLoop: @unchecked Sendable {
    /// Bytes asked of the kernel per read by a reader on a loop, unless configured otherwise:
    /// one buffer per reader, shared by all its connections (the transport's reactor, and a
    /// `UVStreamServer` by default).
    static let defaultReadBufferBytes = 64 * 1024

    /// The loop. Touch it only on the loop thread (or before `start` / after `join`).
    let loop: UnsafeMutablePointer<uv_loop_t>
    fileprivate let wakeup: UnsafeMutablePointer<uv_async_t>
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
        let asyncStatus = uv_async_init(loop, wakeup) { handle in
            let this = Unmanaged<UVEventLoop>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            this.runPending()
        }
        precondition(asyncStatus == 0, "uv_async_init failed: \(UVError.text(asyncStatus))")
        wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        precondition(!threadStarted || joined, "UVEventLoop released without join")
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
        pending.withLock { state in
            guard state.accepting else { return false }
            state.tasks.append(task)
            signal(&state)
            return true
        }
    }

    /// Wakes the loop so that `afterTasks` runs soon. False once `stop` was called.
    @discardableResult
    func wake() -> Bool {
        pending.withLock { state in
            guard state.accepting else { return false }
            signal(&state)
            return true
        }
    }

    /// Queues `finalTask` as the last task ever, then closes the wakeup handle after it.
    func stop(finalTask: @escaping @Sendable () -> Void) {
        pending.withLock { state in
            precondition(state.accepting, "UVEventLoop.stop called twice")
            state.tasks.append(finalTask)
            state.tasks.append { [self] in uv_close(decide_uv_async_as_handle(wakeup), nil) }
            signal(&state)
            state.accepting = false
        }
    }

    /// Waits for the loop thread to end (after `stop`).
    func join() {
        precondition(threadStarted && !isLoopThread, "join from the loop thread")
        pthread_join(thread, nil)
        joined = true
    }

    private func signal(_ state: inout Pending) {
        // Called under the lock: the wakeup handle cannot be closed concurrently.
        if !state.wakeupSent {
            state.wakeupSent = true
            let status = uv_async_send(wakeup)
            precondition(status == 0, "uv_async_send failed: \(UVError.text(status))")
        }
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
        uv_close(decide_uv_async_as_handle(wakeup), nil)
        _ = uv_run(loop, UV_RUN_DEFAULT)
        let status = uv_loop_close(loop)
        precondition(status == 0, "uv_loop_close failed: \(UVError.text(status))")
    }
}
