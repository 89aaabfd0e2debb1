import Decide
import DecideCore
import DecideRESP
import DecideTesting
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// DECIDE.LEASE and DECIDE.RELEASE: leases for clients in any language.
extension SyncNodeTests {
    @Suite struct LeaseCommandTests {
        static func json(_ reply: RESPValue) throws -> [String: Any] {
            guard case .bulk(let bytes) = reply, let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
                throw TestFailure("not a JSON reply: \(reply)")
            }
            return object
        }

        @Test func oneHolderThenAnotherAfterRelease() async throws {
            try await withPair { a, b in
                let onA = try a.client(), onB = try b.client()
                let first = try Self.json(try onA.call("DECIDE.LEASE", "nightly", "60000", "WAIT", "1", "5000"))
                #expect(first["acquired"] as? Bool == true && first["holder"] as? String == "a")
                #expect(first["acknowledgedBy"] as? [String] == ["b"])
                let token = try #require(first["fencingToken"] as? UInt64)
                // b holds the lease a took (a's acknowledgement said so): b cannot take it.
                let refused = try Self.json(try onB.call("DECIDE.LEASE", "nightly", "60000"))
                #expect(refused["acquired"] as? Bool == false && refused["holder"] as? String == "a")
                #expect(try onB.call("GET", "decide.lease[nightly]") == bulk("a"), "a lease is a key like any other")
                #expect(try onB.call("DECIDE.RELEASE", "nightly", String(token)) == .integer(0), "not b's to release")
                #expect(try onA.call("DECIDE.RELEASE", "nightly", String(token + 1)) == .integer(0), "not that lease")
                #expect(try onA.call("DECIDE.RELEASE", "nightly", String(token)) == .integer(1))
                #expect(try await eventually { try onB.call("EXISTS", "decide.lease[nightly]") == .integer(0) })
                let second = try Self.json(try onB.call("DECIDE.LEASE", "nightly", "60000", "WAIT", "1", "5000", "OWNED"))
                #expect(second["acquired"] as? Bool == true && second["holder"] as? String == "b")
                #expect((second["fencingToken"] as? UInt64).map { $0 > token } == true, "a later lease has a higher token")
                // Asked for more peers than there are: written, but reported as not held.
                let weak = try Self.json(try onB.call("DECIDE.LEASE", "nightly", "60000", "WAIT", "2", "200"))
                #expect(weak["acquired"] as? Bool == false && weak["required"] as? Int == 2)
                // Errors, and the connection stays usable.
                #expect(try onA.call("DECIDE.LEASE", "nightly", "0") == .error("ERR invalid expire time in 'decide.lease' command"))
                #expect(try onA.call("DECIDE.LEASE", "nightly", "10", "WAIT").errorText?.hasPrefix("ERR syntax error") == true)
                #expect(try onA.call("DECIDE.RELEASE", "nightly", "x").errorText?.hasPrefix("ERR DECIDE.RELEASE") == true)
                #expect(try onA.call("PING") == .simple("PONG"))
            }
        }

        /// Issue 58: under strict durability DECIDE.LEASE and DECIDE.RELEASE waited for fsync on
        /// the loop thread, so one lease held every client. With the disk held, another client
        /// is answered, and the lease answers once its write is on disk.
        @Test func strictLeasesWaitForTheDiskOffTheLoop() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let disk = StoreFaults()
            try await withPeer("strict-lease", disk: disk, configure: strictDurability(in: directory)) { peer in
                let holder = try peer.client()
                let other = try peer.client()
                disk.stall()
                var released = false
                defer { if !released { disk.resume() } }
                try holder.send("DECIDE.LEASE", "nightly", "60000")
                disk.waitUntilAWriteIsHeld()
                #expect(try other.call("PING") == .simple("PONG"), "a lease waiting for the disk held another client")
                #expect(!holder.hasData(within: 0.2), "the lease answered before it was on disk")
                disk.resume()
                let lease = try Self.json(try holder.reply())
                #expect(lease["acquired"] as? Bool == true)
                let token = try #require(lease["fencingToken"] as? UInt64)

                disk.stall()
                try holder.send("DECIDE.RELEASE", "nightly", String(token))
                disk.waitUntilAWriteIsHeld()
                #expect(try other.call("PING") == .simple("PONG"), "a release waiting for the disk held another client")
                #expect(!holder.hasData(within: 0.2), "the release answered before it was on disk")
                disk.resume()
                released = true
                #expect(try holder.reply() == .integer(1))
            }
        }
    }
}
