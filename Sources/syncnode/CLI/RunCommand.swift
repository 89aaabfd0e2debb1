import ArgumentParser
import CoreMetrics
import Dispatch
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

extension SyncNode {
    /// `syncnode run`: one peer, until SIGINT or SIGTERM, then a graceful leave.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a peer until SIGINT or SIGTERM, then leave the cluster gracefully.",
            discussion: """
                Settings come from, in order of precedence: flags, environment variables \
                (\(SettingKey.allCases.map(\.environmentName).joined(separator: ", ")); \
                SYNCNODE_PEERS is comma-separated), the --config file, \
                defaults. Logs go to stderr, one line per event. SIGHUP re-reads the cluster secret \
                and accepted secrets files (as `syncnode reload-secrets` does).

                Examples:
                  syncnode run --id a --listen 127.0.0.1:7401 --admin 127.0.0.1:7501
                  syncnode run --id b --listen 127.0.0.1:7402 --admin 127.0.0.1:7502 \\
                               --peer 127.0.0.1:7401 --data-dir /var/lib/syncnode/b
                  syncnode run --config /etc/syncnode/b.conf --log-level debug
                  SYNCNODE_ID=c SYNCNODE_PEERS=127.0.0.1:7401,127.0.0.1:7402 syncnode run \\
                               --listen 127.0.0.1:7403 --admin 127.0.0.1:7503

                A config file holds `key = value` lines (or one JSON object) with the flag \
                names as keys:
                  id = b
                  listen = 127.0.0.1:7402
                  peer = 127.0.0.1:7401
                  cluster-secret-file = /etc/syncnode/secret
                """)

        @Option(help: "This node's id, unique in the cluster (default: the data dir's node-id file).")
        var id: String?
        @Option(help: "Peer-to-peer address HOST:PORT (default \(RunSettings.defaultListen)).")
        var listen: String?
        @Option(help: "Client endpoint HOST:PORT speaking the Redis protocol (default \(RunSettings.defaultAdmin)); loopback only unless --admin-password-file is given; off to listen on --admin-socket only.")
        var admin: String?
        @Option(help: "Also accept clients on this Unix socket (created mode 600).")
        var adminSocket: String?
        @Option(help: "File with the password clients must AUTH with (mode 600, at least 16 bytes); required for a non-loopback --admin.")
        var adminPasswordFile: String?
        @Option(help: "Client connections at once (default \(RunSettings.defaultAdminMaxClients)).")
        var adminMaxClients: String?
        @Option(help: "Serve Prometheus metrics on HOST:PORT (GET /metrics; port 0 picks one): counts, gauges and latencies, no keys or values.")
        var metrics: String?
        @Option(name: .customLong("peer"), help: "A seed peer HOST:PORT to dial; repeat for several.")
        var peers: [String] = []
        @Option(help: "Directory holding this node's id and store (created); without it the node keeps nothing across restarts.")
        var dataDir: String?
        @Option(help: "memory, batched, batched:MS or strict (default: batched with --data-dir, else memory).")
        var durability: String?
        @Option(help: "File with the cluster secret (mode 600, at least 16 bytes): proved to peers and sealing every link. Without it, loopback only.")
        var clusterSecretFile: String?
        @Option(help: "File of secrets accepted from peers beside the cluster secret, one per line (mode 600), for rotating it without downtime.")
        var acceptedSecretsFile: String?
        @Option(help: "Cluster name; peers of another name are refused (default \(RunSettings.defaultCluster)).")
        var cluster: String?
        @Option(help: "trace, debug, info, notice, warning, error or critical (default info).")
        var logLevel: String?
        @Flag(help: "Allow listening on a non-loopback address without a cluster secret (unauthenticated).")
        var insecure = false
        @Option(name: .customLong("dead-member-timeout-ms"), help: ArgumentHelp(
            "Remove a member unheard of for this long, as `syncnode forget` would (default off: members are removed only by an operator).",
            valueName: "ms"))
        var deadMemberTimeoutMilliseconds: String?
        @Option(name: .customLong("tombstone-collection-interval-ms"), help: ArgumentHelp(
            "How often tombstones every member holds are collected (default \(RunSettings.defaultTombstoneCollectionIntervalMilliseconds)).",
            valueName: "ms"))
        var tombstoneCollectionIntervalMilliseconds: String?
        @Option(name: .customLong("anti-entropy-interval-ms"), help: ArgumentHelp(
            "How often an anti-entropy walk runs with each peer (default \(RunSettings.defaultAntiEntropyIntervalMilliseconds)).",
            valueName: "ms"))
        var antiEntropyIntervalMilliseconds: String?
        @Option(name: .customLong("change-log-entries"), help: ArgumentHelp(
            "How many of its newest changes this peer remembers, 8 bytes each (default \(RunSettings.defaultChangeLogEntries)): a catch-up that outlasts them starts over, so raise it for peers that catch up under heavy writes.",
            valueName: "n"))
        var changeLogEntries: String?
        @Option(name: .customLong("failure-timeout-ms"), help: ArgumentHelp(
            "A peer silent this long is declared failed, and its owned keys read as absent here (default \(RunSettings.defaultFailureTimeoutMilliseconds); a crashed process shows at once).",
            valueName: "ms"))
        var failureTimeoutMilliseconds: String?
        @Option(name: .customLong("ready-seed-wait-ms"), help: ArgumentHelp(
            "How long GET /ready on the --metrics listener answers 503 while no seed has answered (default \(RunSettings.defaultReadySeedWaitMilliseconds)); after it the peer reports ready and serves alone.",
            valueName: "ms"))
        var readySeedWaitMilliseconds: String?
        @Option(name: .customLong("feed-max-changes"), help: ArgumentHelp(
            "How many of its newest changes the change feed retains for readers that resume (DECIDE.CHANGES, syncnode watch --from; default \(RunSettings.defaultFeedMaxChanges); 0: no feed).",
            valueName: "n"))
        var feedMaxChanges: String?
        @Option(name: .customLong("feed-max-bytes"), help: ArgumentHelp(
            "How many bytes of changes the change feed retains at most (default \(RunSettings.defaultFeedMaxBytes)).",
            valueName: "bytes"))
        var feedMaxBytes: String?
        @Option(name: .customLong("write-coalescing-us"), help: ArgumentHelp(
            "While a link to a peer streams, each write waits this long for more frames (0-1000, default \(RunSettings.defaultWriteCoalescingMicroseconds); 0 writes at once).",
            valueName: "us"))
        var writeCoalescingMicroseconds: String?
        @Option(name: .customLong("admin-auth-timeout-ms"), help: ArgumentHelp(
            "With a password, a client that has not authenticated this long after connecting is closed (default \(RunSettings.defaultAdminAuthTimeoutMilliseconds); 0: never).",
            valueName: "ms"))
        var adminAuthTimeoutMilliseconds: String?
        @Option(name: .customLong("admin-max-unauthenticated-clients"), help: ArgumentHelp(
            "With a password, connections not yet authenticated at once (default \(RunSettings.defaultAdminMaxUnauthenticatedClients)); more are refused.",
            valueName: "n"))
        var adminMaxUnauthenticatedClients: String?
        @Option(name: .customLong("admin-idle-timeout-ms"), help: ArgumentHelp(
            "Close a client that sent nothing for this long, subscribers and clients waiting for an answer excepted (default 0: never, as Redis's timeout 0).",
            valueName: "ms"))
        var adminIdleTimeoutMilliseconds: String?
        @Option(name: .customLong("admin-max-client-memory-bytes"), help: ArgumentHelp(
            "Memory one client may hold (partial requests, unwritten replies, subscriptions, MULTI block); past it, it gets an error and is closed (default \(RunSettings.defaultAdminMaxClientMemoryBytes)).",
            valueName: "bytes"))
        var adminMaxClientMemoryBytes: String?
        @Option(name: .customLong("admin-max-clients-memory-bytes"), help: ArgumentHelp(
            "Memory every client together may hold; past it, the largest clients are closed (default \(RunSettings.defaultAdminMaxClientsMemoryBytes)).",
            valueName: "bytes"))
        var adminMaxClientsMemoryBytes: String?
        @Option(name: .customLong("admin-output-stall-timeout-ms"), help: ArgumentHelp(
            "A client not read because its replies wait, and that writes none of them for this long, gets an error and is closed (default \(RunSettings.defaultAdminOutputStallTimeoutMilliseconds); 0: never).",
            valueName: "ms"))
        var adminOutputStallTimeoutMilliseconds: String?
        @Option(help: "Config file: `key = value` lines or a JSON object (see above).")
        var config: String?

        mutating func run() async throws {
            let settings: RunSettings
            let nodeID: String
            let secrets: [[UInt8]]
            let adminPassword: [UInt8]?
            do {
                settings = try RunSettings.resolve(
                    flags: .init(id: id, listen: listen, admin: admin, adminSocket: adminSocket,
                                 adminPasswordFile: adminPasswordFile, adminMaxClients: adminMaxClients, metrics: metrics, peers: peers, dataDirectory: dataDir, durability: durability,
                                 clusterSecretFile: clusterSecretFile, acceptedSecretsFile: acceptedSecretsFile,
                                 cluster: cluster, logLevel: logLevel,
                                 insecure: insecure, config: config,
                                 deadMemberTimeoutMilliseconds: deadMemberTimeoutMilliseconds,
                                 tombstoneCollectionIntervalMilliseconds: tombstoneCollectionIntervalMilliseconds,
                                 antiEntropyIntervalMilliseconds: antiEntropyIntervalMilliseconds,
                                 failureTimeoutMilliseconds: failureTimeoutMilliseconds,
                                 writeCoalescingMicroseconds: writeCoalescingMicroseconds,
                                 changeLogEntries: changeLogEntries,
                                 readySeedWaitMilliseconds: readySeedWaitMilliseconds,
                                 feedMaxChanges: feedMaxChanges, feedMaxBytes: feedMaxBytes,
                                 adminAuthTimeoutMilliseconds: adminAuthTimeoutMilliseconds,
                                 adminMaxUnauthenticatedClients: adminMaxUnauthenticatedClients,
                                 adminIdleTimeoutMilliseconds: adminIdleTimeoutMilliseconds,
                                 adminMaxClientMemoryBytes: adminMaxClientMemoryBytes,
                                 adminMaxClientsMemoryBytes: adminMaxClientsMemoryBytes,
                                 adminOutputStallTimeoutMilliseconds: adminOutputStallTimeoutMilliseconds),
                    environment: ProcessInfo.processInfo.environment)
                if let directory = settings.dataDirectory {
                    nodeID = try PeerFiles.prepareDataDirectory(directory, id: settings.id)
                } else if let given = settings.id {
                    nodeID = given
                } else {
                    throw RunSettings.Invalid(description: "no node id: pass --id, set SYNCNODE_ID, or give a --data-dir holding a node-id file")
                }
                secrets = try PeerFiles.readKeyring(settings)
                adminPassword = try settings.adminPasswordFile.map { path throws(PeerFiles.Invalid) in
                    try PeerFiles.readSecret(path, what: "admin password")
                }
            } catch {
                FileHandle.standardError.write(Data("syncnode run: \(error)\n".utf8))
                throw ExitCode(64)
            }
            let level = settings.logLevel
            LoggingSystem.bootstrap { label in CompactLogHandler(label: label, level: level) }
            // One registry for the process: the node, the engine and the store report into it.
            let registry = settings.metrics.map { _ in
                let registry = PrometheusCollectorRegistry()
                MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
                return registry
            }
            signal(SIGPIPE, SIG_IGN)

            let peer: PeerProcess
            do {
                peer = try PeerProcess(settings: settings, id: nodeID, secrets: secrets, adminPassword: adminPassword,
                                       metricsRegistry: registry) { label in
                    var logger = Logger(label: label)
                    logger.logLevel = level
                    return logger
                }
            } catch {
                var logger = Logger(label: "syncnode")
                logger[metadataKey: "node"] = "\(nodeID)"
                logger.critical("cannot start: \(error)")
                throw ExitCode(1)
            }
            // SIGHUP re-reads the secrets files (the operator's half of a rotation).
            signal(SIGHUP, SIG_IGN)
            let hangUp = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
            hangUp.setEventHandler { _ = peer.reloadSecrets(reason: "SIGHUP") }
            hangUp.resume()
            defer { hangUp.cancel() }
            // SIGTERM and SIGINT end the group gracefully: the peer leaves through one path.
            let group = ServiceGroup(configuration: .init(
                services: [.init(service: PeerService(peer: peer))],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: peer.logger))
            do {
                try await group.run()
            } catch {
                peer.logger.error("stopping after an error: \(error)")
                await peer.stop()
                throw ExitCode(1)
            }
        }
    }
}
