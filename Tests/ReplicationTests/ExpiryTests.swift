import Decide
import DecideSimulation
import Testing

/// Expiring keys across a cluster in virtual time, with the clocks skewed up to the bound:
/// every replica removes the key at one hybrid-clock instant (each on its own clock, so within
/// the skew of each other), reports it once, and collects it like a tombstone without bringing
/// it back (docs/consistency.md, "Expiring keys").
@Suite struct ExpiryTests {
    struct ExpiringWrite: Decision {
        let key: StateKey
        let value: [UInt8]
        let lifetime: Duration
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.raw(value, into: key, expiringAfter: lifetime)
            return .none
        }
    }

    /// Clocks at +skew, 0 and -skew of virtual time: the two outer ones are 2 × skew apart,
    /// just inside the cluster's bound (`maxClockSkewMilliseconds`, 10 s).
    static let skew: Int64 = 4_900
    static let lifetime: UInt64 = 30_000

    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 20, salt: 0xE1))
    func everyReplicaRemovesTheKeyOnceWithinTheSkewAndNeverBringsItBack(seed: UInt64) {
        let ids = ["a", "b", "c"]
        let cluster = SimCluster(seed: seed, ids: ids, seeds: ["b": ["a"], "c": ["a"]])
        cluster.members["a"]!.clock.skewMilliseconds = Self.skew
        cluster.members["c"]!.clock.skewMilliseconds = -Self.skew
        let removals = ids.map { _ in RemovalCount() }
        for (index, id) in ids.enumerated() {
            _ = cluster.node(id).addCommitListener { if $0.origin == .expired { removals[index].add() } }
        }
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())")

        // Written on the node whose clock is furthest ahead, and on the one furthest behind.
        let key = StateKey(name: "presence", element: Array("\"worker\"".utf8))
        let writer = ["a", "c"][Int(seed % 2)]
        let version = cluster.node(writer).decide(ExpiringWrite(key: key, value: Array("\"up\"".utf8),
                                                                lifetime: .milliseconds(Int64(Self.lifetime))))
            .version
        guard let version else { Issue.record("not committed"); return }
        let expiresAt = version.timestamp.physicalMilliseconds + Self.lifetime
        #expect(cluster.runUntilConverged(maxMilliseconds: 10_000), "\(cluster.describe())")

        // Step through the expiry: a node reads the key absent exactly when its hybrid clock
        // reaches the instant, never before; all agree outside the skew window.
        var goneAt: [String: UInt64] = [:]
        while goneAt.count < ids.count {
            cluster.run(milliseconds: 10)
            for id in ids where goneAt[id] == nil {
                let node = cluster.node(id)
                let (value, now) = node.read { ($0.entry(key)?.value, $0.nowMilliseconds) }
                #expect((value == nil) == (now >= expiresAt), "\(id) at hybrid \(now), expiry \(expiresAt), \(cluster.describe())")
                if value == nil { goneAt[id] = cluster.scheduler.nowMilliseconds }
            }
            if cluster.scheduler.nowMilliseconds > expiresAt + 60_000 { break }
        }
        let times = goneAt.values
        #expect(goneAt.count == ids.count, "\(goneAt) \(cluster.describe())")
        if let first = times.min(), let last = times.max() {
            #expect(last - first <= UInt64(2 * Self.skew) + 10, "removals spread over \(last - first) ms: \(goneAt)")
        }
        // Each replica reports the removal once, at its own tick, then collects the entry once
        // every member holds it; nothing comes back over later anti-entropy rounds.
        cluster.run(milliseconds: 5_000)
        #expect(removals.map(\.value) == [1, 1, 1], "\(removals.map(\.value)), \(cluster.describe())")
        cluster.run(milliseconds: 20_000)
        for id in ids {
            #expect(cluster.node(id).entry(for: key) == nil, "\(id) still stores the expired entry, \(cluster.describe())")
            #expect(cluster.node(id).read { $0.entry(key) } == nil)
        }
        #expect(cluster.converged(), "\(cluster.describe())")
        #expect(removals.map(\.value) == [1, 1, 1])
    }

    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 50, salt: 0xE2))
    func aRenewalOnEitherSideOfAPartitionKeepsTheNewestLifetime(seed: UInt64) {
        let ids = ["a", "b"]
        let cluster = SimCluster(seed: seed, ids: ids)
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())")
        let key = StateKey(name: "lease")
        cluster.node("a").decide(ExpiringWrite(key: key, value: [0x31], lifetime: .seconds(10)))
        #expect(cluster.runUntilConverged(maxMilliseconds: 10_000))
        cluster.network.partition("a", from: "b")
        cluster.run(milliseconds: 2_000)
        // Both renew while apart; b's is the later decision and lives longer.
        cluster.node("a").decide(ExpiringWrite(key: key, value: [0x32], lifetime: .seconds(20)))
        cluster.run(milliseconds: 100)
        let renewal = cluster.node("b").decide(ExpiringWrite(key: key, value: [0x33], lifetime: .seconds(60))).version!
        cluster.network.heal()
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())")
        for id in ids {
            let entry = cluster.node(id).entry(for: key)
            #expect(entry?.version == renewal && entry?.value == [0x33], "\(id): \(String(describing: entry))")
            #expect(entry?.expiresAtMilliseconds == renewal.timestamp.physicalMilliseconds + 60_000)
        }
    }
}

/// A count bumped from listeners (the simulator runs them on the test's thread).
final class RemovalCount: @unchecked Sendable {
    private(set) var value = 0
    func add() { value += 1 }
}
