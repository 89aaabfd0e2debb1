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

/// Bytes that are not valid requests, on raw sockets: each gets Redis's protocol error (or a
/// plain close, where Redis closes silently), never a crash, and the peer goes on answering.
/// And pipelining: many requests in one write, answered in order.
extension SyncNodeTests {
    @Suite struct MalformedInputTests {
        /// Sends `bytes` on a new connection; returns what came back before the server closed.
        static func exchange(_ peer: TestPeer, _ bytes: [UInt8], halfClose: Bool = false) throws -> (text: String, closed: Bool) {
            let client = try peer.client()
            try client.send(raw: bytes)
            if halfClose { client.shutdownWrite() }
            let (received, closed) = client.readUntilClosed(timeout: 10)
            return (String(decoding: received, as: UTF8.self), closed)
        }

        /// The peer still answers a new connection.
        static func stillServes(_ peer: TestPeer) throws -> Bool {
            try peer.client().call("PING") == .simple("PONG")
        }

        @Test func protocolErrorsAreAnsweredAndTheConnectionClosed() async throws {
            try await withPeer("malformed") { peer in
                let digits = String(repeating: "9", count: 70 * 1024)
                let cases: [(String, [UInt8], String)] = [
                    ("multibulk length not a number", Array("*abc\r\n".utf8), "-ERR Protocol error: invalid multibulk length\r\n"),
                    ("multibulk length over the limit", Array("*1048577\r\n".utf8), "-ERR Protocol error: invalid multibulk length\r\n"),
                    ("multibulk length far over", Array("*99999999999999999999\r\n".utf8), "-ERR Protocol error: invalid multibulk length\r\n"),
                    ("bulk length over the limit", Array("*1\r\n$67108865\r\n".utf8), "-ERR Protocol error: invalid bulk length\r\n"),
                    ("negative bulk length", Array("*1\r\n$-1\r\n".utf8), "-ERR Protocol error: invalid bulk length\r\n"),
                    ("bulk length not a number", Array("*1\r\n$x\r\n".utf8), "-ERR Protocol error: invalid bulk length\r\n"),
                    ("no $ before an argument", Array("*1\r\nGET\r\n".utf8), "-ERR Protocol error: expected '$', got 'G'\r\n"),
                    ("bulk data without CRLF", Array("*1\r\n$4\r\nPINGxx".utf8), "-ERR Protocol error: expected CRLF after bulk data\r\n"),
                    ("too long inline line", Array(repeating: UInt8(ascii: "a"), count: 64 * 1024 + 1),
                     "-ERR Protocol error: too big inline request\r\n"),
                    ("too long count line", Array(("*" + digits).utf8), "-ERR Protocol error: too big mbulk count string\r\n"),
                    ("too long bulk header", Array(("*1\r\n$" + digits).utf8), "-ERR Protocol error: too big bulk count string\r\n"),
                    ("unbalanced quotes", Array("SET k \"open\r\n".utf8), "-ERR Protocol error: unbalanced quotes in request\r\n"),
                ]
                for (name, bytes, expected) in cases {
                    let (text, closed) = try Self.exchange(peer, bytes)
                    #expect(text == expected, "\(name): \(text.debugDescription)")
                    #expect(closed, "\(name): the connection stayed open")
                    #expect(try Self.stillServes(peer), "\(name): the peer stopped answering")
                }
                // Requests before the bad one are answered first, in order.
                let (text, closed) = try Self.exchange(peer, Array("PING\r\n*1\r\n$4\r\nPING\r\n*x\r\nPING\r\n".utf8))
                #expect(text == "+PONG\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n" && closed, "\(text.debugDescription)")
                // SETs read before it too (they are committed together, after the read).
                let (sets, setsClosed) = try Self.exchange(peer, Array("SET a 1\r\nSET b 2\r\n*1\r\n$-5\r\n".utf8))
                #expect(sets == "+OK\r\n+OK\r\n-ERR Protocol error: invalid bulk length\r\n" && setsClosed, "\(sets.debugDescription)")
                #expect(peer.logs.contains("client sent a malformed request; closing it"))
            }
        }

        @Test func halfAFrameThenCloseGetsNoReply() async throws {
            try await withPeer("half") { peer in
                // Half a frame, then EOF: closed without a reply, as Redis does.
                for partial in ["*2\r\n$3\r\nGET\r\n$5\r\nab", "*3\r\n", "*1\r\n$4\r\nPI", "GET k"] {
                    let (text, closed) = try Self.exchange(peer, Array(partial.utf8), halfClose: true)
                    #expect(text.isEmpty && closed, "\(partial.debugDescription): \(text.debugDescription), closed \(closed)")
                }
                // A whole request then EOF: answered, then closed.
                let (text, closed) = try Self.exchange(peer, Array("*1\r\n$4\r\nPING\r\nECHO hi\r\n".utf8), halfClose: true)
                #expect(text == "+PONG\r\n$2\r\nhi\r\n" && closed, "\(text.debugDescription)")
                // Half a frame and a full close (the socket is gone): nothing breaks.
                for _ in 0 ..< 20 {
                    let client = try peer.client()
                    try client.send(raw: Array("*2\r\n$3\r\nSET\r\n$100\r\nabc".utf8))
                }
                #expect(try Self.stillServes(peer))
            }
        }

