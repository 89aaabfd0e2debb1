import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// The expiry commands with Redis's replies: SET EX / PX / EXAT / PXAT / KEEPTTL, SETEX,
/// PSETEX, EXPIRE and friends with NX / XX / GT / LT, PERSIST, TTL, PTTL, EXPIRETIME,
/// PEXPIRETIME; the expiry replicates, and every peer removes the key and says so.
extension SyncNodeTests {
    @Suite struct ExpiryCommandTests {
        @Test func setWithALifetimeAndTheTimeLeft() async throws {
            try await withPeer("ttl") { peer in
                let client = try peer.client()
                #expect(try client.call("SET", "k", "v", "EX", "100") == ok)
                #expect(try client.call("TTL", "k") == .integer(100))
                let pttl = try #require(try client.call("PTTL", "k").integerValue)
                #expect(pttl > 99_000 && pttl <= 100_000, "\(pttl)")
                let expiresAt = try #require(peer.node.entry(for: StateKey(name: "k"))?.expiresAtMilliseconds)
                #expect(try client.call("PEXPIRETIME", "k") == .integer(Int64(expiresAt)))
                #expect(try client.call("EXPIRETIME", "k") == .integer(Int64(expiresAt / 1000)))
                // KEEPTTL keeps it; a plain SET ends it.
                #expect(try client.call("SET", "k", "w", "KEEPTTL") == ok)
                #expect(peer.node.entry(for: StateKey(name: "k"))?.expiresAtMilliseconds == expiresAt)
                #expect(try client.call("SET", "k", "x") == ok)
                #expect(try client.call("TTL", "k") == .integer(-1))
                #expect(try client.call("TTL", "missing") == .integer(-2))
                #expect(try client.call("PTTL", "missing") == .integer(-2))
                // PXAT an instant, SETEX and PSETEX.
                let later = UInt64(Date().timeIntervalSince1970 * 1000) + 50_000
                #expect(try client.call("SET", "at", "1", "PXAT", String(later)) == ok)
                #expect(peer.node.entry(for: StateKey(name: "at"))?.expiresAtMilliseconds == later)
                #expect(try client.call("SETEX", "sx", "30", "v") == ok)
                #expect(try client.call("TTL", "sx") == .integer(30))
                #expect(try client.call("PSETEX", "psx", "30000", "v") == ok)
                #expect(try client.call("TTL", "psx") == .integer(30))
                #expect(try client.call("SETEX", "sx", "0", "v") == .error("ERR invalid expire time in 'setex' command"))
                #expect(try client.call("SET", "k", "v", "EX", "0") == .error("ERR invalid expire time in 'set' command"))
                #expect(try client.call("SET", "k", "v", "EX", "x") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("SET", "k", "v", "EX") == .error("ERR syntax error"))
                // NX with a lifetime, and GET with one.
                #expect(try client.call("SET", "nx", "1", "NX", "PX", "60000") == ok)
                #expect(try client.call("SET", "nx", "2", "NX", "PX", "60000") == .null)
                #expect(try client.call("SET", "nx", "3", "GET", "EX", "60") == bulk("1"))
                #expect(try client.call("TTL", "nx") == .integer(60))
                // INFO keyspace counts the keys that will expire.
                let keyspace = try #require(try client.call("INFO", "keyspace").text)
                #expect(keyspace.contains("db0:keys=5,expires=4,"), "\(keyspace)")
            }
        }

        @Test func aKeyDisappearsWhenItsTimeComes() async throws {
            try await withPeer("gone") { peer in
                let client = try peer.client()
                let events = try peer.client()
                #expect(try events.call("SUBSCRIBE", "__keyevent@0__:expired")
                        == .array([bulk("subscribe"), bulk("__keyevent@0__:expired"), .integer(1)]))
                #expect(try client.call("SET", "short", "v", "PX", "200") == ok)
                #expect(try client.call("SET", "long", "v", "EX", "100") == ok)
                #expect(try client.call("GET", "short") == bulk("v"))
                #expect(try events.reply(timeout: 10) == PubSubTests.message("__keyevent@0__:expired", "short"))
                #expect(try client.call("GET", "short") == .null)
                #expect(try client.call("EXISTS", "short", "long") == .integer(1))
                #expect(try client.call("TYPE", "short") == .simple("none"))
                #expect(try client.call("DBSIZE") == .integer(1))
                #expect(try client.call("KEYS", "*") == .array([bulk("long")]))
                #expect(try client.call("DECIDE.GET", "short") == .null)
                // SET NX treats an expired key as absent.
                #expect(try client.call("SET", "short", "again", "NX") == ok)
                #expect(try client.call("GET", "short") == bulk("again"))
            }
        }

