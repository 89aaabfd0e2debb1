import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// DECIDE.CHANGES and DECIDE.SNAPSHOT, the change feed over the Redis protocol
/// (docs/operations.md, "The change feed"): positions, blocking reads, prefixes, and the errors
/// a reader gets instead of a silent skip.
extension SyncNodeTests {
    @Suite struct FeedCommandTests {
        /// The header and the changes of a DECIDE.CHANGES reply.
        static func page(_ reply: RESPValue) throws -> (header: [String: Any], changes: [[String: Any]]) {
            let parts = try #require(reply.elements, "not an array: \(reply)")
            let header = try #require(parts.first?.json)
            return (header, parts.dropFirst().compactMap(\.json))
        }

        static func number(_ value: Any?) -> Int? { (value as? NSNumber)?.intValue }

        @Test func aReaderGetsEveryChangeOnceFromItsPositionThenBlocksForTheNext() async throws {
            try await withPeer("feed") { peer in
                let client = try peer.client()
                #expect(try client.call("SET", "a", "1") == ok)
                #expect(try client.call("MSET", "b", "two", "c", "three") == ok)
                #expect(try client.call("INCR", "hits") == .integer(1))
                let all = try Self.page(try client.call("DECIDE.CHANGES", "0"))
                let feed = try #require(all.header["feed"] as? String)
                #expect(all.changes.map { Self.number($0["position"]) } == [1, 2, 3])
                #expect(Self.number(all.header["end"]) == 3 && Self.number(all.header["newest"]) == 3 && Self.number(all.header["oldest"]) == 1)
                #expect(all.changes.allSatisfy { $0["origin"] as? String == "local" })
                let mset = try #require(all.changes[1]["writes"] as? [[String: Any]])
                #expect(mset.compactMap { $0["key"] as? String } == ["b", "c"], "a decision's writes come together")
                #expect(mset.first?["value"] as? String == "two")
                // From the middle, a page at a time.
                let one = try Self.page(try client.call("DECIDE.CHANGES", "1", "COUNT", "1", "FEED", feed))
                #expect(one.changes.map { Self.number($0["position"]) } == [2] && Self.number(one.header["end"]) == 2)
                // Up to date: only the header, at once without BLOCK.
                #expect(try Self.page(try client.call("DECIDE.CHANGES", "3")).changes.isEmpty)
                // `-` is before the oldest retained; `$` the newest.
                #expect(try Self.page(try client.call("DECIDE.CHANGES", "-")).changes.count == 3)
                #expect(try Self.page(try client.call("DECIDE.CHANGES", "$")).changes.isEmpty)
                // BLOCK: answered by the next change, made by another client meanwhile.
                try client.send("DECIDE.CHANGES", "3", "BLOCK", "5000")
                let writer = try peer.client()
                try await Task.sleep(for: .milliseconds(100))
                #expect(try writer.call("SET", "d", "4") == ok)
                let woken = try Self.page(try client.reply(timeout: 5))
                #expect(woken.changes.map { Self.number($0["position"]) } == [4])
                // BLOCK with nothing coming: the header alone, after the time.
                let start = Date()
                let timedOut = try Self.page(try client.call("DECIDE.CHANGES", "4", "BLOCK", "300"))
                #expect(timedOut.changes.isEmpty && Self.number(timedOut.header["end"]) == 4)
                #expect(Date().timeIntervalSince(start) >= 0.25)
                // The connection goes on, in order.
                #expect(try client.call("PING") == .simple("PONG"))
            }
        }

        @Test func aPrefixKeepsItsKeysAndABlockedReaderWaitsPastWhatItLeavesOut() async throws {
            try await withPeer("feed-prefix") { peer in
                let client = try peer.client()
                #expect(try client.call("SET", "quota", "1") == ok)
                #expect(try client.call("SET", "other", "2") == ok)
                let quota = try Self.page(try client.call("DECIDE.CHANGES", "0", "PREFIX", "quota"))
                #expect(quota.changes.map { Self.number($0["position"]) } == [1] && Self.number(quota.header["end"]) == 2)
                try client.send("DECIDE.CHANGES", "2", "PREFIX", "quota", "BLOCK", "5000")
                let writer = try peer.client()
                try await Task.sleep(for: .milliseconds(100))
                #expect(try writer.call("SET", "other", "3") == ok)   // left out: the reader still waits
                try await Task.sleep(for: .milliseconds(100))
                #expect(try writer.call("SET", "quota", "4") == ok)
                let woken = try Self.page(try client.reply(timeout: 5))
                #expect(woken.changes.map { Self.number($0["position"]) } == [4])
                #expect(Self.number(woken.header["end"]) == 4)
            }
        }

