import Decide
import DecideSimulation
import Testing

/// Deletes over real lengths of time, in virtual time: weeks-long runs tick every 50 s (every
/// engine interval and timeout scaled by the same factor, so the engine runs exactly as it does
/// at its own pace, only slower beside the days these scenarios are about), so a month is about
/// 52,000 ticks per node. Each test asserts that nothing acknowledged is lost, nothing deleted
/// returns, and all converge.
@Suite struct TombstoneTests {
    static let day: UInt64 = 86_400_000
    /// Engine intervals × 1,000: ticks every 50 s, failure timeout 1,000 s, walks every 1,000 s.
    static let weeks: UInt64 = 1_000

    /// Seeds per weeks-long scenario: `minimum` in `make test` (500 simulation seeds), ten
    /// times as many in `make sim` (10,000).
    static func seedCount(_ minimum: UInt64) -> UInt64 {
        max(minimum, minimum * SimulationTests.defaultSeedCount / 1_000)
    }

    static func key(_ index: Int) -> StateKey { StateKey(name: "t\(index)") }
    static func value(_ index: Int) -> [UInt8] { Array("v\(index)".utf8) }

    static func write(_ cluster: SimCluster, on id: String, _ writes: [(StateKey, [UInt8]?)]) {
        let commit = cluster.node(id).decide(SimulationTests.Write(writes: writes))
        precondition(commit.version != nil, "the test's write was not committed: \(commit)")
    }

