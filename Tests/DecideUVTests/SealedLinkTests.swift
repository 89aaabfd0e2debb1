import Decide
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import DecideUV

/// Sealed links (docs/protocol.md §3–4): with a cluster secret the hello names nothing, each
/// side's identity and every later frame are sealed under keys of that link and direction, a
/// replayed, reordered or changed frame closes the link, and a keyring accepts old and new
/// secrets so the secret rotates without downtime.
@Suite("Sealed links")
struct SealedLinkTests {
    static func nonce() -> [UInt8] { (0 ..< 32).map { _ in UInt8.random(in: 0 ... 255) } }

    /// Runs a whole handshake in memory; the two final steps (dialer's, listener's).
    static func handshake(dialer: [[UInt8]], listener: [[UInt8]], dialerCluster: String = "prod", listenerCluster: String = "prod",
                          sent: inout [[UInt8]]) -> (Handshake.Step?, Handshake.Step?) {
        let versions = WireProtocol.minSupportedVersion ... WireProtocol.maxSupportedVersion
        var a = Handshake(clusterName: dialerCluster, nodeID: "node-a", listenAddress: "10.0.0.1:7400", secrets: dialer,
                          outbound: true, nonce: nonce(), versions: versions)
        var b = Handshake(clusterName: listenerCluster, nodeID: "node-b", listenAddress: "10.0.0.2:7400", secrets: listener,
                          outbound: false, nonce: nonce(), versions: versions)
        sent = [a.helloPayload, b.helloPayload]
        var toA = [b.helloPayload], toB = [a.helloPayload]
        var endA: Handshake.Step?, endB: Handshake.Step?
        var progress = true
        while progress && (endA == nil || endB == nil) {
            progress = false
            if endA == nil, !toA.isEmpty {
                progress = true
                switch a.receive(toA.removeFirst()) {
                case .send(let out): toB += out; sent += out
                case let step: endA = step
                }
            }
            if endB == nil, !toB.isEmpty {
                progress = true
                switch b.receive(toB.removeFirst()) {
                case .send(let out): toA += out; sent += out
                case let step: endB = step
                }
            }
        }
        return (endA, endB)
    }

    static func sealers(_ steps: (Handshake.Step?, Handshake.Step?)) -> (LinkSealer, LinkSealer)? {
        guard case .established(_, let peerOfA, _, let a?)? = steps.0, case .established(_, let peerOfB, _, let b?)? = steps.1,
              peerOfA.nodeID == "node-b", peerOfB.nodeID == "node-a", peerOfA.listenAddress == "10.0.0.2:7400" else { return nil }
        return (a, b)
    }