        @Test func expireAndPersist() async throws {
            try await withPeer("expire") { peer in
                let client = try peer.client()
                #expect(try client.call("EXPIRE", "missing", "10") == .integer(0))
                #expect(try client.call("SET", "k", "v") == ok)
                #expect(try client.call("EXPIRE", "k", "100", "XX") == .integer(0))
                #expect(try client.call("EXPIRE", "k", "100", "GT") == .integer(0), "no expiry counts as infinite")
                #expect(try client.call("EXPIRE", "k", "100", "NX") == .integer(1))
                #expect(try client.call("TTL", "k") == .integer(100))
                #expect(try client.call("EXPIRE", "k", "50", "NX") == .integer(0))
                #expect(try client.call("EXPIRE", "k", "50", "GT") == .integer(0))
                #expect(try client.call("PEXPIRE", "k", "200000", "GT") == .integer(1))
                #expect(try client.call("TTL", "k") == .integer(200))
                #expect(try client.call("EXPIRE", "k", "300", "LT") == .integer(0))
                #expect(try client.call("EXPIRE", "k", "20", "LT", "XX") == .integer(1))
                #expect(try client.call("TTL", "k") == .integer(20))
                #expect(try client.call("PERSIST", "k") == .integer(1))
                #expect(try client.call("PERSIST", "k") == .integer(0))
                #expect(try client.call("TTL", "k") == .integer(-1))
                #expect(try client.call("GET", "k") == bulk("v"))
                // An instant in the past deletes the key, as Redis does.
                #expect(try client.call("PEXPIREAT", "k", "1000") == .integer(1))
                #expect(try client.call("GET", "k") == .null)
                #expect(peer.node.entry(for: StateKey(name: "k"))?.isTombstone == true)
                #expect(try client.call("SET", "k", "v") == ok)
                #expect(try client.call("EXPIRE", "k", "0") == .integer(1))
                #expect(try client.call("EXISTS", "k") == .integer(0))
                // Errors, nothing written.
                #expect(try client.call("SET", "k", "v") == ok)
                #expect(try client.call("EXPIRE", "k", "ten") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("EXPIRE", "k", "10", "NX", "XX")
                        == .error("ERR NX and XX, GT or LT options at the same time are not compatible"))
                #expect(try client.call("EXPIRE", "k", "10", "GT", "LT") == .error("ERR GT and LT options at the same time are not compatible"))
                #expect(try client.call("EXPIRE", "k", "10", "SOON") == .error("ERR Unsupported option SOON"))
                #expect(try client.call("EXPIRE", "k", "9223372036854775807")
                        == .error("ERR invalid expire time in 'expire' command"))
                #expect(try client.call("TTL", "k") == .integer(-1))
                // DECIDE.PUT with a lifetime (the CLI's put --expire-after).
                #expect(try client.call("DECIDE.PUT", "j", "{\"a\":1}", "PX", "90000").errorText == nil)
                let pttl = try #require(try client.call("PTTL", "j").integerValue)
                #expect(pttl > 89_000 && pttl <= 90_000)
                #expect(try client.call("DECIDE.PUT", "j", "1", "PX", "0") == .error("ERR invalid expire time in 'decide.put' command"))
                #expect(try client.call("DECIDE.PUT", "j", "1", "EX", "5").errorText?.hasPrefix("ERR syntax error") == true)
            }
        }

        @Test func theExpiryReplicatesAndEveryPeerRemovesTheKey() async throws {
            try await withPair { a, b in
                let watcher = try b.client()
                #expect(try watcher.call("PSUBSCRIBE", "__keyspace@0__:*")
                        == .array([bulk("psubscribe"), bulk("__keyspace@0__:*"), .integer(1)]))
                #expect(try a.client().call("SET", "presence", "up", "PX", "1500") == ok)
                #expect(try watcher.reply() == PubSubTests.pmessage("__keyspace@0__:*", "__keyspace@0__:presence", "set"))
                let onB = try b.client()
                let pttl = try #require(try onB.call("PTTL", "presence").integerValue)
                #expect(pttl > 0 && pttl <= 1_500, "b holds the same expiry instant: \(pttl)")
                #expect(try watcher.reply(timeout: 10) == PubSubTests.pmessage("__keyspace@0__:*", "__keyspace@0__:presence", "expired"))
                #expect(try onB.call("GET", "presence") == .null)
                #expect(try a.client().call("GET", "presence") == .null)
            }
        }

        @Test func anOwnedKeyGoesWithItsPeer() async throws {
            let (a, b) = try await startPair()
            do {
                let onA = try a.client(), onB = try b.client()
                #expect(try onA.call("SET", "presence[api@a]", "up", "OWNED") == ok)
                #expect(try onA.call("DECIDE.PUT", "presence[job@a]", "\"up\"", "OWNED", "PX", "600000").errorText == nil)
                #expect(try onA.call("SET", "config", "shared") == ok)
                #expect(try onA.call("SET", "k", "v", "OWNED", "OWNED") == .error("ERR syntax error"))
                #expect(try await eventually { try onB.call("EXISTS", "presence[api@a]", "presence[job@a]", "config") == .integer(3) })
                let json = try #require(try onB.call("DECIDE.GET", "presence[job@a]").text)
                #expect(json.contains("\"owned\":true") && json.contains("\"expiresAt\":"), "\(json)")
                let watcher = try b.client()
                #expect(try watcher.call("SUBSCRIBE", "__keyspace@0__:presence[\"api@a\"]")
                        == .array([bulk("subscribe"), bulk("__keyspace@0__:presence[\"api@a\"]"), .integer(1)]))
                // a leaves: its owned keys read as absent on b, its shared key stays.
                await a.stop()
                #expect(try watcher.reply(timeout: 10) == PubSubTests.message("__keyspace@0__:presence[\"api@a\"]", "del"))
                #expect(try onB.call("EXISTS", "presence[api@a]", "presence[job@a]", "config") == .integer(1))
                #expect(try onB.call("GET", "config") == bulk("shared"))
                #expect(try onB.call("DBSIZE") == .integer(1))
            } catch {
                await a.stop()
                await b.stop()
                throw error
            }
            await b.stop()
        }
    }
}
