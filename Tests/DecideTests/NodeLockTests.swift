@testable import Decide
import Foundation
import Synchronization
import Testing

/// The node's lock (`NodeLock`, `CDecideLock`): exclusion under contention, queue order, the
/// urgent path, the handoff once the head of the queue's turn has come, and how rarely it comes.
@Suite struct NodeLockTests {
    /// Waits until `condition` holds, polling: the tests arrange a state (threads asleep in the
    /// queue) that only the lock's counters show. Fails the test after 30 s.
    static func waitUntil(_ what: String, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(30)
        while !condition() {
            if Date() > deadline {
                Issue.record("timed out waiting until \(what)")
                return
            }
            usleep(100)
        }
    }

    /// Starts a thread that takes `lock` (appending `first`, when given), returns once it holds
    /// it, and keeps it until `release` is signalled; that thread then runs `after`, and leaves
    /// `finished`.
    static func startHolder(of lock: NodeLock<[String]>, appending first: String? = nil, until release: DispatchSemaphore,
                            finished: DispatchGroup, after: @escaping @Sendable () -> Void = {}) {
        let holding = DispatchSemaphore(value: 0)
        finished.enter()
        Thread {
            lock.withLock { order in
                if let first { order.append(first) }
                holding.signal()
                release.wait()
            }
            after()
            finished.leave()
        }.start()
        holding.wait()
    }

    /// Eight threads, a quarter of them urgent and a quarter polite, add to a plain counter inside
    /// the lock: no update is lost, and no two bodies ever run at once. With bounds of 0 (every
    /// woken loser hands over), 100 µs (the default) and one long enough never to be reached;
    /// a negative bound counts as 0, and `Int.max` microseconds as never (not an overflow).
    @Test(arguments: [-1, 0, 100, 10_000_000, Int.max])
    func bodiesNeverOverlapAndNoUpdateIsLost(handoffMicroseconds: Int) {
        let lock = NodeLock(0, handoffMicroseconds: handoffMicroseconds)
        let inside = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        let threads = 8
        let iterations = 50_000
        let finished = DispatchGroup()
        for thread in 0..<threads {
            finished.enter()
            Thread {
                for iteration in 0..<iterations {
                    let body = { (value: inout Int) in
                        if inside.add(1, ordering: .relaxed).newValue != 1 { overlaps.add(1, ordering: .relaxed) }
                        value += 1
                        // Now and then a long hold, far past the arriving threads' spin, so they
                        // queue and sleep: the slow paths run, not only the spin.
                        if iteration % 1_000 == 0 { usleep(50) }
                        inside.subtract(1, ordering: .relaxed)
                    }
                    switch thread % 4 {
                    case 0: lock.withUrgentLock(body)
                    case 1: lock.withPoliteLock(body)
                    default: lock.withLock(body)
                    }
                }
                finished.leave()
            }.start()
        }
        finished.wait()
        #expect(lock.withLock { $0 } == threads * iterations)
        #expect(overlaps.load(ordering: .relaxed) == 0)
        // Contention was real: threads slept on the lock, so the slow paths ran.
        #expect(lock.sleeps > 0)
    }

    /// Three threads queue in turn behind a held lock, then an urgent one: the urgent thread gets
    /// the lock first, then the others in the order they queued. Without the urgent path it
    /// would come last.
    @Test(arguments: [0, 10_000_000])
    func sleepersAreServedInQueueOrderAndAnUrgentOneFirst(handoffMicroseconds: Int) {
        let lock = NodeLock([String](), handoffMicroseconds: handoffMicroseconds)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchGroup()
        Self.startHolder(of: lock, until: release, finished: finished)
        for (index, name) in ["first", "second", "third", "urgent"].enumerated() {
            finished.enter()
            Thread {
                if name == "urgent" {
                    lock.withUrgentLock { $0.append(name) }
                } else {
                    lock.withLock { $0.append(name) }
                }
                finished.leave()
            }.start()
            Self.waitUntil("\(name) sleeps in the queue") { lock.sleeps == UInt64(index + 1) }
        }
        release.signal()
        finished.wait()
        #expect(lock.withLock { $0 } == ["urgent", "first", "second", "third"])
    }

