import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// INCR, INCRBY, DECR and DECRBY as Redis answers them, on a counter that changes made on two
/// peers at once never lose (docs/operations.md, "Counters"): a string holding a number is taken
/// over, SET and DEL replace the counter, and it reads as a string everywhere.
extension SyncNodeTests {
    @Suite struct CounterCommandTests {
        struct Hits: CounterState {
            static var name: String { "hits" }
        }

        @Test func countersAnswerAsRedisDoes() async throws {
            try await withPeer("counters") { peer in
                let client = try peer.client()
                #expect(try client.call("INCR", "hits") == .integer(1))
                #expect(try client.call("INCRBY", "hits", "41") == .integer(42))
                #expect(try client.call("DECR", "hits") == .integer(41))
                #expect(try client.call("DECRBY", "hits", "-9") == .integer(50))
                #expect(try client.call("GET", "hits") == bulk("50"))
                #expect(try client.call("TYPE", "hits") == .simple("string"))
                #expect(try client.call("EXISTS", "hits", "none") == .integer(1))
                #expect(try client.call("MGET", "hits", "none") == .array([bulk("50"), .null]))
                #expect(peer.node.read(Hits.self) == 50, "a Swift CounterState of the same name reads the same total")
                // Errors, with nothing written.
                #expect(try client.call("INCRBY", "hits", "x") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("INCRBY", "hits", "99999999999999999999") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("DECRBY", "hits", "-9223372036854775808") == .error("ERR decrement would overflow"))
                let overflow = try client.call("INCRBY", "hits", "9223372036854775807").errorText ?? ""
                #expect(overflow.hasPrefix("ERR INCRBY refused, nothing written: counter hits") && overflow.contains("outside Int64"))
                #expect(try client.call("SET", "word", "hello") == ok)
                #expect(try client.call("INCR", "word") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("GET", "word") == bulk("hello"))
                let element = try client.call("INCR", "quota[a]").errorText ?? ""
                #expect(element.contains("needs a plain key"))
                let float = try client.call("INCRBYFLOAT", "hits", "1.5").errorText ?? ""
                #expect(float.hasPrefix("ERR INCRBYFLOAT is not supported: "))
                #expect(try client.call("GET", "hits") == bulk("50"))
                // A number SET before is taken over; SET and DEL replace the counter.
                #expect(try client.call("SET", "n", "10") == ok)
                #expect(try client.call("INCR", "n") == .integer(11))
                #expect(try client.call("SET", "n", "5") == ok)
                #expect(try client.call("GET", "n") == bulk("5"))
                #expect(try client.call("INCR", "n") == .integer(6))
                #expect(try client.call("GETSET", "n", "1") == bulk("6"))
                #expect(try client.call("INCRBY", "n", "-1") == .integer(0))
                #expect(try client.call("GET", "n") == .null, "a counter whose total is 0 reads as no key")
                #expect(try client.call("INCR", "n") == .integer(1))
                #expect(try client.call("DEL", "n") == .integer(1))
                #expect(try client.call("GET", "n") == .null)
                #expect(try client.call("EXISTS", "n") == .integer(0))
                #expect(try client.call("SET", "n", "7", "NX") == ok)
                #expect(try client.call("INCR", "n") == .integer(8))
                #expect(try client.call("SET", "n", "1", "NX") == .null, "a counter is a key SET NX does not replace")
                // A lifetime: a string's goes over to the counter that takes it over (INCR keeps
                // a key's TTL, as in Redis); EXPIRE and PERSIST give and end a counter's.
                #expect(try client.call("SET", "ttl", "1", "EX", "100") == ok)
                #expect(try client.call("INCR", "ttl") == .integer(2))
                #expect(try [.integer(99), .integer(100)].contains(client.call("TTL", "ttl")))
                #expect(try client.call("TTL", "hits") == .integer(-1))
                #expect(try client.call("EXPIRE", "hits", "60") == .integer(1))
                #expect(try [.integer(59), .integer(60)].contains(client.call("TTL", "hits")))
                #expect(try client.call("PERSIST", "hits") == .integer(1))
                #expect(try client.call("TTL", "hits") == .integer(-1))
                #expect(try client.call("GET", "hits") == bulk("50"))
                // One Redis key, however many slots: KEYS and SCAN list it once.
                #expect(try client.call("KEYS", "hits") == .array([bulk("hits")]))
                // A whole walk, cursor 0 to 0: one page holds only some of the digest's leaves,
                // and which one holds the slot depends on the slot's hash (its incarnation).
                var names: [RESPValue] = []
                var cursor = "0"
                repeat {
                    guard case .array(let page) = try client.call("SCAN", cursor, "MATCH", "hits", "COUNT", "1000"),
                          page.count == 2, case .bulk(let next) = page[0], case .array(let listed) = page[1] else {
                        Issue.record("SCAN did not answer a page")
                        return
                    }
                    names += listed
                    cursor = String(decoding: next, as: UTF8.self)
                } while cursor != "0"
                #expect(names == [bulk("hits")])
                // DECIDE.GET (the CLI's get) shows the total and the slots it is made of.
                guard case .bulk(let json) = try client.call("DECIDE.GET", "hits"),
                      let shown = try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
                      let slots = shown["slots"] as? [[String: Any]] else {
                    Issue.record("DECIDE.GET of a counter gave no JSON")
                    return
                }
                #expect(shown["key"] as? String == "hits" && shown["counter"] as? Int == 50)
                #expect(slots.count == 1 && slots[0]["node"] as? String == "counters" && slots[0]["increments"] as? Int == 51
                        && slots[0]["decrements"] as? Int == 1, "\(slots)")
            }
        }

