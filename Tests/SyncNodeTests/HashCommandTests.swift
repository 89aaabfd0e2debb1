import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// HSET, HMSET, HSETNX, HDEL, HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN and HEXISTS as Redis
/// answers them, on the fields of a collection (docs/operations.md, "Hashes"): each field is
/// its own key `NAME["field"]`, so two peers writing different fields of one hash at once keep
/// both; WRONGTYPE between hashes and other kinds; SET and DEL replace a hash.
extension SyncNodeTests {
    @Suite struct HashCommandTests {
        struct Session: CollectionState {
            static var name: String { "session" }
            static func defaultValue(at id: String) -> String { "" }
        }

        @Test func hashesAnswerAsRedisDoes() async throws {
            try await withPeer("hashes") { peer in
                let client = try peer.client()
                #expect(try client.call("HSET", "session", "user", "ann", "cart", "3", "user", "ann") == .integer(2))
                #expect(try client.call("HSET", "session", "user", "bob") == .integer(0), "an existing field is replaced, not added")
                #expect(try client.call("HGET", "session", "user") == bulk("bob"))
                #expect(try client.call("HGET", "session", "none") == .null)
                #expect(try client.call("HMGET", "session", "cart", "none", "user") == .array([bulk("3"), .null, bulk("bob")]))
                #expect(try client.call("HGETALL", "session") == .array([bulk("cart"), bulk("3"), bulk("user"), bulk("bob")]))
                #expect(try client.call("HKEYS", "session") == .array([bulk("cart"), bulk("user")]))
                #expect(try client.call("HVALS", "session") == .array([bulk("3"), bulk("bob")]))
                #expect(try client.call("HLEN", "session") == .integer(2))
                #expect(try client.call("HEXISTS", "session", "cart") == .integer(1))
                #expect(try client.call("HEXISTS", "session", "none") == .integer(0))
                #expect(try client.call("HSETNX", "session", "user", "cid") == .integer(0))
                #expect(try client.call("HSETNX", "session", "lang", "en") == .integer(1))
                #expect(try client.call("HMSET", "session", "theme", "dark") == ok)
                #expect(try client.call("HDEL", "session", "theme", "lang", "none") == .integer(2))
                // The fields are the collection's elements: GET NAME["field"] and a Swift
                // CollectionState read them.
                #expect(try client.call("GET", "session[\"user\"]") == bulk("bob"))
                #expect(peer.node.elements(Session.self).ids == ["cart", "user"])
                // Kinds.
                #expect(try client.call("TYPE", "session") == .simple("hash"))
                #expect(try client.call("EXISTS", "session") == .integer(1))
                #expect(try client.call("TTL", "session") == .integer(-1))
                let wrong = RESPValue.error("WRONGTYPE Operation against a key holding the wrong kind of value")
                #expect(try client.call("GET", "session") == wrong)
                #expect(try client.call("INCR", "session") == wrong)
                #expect(try client.call("SADD", "session", "x") == wrong)
                #expect(try client.call("SET", "word", "hello") == ok)
                #expect(try client.call("HSET", "word", "f", "v") == wrong)
                #expect(try client.call("HGETALL", "word") == wrong)
                #expect(try client.call("SADD", "online", "ann") == .integer(1))
                #expect(try client.call("HGET", "online", "ann") == wrong)
                #expect(try client.call("HGETALL", "none") == .array([]))
                #expect(try client.call("HLEN", "none") == .integer(0))
                #expect(try client.call("EXPIRE", "session", "10") == .integer(1), "a hash expires as a whole (CollectionLifetimeTests)")
                #expect(try client.call("PERSIST", "session") == .integer(1))
                #expect(try client.call("HINCRBY", "session", "cart", "1") == .integer(4), "a counter field (HashCounterCommandTests)")
                #expect(try client.call("HSET", "session", "odd").errorText?.contains("wrong number of arguments") == true)
                // SET NX does not replace a hash; SET and DEL do.
                #expect(try client.call("SET", "session", "x", "NX") == .null)
                #expect(try client.call("HSET", "other", "a", "1") == .integer(1))
                #expect(try client.call("DEL", "other") == .integer(1))
                #expect(try client.call("HGETALL", "other") == .array([]))
                #expect(try client.call("SET", "session", "plain") == ok)
                #expect(try client.call("GET", "session") == bulk("plain"))
                #expect(try client.call("GET", "session[\"user\"]") == .null, "SET replaced the hash")
            }
        }

