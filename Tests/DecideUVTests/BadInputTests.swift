import Decide
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import DecideUV

/// Inputs a hostile or broken peer may send. Each must close that one link, with one log line.
enum BadInput: String, CaseIterable, CustomStringConvertible, Sendable {
    case garbage, truncatedFrame, oversizeBeforeHandshake, oversizeAfterHandshake, emptyFrame
    case unknownHandshakeType, messageBeforeHandshake, badMagic, transportTypeAfterHandshake, silent

    var description: String { rawValue }

    /// Whether the raw client completes the handshake first.
    var handshakeFirst: Bool {
        switch self {
        case .truncatedFrame, .oversizeAfterHandshake, .transportTypeAfterHandshake: return true
        default: return false
        }
    }

    /// Text the single log line must contain.
    var expectedLog: String {
        switch self {
        case .garbage, .oversizeBeforeHandshake: return "exceeds the limit of 1024 bytes"
        case .truncatedFrame: return "truncated frame"
        case .oversizeAfterHandshake: return "exceeds the limit of 65536 bytes"
        case .emptyFrame: return "empty frame"
        case .unknownHandshakeType: return "malformed handshake frame"
        case .messageBeforeHandshake: return "message of type 1 before the handshake"
        case .badMagic: return "bad magic"
        case .transportTypeAfterHandshake: return "transport frame of type 247 after the handshake"
        case .silent: return "no handshake within 300 ms"
        }
    }

    func send(with client: RawClient) {
        switch self {
        case .garbage: client.write(Array("GET / HTTP/1.1\r\nHost: example\r\n\r\n".utf8))
        case .truncatedFrame:
            client.write([100, 0, 0, 0, 1, 2, 3, 4, 5])
            shutdown(client.fd, Int32(SHUT_WR))
        case .oversizeBeforeHandshake: client.write([0xD0, 0x07, 0, 0, 0xF1])
        case .oversizeAfterHandshake: client.write([0x01, 0x00, 0x01, 0x00, 1])  // 65537
        case .emptyFrame: client.write([0, 0, 0, 0])
        case .unknownHandshakeType: client.writeFrame([0xF9, 1, 2])
        case .messageBeforeHandshake: client.writeFrame([1, 2, 3])
        case .badMagic:
            var hello = HandshakeMessage.hello(Hello(minVersion: 1, maxVersion: 1, hasSecret: false,
                                                     nonce: Array(repeating: 1, count: 32), clusterName: "test",
                                                     nodeID: "raw", listenAddress: "")).encoded()
            hello[1] = UInt8(ascii: "X")
            client.writeFrame(hello)
        case .transportTypeAfterHandshake: client.writeFrame([0xF7])
        case .silent: break
        }
    }
}

@Suite("Bad input closes only its own link")
struct BadInputTests {
    @Test("each bad input closes that one connection with one log line; another link keeps working",
          arguments: BadInput.allCases)
    func badInput(_ input: BadInput) throws {
        let pair = try #require(try connectedPair {
            $0.handshakeTimeoutMilliseconds = 300
            $0.maxFrameBytes = 65536
            $0.maxOutboundBytes = 1 << 20
        })
        defer { pair.a.transport.shutdown(); pair.b.transport.shutdown() }
        let address = try #require(pair.b.delegate.waitForConnection()?.1.listenAddress)
        let client = try RawClient(connectTo: address)
        if input.handshakeFirst {
            #expect(client.handshake())
            #expect(pair.a.delegate.wait { events in
                events.filter { if case .connected = $0 { return true }; return false }.count == 2 ? true : nil
            } == true)
        }
        input.send(with: client)
        #expect(client.waitForClose(timeoutSeconds: 5), "the bad link must be closed")

        let lines = pair.a.logs.waitForLinkEndLines()
        #expect(lines.count == 1)
        #expect(lines.first?.text.contains(input.expectedLog) == true, "\(lines.first?.text ?? "no line")")

        // The good link is untouched.
        #expect(pair.b.transport.send([8, 1], to: pair.bLink) == .queued)
        #expect(pair.a.delegate.waitForFrames(on: pair.aLink, count: 1) == [[8, 1]])
        #expect(pair.a.delegate.waitForDisconnect(pair.aLink, timeoutSeconds: 0.01) == nil)
        if input.handshakeFirst {
            // That link was reported up, so its end is reported too, exactly once.
            #expect(pair.a.delegate.events.filter { if case .disconnected = $0 { return true }; return false }.count == 1)
        }
    }

    @Test("a refusal frame reaches the refused peer before the close")
    func refusalReasonIsSent() throws {
        let a = try makeNode("a")
        defer { a.transport.shutdown() }
        let address = try a.transport.listen(on: "127.0.0.1:0")
        let client = try RawClient(connectTo: address)
        client.writeFrame([1, 2, 3])
        #expect(client.waitForClose())
        let refusal = client.remainingFrames.compactMap { try? HandshakeMessage.parse($0) }.compactMap { message -> Refusal? in
            if case .refusal(let refusal) = message { return refusal }
            return nil
        }.first
        #expect(refusal?.code == .protocolViolation)
    }
}

