import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// HINCRBY: a counter field of a hash, a counter of its own inside the hash's collection, so
/// that increments of one field on different peers at once all count (docs/operations.md,
/// "Counter fields of a hash"; docs/design/0001-counters.md). A field reads as its plain value
/// (HSET's) when it has one, else as its counter's total; HSET over a counter field and HDEL
/// reset it; SET, DEL and EXPIRE of the hash take its counter fields with it.
extension SyncNodeTests {
    @Suite struct HashCounterCommandTests {
        static let wrongType = RESPValue.error("WRONGTYPE Operation against a key holding the wrong kind of value")

        @Test func hincrbyAnswersAsRedisDoes() async throws {
            try await withPeer("hincrby") { peer in
                let client = try peer.client()
                #expect(try client.call("HINCRBY", "quota", "jobs", "5") == .integer(5))
                #expect(try client.call("HINCRBY", "quota", "jobs", "-2") == .integer(3))
                #expect(try client.call("HGET", "quota", "jobs") == bulk("3"))
                #expect(try client.call("HEXISTS", "quota", "jobs") == .integer(1))
                #expect(try client.call("TYPE", "quota") == .simple("hash"))
                #expect(try client.call("EXISTS", "quota") == .integer(1))
                // A plain field holding a whole number is taken over, as INCR takes over a string.
                #expect(try client.call("HSET", "quota", "mail", "10", "name", "ann") == .integer(2))
                #expect(try client.call("HINCRBY", "quota", "mail", "2") == .integer(12))
                #expect(try client.call("HGET", "quota", "mail") == bulk("12"))
                #expect(try client.call("HGETALL", "quota") == .array([bulk("jobs"), bulk("3"), bulk("mail"), bulk("12"), bulk("name"), bulk("ann")]))
                #expect(try client.call("HKEYS", "quota") == .array([bulk("jobs"), bulk("mail"), bulk("name")]))
                #expect(try client.call("HVALS", "quota") == .array([bulk("3"), bulk("12"), bulk("ann")]))
                #expect(try client.call("HMGET", "quota", "mail", "none", "jobs") == .array([bulk("12"), .null, bulk("3")]))
                #expect(try client.call("HLEN", "quota") == .integer(3))
                // Errors, with nothing written.
                #expect(try client.call("HINCRBY", "quota", "name", "1") == .error("ERR hash value is not an integer"))
                #expect(try client.call("HGET", "quota", "name") == bulk("ann"))
                #expect(try client.call("HINCRBY", "quota", "jobs", "x") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("HINCRBY", "quota", "jobs", "99999999999999999999") == .error("ERR value is not an integer or out of range"))
                let overflow = try client.call("HINCRBY", "quota", "jobs", "9223372036854775807").errorText ?? ""
                #expect(overflow.hasPrefix("ERR HINCRBY refused, nothing written: counter field \"jobs\" of hash quota") && overflow.contains("outside Int64"),
                        "\(overflow)")
                #expect(try client.call("HGET", "quota", "jobs") == bulk("3"))
                #expect(try client.call("HINCRBYFLOAT", "quota", "jobs", "1.5").errorText?.hasPrefix("ERR HINCRBYFLOAT is not supported: ") == true)
                #expect(try client.call("HINCRBY", "quota", "jobs").errorText?.contains("wrong number of arguments") == true)
                #expect(try client.call("SET", "word", "hello") == ok)
                #expect(try client.call("HINCRBY", "word", "f", "1") == Self.wrongType)
                #expect(try client.call("SADD", "online", "ann") == .integer(1))
                #expect(try client.call("HINCRBY", "online", "f", "1") == Self.wrongType)
                #expect(try client.call("GET", "quota") == Self.wrongType, "a hash of counter fields only is still a hash")
                #expect(try client.call("INCR", "quota") == Self.wrongType)
                // HSET over a counter field replaces it; HDEL deletes it; HSETNX leaves it.
                #expect(try client.call("HSETNX", "quota", "jobs", "0") == .integer(0))
                #expect(try client.call("HSET", "quota", "jobs", "100") == .integer(0), "the field existed")
                #expect(try client.call("HGET", "quota", "jobs") == bulk("100"))
                #expect(try client.call("HINCRBY", "quota", "jobs", "1") == .integer(101))
                #expect(try client.call("HDEL", "quota", "jobs", "none") == .integer(1))
                #expect(try client.call("HGET", "quota", "jobs") == .null)
                #expect(try client.call("HINCRBY", "quota", "jobs", "1") == .integer(1), "a deleted counter field counts from 0")
                #expect(try client.call("HINCRBY", "quota", "jobs", "-1") == .integer(0))
                #expect(try client.call("HEXISTS", "quota", "jobs") == .integer(0), "a counter field at 0 reads as no field, as a counter at 0 reads as no key")
                // A Swift reader and the test state see the field as a counter of its own.
                #expect(peer.node.read { $0.counterTotal(ofField: Array("\"mail\"".utf8), ofHashNamed: "quota") } == 12)
                // DEL and SET replace the hash, counter fields with it.
                #expect(try client.call("DEL", "quota") == .integer(1))
                #expect(try client.call("HGETALL", "quota") == .array([]))
                #expect(try client.call("EXISTS", "quota") == .integer(0))
                #expect(try client.call("HINCRBY", "quota", "mail", "1") == .integer(1), "a new count after DEL")
                #expect(try client.call("SET", "quota", "plain") == ok)
                #expect(try client.call("GET", "quota") == bulk("plain"))
                #expect(try client.call("HGET", "quota", "mail") == Self.wrongType)
                #expect(try client.call("DEL", "quota") == .integer(1))
                #expect(try client.call("HGETALL", "quota") == .array([]), "SET reset the counter field: DEL of the string leaves nothing")
            }
        }