    @Test("the hello and the proof name nobody; frames open only once, in order, unchanged")
    func sealedHandshakeAndFrames() throws {
        var sent: [[UInt8]] = []
        var (a, b) = try #require(Self.sealers(Self.handshake(dialer: [secretA], listener: [secretA], sent: &sent)))
        for payload in sent {
            for word in ["prod", "node-a", "node-b", "10.0.0"] {
                #expect(!Self.contains(payload, word), "a handshake frame shows \(word)")
            }
        }
        let limit = 1 << 20
        let first = a.seal([Array("the value 42".utf8)])
        #expect(first.count == 1 && !Self.contains(first[0], "value 42"))
        #expect(b.open(first[0], maxFrameBytes: limit) == [Array("the value 42".utf8)])
        #expect(b.open(first[0], maxFrameBytes: limit) == nil, "a replayed record does not open")
        let second = a.seal([[2]])[0], third = a.seal([[3]])[0]
        #expect(b.open(third, maxFrameBytes: limit) == nil, "a record out of order does not open")
        #expect(b.open(second, maxFrameBytes: limit) == [[2]] && b.open(third, maxFrameBytes: limit) == [[3]])
        var changed = a.seal([[4, 4, 4]])[0]
        changed[1] ^= 1
        #expect(b.open(changed, maxFrameBytes: limit) == nil, "a changed record does not open")
        // The other direction has its own key and count.
        #expect(a.open(b.seal([[9]])[0], maxFrameBytes: limit) == [[9]])
        #expect(b.open(a.seal([[5]])[0], maxFrameBytes: limit) == nil,
                "after a failure the receiver's count stayed put: record 4 was lost, so 5 cannot open")
    }

    @Test("frames written together share records of at most 64 KiB; a frame larger than that travels alone")
    func recordsPackFrames() throws {
        var sent: [[UInt8]] = []
        var (a, b) = try #require(Self.sealers(Self.handshake(dialer: [secretA], listener: [secretA], sent: &sent)))
        let small = (0 ..< 1_000).map { index in [UInt8](repeating: UInt8(index % 200 + 1), count: 100) }
        let big = [UInt8](repeating: 7, count: 200_000)
        let frames = small + [big] + small
        let records = a.seal(frames)
        // 630 frames of 104 bytes fill a record: 630 + 370, the big one alone, 630 + 370.
        #expect(records.count == 5, "\(records.map(\.count))")
        #expect(records.allSatisfy { $0.count <= LinkSealer.maxRecordBytes(maxFrameBytes: 200_000) })
        var opened: [[UInt8]] = []
        for record in records {
            let inside = b.open(record, maxFrameBytes: 200_000)
            #expect(inside != nil)
            opened += inside ?? []
        }
        #expect(opened == frames)
        // A frame inside a record is held to the receiver's frame limit too.
        let tooBig = a.seal([[UInt8](repeating: 1, count: 2_000)])[0]
        #expect(b.open(tooBig, maxFrameBytes: 1_000) == nil)
    }

    @Test("a keyring accepts any of its secrets; a stranger and another cluster are refused after proving nothing")
    func keyrings() throws {
        var sent: [[UInt8]] = []
        // Mid-rotation: the dialer already proves the new secret, the listener accepts both.
        let rotating = Self.handshake(dialer: [secretB, secretA], listener: [secretA, secretB], sent: &sent)
        let (a, b) = try #require(Self.sealers(rotating))
        #expect(a.sendSecret == SecretFingerprint(secretB) && a.receiveSecret == SecretFingerprint(secretA))
        #expect(b.sendSecret == SecretFingerprint(secretA) && b.receiveSecret == SecretFingerprint(secretB))
        var sender = a, receiver = b
        #expect(receiver.open(sender.seal([[1]])[0], maxFrameBytes: 100) == [[1]])

        let stranger = Self.handshake(dialer: [secretB], listener: [secretA], sent: &sent)
        guard case .refuse(let refusal, _)? = stranger.1 ?? stranger.0 else {
            Issue.record("a peer with another secret was not refused: \(String(describing: stranger))")
            return
        }
        #expect(refusal.code == .badProof)
        let other = Self.handshake(dialer: [secretA], listener: [secretA], dialerCluster: "staging", sent: &sent)
        guard case .refuse(let mismatch, _)? = other.1 ?? other.0 else {
            Issue.record("another cluster was not refused")
            return
        }
        #expect(mismatch.code == .clusterMismatch && mismatch.reason.contains("staging"))
    }

    static func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard bytes.count >= needle.count else { return false }
        return (0 ... (bytes.count - needle.count)).contains { Array(bytes[$0 ..< $0 + needle.count]) == needle }
    }

    @Test("over real sockets: a captured link never shows a value, a name or a node id")
    func capturedLinkShowsNothing() throws {
        let a = try makeNode("alpha-node", cluster: "capture-cluster", secret: secretA)
        let b = try makeNode("beta-node", cluster: "capture-cluster", secret: secretA)
        defer { a.transport.shutdown(); b.transport.shutdown() }
        let address = try a.transport.listen(on: "127.0.0.1:0")
        let relay = try Relay(to: address)
        defer { relay.stop() }
        b.transport.connect(to: relay.address)
        let aLink = try #require(a.delegate.waitForConnection()?.0)
        let bLink = try #require(b.delegate.waitForConnection()?.0)
        let value = Array("maintenance-window-secret-value".utf8)
        for _ in 0 ..< 50 { #expect(b.transport.send(value, to: bLink) == .queued) }
        #expect(a.transport.send(value, to: aLink) == .queued)
        #expect(a.delegate.waitForFrames(on: aLink, count: 50).count == 50)
        #expect(b.delegate.waitForFrames(on: bLink, count: 1) == [value])
        let captured = relay.captured()
        #expect(captured.count > 50 * value.count, "the relay saw the traffic")
        for word in ["maintenance-window", "capture-cluster", "alpha-node", "beta-node"] {
            #expect(!Self.contains(captured, word), "the wire shows \(word)")
        }
        let links = a.transport.sealedLinks()
        #expect(links.map(\.peerNodeID) == ["beta-node"])
        #expect(links.first?.sendsUnder == UVTransport.fingerprint(ofSecret: secretA))
    }

    @Test("over real sockets: a replayed frame closes the link")
    func replayedFrameCloses() throws {
        let a = try makeNode("a", secret: secretA)
        defer { a.transport.shutdown() }
        let address = try a.transport.listen(on: "127.0.0.1:0")
        let client = try RawClient(connectTo: address)
        #expect(client.handshake(secret: secretA))
        let link = try #require(a.delegate.waitForConnection()?.0)
        var sealer = try #require(client.sealer)
        let frame = sealer.seal([[ReplicationFrame.ping]])[0]
        client.writeFrame(frame)
        #expect(a.delegate.waitForFrames(on: link, count: 1) == [[ReplicationFrame.ping]])
        client.writeFrame(frame)   // the same bytes again
        #expect(a.delegate.waitForDisconnect(link).map { "\($0)".contains("did not open") } == true)
        #expect(client.waitForClose())
    }

    @Test("rotation on running transports: new secret accepted, then sent, then the old retired; old links redial")
    func rotationOnRunningTransports() throws {
        let a = try makeNode("a", secret: secretA)
        let b = try makeNode("b", secret: secretA)
        defer { a.transport.shutdown(); b.transport.shutdown() }
        let address = try a.transport.listen(on: "127.0.0.1:0")
        b.transport.connect(to: address)
        let first = try #require(a.delegate.waitForConnection()?.0)
        _ = try #require(b.delegate.waitForConnection())
        // 1. Both accept the new secret; 2. both prove it. The link made under the old one stays.
        try a.transport.updateClusterSecrets([secretA, secretB])
        try b.transport.updateClusterSecrets([secretA, secretB])
        try a.transport.updateClusterSecrets([secretB, secretA])
        try b.transport.updateClusterSecrets([secretB, secretA])
        #expect(a.transport.sealedLinks().map(\.connection) == [first])
        // A new link now seals under the new secret both ways.
        b.transport.connect(to: address)
        let deadline = Date(timeIntervalSinceNow: 5)
        while a.transport.sealedLinks().count < 2 && Date() < deadline { usleep(2_000) }
        let newest = a.transport.sealedLinks().first { $0.connection != first }
        let second = try #require(newest?.connection)
        #expect(newest?.sendsUnder == UVTransport.fingerprint(ofSecret: secretB)
                && newest?.receivesUnder == UVTransport.fingerprint(ofSecret: secretB))
        // 3. The old secret retires: the link still sealed under it closes (the engine redials).
        try a.transport.updateClusterSecrets([secretB])
        #expect(a.delegate.waitForDisconnect(first) != nil)
        #expect(a.transport.sealedLinks().map(\.connection) == [second])
        #expect(a.transport.send([1], to: second) == .queued)
        // A keyring cannot be emptied or made of short secrets on a running transport.
        #expect(throws: UVTransportError.self) { try a.transport.updateClusterSecrets([]) }
        #expect(throws: UVTransportError.self) { try a.transport.updateClusterSecrets([Array("short".utf8)]) }
    }
}

