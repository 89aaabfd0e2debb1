import Foundation
import Synchronization
import Testing
@testable import DecideUV

/// The loop thread's task queue and its wakeup (`UVEventLoop`, an eventfd polled on the loop):
/// every task handed over from any thread runs on the loop, in order per thread, and no wakeup
/// is lost, including one written while the loop is taking the tasks of the previous one. A
/// lost wakeup leaves tasks queued with the loop asleep: these tests then miss their deadline.
@Suite struct EventLoopTests {
    /// Counts on the loop thread only (tasks run there one at a time), read after a semaphore.
    final class LoopCounter: @unchecked Sendable {
        var tasks = 0
        var offLoop = 0
        var outOfOrder = 0
        var lastPerThread: [Int: Int] = [:]
        var afterTasksCalls = 0
    }

    /// A started loop whose `afterTasks` counts and signals `afterTasks`; stopped and joined by `end`.
    struct Running {
        let loop: UVEventLoop
        let counter: LoopCounter
        let afterTasks: DispatchSemaphore

        init() throws {
            let counter = LoopCounter()
            let afterTasks = DispatchSemaphore(value: 0)
            loop = try UVEventLoop(afterTasks: {
                counter.afterTasksCalls += 1
                afterTasks.signal()
            })
            self.counter = counter
            self.afterTasks = afterTasks
            loop.start()
        }

        /// Stops and joins the loop. A loop that lost its wakeup never runs the final task and
        /// its thread never ends: that is recorded, and the loop kept (unjoined) for the rest of
        /// the run rather than the test hanging in `join`.
        func end() {
            let done = DispatchSemaphore(value: 0)
            loop.stop { done.signal() }
            guard done.wait(timeout: .now() + 10) == .success else {
                Issue.record("the final task did not run: the loop is asleep with work queued")
                EventLoopTests.stranded.withLock { $0.append(loop) }
                return
            }
            loop.join()
        }
    }

    /// Loops whose thread could not be joined (see `Running.end`).
    static let stranded = Mutex<[UVEventLoop]>([])

    @Test func everyTaskFromManyThreadsRunsOnTheLoopInEachThreadsOrder() throws {
        let running = try Running()
        let threads = 4, perThread = 25_000
        let allRan = DispatchSemaphore(value: 0)
        let counter = running.counter, loop = running.loop
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for sequence in 0 ..< perThread {
                let accepted = loop.execute {
                    if !loop.isLoopThread { counter.offLoop += 1 }
                    if sequence != (counter.lastPerThread[thread] ?? -1) + 1 { counter.outOfOrder += 1 }
                    counter.lastPerThread[thread] = sequence
                    counter.tasks += 1
                    if counter.tasks == threads * perThread { allRan.signal() }
                }
                precondition(accepted, "the loop refused a task before stop")
            }
        }
        #expect(allRan.wait(timeout: .now() + 20) == .success, "a wakeup was lost: \(counter.tasks) of \(threads * perThread) tasks ran")
        running.end()
        #expect(counter.tasks == threads * perThread)
        #expect(counter.offLoop == 0)
        #expect(counter.outOfOrder == 0)
    }

    /// Ping-pong: each `wake` waits for the `afterTasks` it causes before the next, so every
    /// round needs its own wakeup to arrive (many of them race the loop emptying the eventfd
    /// and taking the previous round's tasks).
    @Test func everyWakeIsFollowedByAfterTasks() throws {
        let running = try Running()
        var missed = 0
        for _ in 0 ..< 20_000 {
            #expect(running.loop.wake())
            if running.afterTasks.wait(timeout: .now() + 10) == .timedOut { missed += 1; break }
        }
        #expect(missed == 0, "a wake did not reach the loop")
        running.end()
    }

    @Test func afterStopNothingMoreIsAcceptedAndTheFinalTaskRunsLast() throws {
        let running = try Running()
        let order = Mutex<[String]>([])
        #expect(running.loop.execute { order.withLock { $0.append("task") } })
        let done = DispatchSemaphore(value: 0)
        running.loop.stop {
            order.withLock { $0.append("final") }
            done.signal()
        }
        #expect(!running.loop.execute { order.withLock { $0.append("late") } })
        #expect(!running.loop.wake())
        guard done.wait(timeout: .now() + 10) == .success else {
            Issue.record("the final task did not run")
            Self.stranded.withLock { $0.append(running.loop) }
            return
        }
        running.loop.join()
        #expect(order.withLock { $0 } == ["task", "final"])
    }

    @Test func aLoopNeverStartedClosesCleanly() throws {
        let loop = try UVEventLoop(afterTasks: {})
        #expect(loop.execute {})  // queued, never run
        loop.closeUnstarted()
        loop.closeUnstarted()  // idempotent
        #expect(!loop.execute {})
        #expect(!loop.wake())
    }
}
