import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// WAIT numreplicas timeout, as Redis answers it: the number of peers that acknowledged every
/// write this node committed before the call.
extension SyncNodeTests {
    @Suite struct WaitCommandTests {
        @Test func waitCountsThePeersThatHoldTheWrites() async throws {
            try await withPair { a, b in
                let client = try a.client()
                #expect(try client.call("WAIT", "1", "100") == .integer(1), "nothing written yet: every linked peer counts")
                #expect(try client.call("SET", "k", "v") == ok)
                #expect(try client.call("WAIT", "1", "5000") == .integer(1))
                #expect(try b.client().call("GET", "k") == bulk("v"), "b said it holds it: it does")
                // Two asked for, one peer exists: the timeout answers with what there is.
                #expect(try client.call("SET", "k", "w") == ok)
                let start = Date()
                #expect(try client.call("WAIT", "2", "300") == .integer(1))
                #expect(Date().timeIntervalSince(start) >= 0.25)
                #expect(try client.call("WAIT", "0", "0") == .integer(1))
                #expect(try client.call("WAIT", "one", "0") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("WAIT", "1", "-1") == .error("ERR timeout is negative"))
                // The connection stays usable, and pipelined commands after WAIT keep their order.
                try client.send(raw: "SET p 1\r\nWAIT 1 5000\r\nGET p\r\n")
                #expect(try client.reply() == ok)
                #expect(try client.reply() == .integer(1))
                #expect(try client.reply() == bulk("1"))
            }
        }

        /// A client that leaves while its WAIT waits is let go at once, unanswered, as Redis frees
        /// a blocked client that disconnects. Its reading used to be paused for the wait, so its
        /// leaving went unseen: `WAIT 1 0` (no peer to count) held the connection for a day.
        @Test func aClientThatLeavesDuringAWaitIsClosedAtOnce() async throws {
            try await withPeer("wait-leave") { peer in
                let observer = try peer.client()
                #expect(try observer.call("SET", "k", "v") == ok)
                func connected() throws -> Int? { try observer.connectedClients() }
                let baseline = try #require(try connected())
                var leaving: [TestClient] = []
                for _ in 0..<3 {
                    let client = try peer.client()
                    try client.send("WAIT", "1", "0")
                    leaving.append(client)
                }
                #expect(try await eventually(5) { try connected() == baseline + 3 })
                leaving.removeAll()  // closes them
                #expect(try await eventually(5) { try connected() == baseline }, "the waiting clients that left are still held")
                // One that only ends its input is closed too, with the WAIT unanswered.
                let halfClosed = try peer.client()
                try halfClosed.send(raw: "PING\r\nWAIT 1 0\r\n")
                halfClosed.shutdownWrite()
                let (bytes, closed) = halfClosed.readUntilClosed(timeout: 5)
                #expect(closed && String(decoding: bytes, as: UTF8.self) == "+PONG\r\n")
                // A client that stays gets its answer when the timeout comes, and what it sent
                // behind the WAIT after it.
                try observer.send(raw: "WAIT 1 100\r\nGET k\r\n")
                #expect(try observer.reply() == .integer(0))
                #expect(try observer.reply() == bulk("v"))
            }
        }

        /// Issue 58, scenario 1: a takes writes alone, then b links. WAIT used to answer 1 the
        /// moment the link was up (it waited for the newest *broadcast*, and none had been), while
        /// b held nothing. Now every answer of 1 means b holds all of a's writes; and once b's
        /// catch-up has run, WAIT does answer 1.
        @Test func waitCountsALateLinkedPeerOnlyOnceItHoldsTheEarlierWrites() async throws {
            try await withPeer("a") { a in
                let client = try a.client()
                let keys = (0 ..< 5_000).map { "early\($0)" }
                for chunk in stride(from: 0, to: keys.count, by: 500) {
                    let pairs = keys[chunk ..< chunk + 500].flatMap { [$0, "v"] }
                    #expect(try client.call(bytes: [Array("MSET".utf8)] + pairs.map { Array($0.utf8) }) == ok)
                }
                try await withPeer("b", peers: [a.listenAddress]) { b in
                    #expect(await eventually { a.isConnected(to: "b") })
                    let onB = try b.client()
                    var counted = 0
                    let deadline = Date().addingTimeInterval(20)
                    while counted < 3 && Date() < deadline {
                        guard try client.call("WAIT", "1", "200") == .integer(1) else { continue }
                        counted += 1
                        let held = try onB.call(bytes: [Array("EXISTS".utf8)] + keys.map { Array($0.utf8) })
                        #expect(held == .integer(Int64(keys.count)), "WAIT counted b, which holds \(held) of \(keys.count) earlier writes")
                    }
                    #expect(counted == 3, "WAIT never counted b after its catch-up")
                }
            }
        }
    }
}
