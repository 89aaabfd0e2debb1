import SyncNodeServer
import Decide
import DecideCore
import DecideUV
import Dispatch
import Foundation
import Logging
import Prometheus
import Synchronization

/// One running peer: a node, its libuv transport, its replicator and its client endpoint (the
/// Redis protocol, on TCP and/or a Unix socket).
///
/// Guarantees: `start` either returns a peer that listens on both addresses or throws having
/// closed whatever it opened; `stop` leaves the cluster (peers are told), waits up to
/// `flushTimeoutMilliseconds` for queued frames to be written, then closes everything.
final class PeerProcess: Sendable {
    /// The longest `stop` waits for the leave messages and queued deltas to be written.
    static let flushTimeoutMilliseconds: UInt64 = 2_000

    let node: Node
    let transport: UVTransport
    let replicator: Replicator
    let admin: UVStreamServer
    let service: RESPService
    /// The Prometheus endpoint (`--metrics`), its delegate (which the server also holds, until
    /// `shutdown`), and the address it bound.
    let metricsServer: UVStreamServer?
    let metricsEndpoint: MetricsEndpoint?
    let metricsAddress: String?
    let logger: Logger
    /// The bound addresses (real ports; `unix:PATH` for a socket).
    let listenAddress: String
    let adminAddresses: [String]
    /// Where the secrets come from, for `reloadSecrets`.
    private let settings: RunSettings
    /// Set once `stop` begins: `GET /ready` answers 503 from then on.
    private let leaving: LeavingFlag

    final class LeavingFlag: Sendable {
        let value = Atomic<Bool>(false)
    }
    /// The secrets in use, the sealing one first (empty without a cluster secret).
    private let keyring: Keyring

    /// The secrets in use, shared with the client endpoint's INFO.
    final class Keyring: Sendable {
        private let secrets: Mutex<[[UInt8]]>
        init(_ secrets: [[UInt8]]) { self.secrets = Mutex(secrets) }
        var current: [[UInt8]] {
            get { secrets.withLock { $0 } }
            set { secrets.withLock { $0 = newValue } }
        }
    }

