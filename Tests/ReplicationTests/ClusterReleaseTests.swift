import Decide
import DecideSimulation
import DecideTesting
import Testing

/// A cluster released at the end of a seed takes its nodes, engines, transports, network and
/// scheduler with it: thousands of seeds in one process must not keep thousands of clusters
/// (they did, about 140 KB a seed, until `TestCluster` crashed its members and dropped the
/// pending events when released).
@Suite struct ClusterReleaseTests {
    @Test func aReleasedClusterFreesEverythingItStarted() {
        weak var scheduler: SimulatedScheduler?
        weak var network: SimulatedNetwork?
        weak var node: Node?
        weak var replicator: Replicator?
        weak var transport: SimulatedTransport?
        weak var crashedTransport: SimulatedTransport?
        do {
            let cluster = SimCluster(seed: 1, ids: ["a", "b", "c"])
            cluster.node("a").decide(SimulationTests.Write(writes: [(StateKey(name: "k"), Array("v".utf8))]))
            cluster.run(milliseconds: 2_000)
            crashedTransport = cluster.members["b"]!.transport
            cluster.crash("b")
            cluster.run(milliseconds: 500)
            cluster.restart("b", empty: false)
            #expect(cluster.runUntilConverged(), "\(cluster.describe())")
            scheduler = cluster.scheduler
            network = cluster.network
            node = cluster.node("a")
            replicator = cluster.members["a"]!.replicator
            transport = cluster.members["a"]!.transport
        }
        #expect(scheduler == nil, "the scheduler outlived its cluster")
        #expect(network == nil, "the network outlived its cluster")
        #expect(node == nil, "a node outlived its cluster")
        #expect(replicator == nil, "an engine outlived its cluster")
        #expect(transport == nil, "a transport outlived its cluster")
        #expect(crashedTransport == nil, "a crashed member's transport outlived its cluster")
    }
}
