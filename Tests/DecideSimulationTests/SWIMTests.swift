@testable import DecideCore
import DecideSimulation
import Foundation
import Testing

/// SWIM's rules, member by member and in small fleets on the simulator.
@Suite struct SWIMTests {
    static let seeds = SimulationSeed.seeds(default: Array(1...20))

    @Test func aSuspectedMemberRefutesWithAHigherIncarnation() {
        var state = SWIMState(id: "a", address: "a:1", incarnation: 10, seeds: [], randomSeed: 1, now: 0)
        let rumour = SWIMEnvelope(from: "b", fromAddress: "b:1", fromIncarnation: 5, message: .ping(sequence: 1, target: "a"),
                                  updates: [SWIMUpdate(member: "a", address: "a:1", incarnation: 10, status: .suspect, origin: "b")])
        let out = state.receive(rumour, now: 1)
        #expect(state.incarnation == 11)
        #expect(state.counters.refutations == 1)
        // The ack carries the refutation (and the sender's incarnation says the same).
        guard case let .send(address, ack)? = out.first(where: { if case .send = $0 { true } else { false } }) else {
            Issue.record("no ack")
            return
        }
        #expect(address == "b:1")
        #expect(ack.message == .ack(sequence: 1))
        #expect(ack.fromIncarnation == 11)
        #expect(ack.updates.contains(SWIMUpdate(member: "a", address: "a:1", incarnation: 11, status: .alive)))
        // Stale news (an older incarnation) is not refuted again; news at the top is ignored.
        _ = state.receive(rumour, now: 2)
        #expect(state.incarnation == 11)
        var top = rumour
        top.updates = [SWIMUpdate(member: "a", address: "a:1", incarnation: UInt64.max, status: .dead)]
        _ = state.receive(top, now: 3)
        #expect(state.incarnation == 11)
        #expect(state.counters.messagesIgnored == 1)
    }

    @Test func newsIsOrderedByIncarnationThenDeadOverSuspectOverAlive() {
        var state = SWIMState(id: "a", address: "a:1", incarnation: 1, seeds: [], randomSeed: 1, now: 0)
        func hear(_ status: SWIMStatus, _ incarnation: UInt64) {
            _ = state.receive(SWIMEnvelope(from: "c", fromAddress: "c:1", fromIncarnation: 1, message: .ack(sequence: 99),
                                           updates: [SWIMUpdate(member: "b", address: "b:1", incarnation: incarnation, status: status, origin: "c")]),
                              now: 1)
        }
        hear(.alive, 5)
        #expect(state.members["b"]?.status == .alive)
        hear(.suspect, 4)
        #expect(state.members["b"]?.status == .alive)
        hear(.suspect, 5)
        #expect(state.members["b"]?.status == .suspect)
        hear(.alive, 5)
        #expect(state.members["b"]?.status == .suspect)
        hear(.dead, 5)
        #expect(state.members["b"]?.status == .dead)
        hear(.suspect, 5)
        hear(.alive, 5)
        #expect(state.members["b"]?.status == .dead)
        hear(.alive, 6)
        #expect(state.members["b"]?.status == .alive)
        #expect(state.members["b"]?.incarnation == 6)
        // Dead news of a member never known is not kept.
        _ = state.receive(SWIMEnvelope(from: "c", fromAddress: "c:1", fromIncarnation: 1, message: .ack(sequence: 99),
                                       updates: [SWIMUpdate(member: "z", address: "z:1", incarnation: 9, status: .dead)]), now: 2)
        #expect(state.members["z"] == nil)
    }

    @Test func memberCountIsBoundedAndExcessNewsCounted() {
        var configuration = SWIMConfiguration()
        configuration.maxMembers = 10
        var state = SWIMState(id: "a", address: "a:1", incarnation: 1, seeds: [], configuration: configuration, randomSeed: 1, now: 0)
        let page = (0..<50).map { SWIMUpdate(member: "m\($0)", address: "m\($0):1", incarnation: 1, status: .alive) }
        _ = state.receive(SWIMEnvelope(from: "m0", fromAddress: "m0:1", fromIncarnation: 1, message: .syncReply(after: "", members: page, complete: true)),
                          now: 1)
        #expect(state.members.count == 10)
        #expect(state.counters.membersRefusedOverLimit == 40)
    }

    @Test func noMessageExceedsTheBudget() {
        var state = SWIMState(id: "a", address: "a:1", incarnation: 1, seeds: [], randomSeed: 1, now: 0)
        let long = String(repeating: "n", count: 200)
        let page = (0..<300).map { SWIMUpdate(member: "\(long)\($0)", address: "\(long)\($0):1", incarnation: 1, status: .alive) }
        _ = state.receive(SWIMEnvelope(from: "b", fromAddress: "b:1", fromIncarnation: 1, message: .ack(sequence: 1), updates: page), now: 1)
        var out = state.receive(SWIMEnvelope(from: "b", fromAddress: "b:1", fromIncarnation: 1, message: .syncRequest(after: "")), now: 2)
        out += state.receive(SWIMEnvelope(from: "b", fromAddress: "b:1", fromIncarnation: 1, message: .ping(sequence: 2, target: "a")), now: 3)
        out += state.tick(now: 5_000)
        var sends = 0
        for case let .send(_, envelope) in out {
            sends += 1
            #expect(SWIMCodec().encode(envelope).count <= state.configuration.maxMessageBytes)
        }
        #expect(sends >= 2)
    }

