import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// EXPIRE, PEXPIRE, EXPIREAT, PERSIST and TTL of a counter, as Redis's fixed-window rate limiter
/// uses them (`INCR key` then `EXPIRE key 60`): the count expires as a whole on every node,
/// every node's share with it, and counts from 0 after (docs/operations.md, "Lifetimes of
/// counters"; docs/design/0004-collection-lifetimes.md, "Counters").
extension SyncNodeTests {
    @Suite struct CounterLifetimeCommandTests {
        @Test func aCounterExpiresAsAWholeAndCountsFromZeroAfter() async throws {
            try await withPeer("counter-lifetime") { peer in
                let client = try peer.client()
                #expect(try client.call("INCR", "window") == .integer(1))
                #expect(try client.call("PEXPIRE", "window", "400") == .integer(1))
                guard case .integer(let left) = try client.call("PTTL", "window") else { throw TestFailure("PTTL answered no integer") }
                #expect(left > 0 && left <= 400)
                // Later changes keep the lifetime, as INCR keeps a key's TTL in Redis.
                #expect(try client.call("INCRBY", "window", "5") == .integer(6))
                guard case .integer(let still) = try client.call("PTTL", "window") else { throw TestFailure("PTTL answered no integer") }
                #expect(still > 0 && still <= left)
                let slots = peer.node.counterSlots(named: "window")
                #expect(!slots.isEmpty && slots.allSatisfy { $0.expiresAtMilliseconds != nil }, "\(slots)")
                #expect(await eventually(5) { (try? client.call("GET", "window")) == .null })
                #expect(try client.call("TTL", "window") == .integer(-2))
                #expect(try client.call("EXISTS", "window") == .integer(0))
                #expect(try client.call("INCR", "window") == .integer(1), "a new count after the lifetime")
                #expect(try client.call("TTL", "window") == .integer(-1), "the new count has no lifetime")
            }
        }

        @Test func optionsDeleteAndReplaceTreatACounterAsRedisTreatsAKey() async throws {
            try await withPeer("counter-lifetime-options") { peer in
                let client = try peer.client()
                #expect(try client.call("INCR", "c") == .integer(1))
                #expect(try client.call("EXPIRE", "c", "100", "XX") == .integer(0))
                #expect(try client.call("EXPIRE", "c", "100", "NX") == .integer(1))
                #expect(try client.call("EXPIRE", "c", "200", "NX") == .integer(0))
                #expect(try client.call("EXPIRE", "c", "50", "GT") == .integer(0))
                #expect(try client.call("EXPIRE", "c", "50", "LT") == .integer(1))
                #expect(try [.integer(49), .integer(50)].contains(client.call("TTL", "c")))
                let at = Int(Date().timeIntervalSince1970) + 1_000
                #expect(try client.call("EXPIREAT", "c", String(at)) == .integer(1))
                #expect(try client.call("EXPIRETIME", "c") == .integer(Int64(at)))
                #expect(try client.call("PERSIST", "c") == .integer(1))
                #expect(try client.call("PERSIST", "c") == .integer(0))
                #expect(try client.call("TTL", "c") == .integer(-1))
                // DEL of a counter with a lifetime ends both: a new INCR has none.
                #expect(try client.call("EXPIRE", "c", "100") == .integer(1))
                #expect(try client.call("DEL", "c") == .integer(1))
                #expect(try client.call("GET", "c") == .null)
                #expect(try client.call("INCR", "c") == .integer(1))
                #expect(try client.call("TTL", "c") == .integer(-1))
                // SET over it: a plain value without a lifetime.
                #expect(try client.call("EXPIRE", "c", "100") == .integer(1))
                #expect(try client.call("SET", "c", "word") == ok)
                #expect(try client.call("GET", "c") == bulk("word"))
                #expect(try client.call("TTL", "c") == .integer(-1))
                // An instant already past deletes it, as for any key.
                #expect(try client.call("SET", "d", "4") == ok)
                #expect(try client.call("INCR", "d") == .integer(5))
                #expect(try client.call("EXPIRE", "d", "-1") == .integer(1))
                #expect(try client.call("GET", "d") == .null)
                #expect(try client.call("INCR", "d") == .integer(1))
                // A lifetime on a counter that reads 0 (no key): nothing to expire.
                #expect(try client.call("EXPIRE", "never-counted", "10") == .integer(0))
            }
        }

