import Decide
import DecideCore
import DecideSimulation
import Testing

/// A hash's counter fields (syncnode's HINCRBY) across a cluster in virtual time
/// (docs/design/0001-counters.md, "Counter fields of a hash"): five nodes increment three fields
/// of one hash at once under loss, duplication, reordering, delays, partitions, clock skew,
/// crashes and restarts, while one of them gives the hash a lifetime. Once healed every node
/// reads each field's exact sum and no more fields; every field slot on every node carries the
/// hash's lifetime (each node followed the marker for its own slots); after the instant every
/// node reads no counter field; and increments after it count from 0.
@Suite struct HashCounterTests {
    static let hash = "limits"
    static let fields = ["\"ann\"", "\"bob\"", "\"cid\""].map { Array($0.utf8) }

    struct Increment: Decision {
        let field: [UInt8]
        let amount: Int64
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.change(.increment(by: amount), counterField: field, ofHashNamed: HashCounterTests.hash)
            return .none
        }
    }

    /// EXPIRE of the hash, as syncnode's KeyLifetime makes it: the marker, and the counter
    /// fields' slots this node may write again.
    struct GiveLifetime: Decision {
        let instant: UInt64
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            let expiry = WriteExpiry.at(milliseconds: instant)
            write.raw(packed: CollectionLifetime.value, into: CollectionLifetime.marker(ofCollectionNamed: HashCounterTests.hash), expiry: expiry, ownedByThisNode: false)
            write.giveLifetime(expiry, toCounterFieldsOfHashNamed: HashCounterTests.hash)
            return .none
        }
    }


    /// Each counter field's total on `node`, keyed by the field's JSON.
    static func totals(_ node: Node) -> [String: Int64] {
        var totals: [String: Int64] = [:]
        for (field, total) in node.read({ $0.counterFields(ofHashNamed: hash) }) { totals[String(decoding: field, as: UTF8.self)] = total }
        return totals
    }

    /// The live counter field slots `node` holds whose expiry is not `instant`.
    static func slotsNotExpiringAt(_ instant: UInt64?, on node: Node) -> [String] {
        let now = SimCluster.now(node)
        return node.entriesReadInSlices().compactMap { item in
            guard item.key.name == hash, CounterSlot.isSlot(item.key), CounterSlot.field(of: item.key) != nil,
                  !item.entry.isTombstone, !item.entry.isExpired(atMilliseconds: now),
                  item.entry.expiresAtMilliseconds != instant else { return nil }
            return "\(item.key) expiring at \(String(describing: item.entry.expiresAtMilliseconds))"
        }
    }

    @Test func everyIncrementOfEveryFieldCountsAndTheLifetimeReachesEverySlot() {
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 100, salt: 0xC4_0000) {
            var random = SplitMix64(seed: seed ^ 0xC4C4)
            let ids = ["a", "b", "c", "d", "e"]
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            var expected: [String: Int64] = [:]
            var instant: UInt64?
            var problems: [String] = []
            for step in 0..<60 {   // 6 s of faults, in 100 ms steps
                for _ in 0..<Int.random(in: 0...6, using: &random) {
                    guard let id = cluster.aliveIDs.randomElement(using: &random) else { continue }
                    let field = Self.fields.randomElement(using: &random)!
                    let amount = Int64.random(in: -5...10, using: &random)
                    guard cluster.node(id).decide(Increment(field: field, amount: amount)).version != nil else { continue }
                    expected[String(decoding: field, as: UTF8.self), default: 0] += amount
                }
                if step == 20, let id = cluster.aliveIDs.randomElement(using: &random) {
                    // Far enough ahead that the cluster heals, converges and follows before it.
                    let at = SimCluster.now(cluster.node(id)) + 40_000
                    if cluster.node(id).decide(GiveLifetime(instant: at)).version != nil { instant = at }
                }
                SimulationTests.nemesis(Int.random(in: 0..<30, using: &random), cluster, ids: ids, random: &random)
                cluster.run(milliseconds: 100)
            }
            guard SimulationTests.healAndConverge(cluster, ids: ids) else {
                Issue.record("seed \(seed) did not converge: \(cluster.describe())")
                break
            }
            cluster.spreadLifetimeFollows()
            let wanted = expected.filter { $0.value != 0 }
            for id in ids {
                let node = cluster.node(id)
                if let instant, SimCluster.now(node) >= instant { problems.append("\(id) is past the instant before the checks") }
                let totals = Self.totals(node)
                if totals != wanted { problems.append("\(id) reads \(totals), the increments sum to \(wanted)") }
                problems += Self.slotsNotExpiringAt(instant, on: node).prefix(2).map { "\(id) holds \($0), the hash's lifetime is \(String(describing: instant))" }
            }
            if let instant {
                cluster.run(pastInstant: instant, ids: ids)
                for id in ids where !Self.totals(cluster.node(id)).isEmpty {
                    problems.append("\(id) reads \(Self.totals(cluster.node(id))) after the instant")
                }
            }
            // Increments after the lifetime: a new count from 0.
            var after: [String: Int64] = instant == nil ? wanted : [:]
            for _ in 0..<20 {
                let id = ids.randomElement(using: &random)!
                let field = Self.fields.randomElement(using: &random)!
                let amount = Int64.random(in: 1...10, using: &random)
                guard cluster.node(id).decide(Increment(field: field, amount: amount)).version != nil else { continue }
                after[String(decoding: field, as: UTF8.self), default: 0] += amount
                cluster.run(milliseconds: 50)
            }
            #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "seed \(seed): no convergence after the instant")
            for id in ids {
                let totals = Self.totals(cluster.node(id))
                if totals != after { problems.append("\(id) reads \(totals) at the end, wanted \(after)") }
                problems += Self.slotsNotExpiringAt(nil, on: cluster.node(id)).prefix(2).map { "\(id): a slot of the new count, \($0)" }
            }
            #expect(problems.isEmpty, "seed \(seed) (lifetime \(String(describing: instant))): \(problems.prefix(4))")
            if !problems.isEmpty { break }
        }
    }
}
