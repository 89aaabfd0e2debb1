import Decide
import DecideCore
import DecideSimulation
import Testing

/// Sets across a cluster in virtual time (docs/consistency.md, "Sets"): five nodes insert and
/// remove under loss, duplication, reordering, partitions, clock skew, crashes and restarts,
/// and once healed every node holds the same elements: each inserted element that no remove
/// had seen, and none that a remove took out; an insert a partitioned remove had not seen stays.
@Suite struct SetTests {
    struct Members: SetState {
        typealias Element = String
        static var name: String { "members" }
    }

    struct Change: Decision {
        let change: SetChange<String>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(change, into: Members.self)
            return .none
        }
    }

    @Test func concurrentInsertsAndRemovesUnderFaultsEndTheSameOnEveryNode() {
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 10, salt: 0x5E7_0000) {
            var random = SplitMix64(seed: seed ^ 0x5E75)
            let ids = ["a", "b", "c", "d", "e"]
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            // Each element is inserted once (u-N), and removed only by a node that reads it,
            // so the final set is exactly the inserted minus the removed.
            var inserted = Set<String>()
            var removed = Set<String>()
            var next = 0
            for _ in 0..<60 {
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    guard let id = cluster.aliveIDs.randomElement(using: &random) else { continue }
                    let present = cluster.node(id).read(Members.self).subtracting(removed)
                    if Bool.random(using: &random) || present.isEmpty {
                        next += 1
                        let element = "u-\(next)"
                        if cluster.node(id).decide(Change(change: .insert(element))).version != nil { inserted.insert(element) }
                    } else {
                        let element = present.sorted().randomElement(using: &random)!
                        if cluster.node(id).decide(Change(change: .remove(element))).version != nil { removed.insert(element) }
                    }
                }
                switch Int.random(in: 0..<30, using: &random) {
                case 0:
                    var faults = cluster.network.faults
                    faults.lossProbability = Double.random(in: 0...0.2, using: &random)
                    faults.duplicateProbability = Double.random(in: 0...0.1, using: &random)
                    faults.reorder = Bool.random(using: &random)
                    let low = UInt64.random(in: 1...20, using: &random)
                    faults.delayMilliseconds = low...(low + UInt64.random(in: 0...200, using: &random))
                    cluster.network.faults = faults
                case 1:
                    let pair = ids.shuffled(using: &random)
                    cluster.network.partition(pair[0], from: pair[1])
                case 2:
                    cluster.network.heal()
                case 3 where cluster.aliveIDs.count > 1:
                    cluster.crash(cluster.aliveIDs.randomElement(using: &random)!)
                case 4:
                    if let dead = ids.filter({ !cluster.members[$0]!.alive }).randomElement(using: &random) {
                        cluster.restart(dead, empty: false)
                    }
                case 5:
                    let id = ids.randomElement(using: &random)!
                    cluster.members[id]!.clock.skewMilliseconds = Int64.random(in: -3_000...3_000, using: &random)
                default:
                    break
                }
                cluster.run(milliseconds: 100)
            }
            cluster.network.heal()
            cluster.network.faults = SimulatedNetwork.Faults()
            for id in ids where !cluster.members[id]!.alive { cluster.restart(id, empty: false) }
            let converged = cluster.runUntilConverged(maxMilliseconds: 60_000)
            #expect(converged, "seed \(seed) did not converge: \(cluster.describe())")
            let expected = inserted.subtracting(removed)
            var problems: [String] = []
            for id in ids {
                let held = cluster.node(id).read(Members.self)
                if held != expected {
                    problems.append("\(id): missing \(expected.subtracting(held).sorted().prefix(5)), extra \(held.subtracting(expected).sorted().prefix(5))")
                }
            }
            #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(3))")
            if !converged || !problems.isEmpty { break }
        }
    }

    /// Add wins: a removes x while cut off from b, which puts x in again at the same time; once
    /// healed, x is in on both. A remove after a has seen b's insert takes it out on both.
    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 50, salt: 0x5E7_1000))
    func anInsertAPartitionedRemoveHadNotSeenStays(seed: UInt64) {
        let cluster = SimCluster(seed: seed, ids: ["a", "b"], seeds: ["b": ["a"]])
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        cluster.node("a").decide(Change(change: .insert("x")))
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        cluster.network.partition("a", from: "b")
        cluster.node("a").decide(Change(change: .remove("x")))
        cluster.node("b").decide(Change(change: .insert("x")))
        cluster.run(milliseconds: 500)
        #expect(cluster.node("a").read(Members.self).isEmpty && cluster.node("b").read(Members.self) == ["x"])
        cluster.network.heal()
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        #expect(cluster.node("a").read(Members.self) == ["x"] && cluster.node("b").read(Members.self) == ["x"])
        cluster.node("a").decide(Change(change: .remove("x")))
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        #expect(cluster.node("a").read(Members.self).isEmpty && cluster.node("b").read(Members.self).isEmpty)
    }
}
