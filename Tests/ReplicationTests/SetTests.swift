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

    /// Nodes insert fresh elements, insert again elements that were in the set, and remove
    /// elements they read. The oracle is the observed-remove rule itself: each committed insert
    /// made one new dot, each insert or remove took out the dots of its element its node held
    /// when it ran, and once healed an element is in the set on every node exactly when one of
    /// its dots was never taken out. (A last-writer-wins key per element, which loses an insert
    /// that a concurrent remove had not seen, fails this.)
    ///
    /// With empty restarts a node may lose what it had not handed on, so elements are inserted
    /// once each and the checks are what survives that: every node holds the same set, nothing
    /// never inserted, every element inserted by a node that never crashed and never removed,
    /// and no element removed by a node that never crashed.
    @Test(arguments: [false, true])
    func concurrentInsertsAndRemovesUnderFaultsEndTheSameOnEveryNode(emptyRestarts: Bool) {
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 10, salt: emptyRestarts ? 0x5E7_0001 : 0x5E7_0000) {
            var random = SplitMix64(seed: seed ^ 0x5E75)
            let ids = ["a", "b", "c", "d", "e"]
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            var insertedBy: [String: String] = [:]
            var removedBy: [String: String] = [:]
            var crashed = Set<String>()
            var made: [StateKey: String] = [:]   // every dot an insert made, with its element
            var takenOut = Set<StateKey>()
            var next = 0
            func dots(_ id: String, _ element: String) -> Set<StateKey> {
                Set(cluster.node(id).setDots(named: Members.name, member: Array("\"\(element)\"".utf8)))
            }
            for _ in 0..<60 {   // 6 s of faults, in 100 ms steps
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    guard let id = cluster.aliveIDs.randomElement(using: &random) else { continue }
                    let present = cluster.node(id).read(Members.self).filter { !emptyRestarts || removedBy[$0] == nil }
                    let element: String
                    let change: SetChange<String>
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0 where !present.isEmpty:
                        element = present.sorted().randomElement(using: &random)!
                        change = .remove(element)
                    case 1 where !emptyRestarts && !insertedBy.isEmpty:
                        element = insertedBy.keys.sorted().randomElement(using: &random)!
                        change = .insert(element)
                    default:
                        next += 1
                        element = "u-\(next)"
                        change = .insert(element)
                    }
                    let before = dots(id, element)
                    guard cluster.node(id).decide(Change(change: change)).version != nil else { continue }
                    takenOut.formUnion(before)
                    if case .insert = change {
                        insertedBy[element] = insertedBy[element] ?? id
                        let fresh = dots(id, element).subtracting(before)
                        if fresh.count != 1 { Issue.record("seed \(seed): an insert of \(element) on \(id) made \(fresh.count) dots") }
                        for dot in fresh { made[dot] = element }
                    } else {
                        removedBy[element] = id
                    }
                }
                SimulationTests.nemesis(Int.random(in: 0..<30, using: &random), cluster, ids: ids, random: &random,
                                        willCrash: { crashed.insert($0) },
                                        restartsEmpty: { random in emptyRestarts && Bool.random(using: &random) })
                cluster.run(milliseconds: 100)
            }
            let converged = SimulationTests.healAndConverge(cluster, ids: ids)
            #expect(converged, "seed \(seed) did not converge: \(cluster.describe())")
            let reference = cluster.node("a").read(Members.self)
            var problems: [String] = []
            for id in ids where cluster.node(id).read(Members.self) != reference {
                problems.append("\(id) holds \(cluster.node(id).read(Members.self).symmetricDifference(reference).sorted().prefix(5)) unlike a")
            }
            let never = reference.filter { insertedBy[$0] == nil }
            if !never.isEmpty { problems.append("held, never inserted: \(never.sorted().prefix(5))") }
            if emptyRestarts {
                for (element, inserter) in insertedBy.sorted(by: { $0.key < $1.key }) {
                    let remover = removedBy[element]
                    if remover == nil, !crashed.contains(inserter), !reference.contains(element) { problems.append("\(element) inserted by \(inserter), never removed, is missing") }
                    if let remover, !crashed.contains(remover), reference.contains(element) { problems.append("\(element) removed by \(remover) is held") }
                }
            } else {
                let expected = Set(made.filter { !takenOut.contains($0.key) }.values)
                if reference != expected {
                    problems.append("held \(reference.count), the rule says \(expected.count): missing \(expected.subtracting(reference).sorted().prefix(5)), extra \(reference.subtracting(expected).sorted().prefix(5))")
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
