import Decide
import Foundation
import Logging

/// A `Node` linked to its peers over libuv: the node, a `UVTransport` and a `Replicator`,
/// started together. The one-call way to embed a replicating node in a service.
///
/// Guarantees: `init` returns a node that listens on `listen` (the bound address is in
/// `listenAddress`) and dials `peers`, or throws having closed whatever it opened; `leave`
/// tells every peer this node is going and closes everything; nothing is left running after
/// `leave` or `shutdown` returns.
public final class ReplicatedNode: Sendable {
    /// Everything needed to start; the node and replication settings keep their own defaults.
    public struct Configuration: Sendable {
        /// The node's settings; its `id` also names it to peers, and its `dataDirectory`, when set,
        /// also holds the member list (`members.json`).
        public var node: Node.Configuration
        /// `HOST:PORT` to listen on (port 0 picks one); loopback only without a cluster secret
        /// unless `insecure`.
        public var listen: String
        /// Seed addresses; the rest of the cluster is learnt by gossip.
        public var peers: [String]
        /// Nodes of different clusters refuse each other in the handshake.
        public var clusterName = "decide"
        /// With a secret, peers prove it before any message and every link is sealed
        /// (docs/protocol.md §4, §6).
        public var clusterSecret: [UInt8]?
        /// Secrets accepted from peers beside `clusterSecret` (rotation; see
        /// `UVTransport.Configuration.acceptedClusterSecrets`).
        public var acceptedClusterSecrets: [[UInt8]] = []
        /// Allows listening beyond loopback without a secret. Logged as a warning.
        public var insecure = false
        /// The replication engine's settings. At start `seeds` is replaced by `peers`; an unset
        /// `membershipPath` and a zero `incarnation` are filled in (data directory, start time in ms).
        public var replication = Replicator.Configuration()
        /// How often the replication engine's timers run.
        public var tickIntervalMilliseconds: UInt64 = 50

        /// Settings for node `id` listening on `listen` and dialling `peers` (none by default);
        /// everything else keeps its default.
        public init(id: String, listen: String, peers: [String] = []) {
            self.node = Node.Configuration(id: id)
            self.listen = listen
            self.peers = peers
        }
    }

    /// The node that holds the state and runs decisions.
    public let node: Node
    /// The libuv transport the node's links run over.
    public let transport: UVTransport
    /// The replication engine linking `node` to its peers over `transport`.
    public let replicator: Replicator
    /// The address this node listens on, with the real port.
    public let listenAddress: String

    /// Makes the node, the transport and the engine, listens, dials the peers and starts the
    /// engine's timer (every `tickIntervalMilliseconds`). Throws if any of them cannot start.
    public init(configuration: Configuration) throws {
        node = try Node(configuration: configuration.node)
        var transportConfiguration = UVTransport.Configuration(
            nodeID: configuration.node.id, clusterName: configuration.clusterName,
            clusterSecret: configuration.clusterSecret, insecure: configuration.insecure,
            logger: configuration.node.logger)
        transportConfiguration.acceptedClusterSecrets = configuration.acceptedClusterSecrets
        transport = try UVTransport(configuration: transportConfiguration)
        var replication = configuration.replication
        replication.seeds = configuration.peers
        if replication.membershipPath == nil, let directory = configuration.node.dataDirectory {
            replication.membershipPath = directory + "/members.json"
        }
        if replication.incarnation == 0 { replication.incarnation = UInt64(Date().timeIntervalSince1970 * 1000) }
        replicator = Replicator(node: node, transport: transport, configuration: replication)
        do {
            listenAddress = try replicator.start(listeningOn: configuration.listen) ?? configuration.listen
        } catch {
            replicator.stop()
            transport.shutdown()
            throw error
        }
        replicator.startTimer(intervalMilliseconds: configuration.tickIntervalMilliseconds)
    }

    /// Who this node knows and how each link is doing.
    public var status: ReplicationStatus { replicator.status }

    /// Runs `decision` and waits until `target` peers hold it, or `timeout` passes
    /// (`Replicator.decide(_:acknowledgedBy:timeout:)`; docs/consistency.md, "Writes
    /// acknowledged by replicas").
    public func decide(_ decision: some Decision, acknowledgedBy target: AcknowledgementTarget, timeout: Duration) async -> Acknowledged {
        await replicator.decide(decision, acknowledgedBy: target, timeout: timeout)
    }

    /// Tells every peer this node leaves (they stop redialling it), waits up to
    /// `flushTimeoutMilliseconds` for queued frames to reach the sockets, then closes
    /// everything and ends the node's observations.
    public func leave(flushTimeoutMilliseconds: UInt64 = 2_000) async {
        replicator.leave()
        let deadline = DispatchTime.now().uptimeNanoseconds + flushTimeoutMilliseconds * 1_000_000
        while DispatchTime.now().uptimeNanoseconds < deadline,
              replicator.status.members.contains(where: { $0.outboundBytesQueued > 0 }) {
            try? await Task.sleep(for: .milliseconds(5))
        }
        await shutdown()
    }

    /// Closes every link without telling peers (they will see the node as unreachable and keep
    /// redialling it), and ends the node's observations.
    public func shutdown() async {
        replicator.stop()
        transport.shutdown()
        await node.shutdown()
    }
}
