import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT and PERSIST of a set, hash or sorted set as a whole
/// (`KeyLifetime`, docs/operations.md "Lifetimes of sets, hashes and sorted sets"): the key and
/// every element, those added after the EXPIRE included, expire together on every peer; TTL
/// answers the key's lifetime; NX / XX / GT / LT judge it; an instant already past deletes the
/// key; an emptied key, a SET or a DEL ends the lifetime, so a new key starts without one;
/// counters still refuse a lifetime, with the reason.
extension SyncNodeTests {
    @Suite struct CollectionLifetimeTests {
        /// One key of each kind: how to add an element, the element to add after the EXPIRE,
        /// and how to count its elements.
        static let kinds: [(name: String, add: [String], later: [String], count: [String], type: String)] = [
            ("s", ["SADD", "s", "a", "b"], ["SADD", "s", "c"], ["SCARD", "s"], "set"),
            ("h", ["HSET", "h", "a", "1", "b", "2"], ["HSET", "h", "c", "3"], ["HLEN", "h"], "hash"),
            ("z", ["ZADD", "z", "1", "a", "2", "b"], ["ZADD", "z", "3", "c"], ["ZCARD", "z"], "zset"),
        ]

        @Test func aSetAHashAndASortedSetExpireAsAWholeWithWhatWasAddedAfter() async throws {
            try await withPeer("lifetimes") { peer in
                let client = try peer.client()
                for kind in Self.kinds {
                    #expect(try client.call(list: kind.add) == .integer(2))
                    #expect(try client.call("TTL", kind.name) == .integer(-1))
                    #expect(try client.call("EXPIRE", kind.name, "100", "XX") == .integer(0), "XX: no lifetime yet")
                    #expect(try client.call("PEXPIRE", kind.name, "1500") == .integer(1))
                    guard case .integer(let left) = try client.call("PTTL", kind.name), left > 0, left <= 1500 else {
                        throw TestFailure("\(kind.type): PTTL is not the lifetime just given")
                    }
                    #expect(try client.call("EXPIRE", kind.name, "100", "NX") == .integer(0), "NX: it has one")
                    #expect(try client.call("PEXPIRE", kind.name, "1000000", "LT") == .integer(0), "LT: later than its own")
                    #expect(try client.call(list: kind.later) == .integer(1))
                    #expect(try client.call(list: kind.count) == .integer(3))
                }
                // Every element, the one added after the EXPIRE included, is gone with the key.
                let gone = try await eventually(10) {
                    try Self.kinds.allSatisfy { try client.call(list: $0.count) == .integer(0) && client.call("TYPE", $0.name) == .simple("none") }
                }
                let left = try Self.kinds.map { try client.call(list: $0.count) }
                #expect(gone, "\(left)")
                for kind in Self.kinds {
                    #expect(try client.call("TTL", kind.name) == .integer(-2))
                    // A new key of the name starts without a lifetime.
                    #expect(try client.call(list: kind.add) == .integer(2))
                    #expect(try client.call("TTL", kind.name) == .integer(-1), "\(kind.type) inherited the old lifetime")
                }
                #expect(peer.node.stateSummary.liveCount < 100)
            }
        }

        @Test func persistEndsTheLifetimeAndAPastInstantDeletes() async throws {
            try await withPeer("lifetime-persist") { peer in
                let client = try peer.client()
                for kind in Self.kinds {
                    #expect(try client.call(list: kind.add) == .integer(2))
                    #expect(try client.call("PEXPIRE", kind.name, "400") == .integer(1))
                    #expect(try client.call("PERSIST", kind.name) == .integer(1))
                    #expect(try client.call("PERSIST", kind.name) == .integer(0))
                    #expect(try client.call("TTL", kind.name) == .integer(-1))
                    #expect(try client.call(list: kind.later) == .integer(1))
                }
                // Past the 400 ms the lifetime had: everything is still there (a PERSIST that
                // left any element expiring would show here). Waited out by a second key given
                // the same lifetime after, which must be gone first.
                #expect(try client.call("SADD", "witness", "w") == .integer(1))
                #expect(try client.call("PEXPIRE", "witness", "400") == .integer(1))
                #expect(try await eventually(10) { try client.call("SCARD", "witness") == .integer(0) })
                for kind in Self.kinds {
                    #expect(try client.call(list: kind.count) == .integer(3), "\(kind.type) lost elements after PERSIST")
                    #expect(try client.call("EXPIREAT", kind.name, "1") == .integer(1), "an instant past deletes")
                    #expect(try client.call("TYPE", kind.name) == .simple("none"))
                }
            }
        }