        @Test func aReaderTheRetentionOvertookIsToldThenResynchronisesFromASnapshot() async throws {
            try await withPeer("feed-retention", configure: { $0.feedMaxChanges = "10" }) { peer in
                let client = try peer.client()
                for index in 0..<30 { #expect(try client.call("SET", "k\(index % 7)", "v\(index)") == ok) }
                guard case .error(let text) = try client.call("DECIDE.CHANGES", "5") else {
                    Issue.record("a position the retention dropped was answered")
                    return
                }
                #expect(text.hasPrefix("OUTOFRETENTION") && text.contains("the oldest is 21"))
                let snapshot = try #require(try client.call("DECIDE.SNAPSHOT").elements)
                let header = try #require(snapshot.first?.json)
                let position = try #require(Self.number(header["position"]))
                #expect(position == 30)
                var mirror: [String: String] = [:]
                for line in snapshot.dropFirst().compactMap(\.json) { mirror[line["key"] as! String] = line["value"] as? String }
                #expect(mirror.count == 7)
                #expect(try client.call("SET", "k0", "after") == ok)
                #expect(try client.call("DEL", "k1") == .integer(1))
                let rest = try Self.page(try client.call("DECIDE.CHANGES", "\(position)", "FEED", header["feed"] as! String))
                for change in rest.changes {
                    for write in change["writes"] as! [[String: Any]] { mirror[write["key"] as! String] = write["value"] as? String }
                }
                #expect(mirror == ["k0": "after", "k2": "v23", "k3": "v24", "k4": "v25", "k5": "v26", "k6": "v27"])
            }
        }

        @Test func aPositionOrFeedThatIsNotThisNodesIsRefusedWithItsReason() async throws {
            try await withPeer("feed-refusals") { peer in
                let client = try peer.client()
                #expect(try client.call("SET", "a", "1") == ok)
                guard case .error(let ahead) = try client.call("DECIDE.CHANGES", "7") else { throw TestFailure("7 was answered") }
                #expect(ahead.hasPrefix("AHEAD"))
                guard case .error(let other) = try client.call("DECIDE.CHANGES", "0", "FEED", "0123456789abcdef") else { throw TestFailure("another feed was answered") }
                #expect(other.hasPrefix("OTHERFEED"))
                #expect(try client.call("DECIDE.CHANGES", "x") == .error("ERR the position is not a whole number, - or $"))
                #expect(try client.call("DECIDE.CHANGES", "0", "COUNT", "0") == .error("ERR COUNT must be 1 to 10000"))
                #expect(try client.call("DECIDE.CHANGES", "0", "FEED", "xyz") == .error("ERR the feed is 16 hex digits, as the header's \"feed\" gives it"))
                guard case .error(let usage) = try client.call("DECIDE.CHANGES", "0", "COUNT") else { throw TestFailure("a missing count was answered") }
                #expect(usage.hasPrefix("ERR syntax error"))
                #expect(try client.call("PING") == .simple("PONG"))
            }
        }

        @Test func aPeersWritesArriveOnTheFeedAsRemote() async throws {
            try await withPair { a, b in
                #expect(try a.client().call("SET", "shared", "1") == ok)
                let reader = try b.client()
                var changes: [[String: Any]] = []
                #expect(try await eventually { changes = try Self.page(try reader.call("DECIDE.CHANGES", "0")).changes; return !changes.isEmpty })
                #expect(changes.first?["origin"] as? String == "remote")
                #expect((changes.first?["writes"] as? [[String: Any]])?.first?["key"] as? String == "shared")
            }
        }

        /// A client that leaves while its DECIDE.CHANGES BLOCK waits is let go at once, as a WAIT's.
        @Test func aBlockedReaderThatLeavesIsClosedAtOnce() async throws {
            try await withPeer("feed-leave") { peer in
                let observer = try peer.client()
                func connected() throws -> Int? { try observer.connectedClients() }
                let baseline = try #require(try connected())
                let halfClosed = try peer.client()
                try halfClosed.send("DECIDE.CHANGES", "$", "BLOCK", "0")
                #expect(try await eventually(5) { try connected() == baseline + 1 })
                halfClosed.shutdownWrite()
                #expect(try await eventually(5) { try connected() == baseline }, "a blocked reader that left is still held")
                // Readers that block forever and leave, with nothing written meanwhile: none of
                // their waits stays behind (each once held its wait, its timer and its session
                // until the next change, or for a day).
                var leaving: [TestClient] = []
                for _ in 0..<50 {
                    let client = try peer.client()
                    try client.send("DECIDE.CHANGES", "$", "BLOCK", "0")
                    leaving.append(client)
                }
                #expect(try await eventually(5) { peer.node.changeFeedWaiters == 50 })
                leaving.removeAll()  // closes them
                #expect(try await eventually(5) { try connected() == baseline }, "the clients that left are still held")
                #expect(try await eventually(5) { peer.node.changeFeedWaiters == 0 }, "waits of clients that left stay registered")
            }
        }
    }
}
