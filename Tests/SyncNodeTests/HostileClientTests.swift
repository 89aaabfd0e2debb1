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

/// Random hostile clients against one password-protected node, from a seeded generator (a
/// failure replays from its seed): strangers with huge headers, too many arguments, garbage
/// and silence; members with pipelines that never read, thousands of patterns, MULTI blocks that
/// never end, half-sent requests and random bytes. Throughout, the node's own account of what
/// its clients hold stays under its bound, and a well-behaved client keeps getting answers.
extension SyncNodeTests {
    @Suite struct HostileClientTests {
        static let clientShareBytes = 4 << 20
        static let clientsTotalBytes = 16 << 20

        /// One hostile act on a new connection; the connection is kept open (it is the act's
        /// point) until the test ends.
        static func act(_ peer: TestPeer, _ random: inout SeededRandom, keep: inout [TestClient],
                        writers: inout [ClientBoundsTests.PipelineWriter], kinds: inout [String]) throws {
            let client = try peer.client(receiveBufferBytes: 64 << 10)
            keep.append(client)
            let stranger = Bool.random(using: &random)
            if !stranger { try client.send("AUTH", ClientBoundsTests.password) }
            switch Int.random(in: 0 ..< 8, using: &random) {
            case 0:  // a huge bulk header, and some of what it declares
                let declared = Int.random(in: 16_385 ... 64 << 20, using: &random)
                try? client.send(raw: "*2\r\n$4\r\nAUTH\r\n$\(declared)\r\n")
                try? client.send(raw: [UInt8](repeating: 0x41, count: Int.random(in: 0 ... 256 << 10, using: &random)))
            case 1:  // too many arguments
                try? client.send(raw: "*\(Int.random(in: 11 ... 2_000_000, using: &random))\r\n")
            case 2:  // random bytes
                let count = Int.random(in: 1 ... 4_096, using: &random)
                try? client.send(raw: (0 ..< count).map { _ in UInt8.random(in: 0 ... 255, using: &random) })
            case 3:  // silence: the authentication deadline (strangers) or nothing (members)
                break
            case 4:  // a pipeline that never reads: 12 MB of replies
                var bytes: [UInt8] = []
                let one = request("ECHO", String(repeating: "e", count: 200))
                for _ in 0 ..< 60_000 { bytes += one }
                writers.append(ClientBoundsTests.PipelineWriter(fd: client.fd, bytes: bytes))
                kinds.append("echo stranger=\(stranger)")
            case 5:  // thousands of patterns, replies unread
                let count = Int.random(in: 500 ... 3_000, using: &random)
                var bytes: [UInt8] = []
                for index in 0 ..< count {
                    let length = Int.random(in: 1 ... 2_000, using: &random)
                    bytes += request("PSUBSCRIBE", "*\(index)" + String(repeating: "a*", count: length / 2))
                }
                writers.append(ClientBoundsTests.PipelineWriter(fd: client.fd, bytes: bytes))
                kinds.append("psubscribe stranger=\(stranger)")
            case 6:  // a MULTI block that never ends
                var bytes = request("MULTI")
                let value = String(repeating: "m", count: Int.random(in: 1 ... 60_000, using: &random))
                for index in 0 ..< Int.random(in: 10 ... 200, using: &random) { bytes += request("SET", "block\(index)", value) }
                writers.append(ClientBoundsTests.PipelineWriter(fd: client.fd, bytes: bytes))
                kinds.append("multi stranger=\(stranger)")
            default:  // half a request: a large argument declared, part of it sent
                let declared = Int.random(in: 1 ... 8 << 20, using: &random)
                try? client.send(raw: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$\(declared)\r\n")
                try? client.send(raw: [UInt8](repeating: 0x42, count: Int.random(in: 0 ... min(declared, 2 << 20), using: &random)))
            }
        }

        @Test(arguments: [UInt64(58), 4_242, 90_001])
        func hostileClientsStayBoundedAndOthersAreServed(seed: UInt64) async throws {
            try await ClientBoundsTests.withPasswordPeer("hostile-\(seed)", configure: {
                $0.adminMaxClientMemoryBytes = "\(Self.clientShareBytes)"
                $0.adminMaxClientsMemoryBytes = "\(Self.clientsTotalBytes)"
                $0.adminOutputStallTimeoutMilliseconds = "500"
                $0.adminAuthTimeoutMilliseconds = "1000"
                $0.adminMaxUnauthenticatedClients = "16"
            }) { peer in
                var random = SeededRandom(seed: seed)
                let member = try peer.client()
                #expect(try member.call("AUTH", ClientBoundsTests.password) == ok)
                // A member subscribed to 2,000 wildcard patterns (within its share), which every
                // change of every round is matched against.
                let watcher = try peer.client()
                #expect(try watcher.call("AUTH", ClientBoundsTests.password) == ok)
                let patterns = (0 ..< 2_000).map { "*\($0)" + String(repeating: "a*", count: 40) + "z" }
                #expect(try ClientBoundsTests.psubscribe(watcher, patterns).error == nil)
                var keep: [TestClient] = []
                var writers: [ClientBoundsTests.PipelineWriter] = []
                var retired: [TestClient] = []
                var kinds: [String] = []
                // What the account may show: the total, and what one client may add between two
                // charges (its read pause and one reply, within its share).
                let bound = Self.clientsTotalBytes + Self.clientShareBytes
                var slowest = 0.0
                for round in 0 ..< 40 {
                    for _ in 0 ..< Int.random(in: 1 ... 3, using: &random) {
                        try Self.act(peer, &random, keep: &keep, writers: &writers, kinds: &kinds)
                    }
                    let started = Date()
                    #expect(try member.call("SET", "member", "\(round)") == ok, "seed \(seed) round \(round)")
                    #expect(try member.call("GET", "member") == bulk("\(round)"), "seed \(seed) round \(round)")
                    slowest = max(slowest, Date().timeIntervalSince(started))
                    let accounting = try ClientBoundsTests.accounting(peer)
                    #expect(accounting.clientsBytes <= bound && accounting.peakClientsBytes <= bound,
                            "seed \(seed) round \(round): \(accounting)")
                    // Keep the open connections within the test's means: shut the oldest down
                    // (their descriptors stay open, and so not reused, while a writer may use them).
                    if keep.count > 48 {
                        for client in keep.prefix(16) { _ = Glibc.shutdown(client.fd, Int32(SHUT_RDWR)) }
                        retired += keep.prefix(16)
                        keep.removeFirst(16)
                    }
                }
                #expect(slowest < 5, "seed \(seed): the member waited \(slowest) s for an answer")
                // The node ends what never ends by itself: every pipeline that does not read is
                // answered or closed, every stranger authenticates or is closed at its deadline.
                #expect(await eventually(30) { writers.allSatisfy { $0.outcome.done } }, "seed \(seed): a writer never ended")
                for (index, writer) in writers.enumerated() where !writer.outcome.done {
                    Issue.record("seed \(seed): writer \(index) (\(kinds[index])) never ended")
                }
                #expect(await eventually(30) { (try? ClientBoundsTests.accounting(peer))?.unauthenticatedClients == 0 },
                        "seed \(seed): a stranger outlived its deadline")
                // The rest (members that hold a block or say nothing) we close; the account goes
                // back to the member's own.
                for client in keep { _ = Glibc.shutdown(client.fd, Int32(SHUT_RDWR)) }
                keep.removeAll()
                retired.removeAll()
                #expect(await eventually(30) {
                    guard let accounting = try? ClientBoundsTests.accounting(peer) else { return false }
                    return accounting.clientsBytes < 4 << 20 && accounting.unauthenticatedClients == 0 && accounting.openClients == 2
                }, "seed \(seed): \(String(describing: try? ClientBoundsTests.accounting(peer)))")
                #expect(try member.call("PING") == .simple("PONG"))
                #expect(try ClientBoundsTests.accounting(peer).notificationMatchSteps > 0, "seed \(seed): no pattern was matched")
                #expect(try ClientBoundsTests.accounting(peer).evictedClients > 0, "seed \(seed): no bound was ever reached")
            }
        }
    }
}
