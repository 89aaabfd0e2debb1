import Decide
import DecideSimulation
import Foundation
import Testing

/// Multi-node properties over many seeds in the deterministic simulator. A failure names its
/// seed; `SIM_SEED=N swift test --filter ReplicationTests` replays exactly that seed.
/// `SIM_SEEDS=N` (or `make sim SEEDS=N`) runs N seeds instead of the default, 500: what keeps
/// `make test` within its time on 2 cores (the seeded suites take about 220 s of it there);
/// `make sim` runs 10,000.
@Suite struct SimulationTests {
    static let defaultSeedCount = UInt64(ProcessInfo.processInfo.environment["SIM_SEEDS"].flatMap { UInt64($0) } ?? 500)

    static func seeds(_ count: UInt64 = defaultSeedCount, salt: UInt64) -> [UInt64] {
        SimulationSeed.seeds(default: (0..<count).map { $0 &+ salt })
    }

    /// Ten plain keys and three pairs whose two keys are only ever written together.
    static func key(_ index: Int) -> StateKey { StateKey(name: "k\(index)") }
    static func pairKeys(_ index: Int) -> (StateKey, StateKey) { (StateKey(name: "px\(index)"), StateKey(name: "py\(index)")) }

    struct Write: Decision {
        let writes: [(StateKey, [UInt8]?)]
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for (key, value) in writes { write.raw(value, into: key) }
            return .none
        }
    }

    /// A random decision: a few plain keys, or one pair, sometimes deleting.
    static func randomDecision(_ random: inout SplitMix64, counter: inout Int) -> Write {
        counter += 1
        let value: [UInt8]? = Int.random(in: 0..<8, using: &random) == 0 ? nil : Array("\(counter)".utf8)
        if Bool.random(using: &random) {
            let (x, y) = pairKeys(Int.random(in: 0..<3, using: &random))
            return Write(writes: [(x, value), (y, value)])
        }
        let count = Int.random(in: 1...3, using: &random)
        return Write(writes: (0..<count).map { _ in (key(Int.random(in: 0..<10, using: &random)), value) })
    }

    /// Pair keys must always carry one version between them, on every node, at every moment.
    static func atomicityViolations(_ cluster: SimCluster) -> [String] {
        var violations: [String] = []
        for id in cluster.aliveIDs {
            let node = cluster.node(id)
            let seen = node.read { reader in
                (0..<3).map { index -> (Version?, Version?) in
                    let (x, y) = pairKeys(index)
                    return (reader.entry(x)?.version, reader.entry(y)?.version)
                }
            }
            for (index, versions) in seen.enumerated() where versions.0 != versions.1 {
                violations.append("\(id) pair \(index): \(versions.0?.description ?? "-") vs \(versions.1?.description ?? "-")")
            }
        }
        return violations
    }

    /// One step of the seeded nemesis the simulation tests share, by `choice`: 0 new network
    /// faults (loss, duplication, reordering, delays; partitions kept), 1 a partition of two
    /// nodes, 2 heal, 3 crash a live node (after `willCrash` is told which, when another stays
    /// up), 4 restart a crashed one (empty when `restartsEmpty` says so), 5 skew a clock by up to
    /// 3 s; any other choice does nothing.
    static func nemesis(_ choice: Int, _ cluster: SimCluster, ids: [String], random: inout SplitMix64,
                        willCrash: (String) -> Void = { _ in }, restartsEmpty: (inout SplitMix64) -> Bool = { _ in false }) {
        switch choice {
        case 0:
            var faults = cluster.network.faults   // keeps the partitions
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
            let id = cluster.aliveIDs.randomElement(using: &random)!
            willCrash(id)
            cluster.crash(id)
        case 4:
            if let dead = ids.filter({ !cluster.members[$0]!.alive }).randomElement(using: &random) {
                cluster.restart(dead, empty: restartsEmpty(&random))
            }
        case 5:
            let id = ids.randomElement(using: &random)!
            cluster.members[id]!.clock.skewMilliseconds = Int64.random(in: -3_000...3_000, using: &random)
        default:
            break
        }
    }

    /// The end of a nemesis run: every partition healed, faults off, every crashed node
    /// restarted with its store; whether the cluster then converged within 60 s.
    static func healAndConverge(_ cluster: SimCluster, ids: [String]) -> Bool {
        cluster.network.heal()
        cluster.network.faults = SimulatedNetwork.Faults()
        for id in ids where !cluster.members[id]!.alive { cluster.restart(id, empty: false) }
        return cluster.runUntilConverged(maxMilliseconds: 60_000)
    }

    @Test func randomFaultsThenHealConvergeWithoutLostWritesOrHalfDecisions() {
        for seed in Self.seeds(salt: 0) {
            var random = SplitMix64(seed: seed ^ 0x5EED)
            let ids = Array(["a", "b", "c", "d", "e"].prefix(Int.random(in: 2...5, using: &random)))
            let cluster = SimCluster(seed: seed, ids: ids)
            cluster.run(milliseconds: 1_000)
            var counter = 0
            var violations: [String] = []
            for _ in 0..<60 {   // 6 s of faults, in 100 ms steps
                for _ in 0..<Int.random(in: 0...3, using: &random) {
                    if let id = cluster.aliveIDs.randomElement(using: &random) {
                        cluster.node(id).decide(Self.randomDecision(&random, counter: &counter))
                    }
                }
                Self.nemesis(Int.random(in: 0..<40, using: &random), cluster, ids: ids, random: &random)
                cluster.run(milliseconds: 100)
                violations += Self.atomicityViolations(cluster)
            }
            // Faults stop, the network heals, every crashed node comes back (with its state).
            let converged = SimulationTests.healAndConverge(cluster, ids: ids)
            #expect(converged, "did not converge: \(cluster.describe())")
            #expect(violations.isEmpty, "half decisions seen, \(cluster.describe()): \(violations.prefix(3))")
            for id in ids {
                let lost = cluster.lostWrites(on: id)
                #expect(lost.isEmpty, "lost writes on \(id), \(cluster.describe()): \(lost.prefix(3))")
            }
            if !converged || !violations.isEmpty { break }
        }
    }

    @Test func aLineTopologyConvergesThroughTheMiddleNode() {
        for seed in Self.seeds(Self.defaultSeedCount / 5, salt: 1 << 32) {
            var random = SplitMix64(seed: seed)
            let cluster = SimCluster(seed: seed, ids: ["a", "b", "c"], seeds: ["a": ["b"], "b": ["a"], "c": ["b"]])
            cluster.network.partition("a", from: "c")   // a and c never link
            var counter = 0
            for _ in 0..<20 {
                let id = ["a", "b", "c"].randomElement(using: &random)!
                cluster.node(id).decide(Self.randomDecision(&random, counter: &counter))
                cluster.run(milliseconds: UInt64.random(in: 0...200, using: &random))
            }
            #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())")
            let aLinks = cluster.members["a"]!.replicator.status.members.filter { $0.link == .connected }.map(\.nodeID)
            #expect(aLinks == ["b"], "a must reach c only through b: \(aLinks), seed \(seed)")
            for id in ["a", "b", "c"] { #expect(cluster.lostWrites(on: id).isEmpty, "\(cluster.describe())") }
        }
    }

    @Test func aLateJoinerLearnsEveryMemberAndCatchesUp() {
        for seed in Self.seeds(Self.defaultSeedCount / 5, salt: 2 << 32) {
            var random = SplitMix64(seed: seed)
            let cluster = SimCluster(seed: seed, ids: ["a", "b", "c"])
            var counter = 0
            for _ in 0..<30 {
                cluster.node(["a", "b", "c"].randomElement(using: &random)!).decide(Self.randomDecision(&random, counter: &counter))
                cluster.run(milliseconds: 50)
            }
            cluster.join("d", seed: ["a", "b", "c"].randomElement(using: &random)!)
            #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())")
            cluster.run(milliseconds: 2_000)
            let known = cluster.members["d"]!.replicator.status.members.filter { $0.link == .connected }.map(\.nodeID)
            #expect(known == ["a", "b", "c"], "d knows \(known), \(cluster.describe())")
            #expect(cluster.lostWrites(on: "d").isEmpty, "\(cluster.describe())")
        }
    }

    @Test func aNodeRestartedEmptyCatchesUp() {
        for seed in Self.seeds(Self.defaultSeedCount / 5, salt: 3 << 32) {
            var random = SplitMix64(seed: seed)
            let cluster = SimCluster(seed: seed, ids: ["a", "b", "c"])
            var counter = 0
            for _ in 0..<20 {
                cluster.node(["a", "b"].randomElement(using: &random)!).decide(Self.randomDecision(&random, counter: &counter))
                cluster.run(milliseconds: 50)
            }
            #expect(cluster.runUntilConverged(), "\(cluster.describe())")
            cluster.crash("c")
            for _ in 0..<20 {
                cluster.node(["a", "b"].randomElement(using: &random)!).decide(Self.randomDecision(&random, counter: &counter))
                cluster.run(milliseconds: 50)
            }
            cluster.restart("c", empty: true, seeds: [SimCluster.address(["a", "b"].randomElement(using: &random)!)])
            #expect(cluster.runUntilConverged(), "\(cluster.describe())")
            #expect(cluster.lostWrites(on: "c").isEmpty, "\(cluster.describe())")
        }
    }

    /// A node that leaves at any moment of its links' handshakes (before either side dialled,
    /// while one is half done, after both) and exits soon after is seen left by its peer, which
    /// never dials it again. Seeded, so the link that comes up after the leave (stop 48's race:
    /// it used to be closed without a word, and the peer saw a disconnect and kept redialling)
    /// is met in many seeds; `LoopbackReplicationTests` covers it over real sockets.
    @Test func aNodeThatLeavesAtAnyMomentIsSeenLeftAndNotRedialled() {
        var lateLinks = 0
        for seed in Self.seeds(Self.defaultSeedCount / 5, salt: 7 << 32) {
            var random = SplitMix64(seed: seed)
            let cluster = SimCluster(seed: seed, ids: ["a", "b"])
            cluster.run(milliseconds: random.next() % 30)
            let linkedBeforeLeave = cluster.network.counters.connectsSucceeded
            cluster.replicator("b").leave()
            cluster.run(milliseconds: 500)
            if cluster.network.counters.connectsSucceeded > linkedBeforeLeave { lateLinks += 1 }
            cluster.crash("b")
            cluster.run(milliseconds: 1_000)
            let dialsAfterExit = cluster.network.counters.connectsFailed + cluster.network.counters.connectsSucceeded
            cluster.run(milliseconds: 30_000)
            let seen = cluster.replicator("a").status.members.first { $0.nodeID == "b" }?.link
            #expect(seen == .left, "seed \(seed): a sees b as \(String(describing: seen)), \(cluster.describe())")
            #expect(cluster.network.counters.connectsFailed + cluster.network.counters.connectsSucceeded == dialsAfterExit,
                    "seed \(seed): a redialled b after it left")
        }
        // The late link is the case this test is for: most seeds must meet it.
        #expect(lateLinks > Int(Self.defaultSeedCount / 5) / 4, "only \(lateLinks) seeds brought a link up after the leave")
    }

    @Test func memoryStaysBoundedWhenAPeerStopsReading() {
        for seed in Self.seeds(20, salt: 4 << 32) {
            let limit = 16 * 1024
            let cluster = SimCluster(seed: seed, ids: ["a", "b"], networkConfiguration: .init(maxOutboundBytes: limit))
            cluster.run(milliseconds: 1_000)
            cluster.network.stallReader("b")
            var counter = 0
            var random = SplitMix64(seed: seed)
            var peakInFlight = 0
            for _ in 0..<400 {
                for _ in 0..<10 { cluster.node("a").decide(Self.randomDecision(&random, counter: &counter)) }
                cluster.run(milliseconds: 5)
                peakInFlight = max(peakInFlight, cluster.network.inFlightBytes(from: "a", to: "b"))
            }
            let dropped = cluster.members["a"]!.replicator.status.members.first { $0.nodeID == "b" }?.droppedDeltas ?? 0
            #expect(peakInFlight <= limit, "in flight \(peakInFlight) > \(limit), seed \(seed)")
            #expect(dropped > 0, "the stalled peer's queue must overflow and be dropped, seed \(seed)")
            cluster.network.unstallReader("b")
            #expect(cluster.runUntilConverged(), "\(cluster.describe())")
            #expect(cluster.lostWrites(on: "b").isEmpty, "\(cluster.describe())")
        }
    }
}

