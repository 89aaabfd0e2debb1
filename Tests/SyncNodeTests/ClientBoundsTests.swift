import Decide
import DecideCore
import DecideRESP
import DecideUV
import Foundation
import Logging
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import SyncNodeServer
@testable import syncnode

/// What one client may cost and for how long (docs/operations.md, "Limits"): strangers' small
/// requests, the authentication deadline and cap, the idle timeout, the per-client memory share
/// and the clients' total, and the pipeline written whole before its replies are read.
extension SyncNodeTests {
    @Suite struct ClientBoundsTests {
        static let password = AuthTests.password

        /// Runs `body` with a peer that requires `password`, its flags adjusted by `configure`.
        static func withPasswordPeer(_ id: String, configure: @escaping (inout RunSettings.Flags) -> Void = { _ in },
                                     _ body: (TestPeer) async throws -> Void) async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let path = try AuthTests.passwordFile(in: directory)
            try await withPeer(id, adminPassword: Array(password.utf8), configure: {
                $0.adminPasswordFile = path
                configure(&$0)
            }, body)
        }

        /// The peer's client accounting, read on its loop.
        static func accounting(_ peer: TestPeer) throws -> RESPService.ClientAccounting {
            guard let accounting = peer.process.service.clientAccounting() else { throw TestFailure("the endpoint is shut down") }
            return accounting
        }