        /// A key emptied before its instant, or replaced by SET, or deleted, leaves no lifetime
        /// behind: the next key of the name has none, and SCAN and KEYS list no marker.
        @Test func anEmptiedReplacedOrDeletedKeyLeavesNoLifetimeBehind() async throws {
            try await withPeer("lifetime-ends") { peer in
                let client = try peer.client()
                #expect(try client.call("SADD", "e", "a") == .integer(1))
                #expect(try client.call("EXPIRE", "e", "100") == .integer(1))
                #expect(try client.call("SREM", "e", "a") == .integer(1))
                #expect(try client.call("KEYS", "*") == .array([]), "the marker is no key")
                guard case .array(let page) = try client.call("SCAN", "0", "COUNT", "1000"), page.count == 2 else { throw TestFailure("SCAN answered no page") }
                #expect(page[1] == .array([]), "SCAN listed \(page[1])")
                #expect(try client.call("SADD", "e", "b") == .integer(1))
                #expect(try client.call("TTL", "e") == .integer(-1))
                #expect(try client.call("HSET", "r", "f", "v") == .integer(1))
                #expect(try client.call("EXPIRE", "r", "100") == .integer(1))
                #expect(try client.call("SET", "r", "plain") == ok)
                #expect(try client.call("TTL", "r") == .integer(-1))
                #expect(try client.call("DEL", "r") == .integer(1))
                #expect(try client.call("HSET", "r", "f", "v") == .integer(1))
                #expect(try client.call("TTL", "r") == .integer(-1))
                #expect(try client.call("INCR", "c") == .integer(1))
                #expect(try client.call("EXPIRE", "c", "10") == .integer(1))
            }
        }

        @Test func aMultiBlockSeesTheLifetimeItGives() async throws {
            try await withPeer("lifetime-multi") { peer in
                let client = try peer.client()
                try client.send(raw: "MULTI\r\nZADD m 1 a\r\nEXPIRE m 100\r\nZADD m 2 b\r\nTTL m\r\nPERSIST m\r\nTTL m\r\nEXEC\r\n")
                for _ in 0..<7 { _ = try client.reply() }
                let reply = try client.reply()
                #expect(reply == .array([.integer(1), .integer(1), .integer(1), .integer(100), .integer(1), .integer(-1)]), "\(reply)")
            }
        }

        /// A key with more elements than one decision may write (`maxDecisionBytes`, 8 MiB: 30,000
        /// set members of 200 bytes are 60,000 dot writes, 12 MB) answers EXPIRE with the
        /// refusal and keeps everything: no lifetime, no element rewritten, the set whole; one
        /// of a size that fits still takes it.
        @Test func anExpireLargerThanOneDecisionIsRefusedWholeAndChangesNothing() async throws {
            try await withPeer("lifetime-large") { peer in
                let client = try peer.client()
                let pad = String(repeating: "m", count: 190)
                for chunk in stride(from: 0, to: 30_000, by: 1_000) {
                    let members = (chunk..<(chunk + 1_000)).map { "\(pad)\($0)" }
                    #expect(try client.call(list: ["SADD", "big"] + members) == .integer(1_000))
                }
                let before = peer.node.stateSummary.liveCount
                guard case .error(let why) = try client.call("EXPIRE", "big", "100") else {
                    throw TestFailure("EXPIRE of a set larger than one decision was not refused")
                }
                #expect(why.contains("maxDecisionBytes"), "\(why)")
                #expect(try client.call("TTL", "big") == .integer(-1))
                #expect(try client.call("SCARD", "big") == .integer(30_000))
                #expect(peer.node.stateSummary.liveCount == before, "the refused EXPIRE wrote something")
                #expect(try client.call("SREM", "big", "\(pad)0") == .integer(1))
                // A set one decision can rewrite takes the lifetime.
                #expect(try client.call(list: ["SADD", "small"] + (0..<1_000).map { "\(pad)\($0)" }) == .integer(1_000))
                #expect(try client.call("EXPIRE", "small", "100") == .integer(1))
                guard case .integer(let left) = try client.call("TTL", "small"), left > 0, left <= 100 else {
                    throw TestFailure("the small set has no lifetime")
                }
            }
        }

        /// The case across peers: a session hash given a lifetime on a, a field added on
        /// b once b holds the lifetime: the whole hash, b's field included, is gone on both.
        @Test func aLifetimeGivenOnOnePeerEndsTheKeyOnBoth() async throws {
            try await withPair { a, b in
                let onA = try a.client(), onB = try b.client()
                #expect(try onA.call("HSET", "session", "user", "ann") == .integer(1))
                #expect(try onA.call("PEXPIRE", "session", "2000") == .integer(1))
                #expect(try await eventually(10) { if case .integer(let left) = try onB.call("PTTL", "session") { return left > 0 } else { return false } })
                #expect(try onB.call("HSET", "session", "cart", "3") == .integer(1))
                #expect(try await eventually(10) { try onA.call("HGET", "session", "cart") == bulk("3") })
                let gone = try await eventually(15) {
                    try onA.call("HLEN", "session") == .integer(0) && onB.call("HLEN", "session") == .integer(0)
                }
                let onBoth = try [onA.call("HGETALL", "session"), onB.call("HGETALL", "session")]
                #expect(gone, "\(onBoth)")
            }
        }
    }
}