/// The whole engine over the simulator replays the same way in every process: no decision may
/// depend on Swift's per-process hash seed (dictionary order) or on real time.
@Suite struct EngineDeterminismTests {
    static func fingerprint(seed: UInt64) -> String {
        var random = SplitMix64(seed: seed)
        let cluster = SimCluster(seed: seed, ids: ["a", "b", "c", "d"])
        var faults = cluster.network.faults
        faults.lossProbability = 0.05
        faults.duplicateProbability = 0.05
        faults.reorder = true
        cluster.network.faults = faults
        var counter = 0
        for step in 0..<40 {
            let id = ["a", "b", "c", "d"].randomElement(using: &random)!
            if cluster.members[id]!.alive { cluster.node(id).decide(SimulationTests.randomDecision(&random, counter: &counter)) }
            if step == 10 { cluster.crash("c") }
            if step == 20 { cluster.network.partition("a", from: "b") }
            if step == 30 { cluster.network.heal(); cluster.restart("c", empty: false) }
            cluster.run(milliseconds: 100)
        }
        cluster.run(milliseconds: 5_000)
        let counters = cluster.network.counters
        let digests = ["a", "b", "c", "d"].map { String(cluster.node($0).stateSummary.digest, radix: 16) }
        return "\(cluster.scheduler.executedEventCount)/\(counters.framesSent)/\(counters.bytesSent)/" + digests.joined(separator: ",")
    }

    /// Pinned from three separate processes. An intended change to the engine, the simulator or
    /// the node changes it: check determinism again (run this test in a few processes) and paste
    /// the new value from the failure message.
    static let golden = "3567/1726/79759/ea8102df4f2f25ab,ea8102df4f2f25ab,ea8102df4f2f25ab,ea8102df4f2f25ab"

    @Test func aSeededClusterRunHasTheSameFingerprintInEveryProcess() {
        let actual = Self.fingerprint(seed: 42)
        #expect(Self.fingerprint(seed: 42) == actual, "two runs in one process differ")
        #expect(actual == Self.golden, "engine fingerprint for seed 42 is now \(actual)")
    }
}
