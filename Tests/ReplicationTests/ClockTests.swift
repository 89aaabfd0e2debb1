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
}
