import Decide
import DecideCore
import DecideSimulation
import Testing

/// A counter's lifetime as a whole across a cluster in virtual time
/// (docs/design/0004-collection-lifetimes.md, "Counters"): five nodes change one counter under
/// loss, duplication, reordering, delays, partitions, clock skew, crashes and restarts (empty
/// ones too), while one of them gives it a lifetime (and, in one variant, another then takes it
/// away again). Once healed, before the instant, every node reads the exact sum of every change
/// and every slot on every node carries the lifetime (each node followed the marker for its own
/// slots, those it wrote before it saw the marker included); after the instant every node
/// reads 0 (or, taken away, still the whole sum); and changes made after it count from 0.
@Suite struct CounterLifetimeTests {
    struct Hits: CounterState {
        static var name: String { "hits" }
    }

    struct Change: Decision {
        let amount: Int64
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(.increment(by: amount), into: Hits.self)
            return .none
        }
    }

    /// EXPIRE (an instant) or PERSIST (`.never`) of the counter, as syncnode makes it.
    struct GiveLifetime: Decision {
        let expiry: WriteExpiry
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.giveLifetime(expiry, toCounterNamed: Hits.name)
            return .none
        }
    }


    @Test(arguments: [(false, false), (false, true), (true, false)])
    func aLifetimeReachesEverySlotAndNoChangeIsLostBeforeIt(takenAway: Bool, emptyRestarts: Bool) {
        let salt: UInt64 = 0xC1_0000 | (takenAway ? 1 : 0) | (emptyRestarts ? 2 : 0)
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 40, salt: salt) {
            var random = SplitMix64(seed: seed ^ 0xC1C1)
            let ids = ["a", "b", "c", "d", "e"]
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            var expected: Int64 = 0
            var instant: UInt64?
            var problems: [String] = []
            for step in 0..<60 {   // 6 s of faults, in 100 ms steps
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    guard let id = cluster.aliveIDs.randomElement(using: &random) else { continue }
                    let amount = Int64.random(in: 1...10, using: &random)
                    // An empty restart loses what its node alone held: counted only once another holds it.
                    guard cluster.node(id).decide(Change(amount: amount)).version != nil else { continue }
                    expected += amount
                }
                if step == 20, let id = cluster.aliveIDs.randomElement(using: &random) {
                    // Far enough ahead that the cluster heals, converges and follows before it.
                    let at = SimCluster.now(cluster.node(id)) + 40_000
                    if cluster.node(id).decide(GiveLifetime(expiry: .at(milliseconds: at))).version != nil { instant = at }
                }
                if step == 40, takenAway, instant != nil, let id = cluster.aliveIDs.randomElement(using: &random) {
                    if cluster.node(id).decide(GiveLifetime(expiry: .never)).version != nil { instant = nil }
                }
                SimulationTests.nemesis(Int.random(in: 0..<30, using: &random), cluster, ids: ids, random: &random,
                                        restartsEmpty: { random in emptyRestarts && Bool.random(using: &random) })
                cluster.run(milliseconds: 100)
            }
            guard SimulationTests.healAndConverge(cluster, ids: ids) else {
                Issue.record("seed \(seed) did not converge: \(cluster.describe())")
                break
            }
            cluster.spreadLifetimeFollows()
            // A node that restarts empty loses what it alone held: the lifetime too, if it gave
            // it and crashed before a peer heard.
            if emptyRestarts, instant != nil, cluster.node("a").read({ $0.lifetime(ofCollectionNamed: Hits.name) }) == nil { instant = nil }
            let reference = cluster.node("a").read(Hits.self)
            for id in ids {
                let node = cluster.node(id)
                if let instant, SimCluster.now(node) >= instant { problems.append("\(id) is past the instant before the checks") }
                let total = node.read(Hits.self)
                // Empty restarts may lose a change only the crashed node held: every node agrees.
                if emptyRestarts ? total != reference : total != expected {
                    problems.append("\(id) reads \(total), the changes sum to \(expected)")
                }
                for slot in node.counterSlots(Hits.self) where slot.expiresAtMilliseconds != instant {
                    problems.append("\(id) holds slot \(slot.node)/\(slot.incarnation) expiring at \(String(describing: slot.expiresAtMilliseconds)), the counter's lifetime is \(String(describing: instant))")
                }
                if node.read({ $0.lifetime(ofCollectionNamed: Hits.name) }) != instant {
                    problems.append("\(id) reads the lifetime \(String(describing: node.read { $0.lifetime(ofCollectionNamed: Hits.name) }))")
                }
            }
            let before = reference
            if let instant { cluster.run(pastInstant: instant, ids: ids) }
            for id in ids {
                let total = cluster.node(id).read(Hits.self)
                let wanted = instant == nil ? before : 0
                if total != wanted { problems.append("\(id) reads \(total) after the instant, wanted \(wanted)") }
            }
            // A change after the lifetime: a new count from 0 (or on top of the kept one).
            var after: Int64 = 0
            for _ in 0..<20 {
                let id = ids.randomElement(using: &random)!
                let amount = Int64.random(in: 1...10, using: &random)
                guard cluster.node(id).decide(Change(amount: amount)).version != nil else { continue }
                after += amount
                cluster.run(milliseconds: 50)
            }
            #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "seed \(seed): no convergence after the instant")
            for id in ids {
                let total = cluster.node(id).read(Hits.self)
                let wanted = (instant == nil ? before : 0) + after
                if total != wanted { problems.append("\(id) reads \(total) at the end, wanted \(wanted)") }
                for slot in cluster.node(id).counterSlots(Hits.self) where slot.expiresAtMilliseconds != nil {
                    problems.append("\(id): slot \(slot.node)/\(slot.incarnation) of the new count expires at \(slot.expiresAtMilliseconds!)")
                }
            }
            #expect(problems.isEmpty, "seed \(seed) (lifetime \(String(describing: instant))): \(problems.prefix(4))")
            if !problems.isEmpty { break }
        }
    }

    /// A member removed for good before the counter got its lifetime never follows the marker:
    /// the node that gives the lifetime writes the removed member's slots with it
    /// (`Transaction.mayTakeLifetime`), so its share goes at the instant on every node, and so
    /// does its share of a hash's counter field.
    @Test func aRemovedMembersShareGoesWithTheLifetime() throws {
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 100, salt: 0xC1_1000) {
            var random = SplitMix64(seed: seed ^ 0xC1D1)
            let ids = ["a", "b", "c", "d", "e"], staying = ["a", "b", "c", "d"]
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            for id in ids {
                #expect(cluster.node(id).decide(Change(amount: Int64.random(in: 1...10, using: &random))).version != nil)
                let field = HashCounterTests.fields.randomElement(using: &random)!
                #expect(cluster.node(id).decide(HashCounterTests.Increment(field: field, amount: 3)).version != nil)
            }
            #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "seed \(seed): no convergence before the removal")
            cluster.crash("e")
            try cluster.replicator("a").forget("e")
            var waited: UInt64 = 0
            while staying.contains(where: { cluster.replicator($0).status.forgottenMemberIDs == 0 }), waited < 60_000 {
                cluster.run(milliseconds: 500)
                waited += 500
            }
            let giver = staying.randomElement(using: &random)!
            let instant = SimCluster.now(cluster.node(giver)) + 5_000
            #expect(cluster.node(giver).decide(GiveLifetime(expiry: .at(milliseconds: instant))).version != nil)
            #expect(cluster.node(giver).decide(HashCounterTests.GiveLifetime(instant: instant)).version != nil)
            _ = cluster.runUntilConverged(staying, maxMilliseconds: 30_000)
            cluster.run(pastInstant: instant, ids: staying)
            var problems: [String] = []
            for id in staying {
                let node = cluster.node(id)
                if node.read(Hits.self) != 0 { problems.append("\(id) reads \(node.read(Hits.self)) after the instant") }
                let fields = HashCounterTests.totals(node)
                if !fields.isEmpty { problems.append("\(id) reads counter fields \(fields) after the instant") }
            }
            #expect(problems.isEmpty, "seed \(seed) (lifetime given by \(giver)): \(problems.prefix(4))")
            if !problems.isEmpty { break }
        }
    }
}
