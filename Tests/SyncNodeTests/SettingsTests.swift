import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// `syncnode run`'s settings: every key through each of its three sources, their precedence,
/// the config file's two forms and its errors, and the failure timeout's range
/// (docs/operations.md, "Starting a peer").
extension SyncNodeTests {
    @Suite struct SettingsTests {
        static func flags(_ failureTimeout: String? = nil) -> RunSettings.Flags {
            var flags = RunSettings.Flags(listen: "127.0.0.1:0", admin: "127.0.0.1:0", peers: [])
            flags.id = "s"
            flags.failureTimeoutMilliseconds = failureTimeout
            return flags
        }

        /// A value each setting accepts on its own.
        static func sample(_ key: SettingKey, directory: TemporaryDirectory) -> String {
            switch key {
            case .id: "n1"
            case .listen: "127.0.0.1:7411"
            case .admin: "127.0.0.1:7511"
            case .adminSocket: directory.file("admin.sock")
            case .adminPasswordFile: directory.file("password")
            case .adminMaxClients: "7"
            case .metrics: "127.0.0.1:9411"
            case .peer: "127.0.0.1:7412"
            case .dataDirectory: directory.file("data")
            case .durability: "memory"
            case .clusterSecretFile: directory.file("secret")
            case .acceptedSecretsFile: directory.file("accepted")
            case .cluster: "prod"
            case .logLevel: "debug"
            case .insecure: "true"
            case .deadMemberTimeoutMilliseconds: "5000"
            case .tombstoneCollectionIntervalMilliseconds: "1000"
            case .antiEntropyIntervalMilliseconds: "2000"
            case .failureTimeoutMilliseconds: "4000"
            case .writeCoalescingMicroseconds: "120"
            case .changeLogEntries: "1048576"
            case .readySeedWaitMilliseconds: "12000"
            case .feedMaxChanges: "5000"
            case .feedMaxBytes: "1048576"
            case .adminAuthTimeoutMilliseconds: "2500"
            case .adminMaxUnauthenticatedClients: "9"
            case .adminIdleTimeoutMilliseconds: "60000"
            case .adminMaxClientMemoryBytes: "16777216"
            case .adminMaxClientsMemoryBytes: "134217728"
            case .adminOutputStallTimeoutMilliseconds: "7000"
            case .config: directory.file("empty.conf")
            }
        }

        /// The flag of `key` set to `text` (the command line's `--KEY text`).
        static func set(_ key: SettingKey, _ text: String, in flags: inout RunSettings.Flags) {
            switch key {
            case .id: flags.id = text
            case .listen: flags.listen = text
            case .admin: flags.admin = text
            case .adminSocket: flags.adminSocket = text
            case .adminPasswordFile: flags.adminPasswordFile = text
            case .adminMaxClients: flags.adminMaxClients = text
            case .metrics: flags.metrics = text
            case .peer: flags.peers = [text]
            case .dataDirectory: flags.dataDirectory = text
            case .durability: flags.durability = text
            case .clusterSecretFile: flags.clusterSecretFile = text
            case .acceptedSecretsFile: flags.acceptedSecretsFile = text
            case .cluster: flags.cluster = text
            case .logLevel: flags.logLevel = text
            case .insecure: flags.insecure = true
            case .deadMemberTimeoutMilliseconds: flags.deadMemberTimeoutMilliseconds = text
            case .tombstoneCollectionIntervalMilliseconds: flags.tombstoneCollectionIntervalMilliseconds = text
            case .antiEntropyIntervalMilliseconds: flags.antiEntropyIntervalMilliseconds = text
            case .failureTimeoutMilliseconds: flags.failureTimeoutMilliseconds = text
            case .writeCoalescingMicroseconds: flags.writeCoalescingMicroseconds = text
            case .changeLogEntries: flags.changeLogEntries = text
            case .readySeedWaitMilliseconds: flags.readySeedWaitMilliseconds = text
            case .feedMaxChanges: flags.feedMaxChanges = text
            case .feedMaxBytes: flags.feedMaxBytes = text
            case .adminAuthTimeoutMilliseconds: flags.adminAuthTimeoutMilliseconds = text
            case .adminMaxUnauthenticatedClients: flags.adminMaxUnauthenticatedClients = text
            case .adminIdleTimeoutMilliseconds: flags.adminIdleTimeoutMilliseconds = text
            case .adminMaxClientMemoryBytes: flags.adminMaxClientMemoryBytes = text
            case .adminMaxClientsMemoryBytes: flags.adminMaxClientsMemoryBytes = text
            case .adminOutputStallTimeoutMilliseconds: flags.adminOutputStallTimeoutMilliseconds = text
            case .config: flags.config = text
            }
        }

