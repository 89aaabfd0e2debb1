@testable import DecideCore
import DecideSimulation
import Foundation
import Testing

/// SWIM at fleet size on the simulator: a thousand members (`SWIM_FLEET_MEMBERS`; `make
/// sim-fleet` runs any size in a release build, though past 1,000 the join does not finish yet:
/// docs/simulation.md) under 1 % datagram loss. Each test prints its figures (`swim-fleet:`
/// lines), which docs/design/0019-swim-membership.md quotes.
@Suite(.serialized) struct SWIMFleetTests {
    static let members = Int(ProcessInfo.processInfo.environment["SWIM_FLEET_MEMBERS"] ?? "") ?? 1_000
    static let seed = SimulationSeed.fromEnvironment ?? 60

    static func joinedFleet(_ count: Int, loss: Double = 0.01) throws -> SWIMFleet {
        let fleet = SWIMFleet(seed: seed, lossProbability: loss)
        fleet.startFleet(count, spreadMilliseconds: UInt64(count) * 10)
        let joined = fleet.run(until: { fleet.everyViewIsExact }, stepMilliseconds: 1_000, limitMilliseconds: 600_000)
        try #require(joined != nil, "SIM_SEED=\(seed): \(count) members never all saw each other")
        print("swim-fleet: \(count) members joined through one seed: every view exact after \(Double(joined!) / 1_000) s")
        return fleet
    }

    /// Crashed members are seen dead by every other member, soon, with no member that is up
    /// ever declared dead, and the fleet's views exact after.
    @Test func crashesAreDetectedEverywhereAndNoLiveMemberIsDeclaredDead() throws {
        let fleet = try Self.joinedFleet(Self.members)
        let victims = stride(from: 7, to: Self.members, by: max(1, Self.members / 10)).map(SWIMFleet.id)
        for victim in victims { fleet.crash(victim) }
        let others = Self.members - victims.count
        let everywhere = fleet.run(until: { victims.allSatisfy { fleet.deadViewCount(of: $0) == others } },
                                   stepMilliseconds: 500, limitMilliseconds: 600_000)
        try #require(everywhere != nil, "SIM_SEED=\(Self.seed): not every member saw the \(victims.count) crashed members dead")
        let first = victims.map { Double(fleet.firstDeathSeen[$0]! - fleet.crashedAt[$0]!) / 1_000 }
        print("swim-fleet: \(victims.count) of \(Self.members) crashed at once: first declared dead after \(first.min()!)–\(first.max()!) s, "
              + "dead in every view after \(Double(everywhere!) / 1_000) s")
        #expect(fleet.falseDeaths == 0, "SIM_SEED=\(Self.seed)")
        #expect(fleet.everyViewIsExact)
        // The bound a user can plan on: Lifeguard's longest suspicion, plus two rounds of the
        // probe list to find the member, plus the O(log n) rounds to spread the news.
        let bounds = fleet.configuration.suspicionBoundsMilliseconds(members: Self.members)
        #expect(everywhere! <= bounds.maximum + 60_000)
        #expect(fleet.decodeErrors == 0)
    }

    /// What one member sends per second does not grow with the fleet: within ±20 % from 100
    /// members to the full size.
    @Test func messagesPerMemberStayFlatFromAHundredToTheFullFleet() throws {
        var rates: [Int: Double] = [:]
        for count in [100, Self.members] {
            let fleet = try Self.joinedFleet(count)
            let before = fleet.messagesSent, suspicionsBefore = fleet.falseSuspicions
            let window: UInt64 = 120_000
            fleet.run(forMilliseconds: window)
            let rate = Double(fleet.messagesSent - before) / Double(count) / (Double(window) / 1_000)
            rates[count] = rate
            print("swim-fleet: \(count) members idle, 1 % loss: \(String(format: "%.2f", rate)) messages a member a second, "
                  + "\(fleet.falseSuspicions - suspicionsBefore) false suspicions (\(suspicionsBefore) while joining), \(fleet.falseDeaths) false deaths in \(window / 1_000) s")
            #expect(fleet.falseDeaths == 0)
            // A probe fails falsely only when the ping or its ack and all three indirect paths
            // are lost: about 1 in 10^6 probes at 1 % loss; without indirect probes, 1 in 50.
            #expect(fleet.falseSuspicions - suspicionsBefore <= 3)
        }
        let small = rates[100]!, large = rates[Self.members]!
        #expect(large <= small * 1.2 && large >= small * 0.8, "messages a member a second: \(small) at 100, \(large) at \(Self.members)")
    }
}
