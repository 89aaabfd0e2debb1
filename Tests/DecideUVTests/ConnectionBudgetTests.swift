import Testing
@testable import DecideUV

/// `ConnectionBudget`, the admission rules as a value: every bound of its guarantees, reached
/// and then held, and every slot given back exactly once.
@Suite("Connection budget")
struct ConnectionBudgetTests {
    @Test("inbound connections never take the dials' reserved slots; dials may take every slot")
    func reservedShare() throws {
        var budget = ConnectionBudget(maxConnections: 6, reservedOutboundConnections: 2, maxInboundHandshakes: 6,
                                      maxInboundHandshakesPerAddress: 6)
        var slots = try (0 ..< 4).map { _ in try budget.admitInbound(from: "10.0.0.1").get() }
        #expect(budget.admitInbound(from: "10.0.0.2") == .failure(.inboundShareFull))
        for index in slots.indices { budget.authenticated(&slots[index]) }
        #expect(budget.admitInbound(from: "10.0.0.2") == .failure(.inboundShareFull), "links hold the share as handshakes did")
        var dials = [try budget.admitOutbound().get(), try budget.admitOutbound().get()]
        #expect(budget.admitOutbound() == .failure(.connectionsFull))
        budget.release(&slots[0])
        budget.release(&slots[0])   // a second release gives nothing back
        #expect(budget.inbound == 3)
        // The freed slot may go to a dial or to a stranger, whichever comes first.
        var third = try budget.admitOutbound().get()
        #expect(budget.admitInbound(from: "10.0.0.2") == .failure(.inboundShareFull))
        budget.release(&third)
        budget.release(&dials[0])
        #expect(budget.outbound == 1)
        #expect(try budget.admitInbound(from: "10.0.0.2").get() == .inboundHandshake(address: "10.0.0.2"))
    }

    @Test("handshakes are bounded in all and per address; authenticating or leaving gives the share back")
    func handshakeCaps() throws {
        var budget = ConnectionBudget(maxConnections: 100, reservedOutboundConnections: 10, maxInboundHandshakes: 5,
                                      maxInboundHandshakesPerAddress: 2)
        var slot = try budget.admitInbound(from: "a").get()
        _ = try budget.admitInbound(from: "a").get()
        #expect(budget.admitInbound(from: "a") == .failure(.addressHandshakesFull))
        var others = try (0 ..< 3).map { index in try budget.admitInbound(from: "b\(index)").get() }
        #expect(budget.admitInbound(from: "c") == .failure(.handshakesFull))
        budget.authenticated(&slot)
        #expect(slot == .inboundLink && budget.inboundHandshakes == 4 && budget.inbound == 5)
        #expect(try budget.admitInbound(from: "a").get() == .inboundHandshake(address: "a"))
        for index in others.indices { budget.release(&others[index]) }
        #expect(budget.inboundHandshakesByAddress == ["a": 2], "an address is forgotten with its last handshake")
        budget.release(&slot)
        #expect(budget.inbound == 2 && budget.inboundHandshakes == 2)
    }
}

/// `RefusalLog`: a line an interval per kind at most, and every refusal in some line.
@Suite("Refusal log")
struct RefusalLogTests {
    @Test("a flood logs its first refusal, then one count a second; every refusal is counted once")
    func flood() {
        var log = RefusalLog(intervalMilliseconds: 1_000)
        var lines = 0, accounted: UInt64 = 0
        for now in stride(from: UInt64(5_000), to: 8_500, by: 1) {   // one refusal a millisecond for 3.5 s
            switch log.note(.tooManyFromAddress, atMilliseconds: now) {
            case .log(let earlier, _): lines += 1; accounted += 1 + earlier
            case .count: break
            }
            for summary in log.due(atMilliseconds: now) { lines += 1; accounted += summary.count }
        }
        for summary in log.remaining(atMilliseconds: 8_500) { lines += 1; accounted += summary.count }
        #expect(accounted == 3_500 && log.total(.tooManyFromAddress) == 3_500)
        #expect(lines <= 5, "\(lines) lines in 3.5 s")
        #expect(log.nextDueMilliseconds == nil)
    }

    @Test("kinds have their own intervals; a late full line carries what was counted before it")
    func kindsAndLateLines() {
        var log = RefusalLog(intervalMilliseconds: 100)
        #expect(log.note(.handshakeTimeout, atMilliseconds: 0) == .log(earlier: 0, windowMilliseconds: 0))
        #expect(log.note(.handshakeTimeout, atMilliseconds: 10) == .count)
        #expect(log.note(.wrongSecret, atMilliseconds: 20) == .log(earlier: 0, windowMilliseconds: 0))
        #expect(log.nextDueMilliseconds == 100)
        #expect(log.due(atMilliseconds: 99).isEmpty)
        // Nobody asked at 100: the next refusal, at 150, logs in full and brings the count along.
        #expect(log.note(.handshakeTimeout, atMilliseconds: 150) == .log(earlier: 1, windowMilliseconds: 150))
        #expect(log.nextDueMilliseconds == nil)
    }
}
