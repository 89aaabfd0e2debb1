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

    /// When a member that counted is removed, relative to the lifetime.
    enum Removal: String, CaseIterable, CustomTestStringConvertible {
        /// Every node knows of the removal before one gives the lifetime.
        case beforeTheLifetime
        /// The node giving the lifetime is cut off while the others learn of the removal.
        case unknownToTheGiver
        /// The lifetime is given and followed while the member is down; then it is removed.
        case afterTheLifetime
        var testDescription: String { rawValue }
    }

    /// A removed member never follows the marker, so its share goes with the lifetime only
    /// because others write its slots with the instant: the node that gives the lifetime, for
    /// the removals it knows (`Transaction.mayTakeLifetime`); every node that follows a marker,
    /// for the removals it knows; and every node that learns of a removal, for every counter
    /// with a lifetime (`NodeCore.setOwners`). Its share of a counter and of a hash's counter
    /// field goes at the instant on every node, whichever came first.
    @Test(arguments: Removal.allCases)
    func aRemovedMembersShareGoesWithTheLifetime(removal: Removal) throws {
        let salt: UInt64 = 0xC1_1000 | UInt64(Removal.allCases.firstIndex(of: removal)!)
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 100, salt: salt) {
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
            // The removal is given on a; the giver is another node, cut off for unknownToTheGiver.
            let giver = ["b", "c", "d"].randomElement(using: &random)!
            var instant: UInt64 = 0
            func knowsOfTheRemoval(_ id: String) -> Bool {
                cluster.replicator(id).status.members.contains { $0.nodeID == "e" && $0.link == .removed }
            }
            func removeE(waitingFor knowing: [String]) throws {
                try cluster.replicator("a").forget("e")
                var waited: UInt64 = 0
                while knowing.contains(where: { !knowsOfTheRemoval($0) }), waited < 60_000 {
                    cluster.run(milliseconds: 500)
                    waited += 500
                }
                #expect(waited < 60_000, "seed \(seed): the removal did not reach \(knowing)")
            }
            func giveTheLifetime() {
                // Far enough ahead for the removal to spread after it (afterTheLifetime).
                instant = SimCluster.now(cluster.node(giver)) + 30_000
                #expect(cluster.node(giver).decide(GiveLifetime(expiry: .at(milliseconds: instant))).version != nil)
                #expect(cluster.node(giver).decide(HashCounterTests.GiveLifetime(instant: instant)).version != nil)
            }
            switch removal {
            case .beforeTheLifetime:
                try removeE(waitingFor: staying)
                giveTheLifetime()
            case .unknownToTheGiver:
                cluster.network.isolate(giver)
                try removeE(waitingFor: staying.filter { $0 != giver })
                #expect(!knowsOfTheRemoval(giver), "seed \(seed): the removal reached \(giver) across the partition")
                giveTheLifetime()
                cluster.network.heal()
            case .afterTheLifetime:
                giveTheLifetime()
                #expect(cluster.runUntilConverged(staying, maxMilliseconds: 30_000), "seed \(seed): no convergence after the lifetime")
                try removeE(waitingFor: staying)
            }
            _ = cluster.runUntilConverged(staying, maxMilliseconds: 30_000)
            #expect(staying.allSatisfy { SimCluster.now(cluster.node($0)) < instant }, "seed \(seed): the instant passed before the checks")
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
