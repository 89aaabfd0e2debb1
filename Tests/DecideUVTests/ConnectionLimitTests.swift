import Decide
import Foundation
import Testing
@testable import DecideUV

/// What became of a stranger's connection to a node.
enum StrangerFate: Equatable {
    /// The node kept it and began its handshake (its hello arrived).
    case admitted
    /// The node turned it away (with the refusal's code, when it arrived before the close).
    case refused(RefusalCode?)
    /// Neither within the wait.
    case undecided
}

extension RawClient {
    /// Waits for the node's first word on this connection: its hello, or a refusal and a close.
    func fate(timeoutSeconds: Double = 5) -> StrangerFate {
        guard let frame = readFrame(timeoutSeconds: timeoutSeconds) else { return closedByPeer ? .refused(nil) : .undecided }
        switch try? HandshakeMessage.parse(frame) {
        case .hello?: return .admitted
        case .refusal(let refusal)?: return .refused(refusal.code)
        default: return .undecided
        }
    }
}

/// The transport's connection limits (docs/protocol.md §7, docs/operations.md "Connection
/// limits"): strangers cannot take the slots kept for the node's own dials, nor more than their
/// address's share of the handshakes; a handshake ends by its deadline; refusals cost a log
/// line a second per reason, however many there are.
@Suite("Connection limits")
struct ConnectionLimitTests {
    @Test("strangers holding every inbound slot cannot keep the node from dialling its peer")
    func reservedShareKeepsDialsOpen() throws {
        let a = try makeNode("a") {
            $0.maxConnections = 12
            $0.reservedOutboundConnections = 2
            $0.maxInboundHandshakes = 12
            $0.maxInboundHandshakesPerAddress = 12
            $0.handshakeTimeoutMilliseconds = 60_000
        }
        let b = try makeNode("b")
        defer { a.transport.shutdown(); b.transport.shutdown() }
        let aAddress = try a.transport.listen(on: "127.0.0.1:0")
        let bAddress = try b.transport.listen(on: "127.0.0.1:0")
        // 20 idle strangers: the node keeps its inbound share, 12 - 2, and turns the rest away.
        let strangers = try (0 ..< 20).map { _ in try RawClient(connectTo: aAddress) }
        let fates = strangers.map { $0.fate() }
        #expect(fates.filter { $0 == .admitted }.count == 10, "\(fates)")
        #expect(fates.filter { $0 == .refused(.tooManyConnections) }.count == 10, "\(fates)")
        // Every inbound slot is held, and still the node's own dial gets through.
        a.transport.connect(to: bAddress)
        let link = try #require(a.delegate.waitForConnection(), "the strangers kept the node from dialling its peer")
        #expect(link.1.nodeID == "b" && link.1.outbound)
        #expect(a.transport.send([3, 1], to: link.0) == .queued)
        #expect(b.delegate.waitForConnection().map { b.delegate.waitForFrames(on: $0.0, count: 1) } == [[3, 1]])
        withExtendedLifetime(strangers) {}
    }

    @Test("strangers on one address hold at most its share of the handshakes; a peer on another links")
    func perAddressHandshakeCap() throws {
        let a = try makeNode("a") {
            $0.maxInboundHandshakesPerAddress = 4
            $0.handshakeTimeoutMilliseconds = 60_000
        }
        let b = try makeNode("b")
        defer { a.transport.shutdown(); b.transport.shutdown() }
        let aAddress = try a.transport.listen(on: "127.0.0.1:0")
        var strangers = try (0 ..< 12).map { _ in try RawClient(connectTo: aAddress, sourceHost: "127.0.0.2") }
        let fates = strangers.map { $0.fate() }
        #expect(fates.filter { $0 == .admitted }.count == 4, "\(fates)")
        #expect(fates.filter { $0 == .refused(.tooManyConnections) }.count == 8, "\(fates)")
        // A peer dialling from 127.0.0.1 is not held back by the strangers on 127.0.0.2.
        b.transport.connect(to: aAddress)
        #expect(b.delegate.waitForConnection() != nil)
        #expect(a.delegate.waitForConnection()?.1.nodeID == "b")
        // The strangers' slots come back when they leave.
        strangers.removeAll()
        let deadline = Date(timeIntervalSinceNow: 5)
        var later = StrangerFate.undecided
        while later != .admitted && Date() < deadline {
            later = try RawClient(connectTo: aAddress, sourceHost: "127.0.0.2").fate()
        }
        #expect(later == .admitted)
    }