@Suite("Shutdown")
struct ShutdownTests {
    @Test("shutdown with links open: every link reported closed, every resource freed, idempotent")
    func shutdownReleasesEverything() throws {
        let pair = try #require(try connectedPair())
        defer { pair.b.transport.shutdown() }
        let address = try #require(pair.b.delegate.waitForConnection()?.1.listenAddress)
        let handshaking = try RawClient(connectTo: address)  // never sends its hello
        let established = try RawClient(connectTo: address)
        #expect(established.handshake())
        #expect(pair.a.delegate.wait { events in
            events.filter { if case .connected = $0 { return true }; return false }.count == 2 ? true : nil
        } == true)
        // Queue writes that may still be in flight when shutdown starts.
        for _ in 0 ..< 100 { _ = pair.a.transport.send([1] + Array(repeating: 0, count: 10_000), to: pair.aLink) }

        pair.a.transport.shutdown()

        let disconnects = pair.a.delegate.events.filter { if case .disconnected(_, .closedLocally) = $0 { return true }; return false }
        #expect(disconnects.count == 2)
        let live = pair.a.transport.liveResources
        #expect(live.connections == 0 && live.writeBatches == 0 && live.listeners == 0)
        #expect(handshaking.waitForClose())
        #expect(established.waitForClose())
        #expect(pair.b.delegate.waitForDisconnect(pair.bLink) == .closedByPeer)
        pair.a.transport.shutdown()  // idempotent
        #expect(pair.a.transport.send([1], to: pair.aLink) == .notConnected)
        #expect(throws: UVTransportError.self) { try pair.a.transport.listen(on: "127.0.0.1:0") }
    }

    @Test("a transport that never started shuts down cleanly")
    func neverStarted() throws {
        let transport = try UVTransport(configuration: .init(nodeID: "x", clusterName: "test"))
        transport.shutdown()
        transport.shutdown()
    }
}

/// Closes the link from inside `didReceive` and records any frame delivered afterwards.
final class ClosingDelegate: TransportDelegate, @unchecked Sendable {
    let inner = TestDelegate()
    private(set) var framesAfterClose = 0
    private var closed = false
    func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
        inner.transport(transport, didConnect: connection, peer: peer)
    }
    func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID) {
        if closed { framesAfterClose += 1 }
        closed = true
        transport.close(connection)
        inner.transport(transport, didReceive: frame, from: connection)
    }
    func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {}
    func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {
        inner.transport(transport, didDisconnect: connection, reason: reason)
    }
    func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {}
}

@Suite("Close from a callback")
struct CloseFromCallbackTests {
    @Test("close inside didReceive: no later frame of that link, then didDisconnect(.closedLocally)")
    func closeInsideCallback() throws {
        let logs = LogCapture()
        let transport = try UVTransport(configuration: .init(nodeID: "a", clusterName: "test", logger: logs.logger("a")))
        let delegate = ClosingDelegate()
        try transport.start(delegate: delegate)
        defer { transport.shutdown() }
        let client = try RawClient(connectTo: try transport.listen(on: "127.0.0.1:0"))
        #expect(client.handshake())
        let (link, _) = try #require(delegate.inner.waitForConnection())
        client.write((0 ..< 50).flatMap { WireProtocol.frame([1, UInt8($0)]) })
        #expect(delegate.inner.waitForDisconnect(link) == .closedLocally)
        #expect(delegate.framesAfterClose == 0)
        #expect(client.waitForClose())
    }
}
