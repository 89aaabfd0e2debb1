import Decide
import DecideSimulation
import Foundation
import Testing

/// Catch-up at the sizes users have: an empty node joins one holding a million keys.
@Suite struct LargeStateTests {
    static let keyCount = Int(ProcessInfo.processInfo.environment["SIM_LARGE_KEYS"] ?? "") ?? 1_000_000

    struct Fill: Decision {
        let range: Range<Int>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in range { write.raw(Array("value-\(index)-........................................".utf8), into: StateKey(name: "big", element: Array("\(index)".utf8))) }
            return .none
        }
    }

    @Test func anEmptyNodeJoinsOneHoldingAMillionKeysWithBoundedMemoryInFlight() {
        let cluster = SimCluster(seed: 11, ids: ["a"], seeds: ["a": []], configureNode: { configuration in
            configuration.digestFanoutBits = 4
            configuration.digestDepth = 4
        })
        var start = 0
        while start < Self.keyCount {
            let end = min(Self.keyCount, start + 1_000)
            cluster.node("a").decide(Fill(range: start..<end))
            start = end
        }
        let target = cluster.node("a").stateSummary
        #expect(target.entryCount == Self.keyCount)
        cluster.join("b", seed: "a")
        let configuration = cluster.replicatorConfiguration
        // One stream's window (a batch is cut after the decision that crosses the budget, and
        // these decisions are ~100 KB), plus room for digests, gossip and pings.
        let window = configuration.catchUpWindowMessages * (configuration.catchUpBatchBytes + 128 * 1024) + 512 * 1024
        var peakInFlight = 0
        var waited: UInt64 = 0
        while cluster.node("b").stateSummary.digest != target.digest && waited < 600_000 {
            cluster.run(milliseconds: 20)
            waited += 20
            peakInFlight = max(peakInFlight, cluster.network.inFlightBytes(from: "a", to: "b"))
        }
        let joined = cluster.node("b").stateSummary
        #expect(joined.digest == target.digest && joined.entryCount == target.entryCount,
                "b holds \(joined.entryCount) of \(target.entryCount) after \(waited) ms, \(cluster.describe())")
        // What a stream keeps in flight is its window, whatever the state's size.
        #expect(peakInFlight <= window, "peak in flight \(peakInFlight) B over the stream window \(window) B")
        #expect(cluster.lostWrites(on: "b").isEmpty)
    }
}
