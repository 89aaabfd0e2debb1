@testable import Decide
import DecideCore
import Testing

/// The replicator's inbound queue (`InboundLoad`): arrival order, passes, and a backlog of the
/// size its byte bound admits.
@Suite struct InboundLoadTests {
    private func waiting(_ number: UInt64, peer: String = "peer") -> InboundLoad.Waiting {
        InboundLoad.Waiting(message: .ping(nonce: number), bytes: 16, isDelta: false,
                            connection: ConnectionID(rawValue: 1), peerID: peer)
    }

    private func nonces(_ batch: [InboundLoad.Waiting]) -> [UInt64] {
        batch.map { item in
            guard case .ping(let nonce) = item.message else { return .max }
            return nonce
        }
    }

    @Test func handsOutBatchesInArrivalOrderAndEndsThePassWhenEmpty() {
        var load = InboundLoad(batchMessages: 4)
        #expect(load.isIdle)
        var scheduled = [load.push(waiting(0))]   // the first push schedules a pass
        for number in 1..<10 { scheduled.append(load.push(waiting(UInt64(number)))) }
        #expect(scheduled == [true] + Array(repeating: false, count: 9))
        #expect(!load.isIdle)
        var batches = [nonces(load.take())]
        let duringPass = load.push(waiting(10))   // a pass runs: it takes this one too
        #expect(!duringPass)
        batches.append(nonces(load.take()))
        batches.append(nonces(load.take()))
        #expect(batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]])
        #expect(!load.isIdle)
        let last = load.take()                     // ends the pass
        #expect(last.isEmpty)
        #expect(load.isIdle)
        let afterPass = load.push(waiting(11))    // so the next push schedules another
        #expect(afterPass)
        let again = nonces(load.take())
        #expect(again == [11])
    }

    @Test func keepsArrivalOrderWhilePushesAndTakesInterleave() {
        var load = InboundLoad(batchMessages: 7)
        var next: UInt64 = 0
        var seen: [UInt64] = []
        for step in 0..<2_000 {
            for _ in 0..<(step * 7_919) % 21 {
                _ = load.push(waiting(next))
                next += 1
            }
            let batch = load.take()
            #expect(batch.count <= 7)
            seen += nonces(batch)
        }
        while true {
            let batch = load.take()
            if batch.isEmpty { break }
            seen += nonces(batch)
        }
        #expect(seen == Array(0..<next))
    }

    /// A store slower than its peers lets the queue fill to `maxInboundDeltaBytes` (64 MiB by
    /// default): about a million small deltas. Draining them must cost in proportion to their
    /// number. The queue once drained a single array from its front, moving every message
    /// behind each batch taken: at this size that is about 2 × 10⁹ moves (each retaining the
    /// message), far past the limit; drained in runs it takes well under a second.
    @Test(.timeLimit(.minutes(1))) func drainsAMillionWaitingMessagesInBatches() {
        let count = 1_000_000
        var load = InboundLoad(batchMessages: Replicator.inboundBatchMessages)
        for number in 0..<count { _ = load.push(waiting(UInt64(number))) }
        var drained = 0
        var ordered = true
        while true {
            let batch = load.take()
            if batch.isEmpty { break }
            #expect(batch.count <= Replicator.inboundBatchMessages)
            for item in batch {
                guard case .ping(let nonce) = item.message, nonce == UInt64(drained) else {
                    ordered = false
                    break
                }
                drained += 1
            }
            if !ordered { break }
        }
        #expect(ordered)
        #expect(drained == count)
        #expect(load.isIdle)
    }
}
