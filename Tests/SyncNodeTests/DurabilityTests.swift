import Decide
import DecideCore
import DecideRESP
import DecideTesting
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// Strict durability: a write replies once it is on disk, answered off the loop so other
/// clients are served meanwhile; replies stay in order; the data survives a restart.
extension SyncNodeTests {
    @Suite struct DurabilityTests {
        @Test func strictWritesWaitForTheDiskWithoutHoldingOtherClients() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let configure = strictDurability(in: directory)
            let disk = StoreFaults()
            try await withPeer("strict", disk: disk, configure: configure) { peer in
                #expect(peer.node.acknowledgesAfterDisk)
                let writer = try peer.client()
                let reader = try peer.client()
                #expect(try writer.call("SET", "before", "1") == ok)
                // The disk stops: pipelined writes wait for it, in order, off the loop.
                disk.stall()
                // Let the disk go again whatever happens below: a peer waiting for it cannot stop.
                var released = false
                defer { if !released { disk.resume() } }
                var batch: [UInt8] = []
                for index in 0 ..< 50 { batch += request("SET", "k", "\(index)") }
                batch += request("MSET", "m1", "a", "m2", "b")
                batch += request("DEL", "before")
                batch += request("SETNX", "k", "never")
                batch += request("GET", "k")
                try writer.send(raw: batch)
                // Meanwhile another client is answered at once, reads included.
                #expect(try reader.call("GET", "before") == bulk("1"))
                #expect(try reader.call("PING") == .simple("PONG"))
                #expect(try reader.call("EXISTS", "before") == .integer(1))
                // Nothing was acknowledged while the disk was held.
                #expect(!writer.hasData(within: 0.2), "a strict write replied before it was on disk")
                disk.resume()
                released = true
                for index in 0 ..< 50 {
                    let reply = try writer.reply()
                    guard reply == ok else {
                        Issue.record("SET \(index) answered \(reply)")
                        break
                    }
                }
                #expect(try writer.reply() == ok)
                #expect(try writer.reply() == .integer(1))
                #expect(try writer.reply() == .integer(0))
                #expect(try writer.reply() == bulk("49"))
                // A reader's write waits for the disk too, and so does not block the writer.
                #expect(try reader.call("SET", "r", "x") == ok)
                // Pipelined writes then EOF: each answered once on disk, then the connection closes.
                let closing = try peer.client()
                var writes: [UInt8] = []
                for index in 0 ..< 10 { writes += request("SET", "c\(index)", "\(index)") }
                try closing.send(raw: writes + request("GET", "c9"))
                closing.shutdownWrite()
                for _ in 0 ..< 10 { #expect(try closing.reply() == ok) }
                #expect(try closing.reply() == bulk("9"))
                #expect(closing.readUntilClosed(timeout: 10).closed)
                #expect(try reader.call("DEL", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9") == .integer(10))
            }
            // Restarted on the same data directory: everything acknowledged is there.
            try await withPeer("strict", configure: configure) { peer in
                let client = try peer.client()
                #expect(try client.call("MGET", "k", "m1", "m2", "r", "before") == .array([bulk("49"), bulk("a"), bulk("b"), bulk("x"), .null]))
                #expect(peer.node.entry(for: StateKey(name: "before"))?.isTombstone == true)
                #expect(try client.call("DBSIZE") == .integer(4))
                #expect(try client.call("CONFIG", "GET", "appendonly") == bulks("appendonly", "yes"))
            }
        }

        /// Batched durability (the default with a data directory) answers on the loop and keeps
        /// what was acknowledged across a graceful restart.
        @Test func batchedWritesSurviveARestart() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try await withPeer("batched", configure: { $0.dataDirectory = directory.path }) { peer in
                #expect(!peer.node.acknowledgesAfterDisk)
                let client = try peer.client()
                #expect(try client.call("MSET", "a", "1", "b", "two") == ok)
                #expect(try client.call("DEL", "a") == .integer(1))
            }
            try await withPeer("batched", configure: { $0.dataDirectory = directory.path }) { peer in
                let client = try peer.client()
                #expect(try client.call("MGET", "a", "b") == .array([.null, bulk("two")]))
            }
        }
    }
}
