import Decide
import DecideCore
import DecideSimulation
import Testing

/// Ordered indexes across a cluster in virtual time (docs/consistency.md, "Ordered indexes"):
/// partitioned nodes that append, insert, move and remove end, once healed, with the same ids
/// in the same order, losing nobody's append, and each node's run of appends stays together.
@Suite struct IndexTests {
    struct Feed: IndexState {
        typealias ID = String
        static var name: String { "feed" }
    }

    struct Append: Decision {
        let ids: [String]
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for id in ids { write(id, into: Feed.self, .append) }
            return .none
        }
    }

    /// One random placement (or removal) of an id from a small pool, anchored on what this node
    /// sees now; an anchor that is the id itself or missing falls back to appending.
    struct Shuffle: Decision {
        let id: String
        let choice: Int
        let anchor: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            let list = read(Feed.self).filter { $0 != id }
            let target = list.isEmpty ? nil : list[anchor % list.count]
            switch (choice, target) {
            case (0, _): write.remove(id, from: Feed.self)
            case (1, _): write(id, into: Feed.self, .prepend)
            case (2, let target?): write(id, into: Feed.self, .after(target))
            case (3, let target?): write(id, into: Feed.self, .before(target))
            default: write(id, into: Feed.self, .append)
            }
            return .none
        }
    }

    /// The case: two nodes cut off from each other each append 1,000 ids (in decisions
    /// of 1 to 50, as the seed chooses); after healing both hold all 2,000 after the ids they
    /// shared, in one order, each node's run whole and in its own order.
    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 50, salt: 0x1DE))
    func twoPartitionedNodesAppendingAThousandEachEndWithTheSameTwoThousandInOneOrder(seed: UInt64) {
        var random = SplitMix64(seed: seed ^ 0x1DE)
        let cluster = SimCluster(seed: seed, ids: ["a", "b"], seeds: ["b": ["a"]])
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        let shared = (0..<10).map { "shared\($0)" }
        cluster.node("a").decide(Append(ids: shared))
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        #expect(cluster.node("b").read(Feed.self) == shared)

        cluster.network.partition("a", from: "b")
        var next = ["a": 0, "b": 0]
        while next.values.contains(where: { $0 < 1_000 }) {
            for node in ["a", "b"] where next[node]! < 1_000 {
                let count = min(Int.random(in: 1...50, using: &random), 1_000 - next[node]!)
                let ids = (next[node]!..<(next[node]! + count)).map { "\(node)\($0)" }
                #expect(cluster.node(node).decide(Append(ids: ids)).version != nil)
                next[node]! += count
            }
            cluster.run(milliseconds: UInt64.random(in: 1...200, using: &random))
        }
        cluster.network.heal()
        #expect(cluster.runUntilConverged(maxMilliseconds: 120_000), "seed \(seed): \(cluster.describe())")

        let onA = cluster.node("a").read(Feed.self)
        let onB = cluster.node("b").read(Feed.self)
        #expect(onA == onB, "seed \(seed): the replicas disagree on the order")
        #expect(onA.count == 2_010 && Set(onA).count == 2_010, "seed \(seed): \(onA.count) ids")
        #expect(Array(onA.prefix(10)) == shared, "seed \(seed)")
        let runA = (0..<1_000).map { "a\($0)" }, runB = (0..<1_000).map { "b\($0)" }
        let rest = Array(onA.dropFirst(10))
        #expect(rest == runA + runB || rest == runB + runA, "seed \(seed): the runs interleave")
    }

    /// Three nodes placing, moving and removing 40 ids under random partitions: once healed,
    /// every replica lists the same ids in the same order.
    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 20, salt: 0x1DF))
    func randomPlacementsUnderPartitionsConvergeToOneOrder(seed: UInt64) {
        var random = SplitMix64(seed: seed ^ 0x1DF)
        let ids = ["a", "b", "c"]
        let cluster = SimCluster(seed: seed, ids: ids, seeds: ["b": ["a"], "c": ["a"]])
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        for _ in 0..<8 {
            switch Int.random(in: 0..<3, using: &random) {
            case 0: cluster.network.heal()
            case 1: cluster.network.partition(groups: [["a"], ["b", "c"]])
            default: cluster.network.partition(groups: [["a", "b"], ["c"]])
            }
            for _ in 0..<Int.random(in: 5...25, using: &random) {
                let node = ids[Int.random(in: 0..<3, using: &random)]
                let decision = Shuffle(id: "item\(Int.random(in: 0..<40, using: &random))",
                                       choice: Int.random(in: 0..<6, using: &random), anchor: Int.random(in: 0..<1_000, using: &random))
                // A removal of an id this node does not hold writes nothing; nothing else may fail.
                let commit = cluster.node(node).decide(decision)
                #expect(commit.version != nil || (decision.choice == 0 && commit == .unchanged), "seed \(seed): \(commit)")
                cluster.run(milliseconds: UInt64.random(in: 0...150, using: &random))
            }
        }
        cluster.network.heal()
        #expect(cluster.runUntilConverged(maxMilliseconds: 120_000), "seed \(seed): \(cluster.describe())")
        let lists = ids.map { cluster.node($0).read(Feed.self) }
        #expect(lists[0] == lists[1] && lists[1] == lists[2], "seed \(seed): \(lists)")
        #expect(Set(lists[0]).count == lists[0].count, "seed \(seed): an id listed twice")
    }
}