    @Test("a handshake that never completes is closed by its deadline, and its slot comes back")
    func handshakeDeadline() throws {
        let a = try makeNode("a") {
            $0.maxInboundHandshakesPerAddress = 1
            $0.handshakeTimeoutMilliseconds = 300
        }
        defer { a.transport.shutdown() }
        let aAddress = try a.transport.listen(on: "127.0.0.1:0")
        // A slow stranger: it sends its hello a byte every 20 ms (it would take a second).
        let slow = try RawClient(connectTo: aAddress, sourceHost: "127.0.0.2")
        #expect(slow.fate() == .admitted)
        let started = Date()
        // While it holds its address's one handshake, another from there is turned away.
        #expect(try RawClient(connectTo: aAddress, sourceHost: "127.0.0.2").fate() == .refused(.tooManyConnections))
        let hello = WireProtocol.frame(HandshakeMessage.hello(Hello(
            minVersion: 3, maxVersion: 3, hasSecret: false, nonce: Array(repeating: 1, count: 32),
            clusterName: "test", nodeID: "slow", listenAddress: "")).encoded())
        var sent = 0
        while !slow.closedByPeer && Date().timeIntervalSince(started) < 5 {
            if sent < hello.count { slow.write([hello[sent]]); sent += 1 }
            _ = slow.waitForClose(timeoutSeconds: 0.02)
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(slow.closedByPeer, "the slow handshake was never closed")
        #expect(sent < hello.count, "the hello was sent whole before the deadline: the test proves nothing")
        #expect(elapsed >= 0.25 && elapsed < 3, "closed after \(elapsed) s, deadline 0.3 s")
        let refusal = slow.remainingFrames.compactMap { frame -> Refusal? in
            if case .refusal(let refusal)? = try? HandshakeMessage.parse(frame) { return refusal }
            return nil
        }.first
        #expect(refusal?.code == .handshakeTimeout)
        // Its slot comes back once the refused connection is gone: at the stranger's close, or
        // after the refusal's linger (1 s) if the stranger keeps its socket open, as this one does.
        let deadline = Date(timeIntervalSinceNow: 5)
        var later = StrangerFate.undecided
        while later != .admitted && Date() < deadline {
            later = try RawClient(connectTo: aAddress, sourceHost: "127.0.0.2").fate()
        }
        #expect(later == .admitted)
        #expect(Date().timeIntervalSince(started) < 3, "the slot came back only after \(Date().timeIntervalSince(started)) s")
        withExtendedLifetime(slow) {}
    }

    @Test("hundreds of refusals cost a log line a second, and every one of them is counted")
    func refusalLinesAreRateLimited() throws {
        let a = try makeNode("a") {
            $0.maxConnections = 3
            $0.reservedOutboundConnections = 1
            $0.maxInboundHandshakes = 3
            $0.maxInboundHandshakesPerAddress = 3
            $0.handshakeTimeoutMilliseconds = 60_000
        }
        defer { a.transport.shutdown() }
        let aAddress = try a.transport.listen(on: "127.0.0.1:0")
        let held = try (0 ..< 2).map { _ in try RawClient(connectTo: aAddress) }
        #expect(held.map { $0.fate() } == [.admitted, .admitted])
        let refusals = 300
        let started = Date()
        var refused = 0
        for _ in 0 ..< refusals {
            if case .refused = try RawClient(connectTo: aAddress).fate() { refused += 1 }
        }
        let elapsedMilliseconds = Int(Date().timeIntervalSince(started) * 1000)
        #expect(refused == refusals)
        func tooMany(_ lines: [LogCapture.Line]) -> [LogCapture.Line] {
            lines.filter { ["link refused", "connections refused"].contains($0.message) && $0.text.contains("too many connections") }
        }
        // Every refusal is in a line: its own, or a count (`also-refused`, or a summary's `count`).
        func accounted(_ lines: [LogCapture.Line]) -> Int {
            tooMany(lines).reduce(0) { sum, line in
                sum + (line.message == "link refused" ? 1 + Int(line.metadata["also-refused"] ?? "0")! : Int(line.metadata["count"]!)!)
            }
        }
        let all = a.logs.wait(timeoutSeconds: 5) { lines in accounted(lines) >= refusals ? lines : nil } ?? a.logs.lines
        #expect(accounted(all) == refusals, "\(tooMany(all).map(\.text))")
        // At most one line per second of refusals, plus the first and the last count.
        let bound = 2 + elapsedMilliseconds / 1000
        #expect(tooMany(all).count <= bound, "\(tooMany(all).count) lines for \(refusals) refusals in \(elapsedMilliseconds) ms")
        #expect(a.transport.inboundRefusals()[.tooManyConnections] == UInt64(refusals))
        withExtendedLifetime(held) {}
    }

    @Test("a refusal of another kind gets its own line while a flood is only counted")
    func kindsHaveTheirOwnLines() throws {
        let a = try makeNode("a") { $0.maxInboundHandshakesPerAddress = 1; $0.handshakeTimeoutMilliseconds = 60_000 }
        defer { a.transport.shutdown() }
        let aAddress = try a.transport.listen(on: "127.0.0.1:0")
        let held = try RawClient(connectTo: aAddress, sourceHost: "127.0.0.2")
        #expect(held.fate() == .admitted)
        for _ in 0 ..< 50 { _ = try RawClient(connectTo: aAddress, sourceHost: "127.0.0.2").fate() }
        let bad = try RawClient(connectTo: aAddress)
        bad.writeFrame([1, 2, 3])
        #expect(bad.waitForClose())
        let line = a.logs.wait { lines in lines.first { $0.message == "link refused" && $0.text.contains("before the handshake") } }
        #expect(line != nil, "the bad handshake's line was swallowed by the flood's budget")
        withExtendedLifetime(held) {}
    }
}
