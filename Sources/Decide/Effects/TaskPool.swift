import Synchronization

/// Runs effect operations with bounded concurrency and a bounded backlog.
///
/// Guarantees: at most `maxConcurrent` jobs run at once; jobs are handed to workers in
/// submission order (jobs that run at once may then interleave in any order); at most
/// `maxQueued` wait; `submit` refuses (returns false) rather than queue more, so memory
/// stays bounded; `waitUntilIdle` returns once nothing runs or waits.
final class TaskPool: Sendable {
    typealias Job = @Sendable () async -> Void

    private struct State: ~Copyable {
        var running = 0
        var queue: [Job] = []
        var head = 0
        var idleWaiters: [CheckedContinuation<Void, Never>] = []

        var queued: Int { queue.count - head }

        mutating func popFirst() -> Job? {
            guard head < queue.count else { return nil }
            let job = queue[head]
            head += 1
            if head > 64 && head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            return job
        }
    }

    let maxConcurrent: Int
    let maxQueued: Int
    private let state = Mutex(State())

    init(maxConcurrent: Int, maxQueued: Int) {
        precondition(maxConcurrent >= 1 && maxQueued >= 0, "task pool needs at least one worker")
        self.maxConcurrent = maxConcurrent
        self.maxQueued = maxQueued
    }

    /// Number of jobs running and waiting.
    var load: (running: Int, queued: Int) {
        state.withLock { ($0.running, $0.queued) }
    }

    /// Starts `job` now if a worker is free, else queues it; false when the backlog is full.
    func submit(_ job: @escaping Job) -> Bool {
        enum Decision { case start, queued, refused }
        let decision = state.withLock { state -> Decision in
            if state.running < maxConcurrent {
                state.running += 1
                return .start
            }
            guard state.queued < maxQueued else { return .refused }
            state.queue.append(job)
            return .queued
        }
        switch decision {
        case .start:
            Task.detached { await self.work(startingWith: job) }
            return true
        case .queued: return true
        case .refused: return false
        }
    }

    /// Returns when no job runs or waits.
    func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { state -> Bool in
                if state.running == 0 && state.queued == 0 { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    private func work(startingWith first: @escaping Job) async {
        var job = first
        while true {
            await job()
            let next = state.withLock { state -> (Job?, [CheckedContinuation<Void, Never>]) in
                if let next = state.popFirst() { return (next, []) }
                state.running -= 1
                guard state.running == 0 else { return (nil, []) }
                let waiters = state.idleWaiters
                state.idleWaiters.removeAll()
                return (nil, waiters)
            }
            guard let following = next.0 else {
                for waiter in next.1 { waiter.resume() }
                return
            }
            job = following
        }
    }
}
