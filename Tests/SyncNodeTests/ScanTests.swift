import Decide
import DecideCore
import DecideRESP
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// SCAN's guarantee (a key held throughout a full walk is returned exactly once, even while
/// others write and delete), MATCH and TYPE, invalid cursors, and KEYS with its reply bound.
extension SyncNodeTests {
    @Suite struct ScanTests {
        static let keyCount = 20_000

        static func name(_ index: Int) -> String {
            let digits = String(index)
            return "key:" + String(repeating: "0", count: max(0, 5 - digits.count)) + digits
        }

        /// Writes `keyCount` keys with pipelined MSETs of 500 keys (all sent, then all answered).
        static func writeKeys(_ client: TestClient) throws -> [String] {
            let names = (0 ..< keyCount).map(name)
            var batch: [UInt8] = []
            for start in stride(from: 0, to: keyCount, by: 500) {
                batch += request(["MSET"] + names[start ..< start + 500].flatMap { [$0, "v"] })
            }
            try client.send(raw: batch)
            for _ in 0 ..< keyCount / 500 {
                let reply = try client.reply()
                guard reply == ok else { throw TestFailure("MSET answered \(reply)") }
            }
            return names
        }

        /// A full SCAN walk from cursor 0 back to 0; every key returned, in order, duplicates kept.
        /// `afterPage` runs after each page.
        static func scanAll(_ client: TestClient, options: [String] = ["COUNT", "100"],
                            afterPage: () throws -> Void = {}) throws -> (keys: [String], pages: Int) {
            var cursor = "0"
            var keys: [String] = []
            var pages = 0
            repeat {
                let reply = try client.call(bytes: (["SCAN", cursor] + options).map { Array($0.utf8) })
                guard let parts = reply.elements, parts.count == 2, let next = parts[0].text, let page = parts[1].texts else {
                    throw TestFailure("SCAN \(cursor) answered \(reply)")
                }
                keys += page
                cursor = next
                pages += 1
                guard pages < 100_000 else { throw TestFailure("SCAN did not finish") }
                try afterPage()
            } while cursor != "0"
            return (keys, pages)
        }

        @Test func aFullScanReturnsEveryKeyExactlyOnce() async throws {
            try await withPeer("scan") { peer in
                let client = try peer.client()
                let names = try Self.writeKeys(client)
                #expect(try client.call("DBSIZE") == .integer(Int64(Self.keyCount)))
                let (keys, pages) = try Self.scanAll(client)
                #expect(keys.count == Self.keyCount, "SCAN returned \(keys.count) keys for \(Self.keyCount)")
                #expect(Set(keys) == Set(names))
                #expect(pages > Self.keyCount / 1_000, "COUNT 100 took only \(pages) pages")
                // A tombstone is not listed.
                #expect(try client.call("DEL", names[0], names[1]) == .integer(2))
                let after = try Self.scanAll(client, options: ["COUNT", "1000"]).keys
                #expect(after.count == Self.keyCount - 2 && !after.contains(names[0]) && !after.contains(names[1]))
            }
        }

        /// Another client writes new keys and deletes some of the original ones throughout the
        /// walk: every original key it never deleted comes back exactly once, and no key twice.
        @Test func aScanDuringWritesAndDeletesMissesNoStableKeyAndRepeatsNone() async throws {
            try await withPeer("scan-churn") { peer in
                let client = try peer.client()
                let names = try Self.writeKeys(client)
                let churn = Churn()
                let address = peer.admin
                // Deletable: every fourth original key, in a shuffled order.
                var random = SeededRandom(seed: 7)
                let deletable = stride(from: 0, to: names.count, by: 4).map { names[$0] }.shuffled(using: &random)
                let thread = Thread {
                    defer { churn.done.signal() }
                    do {
                        let writer = try TestClient(address)
                        var index = 0
                        while !churn.stop.load(ordering: .acquiring) {
                            let key = "new:\(index)"
                            churn.written.withLock { _ = $0.insert(key) }
                            guard try writer.call("SET", key, "n") == ok else { throw TestFailure("SET \(key) failed") }
                            if index < deletable.count {
                                churn.deleted.withLock { _ = $0.insert(deletable[index]) }
                                guard try writer.call("DEL", deletable[index]) == .integer(1) else {
                                    throw TestFailure("DEL \(deletable[index]) did not delete")
                                }
                            }
                            index += 1
                            churn.operations.store(index, ordering: .releasing)
                        }
                    } catch {
                        churn.failure.withLock { $0 = "\(error)" }
                    }
                }
                thread.start()
                // Each page waits for the writer to move on: the walk and the writes interleave
                // from its first page to its last.
                let (keys, pages) = try Self.scanAll(client) {
                    let seen = churn.operations.load(ordering: .acquiring)
                    let deadline = Date().addingTimeInterval(10)
                    while churn.operations.load(ordering: .acquiring) == seen && Date() < deadline
                            && churn.failure.withLock({ $0 }) == nil {
                        usleep(200)
                    }
                }
                churn.stop.store(true, ordering: .releasing)
                #expect(churn.done.wait(timeout: .now() + 10) == .success, "the writer did not stop")
                #expect(churn.failure.withLock { $0 } == nil, "writer: \(churn.failure.withLock { $0 } ?? "")")
                let operations = churn.operations.load(ordering: .acquiring)
                #expect(operations >= pages, "only \(operations) writes during \(pages) pages")

                var counts: [String: Int] = [:]
                for key in keys { counts[key, default: 0] += 1 }
                let repeated = counts.filter { $0.value > 1 }.map(\.key)
                #expect(repeated.isEmpty, "keys returned twice: \(repeated.prefix(10))")
                let deleted = churn.deleted.withLock { $0 }
                let written = churn.written.withLock { $0 }
                let stable = names.filter { !deleted.contains($0) }
                let missing = stable.filter { counts[$0] == nil }
                #expect(missing.isEmpty, "\(missing.count) keys held throughout the walk were not returned: \(missing.prefix(10))")
                #expect(keys.allSatisfy { $0.hasPrefix("key:") || written.contains($0) })
                #expect(deleted.count > 100 && stable.count > Self.keyCount / 2)
            }
        }