        /// What `resolve` made of `key`, as text comparable with `sample`.
        static func resolved(_ key: SettingKey, in settings: RunSettings) -> String? {
            switch key {
            case .id: settings.id
            case .listen: settings.listen
            case .admin: settings.admin
            case .adminSocket: settings.adminSocket
            case .adminPasswordFile: settings.adminPasswordFile
            case .adminMaxClients: String(settings.adminMaxClients)
            case .metrics: settings.metrics
            case .peer: settings.peers.joined(separator: ",")
            case .dataDirectory: settings.dataDirectory
            case .durability: "\(settings.durability)"
            case .clusterSecretFile: settings.clusterSecretFile
            case .acceptedSecretsFile: settings.acceptedSecretsFile
            case .cluster: settings.cluster
            case .logLevel: settings.logLevel.rawValue
            case .insecure: String(settings.insecure)
            case .deadMemberTimeoutMilliseconds: settings.deadMemberTimeoutMilliseconds.map { String($0) }
            case .tombstoneCollectionIntervalMilliseconds: String(settings.tombstoneCollectionIntervalMilliseconds)
            case .antiEntropyIntervalMilliseconds: String(settings.antiEntropyIntervalMilliseconds)
            case .failureTimeoutMilliseconds: String(settings.failureTimeoutMilliseconds)
            case .writeCoalescingMicroseconds: String(settings.writeCoalescingMicroseconds)
            case .changeLogEntries: String(settings.changeLogEntries)
            case .readySeedWaitMilliseconds: String(settings.readySeedWaitMilliseconds)
            case .feedMaxChanges: String(settings.feedMaxChanges)
            case .feedMaxBytes: String(settings.feedMaxBytes)
            case .adminAuthTimeoutMilliseconds: String(settings.adminAuthTimeoutMilliseconds)
            case .adminMaxUnauthenticatedClients: String(settings.adminMaxUnauthenticatedClients)
            case .adminIdleTimeoutMilliseconds: String(settings.adminIdleTimeoutMilliseconds)
            case .adminMaxClientMemoryBytes: String(settings.adminMaxClientMemoryBytes)
            case .adminMaxClientsMemoryBytes: String(settings.adminMaxClientsMemoryBytes)
            case .adminOutputStallTimeoutMilliseconds: String(settings.adminOutputStallTimeoutMilliseconds)
            case .config: nil
            }
        }

        /// A bare command line: nothing set but what `resolve` needs to succeed.
        static let bare = RunSettings.Flags(peers: [])

        @Test func everySettingIsReadFromItsFlagItsEnvironmentVariableAndTheConfigFile() throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try Data("# nothing set\n".utf8).write(to: URL(fileURLWithPath: directory.file("empty.conf")))
            for key in SettingKey.allCases {
                let text = Self.sample(key, directory: directory)
                var flags = Self.bare
                Self.set(key, text, in: &flags)
                let fromFlag = try RunSettings.resolve(flags: flags, environment: [:])
                #expect(fromFlag.sources[key] == "flags", "\(key)")

                let fromEnvironment = try RunSettings.resolve(flags: Self.bare, environment: [key.environmentName: text])
                #expect(fromEnvironment.sources[key] == "environment", "\(key.environmentName)")
                for settings in [fromFlag, fromEnvironment] where key != .config {
                    #expect(Self.resolved(key, in: settings) == text, "\(key)")
                }
                guard key.isFileKey else { continue }
                let path = directory.file("\(key.rawValue).conf")
                try Data("\(key.rawValue) = \(text)\n".utf8).write(to: URL(fileURLWithPath: path))
                var withFile = Self.bare
                withFile.config = path
                let fromFile = try RunSettings.resolve(flags: withFile, environment: [:])
                #expect(fromFile.sources[key] == path, "\(key) in a config file")
                #expect(Self.resolved(key, in: fromFile) == text, "\(key) in a config file")
                #expect(fromFile.sources[.config] == "flags")
            }
            #expect(try RunSettings.resolve(flags: Self.bare, environment: [:]).sourcesSummary == "defaults")
        }

        @Test func aFlagBeatsTheEnvironmentWhichBeatsTheFileWhichBeatsTheDefault() throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let path = directory.file("node.conf")
            try Data("""
                # comments and blank lines are skipped

                listen = 127.0.0.1:7001   # a trailing comment too
                cluster = from-file
                log-level = warning
                peer = 127.0.0.1:7101
                peer = 127.0.0.1:7102
                """.utf8).write(to: URL(fileURLWithPath: path))
            var flags = Self.bare
            flags.config = path
            flags.listen = "127.0.0.1:7003"
            let environment = ["SYNCNODE_LISTEN": "127.0.0.1:7002", "SYNCNODE_CLUSTER": "from-environment", "SYNCNODE_LOG_LEVEL": ""]
            let settings = try RunSettings.resolve(flags: flags, environment: environment)
            #expect(settings.listen == "127.0.0.1:7003")
            #expect(settings.cluster == "from-environment")
            // An empty variable counts as unset: the file's level applies.
            #expect(settings.logLevel == .warning)
            #expect(settings.peers == ["127.0.0.1:7101", "127.0.0.1:7102"])
            #expect(settings.failureTimeoutMilliseconds == RunSettings.defaultFailureTimeoutMilliseconds)
            #expect(settings.sourcesSummary == "flags: listen, config; environment: cluster; \(path): peer, log-level")