        @Test func aMultiBlockSeesItsOwnChanges() async throws {
            try await withPeer("counter-multi") { peer in
                let client = try peer.client()
                try client.send(raw: "MULTI\r\nSET k 5\r\nINCR k\r\nINCRBY k 10\r\nGET k\r\nDECR k\r\nEXEC\r\n")
                for _ in 0..<6 { _ = try client.reply() }
                #expect(try client.reply() == .array([ok, .integer(6), .integer(16), bulk("16"), .integer(15)]))
                let after = try client.call("GET", "k")
                #expect(after == bulk("15"), "\(after)")
            }
        }

        /// The issue's case: two peers each take units of one key at once, and both read the
        /// exact total; and a number SET once, taken over by INCRs on both peers at once, counts
        /// once.
        @Test func changesOnTwoPeersAtOnceAllCount() async throws {
            try await withPair { a, b in
                let first = try a.client()
                #expect(try first.call("SET", "n", "10") == ok)
                #expect(await eventually(10) { (try? b.client().call("GET", "n")) == bulk("10") })
                let onA = try a.client(), onB = try b.client()
                let rounds = 2_000
                let pipeline = String(repeating: "INCR hits\r\nINCRBY n 2\r\n", count: rounds)
                try onA.send(raw: pipeline)
                try onB.send(raw: pipeline)
                for _ in 0..<(2 * rounds) {
                    _ = try onA.reply()
                    _ = try onB.reply()
                }
                let expected = RESPValue.array([bulk("4000"), bulk("8010")])
                let settled = try await eventually(20) {
                    try a.client().call("MGET", "hits", "n") == expected && b.client().call("MGET", "hits", "n") == expected
                }
                let onAReads = try a.client().call("MGET", "hits", "n"), onBReads = try b.client().call("MGET", "hits", "n")
                #expect(settled, "a: \(onAReads), b: \(onBReads)")
            }
        }

        @Test func subscribersHearIncrby() async throws {
            try await withPeer("counter-events") { peer in
                let events = try peer.client()
                try events.send("SUBSCRIBE", "__keyspace@0__:hits", "__keyevent@0__:incrby")
                _ = try events.reply()
                _ = try events.reply()
                #expect(try peer.client().call("INCR", "hits") == .integer(1))
                let heard = [try events.reply(), try events.reply()]
                #expect(heard.contains(.array([bulk("message"), bulk("__keyspace@0__:hits"), bulk("incrby")])))
                #expect(heard.contains(.array([bulk("message"), bulk("__keyevent@0__:incrby"), bulk("hits")])))
            }
        }
    }
}