    /// Five members; one crashes: every other sees it dead, nobody else is suspected, and the
    /// views are exact after, for many seeds.
    @Test(arguments: seeds) func aCrashedMemberIsDeclaredDeadByEveryOther(seed: UInt64) throws {
        let fleet = SWIMFleet(seed: seed, lossProbability: 0.01)
        fleet.startFleet(5)
        let joined = fleet.run(until: { fleet.everyViewIsExact }, limitMilliseconds: 30_000)
        try #require(joined != nil, "SIM_SEED=\(seed): the five did not all see each other")
        fleet.crash("m3")
        let detected = fleet.run(until: { fleet.deadViewCount(of: "m3") == 4 }, limitMilliseconds: 120_000)
        try #require(detected != nil, "SIM_SEED=\(seed): m3 not seen dead by all four")
        #expect(fleet.everyViewIsExact)
        #expect(fleet.falseDeaths == 0, "SIM_SEED=\(seed)")
        #expect(fleet.decodeErrors == 0)
    }

    /// A member partitioned away long enough to be declared dead comes back once the partition
    /// heals: the reconnect ping tells it, it refutes with a new incarnation, and the views are
    /// exact again on both sides.
    @Test(arguments: seeds.prefix(10)) func bothSidesOfAHealedPartitionFindEachOtherAgain(seed: UInt64) throws {
        var configuration = SWIMConfiguration()
        configuration.reconnectIntervalMilliseconds = 5_000
        let fleet = SWIMFleet(seed: seed, configuration: configuration)
        fleet.startFleet(8)
        try #require(fleet.run(until: { fleet.everyViewIsExact }, limitMilliseconds: 30_000) != nil, "SIM_SEED=\(seed)")
        let left = (0..<4).map { SWIMFleet.address(SWIMFleet.id($0)) }, right = (4..<8).map { SWIMFleet.address(SWIMFleet.id($0)) }
        fleet.unreachable = Set((0..<8).map(SWIMFleet.id))
        fleet.network.partition(groups: [left, right])
        let split = fleet.run(until: { (4..<8).allSatisfy { fleet.deadViewCount(of: SWIMFleet.id($0)) == 4 }
                                        && (0..<4).allSatisfy { fleet.deadViewCount(of: SWIMFleet.id($0)) == 4 } },
                              limitMilliseconds: 300_000)
        try #require(split != nil, "SIM_SEED=\(seed): the halves did not declare each other dead")
        fleet.network.heal()
        let healed = fleet.run(until: { fleet.everyViewIsExact }, limitMilliseconds: 300_000)
        try #require(healed != nil, "SIM_SEED=\(seed): the halves did not find each other again")
        for id in fleet.running { #expect(fleet.states[id]!.incarnation > 0) }
    }

    /// Churn: 300 generations of a short-lived member, each with a new id, that joins, lives
    /// 10 s and crashes for good. The stable members see each one dead and forget it after
    /// `deadRetentionMilliseconds`: what they hold stays bounded by the members that died
    /// within the retention, not by how many ever lived.
    @Test func membershipStaysBoundedOverGenerationsOfShortLivedMembers() throws {
        var configuration = SWIMConfiguration()
        configuration.deadRetentionMilliseconds = 120_000
        configuration.syncIntervalMilliseconds = 10_000
        let fleet = SWIMFleet(seed: 11, configuration: configuration, lossProbability: 0.01)
        fleet.startFleet(8)
        try #require(fleet.run(until: { fleet.everyViewIsExact }, limitMilliseconds: 30_000) != nil)
        let period: UInt64 = 15_000
        var largest = 0
        for generation in 0..<300 {
            let id = "short\(generation)"
            fleet.start(id, seeds: [SWIMFleet.id(generation % 8)])
            fleet.run(forMilliseconds: 10_000)
            fleet.crash(id)
            fleet.forget(id)
            fleet.run(forMilliseconds: period - 10_000)
            largest = max(largest, fleet.running.map { fleet.states[$0]!.members.count }.max()!)
        }
        // Seven stable others, plus the short-lived ones that died within the retention (and
        // the suspicion before it) or are still alive: about (120 s + 60 s) / 15 s.
        let bound = 7 + Int((configuration.deadRetentionMilliseconds + 60_000 + configuration.syncIntervalMilliseconds * 2) / period) + 2
        #expect(largest <= bound, "a stable member held \(largest) members; bound \(bound)")
        #expect(largest > 8, "the short-lived members were never seen")
        #expect(fleet.falseDeaths == 0)
        try #require(fleet.run(until: { fleet.everyViewIsExact }, limitMilliseconds: 120_000) != nil)
    }

    /// A member that leaves is seen `left`, not dead, and nobody suspects it first.
    @Test func aLeavingMemberIsSeenLeft() throws {
        let fleet = SWIMFleet(seed: 7)
        fleet.startFleet(6)
        try #require(fleet.run(until: { fleet.everyViewIsExact }, limitMilliseconds: 30_000) != nil)
        fleet.leave("m2")
        let seen = fleet.run(until: { fleet.running.filter { $0 != "m2" }.allSatisfy { fleet.states[$0]!.members["m2"]?.status == .left } },
                             limitMilliseconds: 30_000)
        #expect(seen != nil)
        #expect(fleet.falseSuspicions == 0)
    }
}
