import Decide
import DecideCore
import DecideSimulation
import Testing

/// Counters across a cluster in virtual time (docs/consistency.md, "Counters"): five nodes change
/// one counter at once under loss, duplication, reordering, delays, partitions, clock skew,
/// crashes and restarts, and once healed every node reads the same total, the exact sum of
/// every change committed, or, where a node restarted empty, every change that reached another
/// node and none that did not happen.
@Suite struct CounterTests {
    struct Hits: CounterState {
        static var name: String { "hits" }
    }

    struct Change: Decision {
        let change: CounterChange
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(change, into: Hits.self)
            return .none
        }
    }

    /// A node process: its node id and incarnation.
    struct Process: Hashable, CustomStringConvertible {
        let node: String
        let incarnation: UInt64
        var description: String { "\(node)/\(incarnation)" }
    }

    struct Sums: Equatable, CustomStringConvertible {
        var increments: UInt64 = 0
        var decrements: UInt64 = 0
        var description: String { "[\(increments),\(decrements)]" }
        func covers(_ other: Sums) -> Bool { increments >= other.increments && decrements >= other.decrements }
        func max(_ other: Sums) -> Sums { Sums(increments: Swift.max(increments, other.increments), decrements: Swift.max(decrements, other.decrements)) }
    }

    static func slots(on node: Node) -> [Process: Sums] {
        var slots: [Process: Sums] = [:]
        for slot in node.counterSlots(Hits.self) {
            slots[Process(node: slot.node, incarnation: slot.incarnation)] = Sums(increments: slot.increments, decrements: slot.decrements)
        }
        return slots
    }

    @Test(arguments: [false, true])
    func concurrentChangesUnderFaultsAllCountOnEveryNode(emptyRestarts: Bool) {
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 10, salt: emptyRestarts ? 0xC0_0001 : 0xC0_0000) {
            var random = SplitMix64(seed: seed ^ 0xC0C0)
            let ids = ["a", "b", "c", "d", "e"]
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            // What each process committed (read back from its own slot after each change), the
            // least any other node held of a process when it crashed, and the sum of every change.
            var committed: [Process: Sums] = [:]
            var heldAtCrash: [Process: Sums] = [:]
            var expected: Int64 = 0
            func process(_ id: String) -> Process { Process(node: id, incarnation: cluster.node(id).incarnation) }
            for _ in 0..<60 {   // 6 s of faults, in 100 ms steps
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    guard let id = cluster.aliveIDs.randomElement(using: &random) else { continue }
                    let amount = Int64.random(in: -5...10, using: &random)
                    let change: CounterChange = Bool.random(using: &random) ? .increment(by: amount) : .decrement(by: -amount)
                    guard cluster.node(id).decide(Change(change: change)).version != nil else { continue }
                    expected += amount
                    committed[process(id)] = Self.slots(on: cluster.node(id))[process(id)]
                }
                SimulationTests.nemesis(Int.random(in: 0..<30, using: &random), cluster, ids: ids, random: &random,
                                        willCrash: { id in
                    let dying = process(id)
                    var held = Sums()
                    for other in cluster.aliveIDs where other != id {
                        if let sums = Self.slots(on: cluster.node(other))[dying] { held = held.max(sums) }
                    }
                    heldAtCrash[dying] = held
                }, restartsEmpty: { random in emptyRestarts && Bool.random(using: &random) })
                cluster.run(milliseconds: 100)
            }
            let converged = SimulationTests.healAndConverge(cluster, ids: ids)
            #expect(converged, "seed \(seed) did not converge: \(cluster.describe())")
            let reference = Self.slots(on: cluster.node("a"))
            var problems: [String] = []
            for id in ids {
                let slots = Self.slots(on: cluster.node(id))
                if slots != reference { problems.append("\(id) holds other slots than a: \(slots) vs \(reference)") }
                let total = cluster.node(id).read(Hits.self)
                let summed = slots.values.reduce(Int64(0)) { $0 + Int64($1.increments) - Int64($1.decrements) }
                if total != summed { problems.append("\(id) reads \(total), its slots sum to \(summed)") }
                if !emptyRestarts && total != expected { problems.append("\(id) reads \(total), the changes sum to \(expected)") }
            }
            for (process, sums) in committed {
                let held = reference[process] ?? Sums()
                if heldAtCrash[process] == nil || !emptyRestarts {
                    // A process still running, or one whose node kept its state: all of it.
                    if held != sums { problems.append("\(process) committed \(sums), the cluster holds \(held)") }
                } else {
                    // A process whose node came back empty: what reached another node, no more
                    // than it committed.
                    if !sums.covers(held) || !held.covers(heldAtCrash[process]!) {
                        problems.append("\(process) committed \(sums), held \(heldAtCrash[process]!) elsewhere at its crash; the cluster holds \(held)")
                    }
                }
            }
            for process in reference.keys where committed[process] == nil {
                problems.append("slot \(process) that no process wrote")
            }
            #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(3))")
            if !converged || !problems.isEmpty { break }
        }
    }
}
