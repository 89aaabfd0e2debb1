import Decide
import DecideCore
import DecideSimulation
import Testing

/// Sorted sets across a cluster in virtual time (docs/consistency.md, "Sorted sets"): five
/// nodes add, re-score and remove members under loss, duplication, reordering, partitions,
/// clock skew, crashes and restarts, and once healed every node holds the same members with the
/// same scores, each as the member's last write (by version) left it.
@Suite struct SortedSetTests {
    struct Board: SortedSetState {
        typealias Member = String
        static var name: String { "board" }
    }

    struct Change: Decision {
        let change: SortedSetChange<String>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(change, into: Board.self)
            return .none
        }
    }

    /// The oracle is the rule itself: every committed change that wrote a member (an add, or a
    /// remove of a member its node held) is kept with its commit's version, and once healed a
    /// member is in the set exactly when its highest-versioned write was an add, with that add's
    /// score. (A merge that kept the first write, or the highest score, fails this.)
    @Test func concurrentScoresAndRemovesUnderFaultsEndAsTheLastWriteOnEveryNode() {
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 10, salt: 0x2E7_0000) {
            var random = SplitMix64(seed: seed ^ 0x2E75)
            let ids = ["a", "b", "c", "d", "e"]
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            var last: [String: (version: Version, score: Double?)] = [:]
            let members = (0..<12).map { "m\($0)" }
            for _ in 0..<60 {   // 6 s of faults, in 100 ms steps
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    guard let id = cluster.aliveIDs.randomElement(using: &random) else { continue }
                    let member = members.randomElement(using: &random)!
                    let removing = Int.random(in: 0..<4, using: &random) == 0
                    // A remove of a member the node does not hold writes nothing.
                    if removing, cluster.node(id).read(Board.self, scoreOf: member) == nil { continue }
                    let score = Double(Int.random(in: -50...50, using: &random)) / 4
                    guard let version = cluster.node(id).decide(Change(change: removing ? .remove(member) : .add(member, score: score))).version else {
                        continue
                    }
                    if let held = last[member], held.version > version { continue }
                    last[member] = (version, removing ? nil : score)
                }
                SimulationTests.nemesis(Int.random(in: 0..<30, using: &random), cluster, ids: ids, random: &random,
                                        restartsEmpty: { _ in false })
                cluster.run(milliseconds: 100)
            }
            let converged = SimulationTests.healAndConverge(cluster, ids: ids)
            #expect(converged, "seed \(seed) did not converge: \(cluster.describe())")
            let expected = last.compactMap { member, write in write.score.map { ScoredMember(member, score: $0) } }
                .sorted { $0.score != $1.score ? $0.score < $1.score : Array("\"\($0.member)\"".utf8).lexicographicallyPrecedes(Array("\"\($1.member)\"".utf8)) }
            var problems: [String] = []
            for id in ids where cluster.node(id).read(Board.self) != expected {
                problems.append("\(id) holds \(cluster.node(id).read(Board.self).map { "\($0.member)=\($0.score)" }), the last writes say \(expected.map { "\($0.member)=\($0.score)" })")
            }
            #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(2))")
            if !converged || !problems.isEmpty { break }
        }
    }
}
