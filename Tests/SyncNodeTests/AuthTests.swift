import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import SyncNodeServer
@testable import syncnode

/// Passwords (`--admin-password-file`), the loopback rule for the client endpoint, and the
/// Unix socket.
extension SyncNodeTests {
    @Suite struct AuthTests {
        static let password = "correct-horse-battery-staple"

        /// A password file of mode 600, read as `syncnode run` reads it.
        static func passwordFile(in directory: TemporaryDirectory, text: String = password + "\n",
                                 mode: mode_t = 0o600) throws -> String {
            let path = directory.file("admin-password")
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            chmod(path, mode)
            return path
        }

        @Test func aPasswordIsRequiredBeforeAnyCommand() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let path = try Self.passwordFile(in: directory)
            let secret = try PeerFiles.readSecret(path, what: "admin password")
            #expect(secret == Array(Self.password.utf8), "trailing whitespace is not part of the password")
            try await withPeer("auth", adminPassword: secret, configure: { $0.adminPasswordFile = path }) { peer in
                let client = try peer.client()
                for command in [["GET", "k"], ["SET", "k", "v"], ["PING"], ["SUBSCRIBE", "x"], ["CLIENT", "ID"], ["INFO"], ["DECIDE.STATUS"]] {
                    #expect(try client.call(bytes: command.map { Array($0.utf8) }) == .error("NOAUTH Authentication required."),
                            "\(command) before AUTH")
                }
                #expect(peer.node.entry(for: StateKey(name: "k")) == nil)
                #expect(try client.call("AUTH", "wrong-password") == .error("WRONGPASS invalid username-password pair or user is disabled."))
                #expect(try client.call("AUTH", "default", "wrong-password").errorText?.hasPrefix("WRONGPASS") == true)
                #expect(try client.call("AUTH", "admin", Self.password).errorText?.hasPrefix("WRONGPASS") == true, "only the default user exists")
                #expect(try client.call("AUTH", String(Self.password.dropLast())).errorText?.hasPrefix("WRONGPASS") == true)
                #expect(try client.call("AUTH", Self.password + "x").errorText?.hasPrefix("WRONGPASS") == true)
                // The password followed by anything is wrong, whatever the length difference
                // (256 more bytes differ from the password's length only above the low byte).
                for extra in [1, 255, 256, 512, 4096] {
                    let longer = try client.call("AUTH", Self.password + String(repeating: "x", count: extra))
                    #expect(longer.errorText?.hasPrefix("WRONGPASS") == true, "the password and \(extra) more bytes: \(longer)")
                }
                #expect(try client.call("AUTH", "").errorText?.hasPrefix("WRONGPASS") == true)
                #expect(try client.call("GET", "k") == .error("NOAUTH Authentication required."))
                #expect(peer.logs.contains("client failed to authenticate"))
                #expect(try client.call("AUTH", Self.password) == ok)
                #expect(try client.call("SET", "k", "v") == ok)
                #expect(try client.call("GET", "k") == bulk("v"))
                // RESET forgets the authentication.
                #expect(try client.call("RESET") == .simple("RESET"))
                #expect(try client.call("GET", "k") == .error("NOAUTH Authentication required."))

                let named = try peer.client()
                #expect(try named.call("AUTH", "default", Self.password) == ok)
                #expect(try named.call("GET", "k") == bulk("v"))

                let hello = try peer.client()
                #expect(try hello.call("HELLO", "3").errorText?.hasPrefix("NOAUTH HELLO must be called with the client already authenticated") == true)
                #expect(try hello.call("HELLO", "3", "AUTH", "default", "nope").errorText?.hasPrefix("WRONGPASS") == true)
                let reply = try hello.call("HELLO", "3", "AUTH", "default", Self.password, "SETNAME", "app")
                guard case .map = reply else { throw TestFailure("HELLO 3 AUTH answered \(reply)") }
                try hello.send("GET", "k")
                #expect(try hello.rawReply().bytes == Array("$1\r\nv\r\n".utf8))
                try hello.send("GET", "missing")
                #expect(try hello.rawReply().bytes == Array("_\r\n".utf8), "not RESP3 after HELLO 3 AUTH")
                #expect(try hello.call("CLIENT", "GETNAME") == bulk("app"))