            // Peers come whole from the first source that has any, never merged.
            let fromEnvironment = try RunSettings.resolve(flags: flags, environment: ["SYNCNODE_PEERS": " 127.0.0.1:7201, ,127.0.0.1:7202 "])
            #expect(fromEnvironment.peers == ["127.0.0.1:7201", "127.0.0.1:7202"])
            flags.peers = ["127.0.0.1:7301"]
            #expect(try RunSettings.resolve(flags: flags, environment: ["SYNCNODE_PEERS": "127.0.0.1:7201"]).peers == ["127.0.0.1:7301"])
        }

        @Test func aJSONConfigFileSetsTheSameKeys() throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let path = directory.file("node.json")
            try Data("""
                {"id": "j", "peers": ["127.0.0.1:7101", "127.0.0.1:7102"], "insecure": true,
                 "admin-max-clients": 9, "admin-socket": "\(directory.file("s"))"}
                """.utf8).write(to: URL(fileURLWithPath: path))
            var flags = Self.bare
            flags.config = path
            let settings = try RunSettings.resolve(flags: flags, environment: [:])
            #expect(settings.id == "j")
            #expect(settings.peers == ["127.0.0.1:7101", "127.0.0.1:7102"])
            #expect(settings.insecure)
            #expect(settings.adminMaxClients == 9)
            #expect(settings.adminSocket == directory.file("s"))
        }

        @Test func aConfigFileThatCannotBeUsedIsNamedWithItsLine() throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let cases: [(String, String)] = [
                ("id = a\ncolour = blue\n", ":2: unknown key `colour`"),
                ("id = a\nid = b\n", ":2: `id` is set twice"),
                ("listen 127.0.0.1:1\n", ":1: expected `key = value`"),
                ("config = /etc/other.conf\n", ":1: unknown key `config`"),
                ("{\"id\": [1]}", ": \"id\" must hold strings"),
                ("{\"id\": ", ": "),
            ]
            for (index, (text, expected)) in cases.enumerated() {
                let path = directory.file("bad\(index).conf")
                try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                var flags = Self.bare
                flags.config = path
                #expect(throws: ConfigFile.Invalid.self, "\(text)") { try RunSettings.resolve(flags: flags, environment: [:]) }
                do {
                    _ = try RunSettings.resolve(flags: flags, environment: [:])
                } catch {
                    #expect("\(error)".hasPrefix(path + expected), "\(error)")
                }
            }
            // The file is named by the environment as well as by the flag.
            #expect(throws: ConfigFile.Invalid.self) {
                try RunSettings.resolve(flags: Self.bare, environment: ["SYNCNODE_CONFIG": directory.file("absent.conf")])
            }
        }

        @Test func theWriteCoalescingComesFromTheFlagThenTheEnvironmentWithinItsRange() throws {
            func flags(_ text: String?) -> RunSettings.Flags {
                var flags = Self.flags(nil)
                flags.writeCoalescingMicroseconds = text
                return flags
            }
            #expect(try RunSettings.resolve(flags: flags(nil), environment: [:]).writeCoalescingMicroseconds == 50)
            #expect(try RunSettings.resolve(flags: flags(nil), environment: ["SYNCNODE_WRITE_COALESCING_US": "0"])
                .writeCoalescingMicroseconds == 0)
            #expect(try RunSettings.resolve(flags: flags("1000"), environment: ["SYNCNODE_WRITE_COALESCING_US": "0"])
                .writeCoalescingMicroseconds == 1_000)
            for bad in ["1001", "-1", "soon", "4294967296"] {
                do {
                    _ = try RunSettings.resolve(flags: flags(bad), environment: [:])
                    Issue.record("write-coalescing-us \(bad) was accepted")
                } catch {
                    #expect("\(error)".contains("write-coalescing-us"), "\(error)")
                }
            }
        }

        @Test func theFailureTimeoutComesFromTheFlagThenTheEnvironmentWithinItsRange() throws {
            #expect(try RunSettings.resolve(flags: Self.flags(nil), environment: [:]).failureTimeoutMilliseconds == 3_000)
            #expect(try RunSettings.resolve(flags: Self.flags(nil), environment: ["SYNCNODE_FAILURE_TIMEOUT_MS": "4000"])
                .failureTimeoutMilliseconds == 4_000)
            #expect(try RunSettings.resolve(flags: Self.flags("2500"), environment: ["SYNCNODE_FAILURE_TIMEOUT_MS": "4000"])
                .failureTimeoutMilliseconds == 2_500)
            for bad in ["100", "soon", "700000"] {
                do {
                    _ = try RunSettings.resolve(flags: Self.flags(bad), environment: [:])
                    Issue.record("failure-timeout-ms \(bad) was accepted")
                } catch {
                    #expect("\(error)".contains("failure-timeout-ms"), "\(error)")
                }
            }
        }
    }
}