        @Test func aMultiBlockSeesTheLifetimeItGivesACounter() async throws {
            try await withPeer("counter-lifetime-multi") { peer in
                let client = try peer.client()
                try client.send(raw: "MULTI\r\nINCR m\r\nEXPIRE m 100\r\nINCR m\r\nTTL m\r\nDEL m\r\nINCR m\r\nTTL m\r\nEXEC\r\n")
                for _ in 0..<8 { _ = try client.reply() }
                let replies = try client.reply()
                #expect(replies == .array([.integer(1), .integer(1), .integer(2), .integer(100), .integer(1), .integer(1), .integer(-1)]), "\(replies)")
                #expect(try client.call("GET", "m") == bulk("1"))
                #expect(try client.call("TTL", "m") == .integer(-1))
            }
        }

        /// A MULTI block that deletes a key with a lifetime, then counts into it: the new counter
        /// has no lifetime, whether the old one was stored or given earlier in the block (the
        /// block's own marker writes are read, not the table's alone).
        @Test func aCounterStartedInTheBlockThatDeletedAKeyWithALifetimeHasNone() async throws {
            try await withPeer("counter-lifetime-after-del") { peer in
                let client = try peer.client()
                #expect(try client.call("HSET", "h", "f", "v") == .integer(1))
                #expect(try client.call("EXPIRE", "h", "100") == .integer(1))
                try client.send(raw: "MULTI\r\nDEL h\r\nINCR h\r\nEXEC\r\n")
                for _ in 0..<3 { _ = try client.reply() }
                #expect(try client.reply() == .array([.integer(1), .integer(1)]))
                #expect(try client.call("TTL", "h") == .integer(-1))
                let slots = peer.node.counterSlots(named: "h")
                #expect(slots.count == 1 && slots[0].expiresAtMilliseconds == nil, "\(slots)")
                try client.send(raw: "MULTI\r\nHSET g f v\r\nEXPIRE g 100\r\nDEL g\r\nINCR g\r\nEXEC\r\n")
                for _ in 0..<5 { _ = try client.reply() }
                #expect(try client.reply() == .array([.integer(1), .integer(1), .integer(1), .integer(1)]))
                #expect(try client.call("TTL", "g") == .integer(-1), "the block's own EXPIRE went with its DEL")
                #expect(try client.call("SADD", "g2", "x") == .integer(1))
            }
        }

        /// The rate limiter on two peers: both count into one window at once, one of them gives
        /// it its lifetime, and the other's share (made before it heard of the lifetime) goes at
        /// the instant too, because that peer gives its own slot the lifetime when the marker
        /// arrives. Without that, the other peer's share would outlive the window.
        @Test func aLifetimeGivenOnOnePeerTakesTheOtherPeersShareWithIt() async throws {
            try await withPair { a, b in
                let onA = try a.client(), onB = try b.client()
                let rounds = 500
                let pipeline = String(repeating: "INCR window\r\n", count: rounds)
                try onA.send(raw: pipeline)
                try onB.send(raw: pipeline)
                for _ in 0..<rounds {
                    _ = try onA.reply()
                    _ = try onB.reply()
                }
                let counted = try await eventually(20) {
                    try onA.call("GET", "window") == bulk("1000") && onB.call("GET", "window") == bulk("1000")
                }
                #expect(counted)
                #expect(try onA.call("PEXPIRE", "window", "1500") == .integer(1))
                // B's own slot takes the instant (the follow), and both read the whole count meanwhile.
                let nodeA = a.node, nodeB = b.node
                let followed = await eventually(10) {
                    let slots = nodeB.counterSlots(named: "window")
                    return slots.count == 2 && slots.allSatisfy { $0.expiresAtMilliseconds != nil }
                        && nodeA.counterSlots(named: "window").allSatisfy { $0.expiresAtMilliseconds != nil }
                }
                #expect(followed, "a: \(nodeA.counterSlots(named: "window")), b: \(nodeB.counterSlots(named: "window"))")
                #expect(try onB.call("GET", "window") == bulk("1000"))
                guard case .integer(let left) = try onB.call("PTTL", "window") else { throw TestFailure("PTTL answered no integer") }
                #expect(left > 0 && left <= 1500)
                let expired = try await eventually(10) {
                    try onA.call("GET", "window") == .null && onB.call("GET", "window") == .null
                }
                let readA = try onA.call("GET", "window"), readB = try onB.call("GET", "window")
                #expect(expired, "a reads \(readA), b \(readB)")
                // The next window counts from 0 on both.
                #expect(try onB.call("INCR", "window") == .integer(1))
                let second = try onA.call("INCR", "window")
                #expect(second == .integer(1) || second == .integer(2), "\(second)")
                let next = try await eventually(10) {
                    try onA.call("GET", "window") == bulk("2") && onB.call("GET", "window") == bulk("2")
                }
                #expect(next)
                #expect(try onA.call("TTL", "window") == .integer(-1))
            }
        }
    }
}
