@testable import Decide
import Dispatch
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
}