    /// A chore that takes the lock again politely, right after an unlock woke a queued thread,
    /// lets that thread in first (a plain `withLock` would take the free lock before the woken
    /// thread runs).
    @Test func aPoliteRelockLetsTheWokenThreadInFirst() {
        let lock = NodeLock([String](), handoffMicroseconds: 10_000_000)
        let waiterQueued = DispatchSemaphore(value: 0)
        let finished = DispatchGroup()
        Self.startHolder(of: lock, appending: "chore, first slice", until: waiterQueued, finished: finished) {
            lock.withPoliteLock { $0.append("chore, second slice") }
        }
        finished.enter()
        Thread {
            lock.withLock { $0.append("decision") }
            finished.leave()
        }.start()
        Self.waitUntil("the decision sleeps in the queue") { lock.sleeps >= 1 }
        waiterQueued.signal()
        finished.wait()
        #expect(lock.withLock { $0 } == ["chore, first slice", "decision", "chore, second slice"])
    }

    /// With a bound of 0 the head of the queue's turn has always come: the next unlock wakes it
    /// as the heir, and once it runs and finds the lock held it claims it, so the unlock after
    /// that hands it the lock ahead of the running thread's next request. (A barging lock lets
    /// the running thread take it again first.)
    @Test func anHeirWhoseTurnHasComeIsHandedTheLockAheadOfTheRunningThread() {
        let lock = NodeLock([String](), handoffMicroseconds: 0)
        // H holds the lock while W queues; H unlocks, which wakes W, and at once locks again, so
        // that W, running, finds it held and claims it. A round in which W takes the free lock
        // before H locks again does not show the claim, and is tried again.
        for _ in 0..<100 {
            lock.withLock { $0.removeAll() }
            let sleepsBefore = lock.sleeps
            let handoffsBefore = lock.handoffs
            let waiterQueued = DispatchSemaphore(value: 0)
            let proceed = DispatchSemaphore(value: 0)
            let waiterDone = Atomic<Bool>(false)
            let finished = DispatchGroup()
            Self.startHolder(of: lock, appending: "H", until: waiterQueued, finished: finished) {
                lock.withLock { order in
                    order.append("H again")
                    proceed.wait()
                }
                lock.withLock { $0.append("H third") }
            }
            finished.enter()
            Thread {
                lock.withLock { $0.append("W") }
                waiterDone.store(true, ordering: .releasing)
                finished.leave()
            }.start()
            Self.waitUntil("W sleeps in the queue") { lock.sleeps >= sleepsBefore + 1 }
            waiterQueued.signal()
            Self.waitUntil("W claimed the lock or got in") {
                lock.sleeps >= sleepsBefore + 2 || waiterDone.load(ordering: .acquiring)
            }
            proceed.signal()
            finished.wait()
            let order = lock.withLock { $0 }
            guard order.count > 1, order[1] == "H again" else { continue }
            #expect(order == ["H", "H again", "W", "H third"])
            #expect(lock.handoffs == handoffsBefore + 1)
            return
        }
        Issue.record("in 100 rounds the running thread never took the lock again before the woken waiter")
    }

    /// Fifty threads take the lock 5,000 times each on two processors. The lock hands over at
    /// most once per bound (each handoff starts the next head's turn), so nearly every
    /// acquisition is a running thread's, not a woken sleeper's: the lock's throughput does not
    /// depend on how many threads ask. A lock that hands over whenever a sleeper has waited past
    /// the bound hands over at nearly every acquisition here, since with fifty threads on two
    /// processors every sleeper has (docs/design/0005-node-lock.md, "Measured").
    /// With a bound never reached and no urgent thread it never hands over.
    @Test(arguments: [100, 10_000_000])
    func manyThreadsHandOverAtMostOncePerBound(handoffMicroseconds: Int) {
        let lock = NodeLock(0, handoffMicroseconds: handoffMicroseconds)
        let threads = 50
        let iterations = 5_000
        // Started first and released together, so they contend from the first acquisition.
        let gate = DispatchSemaphore(value: 0)
        let ready = DispatchGroup()
        let finished = DispatchGroup()
        for _ in 0..<threads {
            ready.enter()
            finished.enter()
            Thread {
                ready.leave()
                gate.wait()
                for _ in 0..<iterations {
                    lock.withLock { count in
                        count += 1
                        // Now and then a hold far past a spin, so that waiting threads sleep.
                        if count % 1_000 == 0 { usleep(50) }
                    }
                }
                finished.leave()
            }.start()
        }
        ready.wait()
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<threads { gate.signal() }
        finished.wait()
        let elapsedMicroseconds = (DispatchTime.now().uptimeNanoseconds - start) / 1_000
        #expect(lock.withLock { $0 } == threads * iterations)
        #expect(lock.handoffs <= elapsedMicroseconds / UInt64(handoffMicroseconds) + 1,
                "\(lock.handoffs) handoffs in \(elapsedMicroseconds) µs at a bound of \(handoffMicroseconds) µs")
        // Contention was real: threads slept.
        #expect(lock.sleeps > 0)
    }
}
