import Decide
import DecideRESP
import DecideUV
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// The cluster secret from syncnode's side: the accepted secrets file (flag, environment, config),
/// its format, `DECIDE.REKEY` (what `syncnode reload-secrets` and SIGHUP do) and what INFO shows
/// (docs/operations.md, "Rotating the cluster secret").
extension SyncNodeTests {
    @Suite struct SecretRotationCommandTests {
        static func write(_ text: String, to path: String, mode: Int = 0o600) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        }

        static let old = "an old secret of 32 characters!"
        static let new = "a new secret, also long enough.."

        @Test func theAcceptedSecretsFileComesFromTheFlagEnvironmentOrConfigAndIsReadLineByLine() throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try Self.write(Self.old + "\n", to: directory.file("secret"))
            try Self.write("\n  \(Self.new)  \n\n\(Self.old)\n", to: directory.file("accepted"))
            var flags = RunSettings.Flags(listen: "127.0.0.1:0", admin: "127.0.0.1:0", peers: [])
            flags.id = "s"
            flags.clusterSecretFile = directory.file("secret")
            let fromEnvironment = try RunSettings.resolve(flags: flags, environment: ["SYNCNODE_ACCEPTED_SECRETS_FILE": directory.file("accepted")])
            #expect(fromEnvironment.acceptedSecretsFile == directory.file("accepted"))
            // The cluster secret first, then each accepted one once.
            #expect(try PeerFiles.readKeyring(fromEnvironment) == [Array(Self.old.utf8), Array(Self.new.utf8)])
            try Self.write("accepted-secrets-file = \(directory.file("other"))\n", to: directory.file("conf"))
            flags.config = directory.file("conf")
            #expect(try RunSettings.resolve(flags: flags, environment: [:]).acceptedSecretsFile == directory.file("other"))
            flags.acceptedSecretsFile = directory.file("accepted")
            #expect(try RunSettings.resolve(flags: flags, environment: [:]).acceptedSecretsFile == directory.file("accepted"))

            // What cannot be used says why.
            try Self.write("short\n", to: directory.file("short"))
            try Self.write(Self.new, to: directory.file("open"), mode: 0o644)
            for (file, reason) in [("short", "line 1"), ("open", "chmod 600")] {
                flags.acceptedSecretsFile = directory.file(file)
                let settings = try RunSettings.resolve(flags: flags, environment: [:])
                #expect(throws: PeerFiles.Invalid.self) { try PeerFiles.readKeyring(settings) }
                do { _ = try PeerFiles.readKeyring(settings) } catch { #expect("\(error)".contains(reason), "\(error)") }
            }
            flags.clusterSecretFile = nil
            flags.acceptedSecretsFile = directory.file("accepted")
            let unsealed = try RunSettings.resolve(flags: flags, environment: [:])
            do {
                _ = try PeerFiles.readKeyring(unsealed)
                Issue.record("accepted secrets without a cluster secret were taken")
            } catch {
                #expect("\(error)".contains("needs a cluster secret file"))
            }
        }

        @Test func rekeyRereadsTheFilesAndInfoShowsWhatSealsEachLink() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try Self.write(Self.old, to: directory.file("secret"))
            try Self.write("", to: directory.file("accepted"))
            func sealed(_ flags: inout RunSettings.Flags) {
                flags.clusterSecretFile = directory.file("secret")
                flags.acceptedSecretsFile = directory.file("accepted")
            }
            let a = try TestPeer("a", configure: sealed)
            let b = try TestPeer("b", peers: [a.listenAddress], configure: sealed)
            defer { Task { await a.stop(); await b.stop() } }
            #expect(await eventually { a.isConnected(to: "b") && b.isConnected(to: "a") })
            let client = try a.client()
            let oldName = UVTransport.fingerprint(ofSecret: Array(Self.old.utf8))
            let newName = UVTransport.fingerprint(ofSecret: Array(Self.new.utf8))
            let info = try client.call("INFO", "decide").text ?? ""
            #expect(info.contains("cluster_secret:\(oldName)"), "\(info)")
            let replication = try client.call("INFO", "replication").text ?? ""
            #expect(replication.contains("sealed=\(oldName)/\(oldName)"), "\(replication)")

            // Step 1 on both peers: accept the new secret.
            try Self.write(Self.new + "\n", to: directory.file("accepted"))
            #expect(try client.call("DECIDE.REKEY") == .simple("OK sealing with \(oldName), accepting \(oldName),\(newName)"))
            #expect(try b.client().call("DECIDE.REKEY") == .simple("OK sealing with \(oldName), accepting \(oldName),\(newName)"))
            // A file that cannot be used changes nothing, and says why.
            try Self.write("short", to: directory.file("accepted"))
            guard case .error(let why) = try client.call("DECIDE.REKEY") else {
                Issue.record("a short accepted secret was taken")
                return
            }
            #expect(why.contains("the old ones stay") && why.contains("line 1"))
            #expect((try client.call("INFO", "decide").text ?? "").contains("accepted_secrets:\(oldName),\(newName)"))
            #expect(a.logs.contains("cluster secrets not reloaded, the old ones stay: \(why.dropFirst("ERR cluster secrets not reloaded, the old ones stay: ".count))"))
        }

        @Test func rekeyWithoutASecretSaysSo() async throws {
            let peer = try TestPeer("plain")
            defer { Task { await peer.stop() } }
            guard case .error(let why) = try peer.client().call("DECIDE.REKEY") else {
                Issue.record("REKEY without a secret did not fail")
                return
            }
            #expect(why.contains("without a cluster secret"))
            #expect((try peer.client().call("INFO", "decide").text ?? "").contains("cluster_secret:none"))
        }
    }
}