        /// Seeded random bytes: every reply is an error, the connection ends, the peer survives.
        @Test func binaryGarbageNeverCrashesThePeer() async throws {
            try await withPeer("garbage") { peer in
                var random = SeededRandom(seed: 42)
                for round in 0 ..< 60 {
                    var bytes = (0 ..< Int.random(in: 1 ... 4096, using: &random)).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
                    // A third start like a multibulk, to reach its parser too.
                    if round % 3 == 0 { bytes.insert(contentsOf: Array("*3\r\n".utf8), at: 0) }
                    let client = try peer.client()
                    try client.send(raw: bytes)
                    client.shutdownWrite()
                    var replies: [RESPValue] = []
                    while let reply = try? client.reply(timeout: 10) { replies.append(reply) }
                    #expect(client.closed, "round \(round): the connection was not closed")
                    let answered = replies.filter { !$0.isError }
                    #expect(answered.isEmpty, "round \(round): garbage was answered \(answered)")
                }
                #expect(try Self.stillServes(peer))
                #expect(peer.node.stateSummary.entryCount == 0, "garbage wrote a key")
            }
        }

        /// Far more replies than the server buffers per client (4 MiB) are asked for in one
        /// pipelined stream, then EOF: reading pauses while they wait, every reply comes back in
        /// order, and the connection closes once all are written.
        @Test func pipelinedRepliesPastTheOutputBoundComeBackInOrder() async throws {
            try await withPeer("backpressure") { peer in
                let setup = try peer.client()
                let value = String(repeating: "x", count: 32 << 10)
                #expect(try setup.call("SET", "big", value) == ok)
                let client = try peer.client()
                var requests: [UInt8] = []
                for index in 0 ..< 1_000 {  // 32 MiB of replies
                    requests += request("GET", "big")
                    requests += request("ECHO", "\(index)")
                }
                let sender = Thread { [fd = client.fd, requests] in
                    var offset = 0
                    while offset < requests.count {
                        let written = requests[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        guard written > 0 else { return }
                        offset += written
                    }
                    _ = shutdown(fd, Int32(SHUT_WR))
                }
                sender.start()
                for index in 0 ..< 1_000 {
                    let big = try client.reply(timeout: 20)
                    let mark = try client.reply(timeout: 20)
                    guard big == bulk(value), mark == bulk("\(index)") else {
                        Issue.record("reply \(index): \(mark), value \(big == bulk(value) ? "right" : "wrong")")
                        return
                    }
                }
                let rest = client.readUntilClosed(timeout: 10)
                #expect(rest.closed && rest.bytes.isEmpty, "after the last reply: \(rest.bytes.count) bytes, closed \(rest.closed)")
            }
        }

        /// 10,000 SETs in one write get 10,000 `+OK` in order; then 10,000 GETs read them back in order.
        @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
            try await withPeer("pipeline") { peer in
                let client = try peer.client()
                var sets: [UInt8] = []
                var gets: [UInt8] = []
                for index in 0 ..< 10_000 {
                    sets += request("SET", "p:\(index % 1_000)", "v\(index)")
                    gets += request("GET", "p:\(index % 1_000)")
                    if index % 1_000 == 999 { gets += request("ECHO", "mark \(index)") }
                }
                try client.send(raw: sets)
                for index in 0 ..< 10_000 {
                    let reply = try client.reply()
                    guard reply == ok else {
                        Issue.record("SET \(index) answered \(reply)")
                        return
                    }
                }
                try client.send(raw: gets)
                for index in 0 ..< 10_000 {
                    let reply = try client.reply()
                    guard reply == bulk("v\(9_000 + index % 1_000)") else {
                        Issue.record("GET \(index) answered \(reply)")
                        return
                    }
                    if index % 1_000 == 999 { #expect(try client.reply() == bulk("mark \(index)")) }
                }
                #expect(!client.hasData(within: 0.05), "more replies than requests")
                // Inline requests pipelined with multibulk ones, in one write.
                try client.send(raw: Array("PING\r\n".utf8) + request("ECHO", "b") + Array("ECHO c\n\r\nDBSIZE\r\n".utf8))
                #expect(try client.reply() == .simple("PONG"))
                #expect(try client.reply() == bulk("b"))
                #expect(try client.reply() == bulk("c"))
                #expect(try client.reply() == .integer(1_000))
            }
        }
    }
}
