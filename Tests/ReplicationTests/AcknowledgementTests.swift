import Decide
import DecideSimulation
import Testing

/// Writes acknowledged by replicas, in virtual time: a caller learns when N peers hold its
/// decision; under partitions and loss the count is never more than the peers that hold it,
/// and a timeout says how many did (docs/consistency.md, "Writes acknowledged by replicas").
@Suite struct AcknowledgementTests {
    struct Put: Decision {
        let key: StateKey
        let value: [UInt8]
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.raw(value, into: key)
            return .none
        }
    }

    final class Outcome: @unchecked Sendable {  // set by a completion the simulator calls on the test's thread
        var value: Acknowledged?
        var calls = 0
    }

    /// Makes the decision on `writer` and runs virtual time until it is settled (at most
    /// `limit` ms more than the timeout); returns what came back and how long it took.
    static func decide(_ cluster: SimCluster, on writer: String, _ key: StateKey, _ value: String, target: AcknowledgementTarget,
                       timeoutMilliseconds: UInt64) -> (Acknowledged?, UInt64, Int) {
        let outcome = Outcome()
        let start = cluster.scheduler.nowMilliseconds
        cluster.members[writer]!.replicator.decide(Put(key: key, value: Array("\"\(value)\"".utf8)), acknowledgedBy: target,
                                                   timeoutMilliseconds: timeoutMilliseconds) { acknowledged in
            outcome.value = acknowledged
            outcome.calls += 1
        }
        var waited: UInt64 = 0
        while outcome.value == nil && waited < timeoutMilliseconds + 1_000 {
            cluster.run(milliseconds: 10)
            waited += 10
        }
        return (outcome.value, cluster.scheduler.nowMilliseconds - start, outcome.calls)
    }

    /// Every node counted as acknowledging holds the write (or a newer one of the key).
    static func checkHolders(_ cluster: SimCluster, _ acknowledged: Acknowledged, _ key: StateKey,
                             sourceLocation: SourceLocation = #_sourceLocation) {
        guard let version = acknowledged.commit.version else { return }
        for id in acknowledged.acknowledgedBy {
            let held = cluster.node(id).entry(for: key)?.version
            #expect(held.map { $0 >= version } == true, "\(id) acknowledged \(version) but holds \(String(describing: held)), \(cluster.describe())",
                    sourceLocation: sourceLocation)
        }
    }

    /// a, b and c, b and c seeded with a, every link up for a few seconds.
    static func linkedCluster(seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation) -> SimCluster {
        let cluster = SimCluster(seed: seed, ids: ["a", "b", "c"], seeds: ["b": ["a"], "c": ["a"]])
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())", sourceLocation: sourceLocation)
        cluster.run(milliseconds: 3_000)
        return cluster
    }

    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 20, salt: 0xAC1))
    func acknowledgementsCountOnlyPeersThatHoldTheWrite(seed: UInt64) {
        let cluster = Self.linkedCluster(seed: seed)
        // 5 % of frames lost (each link also loses whole frames, which TCP never does): a
        // delta lost on the way must never be acknowledged.
        var faults = cluster.network.faults
        faults.lossProbability = 0.05
        cluster.network.faults = faults

        // Every peer linked: both acknowledge, well before the timeout.
        let (all, took, calls) = Self.decide(cluster, on: "a", StateKey(name: "k1"), "one", target: .allMembers, timeoutMilliseconds: 5_000)
        #expect(calls == 1)
        if let all {
            #expect(all.required == 2)
            Self.checkHolders(cluster, all, StateKey(name: "k1"))
            // Loss can close a link (5 % of frames dropped); then fewer answer, never more.
            if all.isComplete { #expect(took < 5_000, "complete, yet it took the whole timeout") }
        } else {
            Issue.record("never settled, \(cluster.describe())")
        }

        // c cut off from a: only b can answer; the timeout says so.
        cluster.network.partition("a", from: "c")
        cluster.run(milliseconds: 2_000)
        let (partial, tookPartial, _) = Self.decide(cluster, on: "a", StateKey(name: "k2"), "two", target: .peers(2), timeoutMilliseconds: 1_500)
        if let partial {
            #expect(!partial.acknowledgedBy.contains("c"), "c is cut off: \(partial.acknowledgedBy)")
            #expect(!partial.isComplete && tookPartial >= 1_500)
            Self.checkHolders(cluster, partial, StateKey(name: "k2"))
        } else {
            Issue.record("never settled, \(cluster.describe())")
        }
        // Once healed, c gets k2 by anti-entropy, but never counts for it: it did not get the
        // delta on a link that asked.
        cluster.network.heal()
        faults = cluster.network.faults
        faults.lossProbability = 0
        cluster.network.faults = faults
        #expect(cluster.runUntilConverged(maxMilliseconds: 60_000), "\(cluster.describe())")
        let (zero, _, _) = Self.decide(cluster, on: "a", StateKey(name: "k3"), "three", target: .peers(0), timeoutMilliseconds: 1_000)
        #expect(zero?.isComplete == true && zero?.required == 0)
    }

    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 50, salt: 0xAC2))
    func aCrashedWriterLeavesTheAcknowledgedWriteOnThePeersThatSaidSo(seed: UInt64) {
        let cluster = Self.linkedCluster(seed: seed)
        let key = StateKey(name: "precious")
        let (acknowledged, _, _) = Self.decide(cluster, on: "a", key, "kept", target: .peers(2), timeoutMilliseconds: 5_000)
        #expect(acknowledged?.isComplete == true, "\(String(describing: acknowledged)), \(cluster.describe())")
        cluster.crash("a")
        cluster.run(milliseconds: 5_000)
        for id in ["b", "c"] {
            #expect(cluster.node(id).entry(for: key)?.value == Array("\"kept\"".utf8), "\(id) lost it, \(cluster.describe())")
        }
    }
}
