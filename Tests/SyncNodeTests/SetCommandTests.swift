import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER and SCARD as Redis answers them, on a set whose
/// concurrent inserts and removes on two peers end as the observed-remove rule says
/// (docs/operations.md, "Sets"): WRONGTYPE between sets and strings, SET and DEL replace a set,
/// TYPE, EXISTS, KEYS, SCAN, MULTI, notifications and DECIDE.GET know it.
extension SyncNodeTests {
    @Suite struct SetCommandTests {
        struct Online: SetState {
            typealias Element = String
            static var name: String { "online" }
        }

        @Test func setsAnswerAsRedisDoes() async throws {
            try await withPeer("sets") { peer in
                let client = try peer.client()
                #expect(try client.call("SADD", "online", "ann", "bob", "ann") == .integer(2))
                #expect(try client.call("SADD", "online", "bob", "cid") == .integer(1))
                #expect(try client.call("SMEMBERS", "online") == .array([bulk("ann"), bulk("bob"), bulk("cid")]))
                #expect(try client.call("SISMEMBER", "online", "bob") == .integer(1))
                #expect(try client.call("SISMEMBER", "online", "dee") == .integer(0))
                #expect(try client.call("SMISMEMBER", "online", "ann", "dee", "cid") == .array([.integer(1), .integer(0), .integer(1)]))
                #expect(try client.call("SCARD", "online") == .integer(3))
                #expect(try client.call("SREM", "online", "bob", "dee") == .integer(1))
                #expect(try client.call("SCARD", "online") == .integer(2))
                #expect(peer.node.read(Online.self) == ["ann", "cid"], "a Swift SetState of the same name reads the same members")
                // Members are strings, byte for byte: a number, JSON text and a quoted string stay apart.
                #expect(try client.call("SADD", "odd", "1", "01", "\"1\"", "{\"a\":1}", "") == .integer(5))
                #expect(try client.call("SMEMBERS", "odd") == .array([bulk(""), bulk("01"), bulk("1"), bulk("\"1\""), bulk("{\"a\":1}")]))
                // Kinds: TYPE, EXISTS, TTL, and WRONGTYPE both ways.
                #expect(try client.call("TYPE", "online") == .simple("set"))
                #expect(try client.call("EXISTS", "online", "none") == .integer(1))
                #expect(try client.call("TTL", "online") == .integer(-1))
                let wrong = RESPValue.error("WRONGTYPE Operation against a key holding the wrong kind of value")
                #expect(try client.call("GET", "online") == wrong)
                #expect(try client.call("INCR", "online") == wrong)
                #expect(try client.call("SET", "word", "hello") == ok)
                #expect(try client.call("SADD", "word", "x") == wrong)
                #expect(try client.call("SMEMBERS", "word") == wrong)
                #expect(try client.call("SCARD", "none") == .integer(0))
                #expect(try client.call("SMEMBERS", "none") == .array([]))
                #expect(try client.call("MGET", "online", "word") == .array([.null, bulk("hello")]), "MGET answers nil for a set, as Redis does")
                #expect(try client.call("EXPIRE", "online", "10") == .integer(1), "a set expires as a whole (CollectionLifetimeTests)")
                #expect(try client.call("PERSIST", "online") == .integer(1))
                #expect(try client.call("SADD", "quota[a]", "x").errorText?.contains("needs a plain key") == true)
                #expect(try client.call("SPOP", "online").errorText?.hasPrefix("ERR SPOP is not supported: ") == true)
                // KEYS and SCAN name a set once, whatever its dots; SCAN TYPE tells sets from strings.
                let keys = try client.call("KEYS", "o*")
                #expect(keys == .array([bulk("odd"), bulk("online")]) || keys == .array([bulk("online"), bulk("odd")]), "\(keys)")
                let sets = try Set(ScanTests.scanAll(client, options: ["TYPE", "set"]).keys).sorted()  // a page may repeat a key
                let strings = try ScanTests.scanAll(client, options: ["TYPE", "string"]).keys
                #expect(sets == ["odd", "online"] && strings == ["word"], "sets \(sets), strings \(strings)")
                // DECIDE.GET shows the members and their dots.
                guard case .bulk(let json) = try client.call("DECIDE.GET", "online"),
                      let shown = try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
                      let members = shown["set"] as? [[String: Any]] else {
                    Issue.record("DECIDE.GET online is no set")
                    return
                }
                #expect(members.map { $0["member"] as? String } == ["ann", "cid"] && members.allSatisfy { $0["dots"] as? Int == 1 })
                // SET NX does not replace a set; SET and DEL do.
                #expect(try client.call("SET", "online", "x", "NX") == .null)
                #expect(try client.call("SET", "online", "x") == ok)
                #expect(try client.call("GET", "online") == bulk("x"))
                #expect(try client.call("SISMEMBER", "online", "ann") == wrong)
                #expect(try client.call("DEL", "online", "odd") == .integer(2))
                #expect(try client.call("EXISTS", "online", "odd") == .integer(0))
                #expect(try client.call("SADD", "online", "eve") == .integer(1))
                #expect(try client.call("SMEMBERS", "online") == .array([bulk("eve")]))
            }
        }

