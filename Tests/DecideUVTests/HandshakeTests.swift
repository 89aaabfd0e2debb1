import Decide
import Testing
@testable import DecideUV

@Suite("Handshake over loopback")
struct HandshakeTests {
    @Test("IPv4 with a secret: both sides up, peers named, frames flow both ways")
    func succeedsWithSecret() throws {
        let pair = try #require(try connectedPair(secret: secretA))
        defer { pair.a.transport.shutdown(); pair.b.transport.shutdown() }
        let aPeer = try #require(pair.a.delegate.waitForConnection()?.1)
        let bPeer = try #require(pair.b.delegate.waitForConnection()?.1)
        #expect(aPeer.nodeID == "b" && !aPeer.outbound)
        #expect(bPeer.nodeID == "a" && bPeer.outbound)
        #expect(bPeer.listenAddress.hasPrefix("127.0.0.1:"))
        #expect(pair.b.transport.send([1, 2, 3], to: pair.bLink) == .queued)
        #expect(pair.a.transport.send([7, 9], to: pair.aLink) == .queued)
        #expect(pair.a.delegate.waitForFrames(on: pair.aLink, count: 1) == [[1, 2, 3]])
        #expect(pair.b.delegate.waitForFrames(on: pair.bLink, count: 1) == [[7, 9]])
        #expect(pair.a.logs.lines.contains { $0.message == "link up" && $0.metadata["seal"] == "chacha20-poly1305" })
    }

    @Test("IPv6 loopback without a secret")
    func succeedsOverIPv6() throws {
        let pair = try #require(try connectedPair(host: "::1"))
        defer { pair.a.transport.shutdown(); pair.b.transport.shutdown() }
        #expect(pair.b.transport.send([5], to: pair.bLink) == .queued)
        #expect(pair.a.delegate.waitForFrames(on: pair.aLink, count: 1) == [[5]])
        #expect(pair.a.logs.lines.contains { $0.message.contains("WITHOUT authentication") })
    }

    @Test("a host name resolves (localhost)")
    func listensOnHostName() throws {
        let a = try makeNode("a")
        let b = try makeNode("b")
        defer { a.transport.shutdown(); b.transport.shutdown() }
        let bound = try a.transport.listen(on: "localhost:0")
        let port = try #require(HostPort(bound)?.port)
        #expect(port != 0)
        b.transport.connect(to: "localhost:\(port)")
        // localhost may resolve to ::1 or 127.0.0.1 first; either reaches the bound one or fails cleanly.
        let outcome = b.delegate.wait { events -> String? in
            for event in events {
                if case .connected = event { return "up" }
                if case .failed = event { return "failed" }
            }
            return nil
        }
        #expect(outcome != nil)
    }

    /// Runs a refused handshake; returns b's failure and both logs.
    private func refused(a configureA: (inout UVTransport.Configuration) -> Void,
                         b configureB: (inout UVTransport.Configuration) -> Void,
                         aSecret: [UInt8]?, bSecret: [UInt8]?, bCluster: String = "test")
        throws -> (reason: DisconnectReason?, a: LogCapture, b: LogCapture, aEvents: [TransportEvent]) {
        let a = try makeNode("a", secret: aSecret, configure: configureA)
        let b = try makeNode("b", cluster: bCluster, secret: bSecret, configure: configureB)
        defer { a.transport.shutdown(); b.transport.shutdown() }
        let address = try a.transport.listen(on: "127.0.0.1:0")
        b.transport.connect(to: address)
        let reason = b.delegate.waitForFailure()
        // a logs its own refusal line once the link is gone on its side.
        _ = a.logs.waitForLinkEndLines()
        _ = b.logs.waitForLinkEndLines()
        return (reason, a.logs, b.logs, a.delegate.events)
    }

    private func isRefused(_ reason: DisconnectReason?, containing text: String) -> Bool {
        guard case .refused(let why)? = reason else { return false }
        return why.contains(text)
    }

    @Test("wrong secret: refused on both sides, each logs why")
    func wrongSecret() throws {
        let result = try refused(a: { _ in }, b: { _ in }, aSecret: secretA, bSecret: secretB)
        #expect(isRefused(result.reason, containing: "secret"))
        #expect(result.a.linkEndLines.count == 1)
        #expect(result.a.linkEndLines.first?.text.contains("wrong cluster secret") == true)
        #expect(result.b.linkEndLines.count == 1)
        #expect(!result.aEvents.contains { if case .connected = $0 { return true }; return false })
    }

    @Test("secret on one side only: refused, in both directions")
    func missingSecret() throws {
        let first = try refused(a: { _ in }, b: { _ in }, aSecret: secretA, bSecret: nil)
        #expect(isRefused(first.reason, containing: "secret"))
        #expect(first.a.linkEndLines.first?.text.contains("has no cluster secret") == true)
        let second = try refused(a: { _ in }, b: { _ in }, aSecret: nil, bSecret: secretA)
        #expect(isRefused(second.reason, containing: "secret"))
        #expect(second.a.linkEndLines.first?.text.contains("uses a cluster secret") == true)
    }

    @Test("another cluster name: refused with the names in the log")
    func otherCluster() throws {
        let result = try refused(a: { _ in }, b: { _ in }, aSecret: nil, bSecret: nil, bCluster: "other")
        #expect(isRefused(result.reason, containing: "cluster name mismatch"))
        #expect(result.a.linkEndLines.first?.text.contains("'other'") == true)
    }

    @Test("unsupported protocol version: refused")
    func unsupportedVersion() throws {
        let result = try refused(a: { _ in }, b: { $0.protocolVersions = (WireProtocol.maxSupportedVersion + 1) ... (WireProtocol.maxSupportedVersion + 2) }, aSecret: nil, bSecret: nil)
        #expect(isRefused(result.reason, containing: "unsupported protocol version"))
        #expect(result.a.linkEndLines.first?.text.contains("unsupported protocol version") == true)
    }

    @Test("listen without a secret refuses a non-loopback address")
    func nonLoopbackListenRefused() throws {
        let a = try makeNode("a")
        defer { a.transport.shutdown() }
        #expect(throws: UVTransportError.insecureListenRefused("0.0.0.0:0")) {
            try a.transport.listen(on: "0.0.0.0:0")
        }
        #expect(throws: UVTransportError.invalidAddress("::1:80")) { try a.transport.listen(on: "::1:80") }
    }

    @Test("connect to a closed port reports didFailToConnect")
    func connectFailure() throws {
        let a = try makeNode("a")
        defer { a.transport.shutdown() }
        // Bind a port, learn it, close it: nothing listens there afterwards.
        let probe = try makeNode("probe")
        let address = try probe.transport.listen(on: "127.0.0.1:0")
        probe.transport.shutdown()
        a.transport.connect(to: address)
        guard case .networkError? = a.delegate.waitForFailure() else {
            Issue.record("expected a network error")
            return
        }
    }
}
