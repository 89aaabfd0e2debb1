@testable import Decide
import DecideCore
import DecideTesting
import Testing

/// A node applies peers' deltas from their bytes (`apply(received:recent:skip:)`, what the
/// replication engine does for a node without a store) exactly as it applies decoded ones
/// (`apply(deltas:)`): the same entries and digest, the same deltas refused by the clock rule,
/// the same changes counted, and the same deltas handed to commit listeners, over random runs of
/// atomic and collection writes, deletes, expiring and owned values, values on both sides of the
/// in-place limit, stale and repeated versions, and deltas left out.
@Suite struct ReceivedDeltasApplyTests {
    @Test func applyingFromBytesMatchesApplyingDecodedDeltas() throws {
        let codec = WireCodec()
        for seed in UInt64(0)..<60 {
            var random = SplitMix64(seed: seed)
            func pick(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
            let clock = TestClock()
            let now = clock.nowMilliseconds()
            var deltas: [Delta] = []
            for _ in 0..<(1 + pick(40)) {
                // Some from the far future: the clock rule refuses them.
                let physical = pick(8) == 0 ? now + 10_000_000 : now - UInt64(pick(5_000))
                let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: UInt16(pick(3))),
                                      node: ["b", "c", "peer-ü"][pick(3)])
                let writes = (0..<pick(5)).map { _ -> Delta.Write in
                    let key = pick(2) == 0 ? StateKey(name: ["flags", "config"][pick(2)])
                        : StateKey(name: ["quota", "presence"][pick(2)], element: Array("\"\(pick(30))\"".utf8))
                    let value: [UInt8]? = pick(5) == 0 ? nil : Array("\"\(String(repeating: "v", count: pick(40)))\"".utf8)
                    return Delta.Write(key: key, value: value, expiresAtMilliseconds: pick(4) == 0 ? now + UInt64(pick(20_000)) : nil,
                                       ownedByWriter: pick(4) == 0)
                }
                deltas.append(Delta(version: version, writes: writes))
                if pick(6) == 0 { deltas.append(deltas[pick(deltas.count)]) }  // a repeat
            }
            let skipped = Set(deltas.indices.filter { _ in pick(7) == 0 })

            func node() -> (Node, Recorder<Delta>) {
                let node = Fixture.node("a", clock: clock)
                let heard = Recorder<Delta>()
                _ = node.addCommitListener { heard.append($0.delta) }
                return (node, heard)
            }
            let (decoded, decodedHeard) = node()
            let kept = deltas.indices.filter { !skipped.contains($0) }
            let expected = decoded.apply(deltas: kept.map { deltas[$0] })

            let (fromBytes, bytesHeard) = node()
            let held = ReceivedDeltas(codec: codec)
            for (index, delta) in deltas.enumerated() {
                try ([1] + codec.encode(delta)).withUnsafeBytes { try held.append($0, from: 1, source: UInt64(index)) }
            }
            var recent = RecentWireStrings()
            let outcome = fromBytes.apply(received: held, recent: &recent, skip: { skipped.contains($0) })

            #expect(outcome.changed == expected.changed, "seed \(seed)")
            #expect(outcome.refusals.map { $0.index } == expected.refusals.map { kept[$0.index] }, "seed \(seed)")
            #expect(fromBytes.entries() == decoded.entries(), "seed \(seed)")
            #expect(fromBytes.stateSummary.digest == decoded.stateSummary.digest, "seed \(seed)")
            #expect(bytesHeard.all == decodedHeard.all, "seed \(seed)")
            #expect(fromBytes.stateSummary.appliedRemoteDeltas == decoded.stateSummary.appliedRemoteDeltas, "seed \(seed)")
        }
    }
}