        /// HSET and HINCRBY of one field at once on two peers leave both a plain value and a
        /// counter; the plain value is what reads, and a HINCRBY after it counts from what was
        /// read (the hidden counter reset), an HDEL leaves nothing behind.
        @Test func aPlainValueOverAHiddenCounterCountsFromWhatWasRead() async throws {
            try await withPeer("hincrby-hidden") { peer in
                let client = try peer.client()
                // The concurrent case made on one node: a counter field, then a plain value
                // written under the field's key directly (as a peer's HSET that had not seen it).
                #expect(try client.call("HINCRBY", "h", "f", "7") == .integer(7))
                _ = try client.call("DECIDE.PUT", "h[\"f\"]", "\"40\"")
                #expect(try client.call("HGET", "h", "f") == bulk("40"))
                #expect(try client.call("HINCRBY", "h", "f", "2") == .integer(42))
                #expect(try client.call("HGET", "h", "f") == bulk("42"))
                _ = try client.call("DECIDE.PUT", "h[\"f\"]", "\"9\"")
                #expect(try client.call("HDEL", "h", "f") == .integer(1))
                #expect(try client.call("HGET", "h", "f") == .null, "HDEL reset the counter under the plain value")
                #expect(try client.call("HLEN", "h") == .integer(0))
            }
        }

