import Decide
import Logging

/// The settings of `syncnode run` after merging, for each one, the first of: its flag, its
/// environment variable (`SYNCNODE_ID`, `SYNCNODE_LISTEN`, ...), the `--config` file, the
/// default. Peers come whole from one source (flags, else `SYNCNODE_PEERS` split at commas,
/// else the file's `peer` lines).
struct RunSettings: Sendable, Equatable {
    static let defaultListen = "127.0.0.1:7401"
    static let defaultAdmin = "127.0.0.1:7501"
    static let defaultCluster = "decide"
    static let defaultAdminMaxClients = 1024

    var id: String?
    var listen: String
    /// The Redis-protocol client endpoint's TCP address; nil when turned off (`off`).
    var admin: String?
    /// A Unix socket for clients as well (or instead), mode 600.
    var adminSocket: String?
    /// Clients must AUTH with the password in this file; required for a non-loopback `admin`.
    var adminPasswordFile: String?
    /// Client connections at once.
    var adminMaxClients: Int
    /// Where Prometheus scrapes this peer's metrics (`GET /metrics`); nil: no endpoint.
    var metrics: String?
    var peers: [String]
    var dataDirectory: String?
    /// `.memory` without a data directory; with one, `--durability` or `.batched()`.
    var durability: Durability
    var clusterSecretFile: String?
    /// Secrets accepted from peers beside the cluster secret, one per line (rotation).
    var acceptedSecretsFile: String?
    var cluster: String
    var logLevel: Logger.Level
    var insecure: Bool
    /// A member unheard of for this long is removed from the cluster (nil: never; only `forget`).
    var deadMemberTimeoutMilliseconds: UInt64?
    var tombstoneCollectionIntervalMilliseconds: UInt64
    var antiEntropyIntervalMilliseconds: UInt64
    /// A peer silent this long is declared failed: its link closes and its owned keys read as
    /// absent here (docs/consistency.md, "Node-owned keys").
    var failureTimeoutMilliseconds: UInt64

    static let defaultTombstoneCollectionIntervalMilliseconds: UInt64 = 60_000
    static let defaultFailureTimeoutMilliseconds: UInt64 = 3_000
    static let defaultAntiEntropyIntervalMilliseconds: UInt64 = 10_000

    /// Why the settings cannot be used; the text names the source to fix.
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// The flags as the user typed them (nil / empty: not given).
    struct Flags: Sendable {
        var id: String?
        var listen: String?
        var admin: String?
        var adminSocket: String?
        var adminPasswordFile: String?
        var adminMaxClients: String?
        var metrics: String?
        var peers: [String] = []
        var dataDirectory: String?
        var durability: String?
        var clusterSecretFile: String?
        var acceptedSecretsFile: String?
        var cluster: String?
        var logLevel: String?
        var insecure = false
        var config: String?
        var deadMemberTimeoutMilliseconds: String?
        var tombstoneCollectionIntervalMilliseconds: String?
        var antiEntropyIntervalMilliseconds: String?
        var failureTimeoutMilliseconds: String?
    }