        /// Pipelined SETs (committed together, `SetBatch`) replace a hash, a counter and a set of
        /// their key's name too, as a SET alone does.
        @Test func pipelinedSetsReplaceAHashACounterAndASet() async throws {
            try await withPeer("hash-set") { peer in
                let client = try peer.client()
                #expect(try client.call("HSET", "h", "a", "1", "b", "2") == .integer(2))
                try client.send(raw: "SET h x\r\nSET other y\r\nGET h\r\nHLEN h\r\n")
                #expect(try [client.reply(), client.reply(), client.reply()] == [ok, ok, bulk("x")])
                #expect(try client.reply() == .error("WRONGTYPE Operation against a key holding the wrong kind of value"))
                #expect(try client.call("INCRBY", "c", "5") == .integer(5))
                #expect(try client.call("SADD", "s", "m") == .integer(1))
                try client.send(raw: "SET c 1\r\nSET s x\r\nGET c\r\nINCR c\r\nTYPE s\r\nGET s\r\n")
                let replies = try (0..<6).map { _ in try client.reply() }
                #expect(replies == [ok, ok, bulk("1"), .integer(2), .simple("string"), bulk("x")], "\(replies)")
            }
        }

        /// At the size a session store has: 50,000 fields of one hash written by pipelined HSETs
        /// (committed in runs, `WriteBatch`). Each HSET tests the key's kind without reading the
        /// hash (a field found is enough): were it O(fields), this would take an hour.
        @Test func fiftyThousandFieldsOfOneHash() async throws {
            try await withPeer("hash-big") { peer in
                let client = try peer.client()
                for start in stride(from: 0, to: 50_000, by: 5_000) {
                    try client.send(raw: (start..<start + 5_000).map { "HSET big f\($0) \($0)\r\n" }.joined())
                    for _ in 0..<5_000 { _ = try client.reply() }
                }
                #expect(try client.call("HLEN", "big") == .integer(50_000))
                #expect(try client.call("HGET", "big", "f49999") == bulk("49999"))
                #expect(try client.call("TYPE", "big") == .simple("hash"))
            }
        }

        @Test func resp3AnswersHGETALLWithAMap() async throws {
            try await withPeer("hashes-resp3") { peer in
                let client = try peer.client()
                _ = try client.call("HELLO", "3")
                #expect(try client.call("HSET", "h", "a", "1") == .integer(1))
                try client.send("HGETALL", "h")
                #expect(try client.rawReply().bytes.starts(with: Array("%1\r\n".utf8)))
            }
        }

        @Test func aMultiBlockSeesItsOwnChanges() async throws {
            try await withPeer("hash-multi") { peer in
                let client = try peer.client()
                try client.send(raw: "MULTI\r\nHSET h a 1 b 2\r\nHDEL h a\r\nHGET h b\r\nHLEN h\r\nTYPE h\r\nEXEC\r\n")
                for _ in 0..<6 { _ = try client.reply() }
                let reply = try client.reply()
                #expect(reply == .array([.integer(2), .integer(1), bulk("2"), .integer(1), .simple("hash")]), "\(reply)")
            }
        }

        /// The case: a session hash written field by field on two peers at once keeps
        /// every field, and a field both write ends the same on both.
        @Test func fieldsWrittenOnTwoPeersAtOnceAreAllKept() async throws {
            try await withPair { a, b in
                try pipelineOnBoth(a, (0..<200).map { "HSET session a\($0) \($0)\r\nHSET session both from-a\r\n" },
                                   b, (0..<200).map { "HSET session b\($0) \($0)\r\nHSET session both from-b\r\n" })
                let settled = try await eventually(20) {
                    try a.client().call("HLEN", "session") == .integer(401) && b.client().call("HLEN", "session") == .integer(401)
                        && a.client().call("HGET", "session", "both") == b.client().call("HGET", "session", "both")
                }
                let lengthA = try a.client().call("HLEN", "session"), lengthB = try b.client().call("HLEN", "session")
                #expect(settled, "a: \(lengthA), b: \(lengthB)")
            }
        }
    }
}