        @Test func aMultiBlockSeesItsOwnChanges() async throws {
            try await withPeer("hincrby-multi") { peer in
                let client = try peer.client()
                try client.send(raw: "MULTI\r\nHSET h f 5\r\nHINCRBY h f 2\r\nHGET h f\r\nHINCRBY h g 1\r\nHLEN h\r\nHDEL h f\r\nHGETALL h\r\nEXPIRE h 100\r\nHINCRBY h g 1\r\nTTL h\r\nEXEC\r\n")
                for _ in 0..<11 { _ = try client.reply() }
                let reply = try client.reply()
                #expect(reply == .array([.integer(1), .integer(7), bulk("7"), .integer(1), .integer(2), .integer(1),
                                         .array([bulk("g"), bulk("1")]), .integer(1), .integer(2), .integer(100)]), "\(reply)")
                #expect(try client.call("HGETALL", "h") == .array([bulk("g"), bulk("2")]))
            }
        }

        /// Pipelined HINCRBYs are committed in runs (`WriteBatch`) and each answers its own total.
        @Test func pipelinedIncrementsEachAnswerTheirTotal() async throws {
            try await withPeer("hincrby-pipeline") { peer in
                let client = try peer.client()
                try client.send(raw: (1...1_000).map { "HINCRBY h f\($0 % 10) 1\r\n" }.joined())
                let replies = try (1...1_000).map { _ in try client.reply() }
                let expected: [RESPValue] = (1...1_000).map { (number: Int) -> RESPValue in .integer(Int64((number - 1) / 10 + 1)) }
                #expect(replies == expected)
                #expect(try client.call("HLEN", "h") == .integer(10))
                #expect(try client.call("HGET", "h", "f3") == bulk("100"))
            }
        }

        @Test func aHashOfCounterFieldsExpiresAsAWhole() async throws {
            try await withPeer("hincrby-lifetime") { peer in
                let client = try peer.client()
                #expect(try client.call("HINCRBY", "window", "hits", "1") == .integer(1))
                #expect(try client.call("HSET", "window", "owner", "ann") == .integer(1))
                #expect(try client.call("PEXPIRE", "window", "600") == .integer(1))
                #expect(try client.call("HINCRBY", "window", "hits", "4") == .integer(5), "a later change keeps the hash's lifetime")
                #expect(try client.call("HINCRBY", "window", "misses", "1") == .integer(1))
                guard case .integer(let left) = try client.call("PTTL", "window") else { throw TestFailure("PTTL answered no integer") }
                #expect(left > 0 && left <= 600)
                #expect(await eventually(5) { (try? client.call("HGETALL", "window")) == .array([]) })
                #expect(try client.call("EXISTS", "window") == .integer(0))
                #expect(try client.call("HINCRBY", "window", "hits", "1") == .integer(1), "a new count after the lifetime")
                #expect(try client.call("TTL", "window") == .integer(-1))
                // DEL of a hash with a lifetime ends both: the next HINCRBY has none.
                #expect(try client.call("EXPIRE", "window", "100") == .integer(1))
                #expect(try client.call("DEL", "window") == .integer(1))
                #expect(try client.call("HGET", "window", "hits") == .null)
                #expect(try client.call("HINCRBY", "window", "hits", "3") == .integer(3))
                #expect(try client.call("TTL", "window") == .integer(-1))
            }
        }

        @Test func subscribersHearHincrby() async throws {
            try await withPeer("hincrby-events") { peer in
                let events = try peer.client()
                try events.send("SUBSCRIBE", "__keyspace@0__:h", "__keyevent@0__:hincrby")
                _ = try events.reply()
                _ = try events.reply()
                #expect(try peer.client().call("HINCRBY", "h", "f", "1") == .integer(1))
                let heard = [try events.reply(), try events.reply()]
                #expect(heard.contains(.array([bulk("message"), bulk("__keyspace@0__:h"), bulk("hincrby")])), "\(heard)")
                #expect(heard.contains(.array([bulk("message"), bulk("__keyevent@0__:hincrby"), bulk("h")])), "\(heard)")
            }
        }

        /// DECIDE.GET (the CLI's get) shows the hash, counter fields as totals; DECIDE.DUMP
        /// names each slot's hash and field.
        @Test func getAndDumpShowCounterFields() async throws {
            try await withPeer("hincrby-show") { peer in
                let client = try peer.client()
                #expect(try client.call("HINCRBY", "h", "n", "3") == .integer(3))
                #expect(try client.call("HSET", "h", "s", "x") == .integer(1))
                guard case .bulk(let json) = try client.call("DECIDE.GET", "h"), let reply = try? JSONValue.parse(json) else {
                    throw TestFailure("DECIDE.GET of a hash gave no JSON")
                }
                #expect(reply.compact() == #"{"key":"h","hash":{"n":3,"s":"x"},"counterFields":["n"]}"#)
                #expect(SyncNode.Get.shown(reply).compact() == #"{"n":3,"s":"x"}"#)
                guard case .array(let lines) = try client.call("DECIDE.DUMP") else { throw TestFailure("DECIDE.DUMP gave no array") }
                let layouts = try lines.compactMap { line -> String? in
                    guard case .bulk(let bytes) = line else { return nil }
                    return try JSONValue.parse(bytes)["layout"]?.compact()
                }
                #expect(layouts.contains { $0.hasPrefix(#"{"kind":"hashCounterSlot","hash":"h","field":"n","node":"hincrby-show""#) }, "\(layouts)")
                #expect(try Set(ScanTests.scanAll(client, options: ["TYPE", "hash"]).keys) == ["h"], "the counter field's slot names its hash")
            }
        }

        /// The issue's case: a rate limiter keeps its counts in one hash, one field per client,
        /// and two peers increment the same fields at once: both read the exact totals, a field
        /// HSET to a number before counts on from it on both, and an EXPIRE given on one peer
        /// takes the other peer's slots with it.
        @Test func incrementsOnTwoPeersAtOnceAllCount() async throws {
            try await withPair { a, b in
                #expect(try a.client().call("HSET", "limits", "base", "10") == .integer(1))
                #expect(await eventually(10) { (try? b.client().call("HGET", "limits", "base")) == bulk("10") })
                let rounds = 1_000
                let pipeline = (0..<rounds).map { "HINCRBY limits client\($0 % 4) 1\r\nHINCRBY limits base 2\r\n" }
                try pipelineOnBoth(a, pipeline, b, pipeline)
                let expected = RESPValue.array([bulk("500"), bulk("500"), bulk("500"), bulk("500"), bulk("4010")])
                let read = { (peer: TestPeer) in try peer.client().call("HMGET", "limits", "client0", "client1", "client2", "client3", "base") }
                let settled = try await eventually(20) { try read(a) == expected && read(b) == expected }
                let onA = try read(a), onB = try read(b)
                #expect(settled, "a: \(onA), b: \(onB)")
                #expect(try a.client().call("PEXPIRE", "limits", "1500") == .integer(1))
                #expect(await eventually(10) { (try? b.client().call("TTL", "limits")).map { $0 != .integer(-1) } ?? false })
                #expect(try b.client().call("HINCRBY", "limits", "client0", "1") == .integer(501))
                let gone = try await eventually(20) {
                    try a.client().call("HGETALL", "limits") == .array([]) && b.client().call("HGETALL", "limits") == .array([])
                }
                let leftA = try a.client().call("HGETALL", "limits"), leftB = try b.client().call("HGETALL", "limits")
                #expect(gone, "every slot of both peers expired with the hash: a \(leftA), b \(leftB)")
            }
        }
    }
}
