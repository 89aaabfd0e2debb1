import Decide
import DecideSimulation
import Testing

/// A member with the cluster's secret that sends the worst legal messages must not crash a
/// node, grow its memory past the configured bounds, or keep the honest nodes from converging.
@Suite struct HostilePeerTests {
    @Test func aHostileMemberNeitherTrapsNorGrowsMemoryAndTheOthersStillConverge() {
        for seed in SimulationTests.seeds(max(4, SimulationTests.defaultSeedCount / 50), salt: 30 << 32) {
            let maxMembers = 32
            let cluster = SimCluster(seed: seed, ids: ["a", "b"], configure: { $0.maxMembers = maxMembers })
            cluster.run(milliseconds: 500)
            let hostile = HostilePeer(network: cluster.network, id: "x", target: SimCluster.address("a"),
                                      victimIDs: ["a", "b"], seed: seed)
            let timer = cluster.scheduler.every(milliseconds: 20) { hostile.attack(count: 2) }
            var random = SplitMix64(seed: seed ^ 0xBAD)
            var counter = 0
            for _ in 0..<80 {
                cluster.node(["a", "b"].randomElement(using: &random)!).decide(SimulationTests.randomDecision(&random, counter: &counter))
                cluster.run(milliseconds: 50)
                for id in ["a", "b"] {
                    let rows = cluster.members[id]!.replicator.status.members
                    #expect(rows.filter { $0.link != .removed }.count <= maxMembers, "\(id) holds \(rows.count) members, seed \(seed)")
                    #expect(rows.filter { $0.link == .removed }.count <= maxMembers, "seed \(seed)")
                }
            }
            #expect(hostile.framesSent > 100, "the attack barely ran: \(hostile.framesSent) frames, seed \(seed)")
            cluster.scheduler.cancel(timer)
            cluster.network.crash("x")
            // Once the hostile member is gone, the operator removes it and every member it
            // invented (members that never report hold back tombstone collection, which a forged
            // old tombstone needs), on one node, as long as either node's status still lists one:
            // gossip may bring a member that only the other node knew after a pass (seed
            // 128849019042 did, and a forged tombstone then stayed on a forever, below what b
            // had collected). Removals past `maxMembers` are remembered by id hash, so a peer that
            // still lists one of them gets its removal back instead of bringing it back in.
            var strangers: Set<String> = []
            for _ in 0..<10 {
                cluster.run(milliseconds: 4 * cluster.replicatorConfiguration.gossipIntervalMilliseconds)
                strangers = Set(["a", "b"].flatMap { id in
                    cluster.replicator(id).status.members.filter { !["a", "b"].contains($0.nodeID) && $0.link != .removed }.map(\.nodeID)
                })
                if strangers.isEmpty { break }
                for stranger in strangers { try? cluster.replicator("a").forget(stranger) }
            }
            #expect(strangers.isEmpty, "members the hostile peer invented are still listed: \(strangers.sorted().prefix(5)), seed \(seed)")
            let converged = cluster.runUntilConverged(["a", "b"], maxMilliseconds: 60_000)
            #expect(converged, "\(cluster.describe())")
            for id in ["a", "b"] {
                #expect(cluster.lostWrites(on: id).isEmpty, "\(id) lost honest writes, \(cluster.describe()): \(cluster.lostWrites(on: id).prefix(3))")
            }
        }
    }

    /// The messages that crashed or swelled a node before, one by one, from a member that
    /// passed the handshake.
    @Test func theWorstMessagesFoundBeforeCloseTheLinkOrAreIgnored() {
        let cluster = SimCluster(seed: 7, ids: ["a", "b"], configure: { $0.maxMembers = 64 })
        cluster.run(milliseconds: 500)
        let hostile = HostilePeer(network: cluster.network, id: "x", target: SimCluster.address("a"), victimIDs: ["a"], seed: 7)
        cluster.run(milliseconds: 200)
        let codec = ReplicationCodec()
        func send(_ message: ReplicationMessage) {
            guard let connection = hostile.connection else {
                Issue.record("hostile peer not linked: \(cluster.members["a"]!.replicator.status.members.filter { $0.nodeID == "x" })")
                return
            }
            _ = hostile.transport.send(codec.encode(message), to: connection)
            cluster.run(milliseconds: 200)
        }
        // The victim's own record, left, with the largest incarnation: crashed it with an overflow.
        send(.gossip([.init(nodeID: "a", address: "sim://a", status: .left, incarnation: UInt64.max)]))
        // 200,000 copies of index 0: 16x amplified into a frame over the limit.
        send(.digest(round: 9, seq: 1, clock: 0, shape: .init(fanoutBits: 2, depth: 3), level: 0,
                     nodes: Array(repeating: .init(index: 0, hash: 1), count: 200_000)))
        // Invented members, far more than maxMembers.
        for batch in 0..<20 {
            send(.gossip((0..<25_000).map {
                .init(nodeID: "m\(batch)-\($0)", address: "sim://m\(batch)-\($0)", status: .alive, incarnation: 1)
            }))
        }
        // Acks and stream messages of walks that never were.
        send(.streamAck(round: 42, seq: UInt64.max))
        send(.entries(round: UInt64.max, seq: UInt64.max, last: true, batch: []))
        send(.summary(round: 3, seq: 1, clock: UInt64.max, last: true, groups: [.init(bucket: UInt32.max, items: [])]))
        // A delta over maxDecisionBytes (8 MiB) that still fits a frame: it could never be handed
        // on whole by catch-up, so it closes the link instead of being applied.
        send(.delta(Delta(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_000, logical: 0), node: "x"),
                          writes: (0..<10).map { .init(key: StateKey(name: "huge\($0)"), value: Array(repeating: 0x61, count: 1_000_000)) })))
        let appliedHuge = cluster.node("a").entry(for: StateKey(name: "huge0")) != nil
        #expect(!appliedHuge, "a applied a delta over maxDecisionBytes")
        let rows = cluster.members["a"]!.replicator.status.members
        #expect(rows.count <= 64, "a holds \(rows.count) members")
        #expect(rows.contains { $0.nodeID == "b" && $0.link == .connected }, "a lost its honest peer: \(rows)")
        // Each rule broken is counted against the one who broke it, and only against it.
        #expect((rows.first { $0.nodeID == "x" }?.protocolViolations ?? 0) >= 3, "\(rows.filter { $0.nodeID == "x" })")
        #expect(rows.first { $0.nodeID == "b" }?.protocolViolations == 0)
        cluster.node("a").decide(SimulationTests.Write(writes: [(StateKey(name: "after"), Array("1".utf8))]))
        #expect(cluster.runUntilConverged(["a", "b"]), "\(cluster.describe())")
        #expect(cluster.members["a"]!.replicator.status.incarnation < UInt64.max)
    }
}