        @Test func aStrangersHugeBulkIsRefusedFromItsHeader() async throws {
            try await Self.withPasswordPeer("stranger-bulk") { peer in
                // Sixteen strangers each declare a 64 MiB password and start sending it: each is
                // refused at the header, before its bytes, and closed.
                let filler = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
                var clients: [TestClient] = []
                for _ in 0 ..< 16 {
                    let client = try peer.client()
                    try client.send(raw: "*2\r\n$4\r\nAUTH\r\n$67108864\r\n")
                    try? client.send(raw: filler)  // the server may have closed already
                    clients.append(client)
                }
                for client in clients {
                    let (bytes, closed) = client.readUntilClosed(timeout: 10)
                    #expect(String(decoding: bytes, as: UTF8.self) == "-ERR Protocol error: invalid bulk length\r\n")
                    #expect(closed)
                }
                // Eleven arguments are refused from the count, before any of them.
                let counted = try peer.client()
                try counted.send(raw: "*11\r\n")
                let (text, closed) = counted.readUntilClosed(timeout: 10)
                #expect(String(decoding: text, as: UTF8.self) == "-ERR Protocol error: invalid multibulk length\r\n" && closed)
                // What they made the node hold, by its own count: at most one read each, far
                // from the 16 × 64 MiB they declared.
                let accounting = try Self.accounting(peer)
                #expect(accounting.peakClientsBytes < 4 << 20, "\(accounting)")
                #expect(await eventually { (try? Self.accounting(peer))?.clientsBytes == 0 })
                // Once authenticated, the same client may send a large argument.
                let client = try peer.client()
                #expect(try client.call("AUTH", Self.password) == ok)
                let value = String(repeating: "v", count: 64 << 10)
                let setReply = try client.call("SET", "big", value)
                #expect(setReply == ok, "\(setReply)")
                #expect(try client.call("GET", "big") == bulk(value))
                // RESET makes it a stranger again, with a stranger's limits.
                #expect(try client.call("RESET") == .simple("RESET"))
                try client.send(raw: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16385\r\n")
                let (after, closedAfter) = client.readUntilClosed(timeout: 10)
                #expect(String(decoding: after, as: UTF8.self) == "-ERR Protocol error: invalid bulk length\r\n" && closedAfter)
            }
        }

        @Test func aSilentStrangerIsClosedAtTheAuthenticationDeadline() async throws {
            try await Self.withPasswordPeer("auth-deadline", configure: { $0.adminAuthTimeoutMilliseconds = "300" }) { peer in
                let started = Date()
                let silent = try peer.client()
                let member = try peer.client()
                #expect(try member.call("AUTH", Self.password) == ok)
                let (bytes, closed) = silent.readUntilClosed(timeout: 10)
                let elapsed = Date().timeIntervalSince(started)
                #expect(closed, "the silent stranger stayed connected")
                #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("-ERR authentication timeout"), "\(String(decoding: bytes, as: UTF8.self))")
                #expect(elapsed >= 0.28, "closed before its deadline: \(elapsed) s")
                #expect(peer.logs.contains("client closed: it did not authenticate in time"))
                // The client that authenticated in time stays.
                #expect(try member.call("PING") == .simple("PONG"))
            }
        }

        @Test func strangersHaveTheirOwnCap() async throws {
            try await Self.withPasswordPeer("stranger-cap", configure: { $0.adminMaxUnauthenticatedClients = "3" }) { peer in
                var strangers: [TestClient] = []
                for _ in 0 ..< 3 {
                    let client = try peer.client()
                    #expect(try client.call("PING") == .error("NOAUTH Authentication required."))
                    strangers.append(client)
                }
                let fourth = try peer.client()
                let (bytes, closed) = fourth.readUntilClosed(timeout: 10)
                #expect(String(decoding: bytes, as: UTF8.self) == "-ERR max number of unauthenticated clients reached\r\n" && closed)
                // One authenticates: its place is free for another stranger.
                #expect(try strangers[0].call("AUTH", Self.password) == ok)
                let fifth = try peer.client()
                #expect(try fifth.call("PING") == .error("NOAUTH Authentication required."))
                #expect(try Self.accounting(peer).unauthenticatedClients == 3)
                // Clients that authenticated are not counted against it.
                #expect(try strangers[0].call("PING") == .simple("PONG"))
            }
        }

        @Test func anIdleClientIsClosedButASubscriberIsNot() async throws {
            try await withPeer("idle", configure: { $0.adminIdleTimeoutMilliseconds = "300" }) { peer in
                let subscriber = try peer.client()
                #expect(try subscriber.call("SUBSCRIBE", "news").elements?.count == 3)
                let idle = try peer.client()
                #expect(try idle.call("PING") == .simple("PONG"))
                let (_, closed) = idle.readUntilClosed(timeout: 10)
                #expect(closed, "the idle client stayed connected")
                #expect(peer.logs.contains("client closed: idle"))
                #expect(try subscriber.call("PING") == bulks("pong", ""))
            }
        }

        @Test func aClientOverItsMemoryShareIsToldAndClosed() async throws {
            try await withPeer("share") { peer in
                let endpoint = try CustomEndpoint(on: peer) { $0.maxClientMemoryBytes = 1 << 20 }
                defer { endpoint.stop() }
                // A request larger than the share is refused as its bytes arrive.
                let client = try endpoint.client()
                let value = [UInt8](repeating: UInt8(ascii: "v"), count: 2 << 20)
                try? client.send(bytes: [Array("SET".utf8), Array("k".utf8), value])
                let (bytes, closed) = client.readUntilClosed(timeout: 10)
                #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("-ERR client memory limit reached"), "\(String(decoding: bytes.prefix(200), as: UTF8.self))")
                #expect(closed)
                #expect(peer.logs.contains("client closed: it held more memory than its share"))
                // Another client goes on.
                #expect(try endpoint.client().call("PING") == .simple("PONG"))
                #expect(await eventually { endpoint.service.clientAccounting()?.clientsBytes == 0 })
            }
        }

        @Test func theLargestClientsGoFirstPastTheTotal() async throws {
            try await withPeer("total") { peer in
                let endpoint = try CustomEndpoint(on: peer) {
                    $0.maxClientMemoryBytes = 8 << 20
                    $0.maxClientsMemoryBytes = 3 << 20
                }
                defer { endpoint.stop() }
                let small = try endpoint.client()
                #expect(try small.call("PING") == .simple("PONG"))
                // A MULTI block charged for what it keeps: 4 MiB of arguments pass the total.
                let large = try endpoint.client()
                #expect(try large.call("MULTI") == ok)
                let value = String(repeating: "v", count: 1 << 20)
                var refused = false
                for index in 0 ..< 4 {
                    guard let reply = try? large.call("SET", "k\(index)", value) else { refused = true; break }
                    if reply != .simple("QUEUED") { refused = true; break }
                }
                #expect(refused, "a block past the clients' total was kept")
                #expect(large.readUntilClosed(timeout: 10).closed)
                #expect(peer.logs.contains("client closed: clients together held more memory than maxClientsMemoryBytes"))
                #expect(try small.call("PING") == .simple("PONG"), "the small client was closed instead of the large one")
                let accounting = endpoint.service.clientAccounting()
                #expect((accounting?.peakClientsBytes ?? .max) < 6 << 20, "\(String(describing: accounting))")
            }
        }

        /// Writes `bytes` to `fd` on a thread of its own, as a client that writes a whole
        /// pipeline before it reads a reply; `outcome` says when it ended and whether the
        /// server cut it short.
        final class PipelineWriter: @unchecked Sendable {
            private let state = Mutex<(done: Bool, failed: Bool)>((false, false))

            init(fd: Int32, bytes: [UInt8]) {
                Thread.detachNewThread { [self] in
                    var offset = 0
                    var failed = false
                    while offset < bytes.count {
                        let count = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, min($0.count, 1 << 20), Int32(MSG_NOSIGNAL)) }
                        if count < 0 && errno == EINTR { continue }
                        guard count > 0 else {
                            failed = true
                            break
                        }
                        offset += count
                    }
                    state.withLock { $0 = (true, failed) }
                }
            }

