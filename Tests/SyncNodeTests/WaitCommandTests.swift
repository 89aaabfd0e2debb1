import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import syncnode

/// WAIT numreplicas timeout, as Redis answers it: the number of peers that acknowledged every
/// write this node committed before the call.
extension SyncNodeTests {
    @Suite struct WaitCommandTests {
        @Test func waitCountsThePeersThatHoldTheWrites() async throws {
            try await withPair { a, b in
                let client = try a.client()
                #expect(try client.call("WAIT", "1", "100") == .integer(1), "nothing written yet: every linked peer counts")
                #expect(try client.call("SET", "k", "v") == ok)
                #expect(try client.call("WAIT", "1", "5000") == .integer(1))
                #expect(try b.client().call("GET", "k") == bulk("v"), "b said it holds it: it does")
                // Two asked for, one peer exists: the timeout answers with what there is.
                #expect(try client.call("SET", "k", "w") == ok)
                let start = Date()
                #expect(try client.call("WAIT", "2", "300") == .integer(1))
                #expect(Date().timeIntervalSince(start) >= 0.25)
                #expect(try client.call("WAIT", "0", "0") == .integer(1))
                #expect(try client.call("WAIT", "one", "0") == .error("ERR value is not an integer or out of range"))
                #expect(try client.call("WAIT", "1", "-1") == .error("ERR timeout is negative"))
                // The connection stays usable, and pipelined commands after WAIT keep their order.
                try client.send(raw: "SET p 1\r\nWAIT 1 5000\r\nGET p\r\n")
                #expect(try client.reply() == ok)
                #expect(try client.reply() == .integer(1))
                #expect(try client.reply() == bulk("1"))
            }
        }
    }
}
