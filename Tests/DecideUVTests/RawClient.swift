import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import DecideUV

/// A plain blocking TCP socket that speaks (or breaks) the wire protocol by hand.
final class RawClient {
    let fd: Int32
    private var decoder = FrameDecoder(maxFrameBytes: 1 << 26)
    /// Frames read but not yet consumed.
    private var inbox: [[UInt8]] = []
    /// True once the peer closed (EOF or reset).
    private(set) var closedByPeer = false

    /// Connects to `address` (`127.0.0.1:P` or `[::1]:P`). `receiveBufferBytes` shrinks SO_RCVBUF;
    /// `sourceHost` binds the local end to that address first (any port): `127.0.0.2` makes a
    /// stranger on another loopback address.
    init(connectTo address: String, receiveBufferBytes: Int32? = nil, sourceHost: String? = nil) throws {
        let target = SocketAddress(literal: HostPort(address)!)!
        fd = socket(target.family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        if let sourceHost {
            let local = SocketAddress(literal: HostPort(host: sourceHost, port: 0))!
            let length = socklen_t(local.family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            guard local.withSockaddr({ bind(fd, $0, length) }) == 0 else { Glibc.close(fd); throw POSIXError(.EADDRNOTAVAIL) }
        }
        if var size = receiveBufferBytes {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let length = socklen_t(target.family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        let status = target.withSockaddr { Glibc.connect(fd, $0, length) }
        guard status == 0 else { Glibc.close(fd); throw POSIXError(.ECONNREFUSED) }
    }

    deinit { Glibc.close(fd) }

    /// Writes all of `bytes` (blocking).
    func write(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Writes one frame with its length prefix.
    func writeFrame(_ payload: [UInt8]) { write(WireProtocol.frame(payload)) }

    /// Reads until a whole frame arrived, the peer closed, or the deadline passed.
    func readFrame(timeoutSeconds: Double = 5) -> [UInt8]? {
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        while inbox.isEmpty {
            guard !closedByPeer, readSome(until: deadline) else { return nil }
        }
        return inbox.removeFirst()
    }

    /// Waits until the peer closes (true) or the deadline passes (false); frames read meanwhile
    /// are kept (`remainingFrames`).
    func waitForClose(timeoutSeconds: Double = 5) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        while !closedByPeer {
            if !readSome(until: deadline) && !closedByPeer { return false }
        }
        return true
    }

    /// Frames read and not consumed.
    var remainingFrames: [[UInt8]] { inbox }

    /// One poll + recv. False on timeout.
    private func readSome(until deadline: Date) -> Bool {
        let milliseconds = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, milliseconds) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 {
            closedByPeer = true
            return true
        }
        var offset = 0
        buffer.withUnsafeBytes { raw in
            let input = UnsafeRawBufferPointer(rebasing: raw[0 ..< n])
            while let frame = try? decoder.next(from: input, offset: &offset) { inbox.append(frame) }
        }
        return true
    }

    /// Seals and opens frames after a handshake with a secret.
    var sealer: LinkSealer?

    /// Writes one frame of `payload`, in a sealed record of its own when the handshake set up a sealer.
    func writePayload(_ payload: [UInt8]) {
        guard sealer != nil else { return writeFrame(payload) }
        for record in sealer!.seal([payload]) { writeFrame(record) }
    }

    /// Reads one frame (a sealed record's frames, when sealed); nil when none came or it did not open.
    func readPayloads(timeoutSeconds: Double = 5) -> [[UInt8]]? {
        guard let frame = readFrame(timeoutSeconds: timeoutSeconds) else { return nil }
        return sealer == nil ? [frame] : sealer!.open(frame, maxFrameBytes: 1 << 24)
    }

    /// Runs the handshake as a dialling peer; true when this side considers the link up.
    func handshake(cluster: String = "test", nodeID: String = "raw", secret: [UInt8]? = nil,
                   byteByByte: Bool = false) -> Bool {
        var handshake = Handshake(clusterName: cluster, nodeID: nodeID, listenAddress: "", secrets: secret.map { [$0] } ?? [],
                                  outbound: true, nonce: (0 ..< 32).map { _ in UInt8.random(in: 0 ... 255) },
                                  versions: WireProtocol.minSupportedVersion ... WireProtocol.maxSupportedVersion)
        send(WireProtocol.frame(handshake.helloPayload), byteByByte: byteByByte)
        while let frame = readFrame() {
            switch handshake.receive(frame) {
            case .send(let payloads):
                for payload in payloads { send(WireProtocol.frame(payload), byteByByte: byteByByte) }
            case .established(let payloads, _, _, let sealer):
                for payload in payloads { send(WireProtocol.frame(payload), byteByByte: byteByByte) }
                self.sealer = sealer
                return true
            case .refuse, .refusedByPeer:
                return false
            }
        }
        return false
    }

    /// Writes `bytes` at once or one byte per `send` call.
    func send(_ bytes: [UInt8], byteByByte: Bool) {
        if byteByByte {
            for byte in bytes { write([byte]) }
        } else {
            write(bytes)
        }
    }
}