            var outcome: (done: Bool, failed: Bool) { state.withLock { $0 } }
        }

        /// Reads from `fd` until `count` bytes came, the server closed, or `seconds` passed.
        static func read(_ fd: Int32, count: Int, seconds: Double) -> (bytes: [UInt8], closed: Bool) {
            var received: [UInt8] = []
            received.reserveCapacity(count)
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            let deadline = Date().addingTimeInterval(seconds)
            while received.count < count, Date() < deadline {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 200) > 0 else { continue }
                let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if got < 0 && errno == EINTR { continue }
                guard got > 0 else { return (received, true) }
                received += chunk[0 ..< got]
            }
            return (received, false)
        }

        @Test func aPipelineWrittenWholeBeforeItsRepliesIsAnswered() async throws {
            try await withPeer("pipeline") { peer in
                // 2,000,000 SETs: 10 MB of replies, more than the kernel's buffers (4 MB to send,
                // the 64 KiB asked to receive) and the old 4 MiB read pause together hold.
                let commands = 2_000_000
                var bytes: [UInt8] = []
                let one = request("SET", "pipelined", "v")
                bytes.reserveCapacity(one.count * commands)
                for _ in 0 ..< commands { bytes += one }
                let client = try peer.client(receiveBufferBytes: 64 << 10)
                let writer = PipelineWriter(fd: client.fd, bytes: bytes)
                // The client reads nothing until it wrote everything (redis-py's pipeline()).
                #expect(await eventually(90) { writer.outcome.done }, "the writer was never let finish: a deadlock")
                #expect(!writer.outcome.failed)
                let expected = 5 * commands
                let (replies, _) = Self.read(client.fd, count: expected, seconds: 60)
                #expect(replies.count == expected)
                #expect(replies.prefix(5) == ArraySlice("+OK\r\n".utf8))
                #expect(try client.call("PING") == .simple("PONG"))
            }
        }

        @Test func aPipelineThatNeverReadsIsToldAndClosed() async throws {
            try await withPeer("never-reads") { peer in
                let endpoint = try CustomEndpoint(on: peer, server: { $0.pauseReadingAboveBytes = 256 << 10 }) {
                    $0.outputStallTimeoutMilliseconds = 500
                }
                defer { endpoint.stop() }
                let payload = String(repeating: "p", count: 200)
                var bytes: [UInt8] = []
                let one = request("PING", payload)
                for _ in 0 ..< 200_000 { bytes += one }  // 42 MB of replies
                let client = try endpoint.client(receiveBufferBytes: 64 << 10)
                let started = Date()
                let writer = PipelineWriter(fd: client.fd, bytes: bytes)
                #expect(await eventually(60) { writer.outcome.done }, "the client was neither answered nor closed")
                #expect(writer.outcome.failed, "the server read every request of a client that read no reply")
                #expect(Date().timeIntervalSince(started) < 30)
                #expect(peer.logs.contains("client closed: it stopped reading its replies"))
                #expect(await eventually { endpoint.service.clientAccounting()?.clientsBytes == 0 })
                #expect(try endpoint.client().call("PING") == .simple("PONG"))
                _ = Glibc.shutdown(client.fd, Int32(SHUT_RDWR))
            }
        }

        /// PSUBSCRIBE `patterns` in commands of 100; the replies of those that were made and the
        /// error, if any, that stopped one.
        static func psubscribe(_ client: TestClient, _ patterns: [String]) throws -> (made: Int, error: String?) {
            var made = 0
            for start in stride(from: 0, to: patterns.count, by: 100) {
                let batch = Array(patterns[start ..< min(start + 100, patterns.count)])
                try client.send(bytes: [Array("PSUBSCRIBE".utf8)] + batch.map { Array($0.utf8) })
                for _ in batch {
                    let reply = try client.reply()
                    if let error = reply.errorText { return (made, error) }
                    made += 1
                }
            }
            return (made, nil)
        }

        @Test func patternsAreChargedByTheirBytes() async throws {
            try await withPeer("pattern-bytes") { peer in
                let endpoint = try CustomEndpoint(on: peer) { $0.maxClientMemoryBytes = 16 << 20 }
                defer { endpoint.stop() }
                let client = try endpoint.client()
                // One name is bounded by itself.
                let long = try client.call("PSUBSCRIBE", String(repeating: "p", count: 60_000))
                #expect(long.errorText?.contains("maxSubscriptionNameBytes") == true, "\(long)")
                // 2,000 patterns of 4 KB: charged by their bytes, refused past the share.
                let patterns = (0 ..< 2_000).map { "\($0)*" + String(repeating: "x", count: 4_000) }
                let (made, error) = try Self.psubscribe(client, patterns)
                #expect(error?.contains("memory share") == true, "\(String(describing: error))")
                #expect(made > 100 && made < 2_000, "\(made) made")
                let accounting = endpoint.service.clientAccounting()
                #expect((accounting?.clientsBytes ?? .max) <= 16 << 20, "\(String(describing: accounting))")
                #expect((accounting?.clientsBytes ?? 0) >= made * 8_000, "patterns not charged by their bytes: \(String(describing: accounting))")
                // Unsubscribing gives it back.
                try client.send("PUNSUBSCRIBE")
                for _ in 0 ..< made { _ = try client.reply() }
                #expect(await eventually { (endpoint.service.clientAccounting()?.clientsBytes ?? .max) < 64 << 10 })
            }
        }

        @Test func manyPatternsDoNotHoldOtherClients() async throws {
            try await withPeer("pattern-work") { peer in
                let subscriber = try peer.client()
                // 2,000 patterns that each cost a change of a long key work (a run after a `*`
                // retried at each position), none matching, then one that does.
                let patterns = (0 ..< 2_000).map { "*" + String(repeating: "a", count: 40 + $0 % 20) + "b\($0)" }
                #expect(try Self.psubscribe(subscriber, patterns + ["__keyspace@0__:a*"]).error == nil)
                let before = try Self.accounting(peer)
                let writer = try peer.client()
                let other = try peer.client()
                let key = String(repeating: "a", count: 200)
                #expect(try writer.call("SET", key, "v") == ok)
                let started = Date()
                #expect(try other.call("PING") == .simple("PONG"))
                let latency = Date().timeIntervalSince(started)
                // The matching one is told, after all the work.
                let message = try subscriber.reply(timeout: 60)
                #expect(message.elements?.first == bulk("pmessage"), "\(message)")
                let after = try Self.accounting(peer)
                let work = after.notificationMatchSteps - before.notificationMatchSteps
                #expect(work > 5_000_000, "the case is not the heavy one it means to be: \(work) steps")
                // No loop turn did more than its bound and one candidate's match (at most
                // channel × pattern bytes).
                #expect(after.busiestNotificationTurnSteps <= 1_000_000 + 300 * 300,
                        "a turn took \(after.busiestNotificationTurnSteps) steps")
                // Wall time only as a second check (the steps above are the bound): 45-58 ms measured,
                // 0.63-0.90 s with the bound off.
                #expect(latency < 0.5, "another client's PING waited \(latency) s")
            }
        }

        @Test func aPipelineThatReadsAsItWritesIsNeverTakenForStalled() async throws {
            try await withPeer("reads-as-it-writes") { peer in
                let endpoint = try CustomEndpoint(on: peer, server: { $0.pauseReadingAboveBytes = 256 << 10 }) {
                    $0.outputStallTimeoutMilliseconds = 300
                }
                defer { endpoint.stop() }
                let payload = String(repeating: "p", count: 200)
                let one = request("PING", payload)
                var bytes: [UInt8] = []
                let commands = 500_000  // about 100 MB each way: seconds, against a 300 ms deadline
                for _ in 0 ..< commands { bytes += one }
                let client = try endpoint.client(receiveBufferBytes: 64 << 10)
                let writer = PipelineWriter(fd: client.fd, bytes: bytes)
                // Its replies move between half the pause and the pause for far longer than the
                // stall deadline, while it reads them: it is served to the end.
                let expected = commands * (payload.utf8.count + 8)  // $200\r\n, the payload, \r\n
                let (replies, closed) = Self.read(client.fd, count: expected, seconds: 90)
                #expect(!closed && replies.count == expected, "\(replies.count) of \(expected) bytes, closed: \(closed)")
                #expect(await eventually { writer.outcome.done })
                #expect(!writer.outcome.failed)
                #expect(!peer.logs.contains("client closed: it stopped reading its replies"))
            }
        }

        @Test func logLinesAboutClientsDoNotFlood() {
            let capture = LogCapture()
            let logger = capture.logger("throttle")
            var throttle = LogThrottle()
            for _ in 0 ..< 25 { throttle.log(logger, .warning, "refused", metadata: [:], now: 1_000) }
            #expect(capture.all.count == 10)
            throttle.log(logger, .warning, "other", metadata: [:], now: 1_500)
            #expect(capture.all.count == 11, "each message has its own window")
            throttle.log(logger, .warning, "refused", metadata: [:], now: 2_000)
            #expect(capture.all.count == 12)
            #expect(capture.all.last?.metadata["suppressed"] == "15")
        }
    }
}
