import Decide
import DecideUV
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// `ReplicatedNode` as a swift-service-lifecycle `Service`: a group's graceful shutdown (what
/// SIGTERM triggers) and a cancelled group both make the node leave, so its peers see it as
/// left (not unreachable) and stop redialling it.
@Suite(.serialized) struct LifecycleTests {
    static func quiet(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .critical
        return logger
    }

    static func node(_ id: String, peers: [String] = []) throws -> ReplicatedNode {
        var configuration = ReplicatedNode.Configuration(id: id, listen: "127.0.0.1:0", peers: peers)
        configuration.node.logger = quiet(id)
        configuration.replication.logger = quiet(id)
        configuration.replication.heartbeatIntervalMilliseconds = 100
        configuration.replication.reconnectBaseMilliseconds = 20
        configuration.replication.reconnectMaxMilliseconds = 200
        return try ReplicatedNode(configuration: configuration)
    }

    static func eventually(_ seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    static func link(of id: String, on node: ReplicatedNode) -> ReplicationStatus.LinkState? {
        node.status.members.first { $0.nodeID == id }?.link
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["graceful shutdown", "cancellation"])
    func aGroupEndingMakesTheNodeLeave(how: String) async throws {
        let a = try Self.node("a")
        let b = try Self.node("b", peers: [a.listenAddress])
        let group = ServiceGroup(services: [b], logger: Self.quiet("group"))
        let running = Task { try await group.run() }
        #expect(await Self.eventually { Self.link(of: "b", on: a) == .connected })
        if how == "cancellation" {
            running.cancel()
        } else {
            await group.triggerGracefulShutdown()
        }
        try? await running.value
        #expect(await Self.eventually { Self.link(of: "b", on: a) == .left }, "a sees b as \(String(describing: Self.link(of: "b", on: a)))")
        #expect(b.status.members.allSatisfy { $0.link != .connected }, "b closed its links")
        await a.shutdown()
    }

    /// Made in a function of their own so no strong reference outlives it.
    static func linkedPairShutDown() async throws -> (a: Node?, b: Node?, replicatorA: Replicator?, transportA: UVTransport?) {
        final class Weak: @unchecked Sendable {
            weak var a: Node?
            weak var b: Node?
            weak var replicatorA: Replicator?
            weak var transportA: UVTransport?
        }
        let weak = Weak()
        do {
            let a = try node("a")
            let b = try node("b", peers: [a.listenAddress])
            weak.a = a.node
            weak.b = b.node
            weak.replicatorA = a.replicator
            weak.transportA = a.transport
            #expect(await eventually { link(of: "b", on: a) == .connected })
            await b.shutdown()
            await a.shutdown()
        }
        // Whatever thread lets go of them last frees them: give it until a deadline.
        _ = await eventually(10) { weak.a == nil && weak.b == nil && weak.replicatorA == nil && weak.transportA == nil }
        return (weak.a, weak.b, weak.replicatorA, weak.transportA)
    }

    @Test(.timeLimit(.minutes(1)))
    func aShutDownNodeIsFreedWithItsStateAndItsEngine() async throws {
        // A service that starts and stops nodes (a test suite, a tool, a restart in-process)
        // gets their memory back: a node of a gigabyte stayed allocated after `shutdown`.
        let left = try await Self.linkedPairShutDown()
        #expect(left.a == nil, "node a is still held after shutdown")
        #expect(left.b == nil, "node b is still held after shutdown")
        #expect(left.replicatorA == nil, "a's replication engine is still held after shutdown")
        #expect(left.transportA == nil, "a's transport is still held after shutdown")
    }
}