                // QUIT is allowed before AUTH.
                let quitter = try peer.client()
                #expect(try quitter.call("QUIT") == ok)
                #expect(quitter.readUntilClosed(timeout: 5).closed)
            }
        }

        @Test func authWithoutAConfiguredPasswordIsAnError() async throws {
            try await withPeer("open") { peer in
                let client = try peer.client()
                #expect(try client.call("AUTH", "anything").errorText?.hasPrefix("ERR AUTH <password> called without any password configured") == true)
                #expect(try client.call("GET", "k") == .null)
            }
        }

        @Test func passwordFilesMustBePrivateAndLongEnough() throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let open = try Self.passwordFile(in: directory, mode: 0o644)
            #expect(throws: PeerFiles.Invalid.self) { try PeerFiles.readSecret(open, what: "admin password") }
            let short = try Self.passwordFile(in: directory, text: "short\n")
            #expect(throws: PeerFiles.Invalid.self) { try PeerFiles.readSecret(short, what: "admin password") }
        }

        /// A client endpoint on a non-loopback address needs a password; with one it starts.
        @Test func aNonLoopbackEndpointNeedsAPassword() async throws {
            do {
                let peer = try TestPeer("exposed") { $0.admin = "0.0.0.0:0" }
                await peer.stop()
                Issue.record("a peer listened for clients on 0.0.0.0 without a password")
            } catch {
                #expect("\(error)".contains("pass --admin-password-file"), "\(error)")
                #expect("\(error)".contains("0.0.0.0:0"), "\(error)")
            }
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let path = try Self.passwordFile(in: directory)
            let secret = try PeerFiles.readSecret(path, what: "admin password")
            try await withPeer("exposed", adminPassword: secret, configure: {
                $0.admin = "0.0.0.0:0"
                $0.adminPasswordFile = path
            }) { peer in
                #expect(peer.admin.hasPrefix("0.0.0.0:"), "\(peer.admin)")
                let client = try peer.client()  // dialled on 127.0.0.1
                #expect(try client.call("GET", "k") == .error("NOAUTH Authentication required."))
                #expect(try client.call("AUTH", Self.password) == ok)
                #expect(try client.call("PING") == .simple("PONG"))
            }
        }

        /// A peer whose Unix socket cannot be made fails to start, and closes the TCP client
        /// endpoint it had already opened (its server and the service form a cycle that only
        /// `shutdown` breaks).
        @Test func aPeerThatFailsToStartClosesItsClientEndpoint() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let notASocket = directory.file("plain-file")
            try Data("x".utf8).write(to: URL(fileURLWithPath: notASocket))
            let port = try Self.freeLoopbackPort()
            do {
                let peer = try TestPeer("half-started") {
                    $0.admin = "127.0.0.1:\(port)"
                    $0.adminSocket = notASocket
                }
                await peer.stop()
                Issue.record("a peer started with a regular file where its Unix socket goes")
            } catch {
                #expect("\(error)".contains("not a socket"), "\(error)")
            }
            #expect(throws: TestFailure.self) { _ = try TestClient("127.0.0.1:\(port)") }
        }

        /// A loopback TCP port nothing listens on now, below the kernel's ephemeral range
        /// (32768 and up here), so that no other test's `:0` listener is handed it meanwhile.
        static func freeLoopbackPort() throws -> UInt16 {
            for port in UInt16.random(in: 20_000 ..< 30_000) ..< 32_000 {
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                defer { Glibc.close(fd) }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = port.bigEndian
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                let status = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                if status == 0 { return port }
            }
            throw TestFailure("no free loopback port in 20000..<32000")
        }

        @Test func aUnixSocketAnswersAndIsPrivate() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let socketPath = directory.file("syncnode.sock")
            try await withPeer("unix", configure: {
                $0.admin = "off"
                $0.adminSocket = socketPath
            }) { peer in
                #expect(peer.process.adminAddresses == ["unix:" + socketPath])
                var info = stat()
                #expect(lstat(socketPath, &info) == 0)
                #expect((info.st_mode & S_IFMT) == S_IFSOCK)
                #expect(info.st_mode & 0o777 == 0o600, "socket mode \(String(info.st_mode & 0o777, radix: 8))")
                let client = try TestClient("unix:" + socketPath)
                #expect(try client.call("SET", "k", "over unix") == ok)
                #expect(try client.call("GET", "k") == bulk("over unix"))
                #expect(try client.call("CLIENT", "INFO").text?.contains("addr=unix:\(socketPath)") == true)
                // syncnode's own CLI client speaks to it too.
                let cli = try RESPClient(address: "unix:" + socketPath, replyTimeoutSeconds: 5, password: nil)
                #expect(try cli.call([Array("GET".utf8), Array("k".utf8)]) == bulk("over unix"))
            }
            // The socket file is removed at stop.
            #expect(!FileManager.default.fileExists(atPath: socketPath))
        }
    }
}
