import Configuration
import Foundation

/// One setting of `syncnode run`, named by its config-file key. Its flag is `--` + the key and
/// its environment variable `SYNCNODE_` + the key in capitals with dashes as underscores
/// (`data-dir`: `--data-dir`, `SYNCNODE_DATA_DIR`); `peer` alone differs (`SYNCNODE_PEERS`,
/// comma-separated). This one table is what the config file accepts, what the environment is
/// read for, and what `syncnode ready` reports the source of.
enum SettingKey: String, CaseIterable, Sendable {
    case id
    case listen
    case admin
    case adminSocket = "admin-socket"
    case adminPasswordFile = "admin-password-file"
    case adminMaxClients = "admin-max-clients"
    case adminAuthTimeoutMilliseconds = "admin-auth-timeout-ms"
    case adminMaxUnauthenticatedClients = "admin-max-unauthenticated-clients"
    case adminIdleTimeoutMilliseconds = "admin-idle-timeout-ms"
    case adminMaxClientMemoryBytes = "admin-max-client-memory-bytes"
    case adminMaxClientsMemoryBytes = "admin-max-clients-memory-bytes"
    case adminOutputStallTimeoutMilliseconds = "admin-output-stall-timeout-ms"
    case metrics
    case peer
    case dataDirectory = "data-dir"
    case durability
    case clusterSecretFile = "cluster-secret-file"
    case acceptedSecretsFile = "accepted-secrets-file"
    case cluster
    case logLevel = "log-level"
    case insecure
    case deadMemberTimeoutMilliseconds = "dead-member-timeout-ms"
    case tombstoneCollectionIntervalMilliseconds = "tombstone-collection-interval-ms"
    case antiEntropyIntervalMilliseconds = "anti-entropy-interval-ms"
    case failureTimeoutMilliseconds = "failure-timeout-ms"
    case writeCoalescingMicroseconds = "write-coalescing-us"
    case changeLogEntries = "change-log-entries"
    case readySeedWaitMilliseconds = "ready-seed-wait-ms"
    case feedMaxChanges = "feed-max-changes"
    case feedMaxBytes = "feed-max-bytes"
    /// The config file's own path: a flag or the environment, never the file itself.
    case config

    /// The environment variable that sets it, e.g. `SYNCNODE_DATA_DIR`.
    var environmentName: String {
        "SYNCNODE_" + environmentWord
    }

    /// The environment name after `SYNCNODE_`; the components swift-configuration's
    /// environment provider joins with `_` in capitals, so both spell the name alike.
    var environmentWord: String {
        self == .peer ? "PEERS" : rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// Its key in the settings reader: the config-file key as one component.
    var configKey: ConfigKey { ConfigKey([rawValue]) }

    /// The same key as providers are asked for it.
    var absoluteKey: AbsoluteConfigKey { AbsoluteConfigKey([rawValue]) }

    /// Whether a config file may set it.
    var isFileKey: Bool { self != .config }
}