    /// Starts a peer with `settings`; `id` is already settled (flag, env, config or data dir).
    /// `storeFileWrapper` goes to the node's configuration (`Node.Configuration.storeFileWrapper`;
    /// tests put a misbehaving disk there).
    init(settings: RunSettings, id: String, secrets: [[UInt8]], adminPassword: [UInt8]?,
         metricsRegistry: PrometheusCollectorRegistry? = nil,
         storeFileWrapper: (@Sendable (any StoreFile) -> any StoreFile)? = nil, makeLogger: (String) -> Logger) throws {
        self.settings = settings
        let started = DispatchTime.now().uptimeNanoseconds
        let leaving = LeavingFlag()
        self.leaving = leaving
        keyring = Keyring(secrets)
        var logger = makeLogger("syncnode")
        logger[metadataKey: "node"] = "\(id)"
        self.logger = logger
        var nodeConfiguration = Node.Configuration(id: id)
        nodeConfiguration.logger = makeLogger("decide.node")
        nodeConfiguration.dataDirectory = settings.dataDirectory
        nodeConfiguration.durability = settings.durability
        nodeConfiguration.storeFileWrapper = storeFileWrapper
        nodeConfiguration.recentChangeCapacity = settings.changeLogEntries
        // syncnode keeps a feed unless told not to: DECIDE.CHANGES and `syncnode watch` read it.
        nodeConfiguration.changeFeed = settings.feedMaxChanges == 0 ? nil
            : ChangeFeedConfiguration(maxRetainedChanges: settings.feedMaxChanges, maxRetainedBytes: settings.feedMaxBytes)
        node = try Node(configuration: nodeConfiguration)
        var transportConfiguration = UVTransport.Configuration(
            nodeID: id, clusterName: settings.cluster, clusterSecret: secrets.first, insecure: settings.insecure,
            logger: makeLogger("decide.uv"))
        transportConfiguration.acceptedClusterSecrets = Array(secrets.dropFirst())
        transportConfiguration.flushCoalescingMicroseconds = settings.writeCoalescingMicroseconds
        let transport = try UVTransport(configuration: transportConfiguration)
        self.transport = transport
        var replication = Replicator.Configuration()
        replication.seeds = settings.peers
        // The member list (removed members included) survives restarts: a tombstone is collected
        // only once every member holds it, so a node must not forget members that are down.
        if let directory = settings.dataDirectory { replication.membershipPath = directory + "/members.json" }
        replication.deadMemberTimeoutMilliseconds = settings.deadMemberTimeoutMilliseconds
        replication.tombstoneCollectionIntervalMilliseconds = settings.tombstoneCollectionIntervalMilliseconds
        replication.antiEntropyIntervalMilliseconds = settings.antiEntropyIntervalMilliseconds
        replication.failureTimeoutMilliseconds = settings.failureTimeoutMilliseconds
        replication.incarnation = UInt64(Date().timeIntervalSince1970 * 1000)
        replication.logger = makeLogger("decide.replication")
        let replicator = Replicator(node: node, transport: transport, configuration: replication)
        self.replicator = replicator
        var adminLogger = makeLogger("syncnode.admin")
        adminLogger[metadataKey: "node"] = "\(id)"
        var serverConfiguration = UVStreamServer.Configuration()
        serverConfiguration.logger = adminLogger
        serverConfiguration.maxConnections = settings.adminMaxClients
        // A client's replies may wait up to an eighth of its memory share (32 MiB by default)
        // before it is no longer read: a pipeline written whole before its replies are read
        // (redis-py's `pipeline()` of a million SETs is 5 MB of replies) is answered, and a
        // client that does not read past that is told and closed after
        // `adminOutputStallTimeoutMilliseconds` (docs/operations.md, "Limits").
        serverConfiguration.pauseReadingAboveBytes = max(settings.adminMaxClientMemoryBytes / 8, 1 << 17)
        serverConfiguration.allowsNonLoopback = adminPassword != nil
        serverConfiguration.tooManyConnectionsReply = RESPService.tooManyClientsReply
        let listen: String
        do {
            listen = try replicator.start(listeningOn: settings.listen) ?? settings.listen
        } catch {
            replicator.stop()
            transport.shutdown()
            throw error
        }
        replicator.startTimer(intervalMilliseconds: 50)
        listenAddress = listen
        var serviceConfiguration = RESPService.Configuration()
        serviceConfiguration.password = adminPassword
        serviceConfiguration.maxClients = settings.adminMaxClients
        serviceConfiguration.authTimeoutMilliseconds = settings.adminAuthTimeoutMilliseconds
        serviceConfiguration.maxUnauthenticatedClients = settings.adminMaxUnauthenticatedClients
        serviceConfiguration.idleTimeoutMilliseconds = settings.adminIdleTimeoutMilliseconds
        serviceConfiguration.maxClientMemoryBytes = settings.adminMaxClientMemoryBytes
        serviceConfiguration.maxClientsMemoryBytes = settings.adminMaxClientsMemoryBytes
        serviceConfiguration.outputStallTimeoutMilliseconds = settings.adminOutputStallTimeoutMilliseconds
        let keyring = self.keyring
        serviceConfiguration.secrets = RESPService.SecretsControl(
            reload: { [weak transport, settings, logger] in
                guard let transport else { throw PeerFiles.Invalid(description: "the peer is stopping") }
                return try Self.applySecrets(settings: settings, transport: transport, keyring: keyring, logger: logger,
                                             reason: "DECIDE.REKEY")
            },
            fingerprints: { keyring.current.map { UVTransport.fingerprint(ofSecret: $0) } },
            links: { [weak transport] in transport?.sealedLinks() ?? [] })
        let service = RESPService(
            node: node, replicator: replicator, configuration: serviceConfiguration,
            identity: .init(cluster: settings.cluster, listen: listen, admin: settings.admin ?? "",
                            durability: "\(settings.durability)"),
            logger: adminLogger)
        self.service = service
        let admin: UVStreamServer
        do {
            admin = try UVStreamServer(configuration: serverConfiguration, delegate: service)
        } catch {
            replicator.stop()
            transport.shutdown()
            throw error
        }
        service.attach(admin)
        do {
            var bound: [String] = []
            if let address = settings.admin {
                let result = Result { () throws(UVTransportError) -> String in try admin.listen(on: address) }
                if case .failure(.insecureListenRefused) = result {
                    throw RunSettings.Invalid(description: "refusing to accept clients on non-loopback \(address) without a password: pass --admin-password-file")
                }
                bound.append(try result.get())
            }
            if let path = settings.adminSocket { bound.append(try admin.listen(unixSocket: path)) }
            adminAddresses = bound
            service.identity.withLock { $0.admin = bound.joined(separator: ",") }
        } catch {
            // The server holds the service, which holds the server, until shutdown.
            admin.shutdown()
            replicator.stop()
            transport.shutdown()
            throw error
        }
        self.admin = admin
        if let address = settings.metrics, let metricsRegistry {
            var metricsConfiguration = UVStreamServer.Configuration()
            metricsConfiguration.logger = adminLogger
            metricsConfiguration.maxConnections = 16
            // Counts and node ids only, no keys or values: scraped from other hosts, like an exporter.
            metricsConfiguration.allowsNonLoopback = true
            let (seeds, seedWait) = (settings.peers.count, settings.readySeedWaitMilliseconds)
            let endpoint = MetricsEndpoint(registry: metricsRegistry) {
                let members = replicator.status.members.filter { $0.link != .removed && $0.link != .left }
                return Readiness.of(seeds: seeds, linked: members.filter { $0.link == .connected }.count, members: members.count,
                                    elapsedMilliseconds: (DispatchTime.now().uptimeNanoseconds - started) / 1_000_000,
                                    seedWaitMilliseconds: seedWait, leaving: leaving.value.load(ordering: .relaxed))
            }
            metricsEndpoint = endpoint
            do {
                let server = try UVStreamServer(configuration: metricsConfiguration, delegate: endpoint)
                metricsServer = server
                metricsAddress = try server.listen(on: address)
            } catch {
                admin.shutdown()
                replicator.stop()
                transport.shutdown()
                throw error
            }
        } else {
            metricsServer = nil
            metricsEndpoint = nil
            metricsAddress = nil
        }
        logger.info("syncnode ready", metadata: [
            "listen": "\(listenAddress)", "admin": "\(adminAddresses.joined(separator: ","))",
            "adminAuth": "\(adminPassword == nil ? "none" : "password")", "cluster": "\(settings.cluster)",
            "seeds": "\(settings.peers.joined(separator: ","))", "incarnation": "\(replication.incarnation)",
            "durability": "\(settings.durability)", "entries": "\(node.stateSummary.entryCount)",
            "deadMemberTimeoutMs": "\(settings.deadMemberTimeoutMilliseconds.map { String($0) } ?? "off")",
            "metrics": "\(metricsAddress ?? "off")", "allocator": "\(MemoryAllocator.name)",
            "settingsFrom": "\(settings.sourcesSummary)",
        ])
    }

