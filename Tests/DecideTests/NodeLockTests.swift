@testable import Decide
import Dispatch
import Synchronization
import Foundation
import Testing

@Suite struct NodeLockTests {
    /// Eight threads add to one plain integer inside the lock, a hundred thousand times each:
    /// not one addition is lost, and a read inside the lock sees them all.
    @Test func bodiesExcludeEachOther() {
        let lock = NodeLock((count: 0, pairs: 0))
        let threads = 8, rounds = 100_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<rounds {
                lock.withLock { value in
                    // Two writes a body: another body in between would see them disagree.
                    value.count += 1
                    if value.count != value.pairs + 1 { value.count = -1_000_000_000 }
                    value.pairs += 1
                }
            }
        }
        #expect(lock.withLock { $0.count } == threads * rounds)
        #expect(lock.withLock { $0.pairs } == threads * rounds)
    }

    /// A throwing body releases the lock: the next body runs.
    @Test func aThrowingBodyReleasesTheLock() {
        struct Failure: Error {}
        let lock = NodeLock(0)
        #expect(throws: Failure.self) { try lock.withLock { (_: inout Int) throws -> Void in throw Failure() } }
        #expect(lock.withLock { value -> Int in value += 1; return value } == 1)
    }

    /// A chore holds the lock in 400 slices of about 100 µs, calling `yieldToWaiters()` before
    /// each; another thread asks for the lock twenty times meanwhile and gets it each time within
    /// a few slices. Without the yield, the chore's unlock-then-lock won the lock back and a
    /// waiter could wait out the whole chore (the collection rows of `make bench`: 5.6 and 88 ms).
    @Test func aChoreInSlicesLetsWaitersIn() async {
        let lock = NodeLock(0)
        let slices = 400
        let current = Atomic<Int>(-1)
        let started = DispatchSemaphore(value: 0)
        let chore = Thread {
            for slice in 0..<slices {
                lock.yieldToWaiters()
                lock.withLock { _ in
                    current.store(slice, ordering: .releasing)
                    if slice == 0 { started.signal() }
                    let until = DispatchTime.now().uptimeNanoseconds + 100_000
                    while DispatchTime.now().uptimeNanoseconds < until {}
                }
            }
            current.store(slices, ordering: .releasing)
        }
        chore.start()
        started.wait()
        var longestWait = 0
        for _ in 0..<20 {
            let asked = current.load(ordering: .acquiring)
            if asked >= slices { break }
            let got = lock.withLock { _ in current.load(ordering: .acquiring) }
            longestWait = max(longestWait, got - asked)
            usleep(500)
        }
        #expect(longestWait <= 5, "a waiter waited \(longestWait) slices of the chore")
        while current.load(ordering: .acquiring) < slices { usleep(1_000) }
    }
}
