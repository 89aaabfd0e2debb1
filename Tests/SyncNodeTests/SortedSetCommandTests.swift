import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// ZADD, ZREM, ZSCORE, ZMSCORE, ZCARD, ZCOUNT, ZRANK, ZREVRANK, ZRANGE and its older forms as
/// Redis answers them, on a `SortedSetState` (docs/operations.md, "Sorted sets"): each member's
/// score replaced last-writer-wins on its own, so two peers scoring different members of one
/// sorted set at once keep both; WRONGTYPE between sorted sets and other kinds; SET and DEL
/// replace a sorted set; refusals say why.
extension SyncNodeTests {
    @Suite struct SortedSetCommandTests {
        struct Board: SortedSetState {
            typealias Member = String
            static var name: String { "board" }
        }

        @Test func sortedSetsAnswerAsRedisDoes() async throws {
            try await withPeer("zsets") { peer in
                let client = try peer.client()
                #expect(try client.call("ZADD", "board", "3", "cid", "1", "ann", "2", "bob", "1", "ann") == .integer(3))
                #expect(try client.call("ZADD", "board", "1.5", "ann") == .integer(0), "a re-score is not an add")
                #expect(try client.call("ZADD", "board", "CH", "1.5", "ann", "4", "bob", "0", "dee") == .integer(2), "CH: bob re-scored, dee added")
                // Order: by score, ties by the member's bytes.
                #expect(try client.call("ZRANGE", "board", "0", "-1") == .array(["dee", "ann", "cid", "bob"].map(bulk)))
                #expect(try client.call("ZRANGE", "board", "0", "1", "WITHSCORES") == .array([bulk("dee"), bulk("0"), bulk("ann"), bulk("1.5")]))
                #expect(try client.call("ZRANGE", "board", "-2", "-1", "REV") == .array(["ann", "dee"].map(bulk)))
                #expect(try client.call("ZRANGE", "board", "5", "9") == .array([]))
                #expect(try client.call("ZRANGE", "board", "(1.5", "+inf", "BYSCORE") == .array(["cid", "bob"].map(bulk)))
                #expect(try client.call("ZRANGE", "board", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2") == .array(["cid", "ann"].map(bulk)))
                #expect(try client.call("ZRANGEBYSCORE", "board", "1", "3", "WITHSCORES") == .array([bulk("ann"), bulk("1.5"), bulk("cid"), bulk("3")]))
                #expect(try client.call("ZRANGEBYSCORE", "board", "-inf", "inf", "LIMIT", "0", "-1") == .array(["dee", "ann", "cid", "bob"].map(bulk)))
                #expect(try client.call("ZREVRANGEBYSCORE", "board", "3", "(0") == .array(["cid", "ann"].map(bulk)))
                #expect(try client.call("ZREVRANGE", "board", "0", "0", "WITHSCORES") == .array([bulk("bob"), bulk("4")]))
                #expect(try client.call("ZSCORE", "board", "ann") == bulk("1.5"))
                #expect(try client.call("ZSCORE", "board", "none") == .null)
                #expect(try client.call("ZMSCORE", "board", "bob", "none") == .array([bulk("4"), .null]))
                #expect(try client.call("ZCARD", "board") == .integer(4))
                #expect(try client.call("ZCOUNT", "board", "(0", "3") == .integer(2))
                #expect(try client.call("ZRANK", "board", "cid") == .integer(2))
                #expect(try client.call("ZREVRANK", "board", "cid") == .integer(1))
                #expect(try client.call("ZRANK", "board", "cid", "WITHSCORE") == .array([.integer(2), bulk("3")]))
                #expect(try client.call("ZRANK", "board", "none") == .null)
                // NX, XX, GT, LT, judged on this node.
                #expect(try client.call("ZADD", "board", "NX", "9", "ann", "9", "eve") == .integer(1))
                #expect(try client.call("ZADD", "board", "XX", "CH", "9", "ann", "9", "fay") == .integer(1))
                #expect(try client.call("ZADD", "board", "GT", "CH", "1", "ann", "10", "bob") == .integer(1))
                #expect(try client.call("ZADD", "board", "LT", "CH", "20", "ann", "0.5", "eve") == .integer(1))
                #expect(try client.call("ZMSCORE", "board", "ann", "bob", "eve", "fay") == .array([bulk("9"), bulk("10"), bulk("0.5"), .null]))
                #expect(try client.call("ZREM", "board", "eve", "none", "eve") == .integer(1))
                // The members are a SortedSetState's: a Swift service reads the same.
                #expect(peer.node.read(Board.self) == [ScoredMember("dee", score: 0), ScoredMember("cid", score: 3), ScoredMember("ann", score: 9),
                                                        ScoredMember("bob", score: 10)])
                // Kinds.
                #expect(try client.call("TYPE", "board") == .simple("zset"))
                #expect(try client.call("EXISTS", "board") == .integer(1))
                #expect(try client.call("TTL", "board") == .integer(-1))
                let wrong = RESPValue.error("WRONGTYPE Operation against a key holding the wrong kind of value")
                #expect(try client.call("GET", "board") == wrong)
                #expect(try client.call("INCR", "board") == wrong)
                #expect(try client.call("SADD", "board", "x") == wrong)
                #expect(try client.call("HSET", "board", "f", "v") == wrong)
                #expect(try client.call("SMEMBERS", "board") == wrong)
                #expect(try client.call("HGETALL", "board") == wrong)
                #expect(try client.call("SET", "word", "hello") == ok)
                #expect(try client.call("ZADD", "word", "1", "m") == wrong)
                #expect(try client.call("ZRANGE", "word", "0", "-1") == wrong)
                #expect(try client.call("SADD", "online", "ann") == .integer(1))
                #expect(try client.call("ZSCORE", "online", "ann") == wrong)
                #expect(try client.call("HSET", "h", "f", "v") == .integer(1))
                #expect(try client.call("ZCARD", "h") == wrong)
                #expect(try client.call("ZADD", "h", "1", "m") == wrong)
                #expect(try client.call("ZRANGE", "none", "0", "-1") == .array([]))
                #expect(try client.call("ZCARD", "none") == .integer(0))
                // SET NX does not replace a sorted set; SET and DEL do.
                #expect(try client.call("SET", "board", "x", "NX") == .null)
                #expect(try client.call("ZADD", "other", "1", "a") == .integer(1))
                #expect(try client.call("DEL", "other") == .integer(1))
                #expect(try client.call("ZCARD", "other") == .integer(0))
                #expect(try client.call("SET", "board", "plain") == ok)
                #expect(try client.call("GET", "board") == bulk("plain"))
                #expect(peer.node.read(Board.self).isEmpty, "SET replaced the sorted set")
            }
        }

        @Test func wrongArgumentsAndRefusalsAnswerWithRedisErrorsOrTheReason() async throws {
            try await withPeer("zset-errors") { peer in
                let client = try peer.client()
                #expect(try client.call("ZADD", "z", "one", "m") == .error("ERR value is not a valid float"))
                #expect(try client.call("ZADD", "z", "nan", "m") == .error("ERR value is not a valid float"))
                #expect(try client.call("ZADD", "z", "1", "m", "2") == .error("ERR syntax error"))
                #expect(try client.call("ZADD", "z", "NX", "XX", "1", "m") == .error("ERR XX and NX options at the same time are not compatible"))
                #expect(try client.call("ZADD", "z", "GT", "LT", "1", "m") == .error("ERR GT, LT, and/or NX options at the same time are not compatible"))
                #expect(try client.call("ZADD", "z", "inf", "m").errorText?.contains("cannot be infinite") == true)
                #expect(try client.call("ZADD", "z", "INCR", "1", "m").errorText?.contains("adding to one score at once") == true)
                #expect(try client.call("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1") == .error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"))
                #expect(try client.call("ZRANGE", "z", "a", "-1") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("ZRANGE", "z", "x", "1", "BYSCORE") == .error("ERR min or max is not a float"))
                #expect(try client.call("ZRANGE", "z", "-", "+", "BYLEX").errorText?.contains("BYLEX is not built yet") == true)
                #expect(try client.call("ZCOUNT", "z", "(", "1") == .error("ERR min or max is not a float"))
                #expect(try client.call("ZINCRBY", "z", "1", "m").errorText?.hasPrefix("ERR ZINCRBY is not supported: ") == true)
                #expect(try client.call("ZRANGEBYLEX", "z", "-", "+").errorText?.contains("not built yet") == true)
                #expect(try client.call("ZSCORE", "z[\"e\"]", "m").errorText?.contains("needs a plain key") == true)
                #expect(try client.call("ZADD", "z", "1", "m") == .integer(1))
                #expect(try client.call("INCR", "counted") == .integer(1))
                #expect(try client.call("EXPIRE", "counted", "10") == .integer(1), "a counter takes a lifetime")
                #expect(try client.call("ZRANGE", "z", "0", "-1", "WITHSCORES") == .array([bulk("m"), bulk("1")]), "no refused command wrote")
            }
        }

        @Test func resp3AnswersScoresAsDoublesAndPairs() async throws {
            try await withPeer("zsets-resp3") { peer in
                let client = try peer.client()
                _ = try client.call("HELLO", "3")
                #expect(try client.call("ZADD", "z", "1.5", "a", "2", "b") == .integer(2))
                try client.send("ZSCORE", "z", "a")
                #expect(try client.rawReply().bytes == Array(",1.5\r\n".utf8))
                try client.send("ZRANGE", "z", "0", "-1", "WITHSCORES")
                #expect(try client.rawReply().bytes == Array("*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n".utf8))
            }
        }

        @Test func aMultiBlockSeesItsOwnChanges() async throws {
            try await withPeer("zset-multi") { peer in
                let client = try peer.client()
                try client.send(raw: "MULTI\r\nZADD z 1 a 2 b\r\nZREM z a\r\nZSCORE z b\r\nZCARD z\r\nTYPE z\r\nZRANGE z 0 -1\r\nEXEC\r\n")
                for _ in 0..<7 { _ = try client.reply() }
                let reply = try client.reply()
                #expect(reply == .array([.integer(2), .integer(1), bulk("2"), .integer(1), .simple("zset"), .array([bulk("b")])]), "\(reply)")
            }
        }

        @Test func decideGetAndNotificationsShowTheMembers() async throws {
            try await withPeer("zset-get") { peer in
                let listener = try peer.client()
                _ = try listener.call("SUBSCRIBE", "__keyevent@0__:zadd", "__keyevent@0__:zrem")
                _ = try listener.reply()
                let client = try peer.client()
                #expect(try client.call("ZADD", "z", "2", "b", "1", "a") == .integer(2))
                let got = #"{"key":"z","sortedSet":[{"member":"a","score":1.0},{"member":"b","score":2.0}]}"#
                #expect(try client.call("DECIDE.GET", "z") == bulk(got))
                // `syncnode get` prints the members with their scores; a set's members; a counter's total.
                #expect(SyncNode.Get.shown(try JSONValue.parse(got)).compact() == #"[{"member":"a","score":1.0},{"member":"b","score":2.0}]"#)
                _ = try client.call("SADD", "s", "y", "x")
                _ = try client.call("INCRBY", "c", "7")
                if case .bulk(let set) = try client.call("DECIDE.GET", "s"), case .bulk(let counter) = try client.call("DECIDE.GET", "c") {
                    #expect(SyncNode.Get.shown(try JSONValue.parse(set)).compact() == #"["x","y"]"#)
                    #expect(SyncNode.Get.shown(try JSONValue.parse(counter)).compact() == "7")
                } else {
                    Issue.record("DECIDE.GET of a set or counter is no bulk string")
                }
                #expect(try client.call("ZREM", "z", "a") == .integer(1))
                var events: [RESPValue] = []
                for _ in 0..<3 { events.append(try listener.reply()) }
                let channels = events.compactMap { event -> String? in
                    guard case .array(let parts) = event, parts.count == 3, case .bulk(let channel) = parts[1] else { return nil }
                    return String(decoding: channel, as: UTF8.self)
                }
                #expect(channels == ["__keyevent@0__:zadd", "__keyevent@0__:zadd", "__keyevent@0__:zrem"], "\(events)")
            }
        }

        /// Two peers scoring members of one sorted set at once keep every member, and a member
        /// both score ends with the same score on both.
        @Test func membersScoredOnTwoPeersAtOnceAreAllKept() async throws {
            try await withPair { a, b in
                try pipelineOnBoth(a, (0..<200).map { "ZADD board \($0) a\($0)\r\nZADD board 1 both\r\n" },
                                   b, (0..<200).map { "ZADD board \($0) b\($0)\r\nZADD board 2 both\r\n" })
                let settled = try await eventually(20) {
                    try a.client().call("ZCARD", "board") == .integer(401) && b.client().call("ZCARD", "board") == .integer(401)
                        && a.client().call("ZRANGE", "board", "0", "-1", "WITHSCORES") == b.client().call("ZRANGE", "board", "0", "-1", "WITHSCORES")
                }
                let cardA = try a.client().call("ZCARD", "board"), cardB = try b.client().call("ZCARD", "board")
                #expect(settled, "a: \(cardA), b: \(cardB)")
            }
        }
    }
}
