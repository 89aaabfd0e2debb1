import Decide
import DecideSimulation
import Testing

/// A node whose clock is far from its peers' stops taking decisions and says why, instead of
/// stamping versions the others refuse or that win every key; it resumes once its clock agrees.
@Suite struct ClusterClockTests {
    @Test(arguments: [Int64(300_000), Int64(-300_000)])
    func aNodeOutvotedOnItsClockTakesNoDecisionUntilItIsFixed(skewMilliseconds: Int64) {
        let cluster = SimCluster(seed: 3, ids: ["a", "b", "c"])
        #expect(cluster.runUntilConverged())
        cluster.run(milliseconds: 2_000)
        cluster.members["c"]!.clock.skewMilliseconds = skewMilliseconds
        cluster.run(milliseconds: 2_000)
        guard case .aborted(let reason) = cluster.node("c").decide(SimulationTests.Write(writes: [(StateKey(name: "k"), [1])])) else {
            Issue.record("c took a decision with its clock \(skewMilliseconds) ms off")
            return
        }
        // Stepped back, its own hybrid clock is ahead of it too: either rule may speak first.
        #expect(skewMilliseconds > 0 ? reason.contains("ahead") : (reason.contains("behind") || reason.contains("ahead of its physical clock")),
                "\(reason)")
        #expect(cluster.node("a").decide(SimulationTests.Write(writes: [(StateKey(name: "k"), [2])])).version != nil,
                "a node whose clock agrees with most peers must keep deciding")
        cluster.members["c"]!.clock.skewMilliseconds = 0
        // It resumes once its clock agrees again and real time has passed every time it used
        // (a clock that ran ahead may have stamped a walk or a commit before it was outvoted).
        var waited: UInt64 = 0
        var resumed = false
        while !resumed && waited <= UInt64(max(0, skewMilliseconds)) + 5_000 {
            cluster.run(milliseconds: 1_000)
            waited += 1_000
            resumed = cluster.node("c").decide(SimulationTests.Write(writes: [(StateKey(name: "k2"), [3])])).version != nil
        }
        #expect(resumed, "c did not resume \(waited) ms after its clock was fixed")
        #expect(cluster.runUntilConverged(), "\(cluster.describe())")
    }

    /// A node that comes up with a wrong clock is outvoted one round trip after its links are
    /// up, not a heartbeat later: each new link is pinged at once, and the clock is judged when
    /// the answer arrives. Until then it decides, and its peers refuse those versions until
    /// real time catches up (docs/consistency.md §7), so the window must stay short.
    @Test(arguments: [Int64(300_000), Int64(-300_000)])
    func aNodeStartingWithAWrongClockIsOutvotedWithinARoundTripOfLinking(skewMilliseconds: Int64) {
        let cluster = SimCluster(seed: 11, ids: ["a", "b", "c"])
        #expect(cluster.runUntilConverged())
        cluster.crash("c")
        cluster.run(milliseconds: 2_000)
        cluster.members["c"]!.clock.skewMilliseconds = skewMilliseconds
        cluster.restart("c", empty: true)
        var elapsed: UInt64 = 0
        var linkedAt: UInt64?
        var refusedAt: UInt64?
        var decided = 0
        while refusedAt == nil && elapsed < 5_000 {
            cluster.run(milliseconds: 1)
            elapsed += 1
            if linkedAt == nil,
               cluster.replicator("c").status.members.filter({ $0.link == .connected }).count == 2 {
                linkedAt = elapsed
            }
            guard linkedAt != nil else { continue }
            switch cluster.node("c").decide(SimulationTests.Write(writes: [(StateKey(name: "probe"), [UInt8(decided % 256)])])) {
            case .aborted: refusedAt = elapsed
            default: decided += 1
            }
        }
        guard let linkedAt, let refusedAt else {
            Issue.record("c never refused: linked at \(linkedAt.map(String.init) ?? "never"), \(cluster.describe())")
            return
        }
        // The heartbeat is 200 ms here; a round trip on the simulated network is a few ms.
        #expect(refusedAt - linkedAt <= 50, "c took decisions for \(refusedAt - linkedAt) ms after linking (\(decided) decisions)")
    }
}