        @Test func resp3AnswersSMEMBERSWithASet() async throws {
            try await withPeer("sets-resp3") { peer in
                let client = try peer.client()
                _ = try client.call("HELLO", "3")
                #expect(try client.call("SADD", "s", "a") == .integer(1))
                try client.send("SMEMBERS", "s")
                #expect(try client.rawReply().bytes.starts(with: Array("~1\r\n".utf8)))
            }
        }

        @Test func aMultiBlockSeesItsOwnChanges() async throws {
            try await withPeer("set-multi") { peer in
                let client = try peer.client()
                try client.send(raw: "MULTI\r\nSADD s a b\r\nSREM s a\r\nSISMEMBER s a\r\nSMEMBERS s\r\nTYPE s\r\nSCARD s\r\nEXEC\r\n")
                for _ in 0..<7 { _ = try client.reply() }
                let reply = try client.reply()
                #expect(reply == .array([.integer(2), .integer(1), .integer(0), .array([bulk("b")]), .simple("set"), .integer(1)]), "\(reply)")
            }
        }

        /// The issue's case: SADD and SREM of the same members on two peers at once. A member
        /// one peer removes while the other adds it again stays (add wins); members only removed
        /// go; both peers end with the same members.
        @Test func concurrentAddsAndRemovesOnTwoPeersEndAsTheRuleSays() async throws {
            try await withPair { a, b in
                let first = try a.client()
                let members = (0..<200).map { "m\($0)" }
                #expect(try first.call(bytes: (["SADD", "users"] + members).map { Array($0.utf8) }) == .integer(200))
                #expect(await eventually(10) { (try? b.client().call("SCARD", "users")) == .integer(200) })
                let onA = try a.client(), onB = try b.client()
                // At once: a removes every member; b adds the even ones again and a new one each.
                try onA.send(raw: members.map { "SREM users \($0)\r\n" }.joined())
                try onB.send(raw: members.enumerated().map { $0.offset % 2 == 0 ? "SADD users \($0.element)\r\nSADD users new\($0.offset)\r\n" : "" }.joined())
                for _ in 0..<200 { _ = try onA.reply() }
                for _ in 0..<200 { _ = try onB.reply() }
                let expected = Set((0..<200).filter { $0 % 2 == 0 }.flatMap { ["m\($0)", "new\($0)"] })
                func held(_ peer: TestPeer) throws -> Set<String> {
                    guard case .array(let items) = try peer.client().call("SMEMBERS", "users") else { return [] }
                    return Set(items.compactMap { if case .bulk(let bytes) = $0 { String(decoding: bytes, as: UTF8.self) } else { nil } })
                }
                let settled = try await eventually(20) { try held(a) == held(b) && held(a).isSuperset(of: expected.filter { $0.hasPrefix("new") }) }
                let countA = try held(a).count, countB = try held(b).count
                #expect(settled, "a: \(countA), b: \(countB)")
                // Every even member b added again stays unless a's remove ran after it arrived; no
                // odd member (only removed) is left; every new member is in.
                let final = try held(a)
                #expect(final.allSatisfy { expected.contains($0) }, "extra: \(final.subtracting(expected).sorted().prefix(5))")
                #expect(expected.filter { $0.hasPrefix("new") }.allSatisfy { final.contains($0) })
            }
        }

        @Test func subscribersHearSaddAndSrem() async throws {
            try await withPeer("set-events") { peer in
                let events = try peer.client()
                try events.send("SUBSCRIBE", "__keyevent@0__:sadd", "__keyevent@0__:srem")
                _ = try events.reply()
                _ = try events.reply()
                #expect(try peer.client().call("SADD", "s", "a") == .integer(1))
                #expect(try events.reply() == .array([bulk("message"), bulk("__keyevent@0__:sadd"), bulk("s")]))
                #expect(try peer.client().call("SREM", "s", "a") == .integer(1))
                #expect(try events.reply() == .array([bulk("message"), bulk("__keyevent@0__:srem"), bulk("s")]))
            }
        }
    }
}
