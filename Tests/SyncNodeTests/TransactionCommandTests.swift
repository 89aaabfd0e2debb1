import Decide
import DecideCore
import DecideRESP
import DecideTesting
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// MULTI … EXEC through a real socket: the block is one decision (one version on every key, on
/// the replica too), each command sees the writes of those before it, errors while queuing
/// abort the block, errors in a command's arguments answer in its place, and the block is
/// bounded like one request.
extension SyncNodeTests {
    @Suite struct TransactionCommandTests {
        @Test(arguments: [2, 3]) func aBlockIsOneDecisionAndEachCommandSeesTheOnesBefore(protocolVersion: Int) async throws {
            try await withPair { a, b in
                let client = try KeyCommandTests.client(a, protocolVersion: protocolVersion)
                #expect(try client.call("SET", "held", "old") == ok)
                #expect(try client.call("SET", "gone", "soon") == ok)
                #expect(try client.call("MULTI") == ok)
                let block: [[String]] = [
                    ["SET", "a", "1"], ["GET", "a"], ["SET", "b", "x", "NX"], ["SET", "b", "y", "NX"], ["GETSET", "a", "2"],
                    ["DEL", "gone", "never"], ["EXPIRE", "a", "100"], ["TTL", "a"], ["MGET", "a", "gone", "held"],
                    ["EXISTS", "a", "gone", "b"], ["PING"], ["ECHO", "hi"], ["SET", "c", "v", "BADOPT"],
                    ["SETEX", "e", "50", "v"], ["PTTL", "e"], ["PERSIST", "e"], ["TTL", "e"], ["TYPE", "e"], ["GETDEL", "e"],
                    ["TYPE", "e"], ["SETNX", "a", "9"], ["MSET", "m1", "1", "m2", "2"], ["SET", "held", "new", "GET"],
                ]
                for command in block {
                    #expect(try client.call(bytes: command.map { Array($0.utf8) }) == .simple("QUEUED"), "\(command)")
                }
                // Nothing ran before EXEC.
                #expect(a.node.entry(for: StateKey(name: "a")) == nil)
                let reply = try client.call("EXEC")
                let expected: [RESPValue] = [
                    ok, bulk("1"), ok, .null, bulk("1"),
                    .integer(1), .integer(1), .integer(100), .array([bulk("2"), .null, bulk("old")]),
                    .integer(2), .simple("PONG"), bulk("hi"), .error("ERR syntax error"),
                    ok, .integer(50_000), .integer(1), .integer(-1), .simple("string"), bulk("v"),
                    .simple("none"), .integer(0), ok, bulk("old"),
                ]
                guard case .array(let replies) = reply, replies.count == expected.count else {
                    Issue.record("EXEC answered \(reply)")
                    return
                }
                for (index, (got, wanted)) in zip(replies, expected).enumerated() {
                    #expect(got == wanted, "\(block[index]): \(got)")
                }
                // One version for every key the block wrote, and the replica shows the whole block.
                let written = ["a", "b", "gone", "e", "m1", "m2", "held"].map { StateKey(name: $0) }
                let versions = Set(written.compactMap { a.node.entry(for: $0)?.version })
                #expect(versions.count == 1, "\(versions)")
                #expect(await eventually { written.allSatisfy { b.node.entry(for: $0)?.version == versions.first } })
                let peerClient = try b.client()
                #expect(try peerClient.call("MGET", "a", "b", "gone", "e", "m1", "m2", "held", "c") ==
                        .array([bulk("2"), bulk("x"), .null, .null, bulk("1"), bulk("2"), bulk("new"), .null]))
                #expect(try peerClient.call("TTL", "a") != .integer(-1))
                // Reads alone make an EXEC too, and an empty block answers an empty array.
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("GET", "a") == .simple("QUEUED"))
                #expect(try client.call("EXEC") == .array([bulk("2")]))
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("EXEC") == .array([]))
            }
        }

        @Test func errorsWhileQueuingAbortTheBlockAndNothingRuns() async throws {
            try await withPeer("abort") { peer in
                let client = try peer.client()
                // Each kind of refusal while queuing: an unknown command, a refused one, a wrong
                // number of arguments, one not allowed in a block.
                for refused in [["NOSUCH", "x"], ["LPUSH", "k", "v"], ["SET", "k"], ["SUBSCRIBE", "ch"], ["WAIT", "1", "0"], ["DECIDE.DUMP"]] {
                    #expect(try client.call("MULTI") == ok)
                    #expect(try client.call("SET", "k", "1") == .simple("QUEUED"))
                    #expect(try client.call(bytes: refused.map { Array($0.utf8) }).isError, "\(refused)")
                    #expect(try client.call("SET", "j", "1") == .simple("QUEUED"), "the block goes on queuing after \(refused)")
                    #expect(try client.call("EXEC") == .error("EXECABORT Transaction discarded because of previous errors."))
                    #expect(peer.node.entry(for: StateKey(name: "k")) == nil && peer.node.entry(for: StateKey(name: "j")) == nil)
                }
                // A nested MULTI is answered but does not abort (as Redis).
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("MULTI") == .error("ERR MULTI calls can not be nested"))
                #expect(try client.call("SET", "k", "1") == .simple("QUEUED"))
                #expect(try client.call("EXEC") == .array([ok]))
                // EXEC and DISCARD outside a block; DISCARD and RESET drop one.
                #expect(try client.call("EXEC") == .error("ERR EXEC without MULTI"))
                #expect(try client.call("DISCARD") == .error("ERR DISCARD without MULTI"))
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("SET", "k", "2") == .simple("QUEUED"))
                #expect(try client.call("DISCARD") == ok)
                #expect(try client.call("GET", "k") == bulk("1"))
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("SET", "k", "3") == .simple("QUEUED"))
                #expect(try client.call("RESET") == .simple("RESET"))
                #expect(try client.call("GET", "k") == bulk("1"))
                // UNWATCH is harmless; WATCH is refused with the reason.
                #expect(try client.call("UNWATCH") == ok)
                #expect(try client.call("WATCH", "k").errorText?.contains("one server to order every write") == true)
                // Pipelined, the way client libraries send a transaction: one write, every reply.
                try client.send(raw: request("MULTI") + request("SET", "p", "1") + request("GET", "p") + request("EXEC") + request("GET", "p"))
                #expect(try client.reply() == ok)
                #expect(try client.reply() == .simple("QUEUED"))
                #expect(try client.reply() == .simple("QUEUED"))
                #expect(try client.reply() == .array([ok, bulk("1")]))
                #expect(try client.reply() == bulk("1"))
            }
        }

        @Test func aRefusedBlockWritesNothing() async throws {
            try await withPeer("refusal") { peer in
                let client = try peer.client()
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("SET", "k", "1") == .simple("QUEUED"))
                #expect(try client.call("GET", "k") == .simple("QUEUED"))
                peer.node.refuseWrites("the clock is being checked")
                let reply = try client.call("EXEC")
                #expect(reply.errorText?.hasPrefix("ERR EXEC refused, nothing written: ") == true, "\(reply)")
                peer.node.refuseWrites(nil)
                #expect(try client.call("GET", "k") == .null)
            }
        }

        @Test func aBlockIsBoundedLikeOneRequestAndItsReplyByMaxReplyBytes() async throws {
            try await withPeer("bounds") { peer in
                let endpoint = try CustomEndpoint(on: peer) {
                    $0.limits.maxRequestBytes = 4096
                    $0.limits.maxArguments = 8
                    $0.maxReplyBytes = 2048
                }
                defer { endpoint.stop() }
                let client = try endpoint.client()
                // Commands: the ninth is refused and the block aborted.
                #expect(try client.call("MULTI") == ok)
                for index in 0 ..< 8 { #expect(try client.call("SET", "k\(index)", "1") == .simple("QUEUED")) }
                #expect(try client.call("SET", "k8", "1").errorText?.hasPrefix("ERR transaction past its bounds") == true)
                #expect(try client.call("EXEC") == .error("EXECABORT Transaction discarded because of previous errors."))
                #expect(peer.node.entry(for: StateKey(name: "k0")) == nil)
                // Bytes: arguments past maxRequestBytes in all.
                let value = String(repeating: "v", count: 1500)
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("SET", "big1", value) == .simple("QUEUED"))
                #expect(try client.call("SET", "big2", value) == .simple("QUEUED"))
                #expect(try client.call("SET", "big3", value).errorText?.hasPrefix("ERR transaction past its bounds") == true)
                #expect(try client.call("EXEC") == .error("EXECABORT Transaction discarded because of previous errors."))
                // The reply: once it passed maxReplyBytes, later reads answer an error in their
                // place (GETSET's old value too); writes are made all the same.
                #expect(try client.call("SET", "big", value) == ok)
                #expect(try client.call("MULTI") == ok)
                for command in [["GET", "big"], ["GET", "big"], ["SET", "after", "1"], ["GETSET", "big", "small"], ["GET", "after"]] {
                    #expect(try client.call(bytes: command.map { Array($0.utf8) }) == .simple("QUEUED"))
                }
                guard case .array(let replies) = try client.call("EXEC"), replies.count == 5 else {
                    Issue.record("EXEC did not answer five replies")
                    return
                }
                #expect(replies[0] == bulk(value))
                #expect(replies[1] == bulk(value), "the reply had not passed 2,048 bytes before this GET")
                #expect(replies[2] == ok)
                #expect(replies[3].errorText?.contains("writes were made") == true, "\(replies[3])")
                #expect(replies[4].errorText?.contains("maxReplyBytes") == true, "\(replies[4])")
                #expect(try client.call("MGET", "after", "big") == .array([bulk("1"), bulk("small")]))
                // Each argument kept is charged its keeping too (64 bytes), so many short commands
                // are bounded by the memory they take: `SET kN v` counts 3 + 3 × 64 bytes.
                let counted = try CustomEndpoint(on: peer) { $0.limits.maxRequestBytes = 4096 }
                defer { counted.stop() }
                let short = try counted.client()
                #expect(try short.call("MULTI") == ok)
                for index in 0 ..< 20 { #expect(try short.call("SET", "s\(index % 10)", "v") == .simple("QUEUED")) }
                #expect(try short.call("SET", "s0", "v").errorText?.hasPrefix("ERR transaction past its bounds") == true)
                #expect(try short.call("DISCARD") == ok)
            }
        }

        @Test func strictDurabilityAnswersTheBlockOnceOnDisk() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let configure = strictDurability(in: directory)
            let disk = StoreFaults()
            try await withPeer("strict-block", disk: disk, configure: configure) { peer in
                let client = try peer.client()
                let reader = try peer.client()
                #expect(try client.call("MULTI") == ok)
                #expect(try client.call("SET", "s1", "a") == .simple("QUEUED"))
                #expect(try client.call("MSET", "s2", "b", "s3", "c") == .simple("QUEUED"))
                disk.stall()
                var released = false
                defer { if !released { disk.resume() } }
                try client.send("EXEC")
                // Another client is served while the block waits for the disk.
                #expect(try reader.call("PING") == .simple("PONG"))
                #expect(!client.hasData(within: 0.2), "EXEC answered before its writes were on disk")
                disk.resume()
                released = true
                #expect(try client.reply() == .array([ok, ok]))
            }
            try await withPeer("strict-block", configure: configure) { peer in
                let client = try peer.client()
                #expect(try client.call("MGET", "s1", "s2", "s3") == bulks("a", "b", "c"))
            }
        }
    }
}
