import Configuration
import Decide
import Foundation
import Logging

/// The settings of `syncnode run` after merging, for each one, the first of: its flag, its
/// environment variable (`SYNCNODE_ID`, `SYNCNODE_LISTEN`, ...), the `--config` file, the
/// default (`SettingKey` names them all). Peers come whole from one source (flags, else
/// `SYNCNODE_PEERS` split at commas, else the file's `peer` lines).
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
    /// A client not authenticated this long after connecting is closed (0: never; only with a
    /// password).
    var adminAuthTimeoutMilliseconds: UInt64 = defaultAdminAuthTimeoutMilliseconds
    /// Connections not yet authenticated at once (only with a password).
    var adminMaxUnauthenticatedClients: Int = defaultAdminMaxUnauthenticatedClients
    /// A client that sent nothing this long is closed (0: never), subscribers and clients
    /// waiting for an answer excepted.
    var adminIdleTimeoutMilliseconds: UInt64 = 0
    /// Memory one client may hold: requests, unwritten replies, subscriptions, MULTI block.
    var adminMaxClientMemoryBytes: Int = defaultAdminMaxClientMemoryBytes
    /// Memory every client together may hold; past it the largest are closed.
    var adminMaxClientsMemoryBytes: Int = defaultAdminMaxClientsMemoryBytes
    /// A client whose replies do not drain for this long while it is not read is closed (0: never).
    var adminOutputStallTimeoutMilliseconds: UInt64 = defaultAdminOutputStallTimeoutMilliseconds
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
    /// While a link streams, each write to peers waits this long for more frames
    /// (`UVTransport.Configuration.flushCoalescingMicroseconds`); 0 writes at once.
    var writeCoalescingMicroseconds: UInt32
    /// How long `GET /ready` waits for a first link to a seed before it answers ready anyway
    /// (the peer then serves alone; `Readiness`).
    var readySeedWaitMilliseconds: UInt64
    /// How many of its newest changes the node remembers, 8 bytes each
    /// (`Node.Configuration.recentChangeCapacity`): a catch-up walk sends only what changed
    /// during it, and starts over when more changed than this.
    var changeLogEntries: Int
    /// What the change feed retains (`Node.Configuration.changeFeed`): at most this many
    /// changes (0: no feed) and about this many bytes of them.
    var feedMaxChanges: Int
    var feedMaxBytes: Int
    /// Where each setting that did not take its default came from: `flags`, `environment` or
    /// the config file's path. `syncnode ready` logs it.
    var sources: [SettingKey: String] = [:]

    static let defaultTombstoneCollectionIntervalMilliseconds: UInt64 = 60_000
    static let defaultFailureTimeoutMilliseconds: UInt64 = 3_000
    /// Ten failure timeouts: long enough for a seed that starts a little later, short enough
    /// that a peer whose seeds are all gone is sent clients within a minute.
    static let defaultReadySeedWaitMilliseconds: UInt64 = 30_000
    static let defaultAntiEntropyIntervalMilliseconds: UInt64 = 10_000
    static let defaultWriteCoalescingMicroseconds: UInt32 = 50
    static let defaultChangeLogEntries = 65_536
    static let defaultFeedMaxChanges = ChangeFeedConfiguration().maxRetainedChanges
    static let defaultFeedMaxBytes = ChangeFeedConfiguration().maxRetainedBytes
    static let defaultAdminAuthTimeoutMilliseconds: UInt64 = 10_000
    static let defaultAdminMaxUnauthenticatedClients = 64
    static let defaultAdminMaxClientMemoryBytes = 256 << 20
    static let defaultAdminMaxClientsMemoryBytes = 2 << 30
    static let defaultAdminOutputStallTimeoutMilliseconds: UInt64 = 30_000

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
        var writeCoalescingMicroseconds: String?
        var changeLogEntries: String?
        var readySeedWaitMilliseconds: String?
        var feedMaxChanges: String?
        var feedMaxBytes: String?
        var adminAuthTimeoutMilliseconds: String?
        var adminMaxUnauthenticatedClients: String?
        var adminIdleTimeoutMilliseconds: String?
        var adminMaxClientMemoryBytes: String?
        var adminMaxClientsMemoryBytes: String?
        var adminOutputStallTimeoutMilliseconds: String?

        /// The flags given, as the first of the reader's providers sees them.
        var configValues: [AbsoluteConfigKey: ConfigValue] {
            let given: [(SettingKey, String?)] = [
                (.id, id), (.listen, listen), (.admin, admin), (.adminSocket, adminSocket),
                (.adminPasswordFile, adminPasswordFile), (.adminMaxClients, adminMaxClients), (.metrics, metrics),
                (.dataDirectory, dataDirectory), (.durability, durability), (.clusterSecretFile, clusterSecretFile),
                (.acceptedSecretsFile, acceptedSecretsFile), (.cluster, cluster), (.logLevel, logLevel),
                (.insecure, insecure ? "true" : nil), (.config, config),
                (.deadMemberTimeoutMilliseconds, deadMemberTimeoutMilliseconds),
                (.tombstoneCollectionIntervalMilliseconds, tombstoneCollectionIntervalMilliseconds),
                (.antiEntropyIntervalMilliseconds, antiEntropyIntervalMilliseconds),
                (.failureTimeoutMilliseconds, failureTimeoutMilliseconds),
                (.writeCoalescingMicroseconds, writeCoalescingMicroseconds),
                (.changeLogEntries, changeLogEntries),
                (.readySeedWaitMilliseconds, readySeedWaitMilliseconds),
                (.feedMaxChanges, feedMaxChanges), (.feedMaxBytes, feedMaxBytes),
                (.adminAuthTimeoutMilliseconds, adminAuthTimeoutMilliseconds),
                (.adminMaxUnauthenticatedClients, adminMaxUnauthenticatedClients),
                (.adminIdleTimeoutMilliseconds, adminIdleTimeoutMilliseconds),
                (.adminMaxClientMemoryBytes, adminMaxClientMemoryBytes),
                (.adminMaxClientsMemoryBytes, adminMaxClientsMemoryBytes),
                (.adminOutputStallTimeoutMilliseconds, adminOutputStallTimeoutMilliseconds),
            ]
            var values: [AbsoluteConfigKey: ConfigValue] = [:]
            for case let (key, text?) in given { values[key.absoluteKey] = ConfigValue(.string(text), isSecret: false) }
            if !peers.isEmpty { values[SettingKey.peer.absoluteKey] = ConfigValue(.stringArray(peers), isSecret: false) }
            return values
        }
    }

    /// Where the settings came from, for the log: each source with the keys it gave, in
    /// precedence order (`flags: id, listen; environment: peer`); `defaults` when none.
    var sourcesSummary: String {
        var order: [String] = []
        var keys: [String: [String]] = [:]
        for key in SettingKey.allCases {
            guard let source = sources[key] else { continue }
            if keys[source] == nil { order.append(source) }
            keys[source, default: []].append(key.rawValue)
        }
        let rank = ["flags": 0, "environment": 1]
        order.sort { rank[$0, default: 2] < rank[$1, default: 2] }
        return order.isEmpty ? "defaults" : order.map { "\($0): \(keys[$0]!.joined(separator: ", "))" }.joined(separator: "; ")
    }

    /// Merges `flags`, `environment` and the config file (from `--config` or `SYNCNODE_CONFIG`)
    /// through swift-configuration's reader, providers in precedence order; an empty
    /// environment variable counts as unset. Values are checked here, so each error names the
    /// setting and what it takes.
    static func resolve(flags: Flags, environment: [String: String]) throws -> RunSettings {
        let flagProvider = InMemoryProvider(name: "flags", values: flags.configValues)
        let environmentProvider = KeyMappingProvider(
            upstream: EnvironmentVariablesProvider(environmentVariables: environment.filter { !$0.value.isEmpty }),
            keyMapper: { key in
                let word = SettingKey(rawValue: key.components.joined(separator: "."))?.environmentWord
                return AbsoluteConfigKey(["SYNCNODE", word ?? key.components.joined(separator: "_")])
            })
        let sources = SettingSources()
        let configPath = ConfigReader(providers: [flagProvider, environmentProvider], accessReporter: sources)
            .string(forKey: SettingKey.config.configKey)
        let file = try configPath.map { path throws(ConfigFile.Invalid) in try ConfigFile(path: path) }
        var providers: [any ConfigProvider] = [flagProvider, environmentProvider]
        // The names the log shows for each provider's own (`InMemoryProvider[flags]`, ...).
        var labels = [flagProvider.providerName: "flags", environmentProvider.providerName: "environment"]
        if let file, let configPath {
            let fileProvider = InMemoryProvider(name: configPath, values: file.configValues)
            providers.append(fileProvider)
            labels[fileProvider.providerName] = configPath
        }
        let reader = ConfigReader(providers: providers, accessReporter: sources)
        func pick(_ key: SettingKey) -> String? { reader.string(forKey: key.configKey) }

        let peers = (reader.stringArray(forKey: SettingKey.peer.configKey) ?? [])
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let levelText = pick(.logLevel) ?? "info"
        guard let level = Logger.Level(rawValue: levelText.lowercased()) else {
            throw Invalid(description: "unknown log level '\(levelText)': use trace, debug, info, notice, warning, error or critical")
        }
        var insecure = false
        if let text = pick(.insecure) {
            guard let flag = parseBool(text) else { throw Invalid(description: "insecure must be true or false, not '\(text)'") }
            insecure = flag
        }
        let dataDirectory = pick(.dataDirectory)
        let durability = try parseDurability(pick(.durability), dataDirectory: dataDirectory)
        var deadMemberTimeout: UInt64?
        if let text = pick(.deadMemberTimeoutMilliseconds), text.lowercased() != "off", text != "0" {
            deadMemberTimeout = try milliseconds(text, name: "dead-member-timeout-ms", range: 1_000 ... 31_536_000_000,
                                                 example: "86400000 (a day), or off")
        }
        let collectionInterval = try pick(.tombstoneCollectionIntervalMilliseconds)
            .map { text throws(Invalid) in
                try milliseconds(text, name: "tombstone-collection-interval-ms", range: 100 ... 86_400_000, example: "60000")
            } ?? defaultTombstoneCollectionIntervalMilliseconds
        let antiEntropyInterval = try pick(.antiEntropyIntervalMilliseconds)
            .map { text throws(Invalid) in
                try milliseconds(text, name: "anti-entropy-interval-ms", range: 100 ... 86_400_000, example: "10000")
            } ?? defaultAntiEntropyIntervalMilliseconds
        // At least four heartbeats (500 ms apart): one late ping must not look like a failure.
        let failureTimeout = try pick(.failureTimeoutMilliseconds)
            .map { text throws(Invalid) in
                try milliseconds(text, name: "failure-timeout-ms", range: 2_000 ... 600_000, example: "3000")
            } ?? defaultFailureTimeoutMilliseconds
        let readySeedWait = try pick(.readySeedWaitMilliseconds)
            .map { text throws(Invalid) in
                try milliseconds(text, name: "ready-seed-wait-ms", range: 0 ... 3_600_000, example: "30000")
            } ?? defaultReadySeedWaitMilliseconds
        let writeCoalescing = try pick(.writeCoalescingMicroseconds)
            .map { text throws(Invalid) in
                UInt32(try whole(text, unit: "microseconds", name: "write-coalescing-us", range: 0 ... 1_000, example: "50"))
            } ?? defaultWriteCoalescingMicroseconds
        let changeLog = try pick(.changeLogEntries)
            .map { text throws(Invalid) in
                Int(try whole(text, unit: "entries", name: "change-log-entries", range: 1_024 ... 67_108_864, example: "1048576"))
            } ?? defaultChangeLogEntries
        let feedMaxChanges = try pick(.feedMaxChanges)
            .map { text throws(Invalid) in
                Int(try whole(text, unit: "changes", name: "feed-max-changes", range: 0 ... 100_000_000, example: "1000000"))
            } ?? defaultFeedMaxChanges
        let feedMaxBytes = try pick(.feedMaxBytes)
            .map { text throws(Invalid) in
                Int(try whole(text, unit: "bytes", name: "feed-max-bytes", range: 65_536 ... 68_719_476_736, example: "67108864"))
            } ?? defaultFeedMaxBytes
        let adminText = pick(.admin) ?? defaultAdmin
        let admin = ["off", "none"].contains(adminText.lowercased()) ? nil : adminText
        let adminSocket = pick(.adminSocket)
        guard admin != nil || adminSocket != nil else {
            throw Invalid(description: "admin is off and no admin-socket is given: clients could not reach this node")
        }
        var maxClients = defaultAdminMaxClients
        if let text = pick(.adminMaxClients) {
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)), (1 ... 100_000).contains(value) else {
                throw Invalid(description: "admin-max-clients '\(text)': expected a whole number in 1...100000, e.g. 1024")
            }
            maxClients = value
        }
        let authTimeout = try pick(.adminAuthTimeoutMilliseconds).map { text throws(Invalid) in
            try milliseconds(text, name: "admin-auth-timeout-ms", range: 0 ... 3_600_000, example: "10000, or 0 for never")
        } ?? defaultAdminAuthTimeoutMilliseconds
        let maxUnauthenticated = try pick(.adminMaxUnauthenticatedClients).map { text throws(Invalid) in
            Int(try whole(text, unit: "clients", name: "admin-max-unauthenticated-clients", range: 1 ... 100_000, example: "64"))
        } ?? defaultAdminMaxUnauthenticatedClients
        let idleTimeout = try pick(.adminIdleTimeoutMilliseconds).map { text throws(Invalid) in
            try milliseconds(text, name: "admin-idle-timeout-ms", range: 0 ... 31_536_000_000, example: "300000, or 0 for never")
        } ?? 0
        let clientMemory = try pick(.adminMaxClientMemoryBytes).map { text throws(Invalid) in
            Int(try whole(text, unit: "bytes", name: "admin-max-client-memory-bytes", range: 1 << 20 ... 1 << 40, example: "268435456"))
        } ?? defaultAdminMaxClientMemoryBytes
        let clientsMemory = try pick(.adminMaxClientsMemoryBytes).map { text throws(Invalid) in
            Int(try whole(text, unit: "bytes", name: "admin-max-clients-memory-bytes", range: 1 << 20 ... 1 << 44, example: "2147483648"))
        } ?? defaultAdminMaxClientsMemoryBytes
        let outputStall = try pick(.adminOutputStallTimeoutMilliseconds).map { text throws(Invalid) in
            try milliseconds(text, name: "admin-output-stall-timeout-ms", range: 0 ... 3_600_000, example: "30000, or 0 for never")
        } ?? defaultAdminOutputStallTimeoutMilliseconds
        return RunSettings(
            id: pick(.id),
            listen: pick(.listen) ?? defaultListen,
            admin: admin,
            adminSocket: adminSocket,
            adminPasswordFile: pick(.adminPasswordFile),
            adminMaxClients: maxClients,
            adminAuthTimeoutMilliseconds: authTimeout,
            adminMaxUnauthenticatedClients: maxUnauthenticated,
            adminIdleTimeoutMilliseconds: idleTimeout,
            adminMaxClientMemoryBytes: clientMemory,
            adminMaxClientsMemoryBytes: clientsMemory,
            adminOutputStallTimeoutMilliseconds: outputStall,
            metrics: pick(.metrics),
            peers: peers,
            dataDirectory: dataDirectory,
            durability: durability,
            clusterSecretFile: pick(.clusterSecretFile),
            acceptedSecretsFile: pick(.acceptedSecretsFile),
            cluster: pick(.cluster) ?? defaultCluster,
            logLevel: level,
            insecure: insecure,
            deadMemberTimeoutMilliseconds: deadMemberTimeout,
            tombstoneCollectionIntervalMilliseconds: collectionInterval,
            antiEntropyIntervalMilliseconds: antiEntropyInterval,
            failureTimeoutMilliseconds: failureTimeout,
            writeCoalescingMicroseconds: writeCoalescing,
            readySeedWaitMilliseconds: readySeedWait,
            changeLogEntries: changeLog,
            feedMaxChanges: feedMaxChanges,
            feedMaxBytes: feedMaxBytes,
            sources: sources.bySetting.mapValues { labels[$0] ?? $0 })
    }

    /// A whole number of milliseconds within `range`; the error names the setting.
    private static func milliseconds(_ text: String, name: String, range: ClosedRange<UInt64>,
                                     example: String) throws(Invalid) -> UInt64 {
        try whole(text, unit: "milliseconds", name: name, range: range, example: example)
    }

    /// A whole number of `unit` within `range`; the error names the setting.
    private static func whole(_ text: String, unit: String, name: String, range: ClosedRange<UInt64>,
                              example: String) throws(Invalid) -> UInt64 {
        guard let value = UInt64(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw Invalid(description: "\(name) '\(text)': expected whole \(unit) in \(range.lowerBound)...\(range.upperBound), e.g. \(example)")
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