/// A TCP relay on loopback that copies bytes both ways and keeps a copy of everything.
final class Relay: @unchecked Sendable {
    let address: String
    private let listener: Int32
    private let target: String
    private let lock = NSLock()
    private var bytes: [UInt8] = []
    private var running = true
    private var sockets: [Int32] = []

    init(to target: String) throws {
        self.target = target
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr("127.0.0.1")
        local.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, Glibc.listen(fd, 4) == 0 else {
            Glibc.close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        _ = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listener = fd
        address = "127.0.0.1:\(UInt16(bigEndian: local.sin_port))"
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            guard let upstream = try? RawClient(connectTo: target) else { Glibc.close(client); continue }
            let server = dup(upstream.fd)
            lock.withLock { sockets += [client, server] }
            Thread.detachNewThread { [self] in pump(from: client, to: server) }
            Thread.detachNewThread { [self] in pump(from: server, to: client) }
            _ = upstream  // its descriptor is duplicated; the original closes with it
        }
    }

    private func pump(from source: Int32, to sink: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            guard count > 0 else {
                shutdown(sink, Int32(SHUT_WR))
                return
            }
            lock.withLock { bytes += buffer[0 ..< count] }
            var sent = 0
            while sent < count {
                let written = buffer[sent ..< count].withUnsafeBytes { Glibc.send(sink, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard written > 0 else { return }
                sent += written
            }
        }
    }

    func captured() -> [UInt8] { lock.withLock { bytes } }

    func stop() {
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        for socket in lock.withLock({ sockets }) { Glibc.shutdown(socket, Int32(SHUT_RDWR)); Glibc.close(socket) }
    }
}

/// A replication message type the transport passes through (any byte below 0xF0 does).
enum ReplicationFrame {
    static let ping: UInt8 = 7
}