    /// Merges `flags`, `environment` and the config file (from `--config` or `SYNCNODE_CONFIG`).
    static func resolve(flags: Flags, environment: [String: String]) throws -> RunSettings {
        func env(_ name: String) -> String? {
            guard let value = environment["SYNCNODE_" + name], !value.isEmpty else { return nil }
            return value
        }
        let file = try (flags.config ?? env("CONFIG")).map { path throws(ConfigFile.Invalid) in try ConfigFile(path: path) }
        func pick(_ flag: String?, _ envName: String, _ key: String) -> String? {
            flag ?? env(envName) ?? file?.value(key)
        }
        let peers: [String]
        if !flags.peers.isEmpty {
            peers = flags.peers
        } else if let list = env("PEERS") {
            peers = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        } else {
            peers = file?.all("peer") ?? []
        }
        let levelText = pick(flags.logLevel, "LOG_LEVEL", "log-level") ?? "info"
        guard let level = Logger.Level(rawValue: levelText.lowercased()) else {
            throw Invalid(description: "unknown log level '\(levelText)': use trace, debug, info, notice, warning, error or critical")
        }
        var insecure = flags.insecure
        if !insecure, let text = env("INSECURE") ?? file?.value("insecure") {
            guard let flag = parseBool(text) else { throw Invalid(description: "insecure must be true or false, not '\(text)'") }
            insecure = flag
        }
        let dataDirectory = pick(flags.dataDirectory, "DATA_DIR", "data-dir")
        let durability = try parseDurability(pick(flags.durability, "DURABILITY", "durability"), dataDirectory: dataDirectory)
        var deadMemberTimeout: UInt64?
        if let text = pick(flags.deadMemberTimeoutMilliseconds, "DEAD_MEMBER_TIMEOUT_MS", "dead-member-timeout-ms"),
           text.lowercased() != "off", text != "0" {
            deadMemberTimeout = try milliseconds(text, name: "dead-member-timeout-ms", range: 1_000 ... 31_536_000_000,
                                                 example: "86400000 (a day), or off")
        }
        let collectionInterval = try pick(flags.tombstoneCollectionIntervalMilliseconds, "TOMBSTONE_COLLECTION_INTERVAL_MS",
                                          "tombstone-collection-interval-ms")
            .map { text throws(Invalid) in
                try milliseconds(text, name: "tombstone-collection-interval-ms", range: 100 ... 86_400_000, example: "60000")
            } ?? defaultTombstoneCollectionIntervalMilliseconds
        let antiEntropyInterval = try pick(flags.antiEntropyIntervalMilliseconds, "ANTI_ENTROPY_INTERVAL_MS", "anti-entropy-interval-ms")
            .map { text throws(Invalid) in
                try milliseconds(text, name: "anti-entropy-interval-ms", range: 100 ... 86_400_000, example: "10000")
            } ?? defaultAntiEntropyIntervalMilliseconds
        // At least four heartbeats (500 ms apart): one late ping must not look like a failure.
        let failureTimeout = try pick(flags.failureTimeoutMilliseconds, "FAILURE_TIMEOUT_MS", "failure-timeout-ms")
            .map { text throws(Invalid) in
                try milliseconds(text, name: "failure-timeout-ms", range: 2_000 ... 600_000, example: "3000")
            } ?? defaultFailureTimeoutMilliseconds
        let adminText = pick(flags.admin, "ADMIN", "admin") ?? defaultAdmin
        let admin = ["off", "none"].contains(adminText.lowercased()) ? nil : adminText
        let adminSocket = pick(flags.adminSocket, "ADMIN_SOCKET", "admin-socket")
        guard admin != nil || adminSocket != nil else {
            throw Invalid(description: "admin is off and no admin-socket is given: clients could not reach this node")
        }
        var maxClients = defaultAdminMaxClients
        if let text = pick(flags.adminMaxClients, "ADMIN_MAX_CLIENTS", "admin-max-clients") {
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)), (1 ... 100_000).contains(value) else {
                throw Invalid(description: "admin-max-clients '\(text)': expected a whole number in 1...100000, e.g. 1024")
            }
            maxClients = value
        }
        return RunSettings(
            id: pick(flags.id, "ID", "id"),
            listen: pick(flags.listen, "LISTEN", "listen") ?? defaultListen,
            admin: admin,
            adminSocket: adminSocket,
            adminPasswordFile: pick(flags.adminPasswordFile, "ADMIN_PASSWORD_FILE", "admin-password-file"),
            adminMaxClients: maxClients,
            metrics: pick(flags.metrics, "METRICS", "metrics"),
            peers: peers,
            dataDirectory: dataDirectory,
            durability: durability,
            clusterSecretFile: pick(flags.clusterSecretFile, "CLUSTER_SECRET_FILE", "cluster-secret-file"),
            acceptedSecretsFile: pick(flags.acceptedSecretsFile, "ACCEPTED_SECRETS_FILE", "accepted-secrets-file"),
            cluster: pick(flags.cluster, "CLUSTER", "cluster") ?? defaultCluster,
            logLevel: level,
            insecure: insecure,
            deadMemberTimeoutMilliseconds: deadMemberTimeout,
            tombstoneCollectionIntervalMilliseconds: collectionInterval,
            antiEntropyIntervalMilliseconds: antiEntropyInterval,
            failureTimeoutMilliseconds: failureTimeout)
    }

    /// A whole number of milliseconds within `range`; the error names the setting.
    private static func milliseconds(_ text: String, name: String, range: ClosedRange<UInt64>,
                                     example: String) throws(Invalid) -> UInt64 {
        guard let value = UInt64(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw Invalid(description: "\(name) '\(text)': expected whole milliseconds in \(range.lowerBound)...\(range.upperBound), e.g. \(example)")
        }
        return value
    }

    /// `memory`, `batched`, `batched:MS` or `strict`; the default is `memory` without a data
    /// directory and `batched` (5 ms) with one.
    private static func parseDurability(_ text: String?, dataDirectory: String?) throws -> Durability {
        guard let text else { return dataDirectory == nil ? .memory : .batched() }
        let durability: Durability
        switch text.lowercased() {
        case "memory": durability = .memory
        case "strict": durability = .strict
        case "batched": durability = .batched()
        case let other where other.hasPrefix("batched:"):
            guard let milliseconds = Int(other.dropFirst("batched:".count)), (1 ... 60_000).contains(milliseconds) else {
                throw Invalid(description: "durability '\(text)': the interval must be 1...60000 ms, e.g. batched:5")
            }
            durability = .batched(intervalMilliseconds: milliseconds)
        default:
            throw Invalid(description: "unknown durability '\(text)': use memory, batched, batched:MS or strict")
        }
        if durability == .memory && dataDirectory != nil {
            throw Invalid(description: "durability memory keeps nothing on disk: drop --data-dir, or choose batched or strict")
        }
        if durability != .memory && dataDirectory == nil {
            throw Invalid(description: "durability \(durability) needs a --data-dir to write to")
        }
        return durability
    }

    private static func parseBool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "1", "on": return true
        case "false", "no", "0", "off": return false
        default: return nil
        }
    }
}