        final class Churn: @unchecked Sendable {
            let stop = Atomic<Bool>(false)
            let operations = Atomic<Int>(0)
            let deleted = Mutex<Set<String>>([])
            let written = Mutex<Set<String>>([])
            let failure = Mutex<String?>(nil)
            let done = DispatchSemaphore(value: 0)
        }

        @Test func matchTypeKeysAndInvalidCursors() async throws {
            try await withPeer("match") { peer in
                let client = try peer.client()
                _ = try Self.writeKeys(client)
                #expect(try client.call("MSET", "other", "1", "quota[a]", "2", "quota[b]", "3") == ok)
                let expected = Set((10 ... 19).map(Self.name))
                let matched = try Self.scanAll(client, options: ["MATCH", "key:0001?", "COUNT", "500"]).keys
                #expect(matched.count == 10 && Set(matched) == expected, "\(matched)")
                let quota = try Self.scanAll(client, options: ["COUNT", "1000", "MATCH", "quota\\[*"]).keys
                #expect(Set(quota) == ["quota[\"a\"]", "quota[\"b\"]"], "\(quota)")
                #expect(try Self.scanAll(client, options: ["TYPE", "hash"]).keys.isEmpty)
                #expect(try Self.scanAll(client, options: ["TYPE", "string", "COUNT", "5000", "MATCH", "o*"]).keys == ["other"])
                // KEYS: the whole answer at once.
                let keys = try #require(try client.call("KEYS", "key:0001?").texts)
                #expect(keys.count == 10 && Set(keys) == expected)
                #expect(try client.call("KEYS", "*").elements?.count == Self.keyCount + 3)
                #expect(try client.call("KEYS", "nothing*") == .array([]))
                // Invalid cursors and options.
                for cursor in ["abc", "-1", "99999999999999", "1.5", ""] {
                    #expect(try client.call("SCAN", cursor) == .error("ERR invalid cursor"), "cursor \(cursor.debugDescription)")
                }
                #expect(try client.call("SCAN", "0", "COUNT", "0") == .error("ERR syntax error"))
                #expect(try client.call("SCAN", "0", "COUNT", "x") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("SCAN", "0", "MATCH") == .error("ERR syntax error"))
                #expect(try client.call("SCAN", "0", "LIMIT", "3") == .error("ERR syntax error"))
                #expect(try client.call("SCAN") == .error("ERR wrong number of arguments for 'scan' command"))
            }
        }

        /// KEYS and MGET refuse to build a reply past `maxReplyBytes`, and the connection goes on.
        @Test func keysAndMgetRefuseRepliesPastTheBound() async throws {
            try await withPeer("bound") { peer in
                let endpoint = try CustomEndpoint(on: peer) { $0.maxReplyBytes = 4096 }
                defer { endpoint.stop() }
                let client = try endpoint.client()
                _ = try Self.writeKeys(client)
                #expect(try client.call("KEYS", "*") == .error("ERR KEYS would reply more than maxReplyBytes 4096 bytes: use SCAN"))
                #expect(try client.call("KEYS", "key:0001?").elements?.count == 10)
                let many = (0 ..< 300).map(Self.name)
                let mget = try client.call(bytes: [Array("MGET".utf8)] + many.map { Array($0.utf8) })
                #expect(mget.errorText?.hasPrefix("ERR MGET would reply") == true, "\(mget)")
                #expect(try client.call("MGET", "key:00001").elements?.count == 1)
                // SCAN with a large COUNT answers a shorter page rather than a reply past the
                // bound, and a walk with it still returns every key exactly once.
                try client.send("SCAN", "0", "COUNT", "100000")
                let (page, pageBytes) = try client.rawReply()
                #expect(page.elements?.count == 2)
                #expect(pageBytes.count <= 4096, "a SCAN reply of \(pageBytes.count) bytes passed maxReplyBytes 4096")
                let walk = try Self.scanAll(client, options: ["COUNT", "100000"]).keys
                #expect(walk.count == Self.keyCount && Set(walk).count == Self.keyCount)
            }
        }
    }
}