    /// Re-reads the cluster secret and accepted secrets files and hands them to the transport:
    /// new links prove and seal with the cluster secret and accept any of them; links still
    /// sealed under a secret no longer accepted close and redial. Nothing changes when a file
    /// cannot be used; the log says why either way.
    @discardableResult
    func reloadSecrets(reason: String) -> Result<String, any Error> {
        Result { try Self.applySecrets(settings: settings, transport: transport, keyring: keyring, logger: logger, reason: reason) }
    }

    private static func applySecrets(settings: RunSettings, transport: UVTransport, keyring: Keyring,
                                      logger: Logger, reason: String) throws -> String {
        do {
            guard settings.clusterSecretFile != nil else {
                throw PeerFiles.Invalid(description: "this peer runs without a cluster secret; start it with --cluster-secret-file to seal links")
            }
            let secrets = try PeerFiles.readKeyring(settings)
            try transport.updateClusterSecrets(secrets)
            keyring.current = secrets
            let names = secrets.map { UVTransport.fingerprint(ofSecret: $0) }
            let summary = "sealing with \(names[0]), accepting \(names.joined(separator: ","))"
            logger.notice("cluster secrets reloaded", metadata: ["reason": "\(reason)", "sealing": "\(names[0])",
                                                                 "accepted": "\(names.joined(separator: ","))"])
            return summary
        } catch {
            logger.error("cluster secrets not reloaded, the old ones stay: \(error)", metadata: ["reason": "\(reason)"])
            throw error
        }
    }

    /// Leaves gracefully: tells every peer, flushes queued frames (bounded wait), closes the
    /// admin endpoint, the transport and the node.
    func stop() async {
        logger.info("stopping: leaving the cluster")
        leaving.value.store(true, ordering: .relaxed)
        replicator.leave()
        let deadline = DispatchTime.now().uptimeNanoseconds + Self.flushTimeoutMilliseconds * 1_000_000
        while DispatchTime.now().uptimeNanoseconds < deadline {
            let queued = replicator.status.members.reduce(0) { $0 + $1.outboundBytesQueued }
            if queued == 0 { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        admin.shutdown()
        metricsServer?.shutdown()
        transport.shutdown()
        await node.shutdown()
        do {
            try node.close()
        } catch {
            logger.error("closing the store: \(error)")
        }
        logger.info("stopped")
    }
}