    /// Keys `deleted` hold no value and keys `live` hold theirs, on every node given.
    static func check(_ cluster: SimCluster, _ ids: [String], live: Range<Int>, deleted: Range<Int>,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        for id in ids {
            for index in live {
                #expect(cluster.node(id).entry(for: key(index))?.value == value(index),
                        "\(id) lost live key \(index), \(cluster.describe())", sourceLocation: sourceLocation)
            }
            for index in deleted {
                let entry = cluster.node(id).entry(for: key(index))
                #expect(entry == nil || entry!.isTombstone,
                        "\(id) resurrected deleted key \(index), \(cluster.describe())", sourceLocation: sourceLocation)
            }
        }
    }

    /// Runs until no node holds a tombstone, or `maxMilliseconds` pass.
    static func runUntilCollected(_ cluster: SimCluster, _ ids: [String], maxMilliseconds: UInt64, step: UInt64) -> Bool {
        var waited: UInt64 = 0
        while waited < maxMilliseconds {
            if ids.allSatisfy({ cluster.node($0).stateSummary.tombstoneCount == 0 }) { return true }
            cluster.run(milliseconds: step)
            waited += step
        }
        return ids.allSatisfy { cluster.node($0).stateSummary.tombstoneCount == 0 }
    }

    /// Once collected, tombstones stay collected: a peer that collects a little later must not
    /// hand them back in a walk (they would then bounce between nodes for ever).
    static func expectStaysCollected(_ cluster: SimCluster, _ ids: [String], forMilliseconds: UInt64, step: UInt64,
                                     sourceLocation: SourceLocation = #_sourceLocation) {
        var waited: UInt64 = 0
        while waited < forMilliseconds {
            cluster.run(milliseconds: step)
            waited += step
            for id in ids where cluster.node(id).stateSummary.tombstoneCount != 0 {
                Issue.record("\(id) holds a collected tombstone again after \(waited) ms, \(cluster.describe())",
                             sourceLocation: sourceLocation)
                return
            }
        }
    }

    @Test func aLoneNodeRestartedEightDaysLaterThenJoinedKeepsEverything() {
        for seed in SimulationTests.seeds(Self.seedCount(3), salt: 20 << 32) {
            let cluster = SimCluster(seed: seed, ids: ["a"], seeds: ["a": []], timeScale: Self.weeks)
            Self.write(cluster, on: "a", (0..<50).map { (Self.key($0), Self.value($0)) })
            Self.write(cluster, on: "a", (40..<50).map { (Self.key($0), nil) })
            cluster.run(milliseconds: Self.day)
            cluster.crash("a")
            cluster.run(milliseconds: 8 * Self.day)
            cluster.restart("a", empty: false)
            cluster.run(milliseconds: Self.day)
            cluster.join("b", seed: "a")
            #expect(cluster.runUntilConverged(maxMilliseconds: Self.day, stepMilliseconds: 60_000), "\(cluster.describe())")
            Self.check(cluster, ["a", "b"], live: 0..<40, deleted: 40..<50)
        }
    }

    @Test func aPeerAwayForEightDaysComesBackWithoutLossOrResurrection() {
        for seed in SimulationTests.seeds(Self.seedCount(3), salt: 21 << 32) {
            let cluster = SimCluster(seed: seed, ids: ["a", "b"], timeScale: Self.weeks)
            Self.write(cluster, on: "a", (0..<20).map { (Self.key($0), Self.value($0)) })
            #expect(cluster.runUntilConverged(maxMilliseconds: Self.day, stepMilliseconds: 10_000), "\(cluster.describe())")
            cluster.crash("b")
            Self.write(cluster, on: "a", (10..<20).map { (Self.key($0), nil) })
            cluster.run(milliseconds: 8 * Self.day)
            // b is a member that is away: a must still hold every tombstone it may need.
            #expect(cluster.node("a").stateSummary.tombstoneCount == 10, "a collected tombstones b lacks, \(cluster.describe())")
            cluster.restart("b", empty: false)
            #expect(cluster.runUntilConverged(maxMilliseconds: Self.day, stepMilliseconds: 10_000), "\(cluster.describe())")
            Self.check(cluster, ["a", "b"], live: 0..<10, deleted: 10..<20)
            #expect(Self.runUntilCollected(cluster, ["a", "b"], maxMilliseconds: Self.day, step: 60_000),
                    "tombstones every member holds were not collected, \(cluster.describe())")
            Self.expectStaysCollected(cluster, ["a", "b"], forMilliseconds: Self.day, step: 60_000)
            Self.check(cluster, ["a", "b"], live: 0..<10, deleted: 10..<20)
        }
    }

    @Test func aMonthLongPartitionWithDeletesOnBothSidesResurrectsNothing() {
        for seed in SimulationTests.seeds(Self.seedCount(2), salt: 22 << 32) {
            let ids = ["a", "b", "c", "d"]
            let cluster = SimCluster(seed: seed, ids: ids, timeScale: Self.weeks)
            Self.write(cluster, on: "a", (0..<40).map { (Self.key($0), Self.value($0)) })
            #expect(cluster.runUntilConverged(maxMilliseconds: Self.day, stepMilliseconds: 10_000), "\(cluster.describe())")
            cluster.run(milliseconds: 3_600_000)
            cluster.network.partition(groups: [["a", "c"], ["b", "d"]])
            cluster.run(milliseconds: Self.day)
            Self.write(cluster, on: "a", (0..<10).map { (Self.key($0), nil) })
            cluster.run(milliseconds: Self.day)
            Self.write(cluster, on: "b", (10..<20).map { (Self.key($0), nil) })
            cluster.run(milliseconds: 28 * Self.day)
            for id in ["a", "c"] {
                #expect(cluster.node(id).stateSummary.tombstoneCount == 10,
                        "\(id) collected tombstones the other side lacks, \(cluster.describe())")
            }
            Self.check(cluster, ["a", "c"], live: 10..<40, deleted: 0..<10)
            Self.check(cluster, ["b", "d"], live: 20..<40, deleted: 10..<20)
            cluster.network.heal()
            #expect(cluster.runUntilConverged(maxMilliseconds: Self.day, stepMilliseconds: 10_000), "\(cluster.describe())")
            Self.check(cluster, ids, live: 20..<40, deleted: 0..<20)
            #expect(Self.runUntilCollected(cluster, ids, maxMilliseconds: Self.day, step: 60_000), "\(cluster.describe())")
            Self.expectStaysCollected(cluster, ids, forMilliseconds: Self.day, step: 60_000)
            Self.check(cluster, ids, live: 20..<40, deleted: 0..<20)
            for id in ids { #expect(cluster.node(id).stateSummary.entryCount == 20, "\(cluster.describe())") }
        }
    }

    @Test func aMemberAwayForAMonthIsForgottenThenRefusedWhenItReturns() {
        for seed in SimulationTests.seeds(Self.seedCount(3), salt: 23 << 32) {
            let cluster = SimCluster(seed: seed, ids: ["a", "b", "c"], timeScale: Self.weeks)
            Self.write(cluster, on: "a", (0..<10).map { (Self.key($0), Self.value($0)) })
            #expect(cluster.runUntilConverged(maxMilliseconds: Self.day, stepMilliseconds: 10_000), "\(cluster.describe())")
            cluster.crash("c")
            Self.write(cluster, on: "b", (0..<5).map { (Self.key($0), nil) })
            cluster.run(milliseconds: 30 * Self.day)
            // c still counts: nobody may collect what it lacks.
            for id in ["a", "b"] {
                #expect(cluster.node(id).stateSummary.tombstoneCount == 5, "\(id) collected too early, \(cluster.describe())")
            }
            #expect(throws: ForgetError.self) { try cluster.members["a"]!.replicator.forget("nobody") }
            #expect(throws: ForgetError.self) { try cluster.members["a"]!.replicator.forget("a") }
            try? cluster.members["a"]!.replicator.forget("c")
            #expect(Self.runUntilCollected(cluster, ["a", "b"], maxMilliseconds: Self.day, step: 60_000),
                    "tombstones not collected after c was forgotten, \(cluster.describe())")
            for id in ["a", "b"] {
                let row = cluster.members[id]!.replicator.status.members.first { $0.nodeID == "c" }
                #expect(row?.link == .removed, "\(id) sees c as \(String(describing: row?.link)), \(cluster.describe())")
            }
            // c comes back with its month-old state, holding values the others deleted and forgot.
            cluster.restart("c", empty: false)
            cluster.run(milliseconds: Self.day)
            Self.check(cluster, ["a", "b"], live: 5..<10, deleted: 0..<5)
            for id in ["a", "b"] {
                let connected = cluster.members[id]!.replicator.status.members.filter { $0.link == .connected }.map(\.nodeID)
                #expect(connected == (id == "a" ? ["b"] : ["a"]), "\(id) let c back in: \(connected), \(cluster.describe())")
            }
        }
    }

    /// A node keeps full removal records for `maxMembers` members only. One that dropped the
    /// record of a removal still remembers it by id hash, so a peer that was partitioned away
    /// while the member was removed, and still lists it as alive, cannot gossip it back in
    /// (where, never reporting, it would hold back tombstone collection on every node): the
    /// removal comes back instead and reaches the peer, after one `forget` on one node.
    @Test func aRemovalDroppedPastMaxMembersIsRememberedAndTaughtToAPeerThatMissedIt() {
        for seed in SimulationTests.seeds(Self.seedCount(5), salt: 26 << 32) {
            let cluster = SimCluster(seed: seed, ids: ["a", "b"], configure: { $0.maxMembers = 2 })
            cluster.join("c1", seed: "a")
            var waited = 0
            while !cluster.replicator("b").status.members.contains(where: { $0.nodeID == "c1" && $0.link == .connected }), waited < 100 {
                cluster.run(milliseconds: 100)
                waited += 1
            }
            #expect(waited < 100, "b never linked with c1, \(cluster.describe())")
            // c1's presence (owned by c1) reaches both: once c1 is removed it is gone for good.
            cluster.node("c1").decide(OwnedKeyTests.Publish(id: "c1"))
            cluster.run(milliseconds: 1_000)
            for id in ["a", "b"] {
                #expect(cluster.node(id).entry(for: OwnedKeyTests.presence("c1")) != nil, "\(id) never got c1's presence, seed \(seed)")
            }
            // b is cut off while c1, c2 and c3 come and go and are forgotten on a: a keeps the
            // removal records of the last two only.
            cluster.network.partition(groups: [["b"], ["a", "c1", "c2", "c3"]])
            cluster.crash("c1")
            cluster.run(milliseconds: 2_000)
            try? cluster.replicator("a").forget("c1")
            for id in ["c2", "c3"] {
                cluster.join(id, seed: "a")
                cluster.run(milliseconds: 3_000)
                cluster.crash(id)
                cluster.run(milliseconds: 2_000)
                try? cluster.replicator("a").forget(id)
            }
            let rowsOnA = cluster.replicator("a").status
            #expect(!rowsOnA.members.contains { $0.nodeID == "c1" }, "a still holds c1's full record, seed \(seed)")
            #expect(rowsOnA.forgottenMemberIDs == 1, "seed \(seed): \(rowsOnA)")
            #expect(throws: ForgetError.self) { try cluster.replicator("a").forget("c1") }
            // b comes back listing c1 as alive; a delete made now must still be collected.
            cluster.network.heal()
            Self.write(cluster, on: "a", [(Self.key(0), Self.value(0))])
            Self.write(cluster, on: "a", [(Self.key(0), nil)])
            #expect(Self.runUntilCollected(cluster, ["a", "b"], maxMilliseconds: 60_000, step: 500),
                    "a removed member came back and holds back collection, \(cluster.describe())")
            for id in ["a", "b"] {
                let c1 = cluster.replicator(id).status.members.first { $0.nodeID == "c1" }
                #expect(c1 == nil || c1!.link == .removed, "\(id) lists c1 as \(String(describing: c1?.link)), seed \(seed)")
                #expect(cluster.node(id).entry(for: OwnedKeyTests.presence("c1")) == nil,
                        "\(id) still stores the presence of removed c1, seed \(seed)")
            }
            // c1 returns with its old state: refused by both, the hash on a and the record on b.
            cluster.restart("c1", empty: false, seeds: [SimCluster.address("a"), SimCluster.address("b")])
            cluster.run(milliseconds: 5_000)
            for id in ["a", "b"] {
                let connected = cluster.replicator(id).status.members.filter { $0.link == .connected }.map(\.nodeID)
                #expect(connected == (id == "a" ? ["b"] : ["a"]), "\(id) let c1 back in: \(connected), seed \(seed)")
            }
        }
    }

    @Test func theDeadMemberTimeoutRemovesAMemberThatStaysAway() {
        for seed in SimulationTests.seeds(Self.seedCount(3), salt: 24 << 32) {
            let cluster = SimCluster(seed: seed, ids: ["a", "b", "c"], timeScale: Self.weeks, configure: { configuration in
                configuration.deadMemberTimeoutMilliseconds = 7 * Self.day
            })
            Self.write(cluster, on: "a", (0..<4).map { (Self.key($0), Self.value($0)) })
            #expect(cluster.runUntilConverged(maxMilliseconds: Self.day, stepMilliseconds: 10_000), "\(cluster.describe())")
            cluster.crash("c")
            Self.write(cluster, on: "a", [(Self.key(0), nil)])
            cluster.run(milliseconds: 6 * Self.day)
            #expect(cluster.node("b").stateSummary.tombstoneCount == 1, "collected before c timed out, \(cluster.describe())")
            #expect(Self.runUntilCollected(cluster, ["a", "b"], maxMilliseconds: 3 * Self.day, step: 60_000),
                    "\(cluster.describe())")
            for id in ["a", "b"] {
                #expect(cluster.members[id]!.replicator.status.members.first { $0.nodeID == "c" }?.link == .removed,
                        "\(cluster.describe())")
            }
            Self.check(cluster, ["a", "b"], live: 1..<4, deleted: 0..<1)
        }
    }

    @Test func tombstonesAreCollectedOnlyOnceEveryMemberHoldsThem() {
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 10, salt: 25 << 32) {
            // Collection less often than walks, as by default (60 s and 10 s): a node that has
            // collected walks with peers that have not yet.
            let cluster = SimCluster(seed: seed, ids: ["a", "b", "c"], configure: { $0.tombstoneCollectionIntervalMilliseconds = 6_000 })
            Self.write(cluster, on: "a", [(Self.key(0), Self.value(0)), (Self.key(1), Self.value(1))])
            #expect(cluster.runUntilConverged(), "\(cluster.describe())")
            cluster.network.partition(groups: [["a", "b"], ["c"]])
            cluster.run(milliseconds: 2_000)
            Self.write(cluster, on: "b", [(Self.key(0), nil)])
            cluster.run(milliseconds: 20_000)
            for id in ["a", "b"] {
                #expect(cluster.node(id).entry(for: Self.key(0))?.isTombstone == true,
                        "\(id) collected a tombstone c lacks, \(cluster.describe())")
            }
            #expect(cluster.node("c").entry(for: Self.key(0))?.value == Self.value(0), "seed \(seed)")
            cluster.network.heal()
            #expect(cluster.runUntilConverged(), "\(cluster.describe())")
            #expect(Self.runUntilCollected(cluster, ["a", "b", "c"], maxMilliseconds: 60_000, step: 250), "\(cluster.describe())")
            Self.expectStaysCollected(cluster, ["a", "b", "c"], forMilliseconds: 20_000, step: 250)
            Self.check(cluster, ["a", "b", "c"], live: 1..<2, deleted: 0..<1)
        }
    }
}
