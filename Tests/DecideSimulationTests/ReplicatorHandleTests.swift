@testable import Decide
import DecideCore
import DecideSimulation
import Testing

/// `ReplicatorHandle`, how a node and its engine's timer reach the engine without owning it:
/// while attached it reaches the engine; once detached (the engine's `deinit`), neither the
/// timer's tick nor a strict commit's late send does; and an engine going away unhooks only its
/// own handle from the node, never a later engine's.
@Suite struct ReplicatorHandleTests {
    func engine(_ id: String, node: Node, network: SimulatedNetwork) -> Replicator {
        Replicator(node: node, transport: network.makeTransport(nodeID: id, address: "\(id):1"), configuration: .init())
    }

    @Test func aDetachedHandleNoLongerReachesItsEngine() throws {
        let network = SimulatedNetwork(scheduler: SimulatedScheduler(seed: 7))
        let node = try Node(configuration: .init(id: "a"))
        let replicator = engine("a", node: node, network: network)
        let handle = ReplicatorHandle(replicator)
        var reached: [ObjectIdentifier] = []
        handle.withEngine { reached.append(ObjectIdentifier($0)) }
        #expect(reached == [ObjectIdentifier(replicator)])
        handle.detach()
        handle.withEngine { reached.append(ObjectIdentifier($0)) }
        handle.send([1, 2, 3], timestamp: HLCTimestamp(rawValue: 1))
        #expect(reached.count == 1, "a detached handle reached its engine")
    }

    @Test func unhookingRemovesOnlyTheSameHandle() throws {
        let node = try Node(configuration: .init(id: "a"))
        // Two engines of one node, one after the other: each on a network of its own.
        let firstEngine = engine("a", node: node, network: SimulatedNetwork(scheduler: SimulatedScheduler(seed: 8)))
        let secondEngine = engine("a", node: node, network: SimulatedNetwork(scheduler: SimulatedScheduler(seed: 9)))
        let first = ReplicatorHandle(firstEngine)
        let second = ReplicatorHandle(secondEngine)
        func current() -> (any LocalCommitSender)? { node.core.withLock { $0.localCommitSender } }
        node.setLocalCommitSender(first)
        node.unhookLocalCommitSender(second)
        #expect(current() === first, "another handle's unhook removed this one")
        node.unhookLocalCommitSender(first)
        #expect(current() == nil)
        node.setLocalCommitSender(second)
        node.unhookLocalCommitSender(first)
        #expect(current() === second, "an earlier engine going away unhooked a later one")
        withExtendedLifetime((firstEngine, secondEngine)) {}
    }

    /// `start` hooks the engine's handle into its node; `stop` unhooks it.
    @Test func startHooksTheHandleAndStopUnhooksIt() throws {
        let scheduler = SimulatedScheduler(seed: 10)
        let network = SimulatedNetwork(scheduler: scheduler)
        let node = try Node(configuration: .init(id: "a"))
        let replicator = engine("a", node: node, network: network)
        _ = try replicator.start(listeningOn: nil)
        #expect(node.core.withLock { $0.localCommitSender } is ReplicatorHandle)
        replicator.stop()
        #expect(node.core.withLock { $0.localCommitSender } == nil)
    }

    /// An engine stopped after a later one started on the same node leaves the later one's
    /// handle hooked: the node's commits keep reaching the engine that runs.
    @Test func stoppingAnEarlierEngineLeavesALaterOneHooked() throws {
        let node = try Node(configuration: .init(id: "a"))
        let earlier = engine("a", node: node, network: SimulatedNetwork(scheduler: SimulatedScheduler(seed: 11)))
        let later = engine("a", node: node, network: SimulatedNetwork(scheduler: SimulatedScheduler(seed: 12)))
        _ = try earlier.start(listeningOn: nil)
        _ = try later.start(listeningOn: nil)
        func current() -> (any LocalCommitSender)? { node.core.withLock { $0.localCommitSender } }
        let laterHandle = try #require(current())
        earlier.stop()
        #expect(current() === laterHandle, "stopping the earlier engine unhooked the later one")
        later.stop()
        #expect(current() == nil)
    }
}
