import DecideRESP
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking Redis-protocol client for the syncnode subcommands: one connection (TCP
/// `HOST:PORT`, or a Unix socket `unix:PATH` / an absolute path), requests written as RESP
/// multibulks, replies parsed by `RESPReplyParser`.
///
/// Guarantees: a reply larger than `maxReplyBytes` is refused rather than buffered (a dump
/// is read element by element, so its size is not bounded by it), and every failure to reach
/// or hear from the server is a `Failure` whose text says what to do.
final class RESPClient {
    /// The largest single reply value accepted.
    static let maxReplyBytes = 64 << 20

    /// Why the endpoint could not be used (syncnode exits 2 on it).
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let address: String
    private let socket: Int32
    private var parser = RESPReplyParser(maxBulkBytes: maxReplyBytes)
    private var pending: [UInt8] = []

    /// Connects to `address`; `replyTimeoutSeconds` bounds each wait for a reply (0: wait
    /// forever, for `watch`). With `password`, authenticates first.
    init(address: String, replyTimeoutSeconds: Int, password: [UInt8]?) throws(Failure) {
        self.address = address
        let fd: Int32
        if address.hasPrefix("unix:") || address.hasPrefix("/") {
            fd = try Self.connectUnix(address.hasPrefix("unix:") ? String(address.dropFirst(5)) : address, address: address)
        } else {
            fd = try Self.connectTCP(address)
        }
        if replyTimeoutSeconds > 0 {
            var timeout = timeval(tv_sec: replyTimeoutSeconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        socket = fd
        if let password {
            let reply = try call([Array("AUTH".utf8), password])
            if case .error(let text) = reply {
                throw Failure(description: "syncnode at \(address) refused the password: \(text)")
            }
        }
    }

    deinit { Glibc.close(socket) }

    private static func connectTCP(_ address: String) throws(Failure) -> Int32 {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw Failure(description: "invalid admin address '\(address)': expected HOST:PORT (e.g. 127.0.0.1:7501) or unix:PATH")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let info = result else {
            throw Failure(description: "cannot resolve the admin host '\(host)'")
        }
        defer { freeaddrinfo(info) }
        let fd = Glibc.socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "cannot open a socket: \(String(cString: strerror(errno)))") }
        if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0 {
            let code = errno
            Glibc.close(fd)
            throw unreachable(address, code)
        }
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }

    private static func connectUnix(_ path: String, address: String) throws(Failure) -> Int32 {
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: socketAddress.sun_path) else {
            throw Failure(description: "unix socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "cannot open a socket: \(String(cString: strerror(errno)))") }
        let status = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if status != 0 {
            let code = errno
            Glibc.close(fd)
            throw unreachable(address, code)
        }
        return fd
    }

    private static func unreachable(_ address: String, _ code: Int32) -> Failure {
        if code == ECONNREFUSED || code == ENOENT {
            return Failure(description: "no syncnode answers at \(address) — is it running? (start one with `syncnode run`, or pass --admin HOST:PORT)")
        }
        if code == EACCES {
            return Failure(description: "no permission to connect to \(address) (the socket's file mode decides who may)")
        }
        return Failure(description: "cannot reach syncnode at \(address): \(String(cString: strerror(code)))")
    }

    /// Writes one command.
    func send(_ arguments: [[UInt8]]) throws(Failure) {
        var bytes = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            bytes += Array("$\(argument.count)\r\n".utf8)
            bytes += argument
            bytes += [0x0D, 0x0A]
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else {
                if written < 0 && errno == EINTR { continue }
                throw Failure(description: "lost the connection to syncnode at \(address) while sending: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// Sends one command and returns its reply.
    func call(_ arguments: [[UInt8]]) throws(Failure) -> RESPValue {
        try send(arguments)
        guard let reply = try receive() else {
            throw Failure(description: "syncnode at \(address) closed the connection without answering")
        }
        return reply
    }

    /// The next reply value; nil when the server closed the connection cleanly between replies.
    func receive() throws(Failure) -> RESPValue? {
        while true {
            do {
                if let value = try parser.next() { return value }
            } catch {
                throw Failure(description: "syncnode at \(address) sent a malformed reply (\(error)) — is that a syncnode client port?")
            }
            guard try fill() else {
                guard parser.bufferedBytes == 0 else {
                    throw Failure(description: "syncnode at \(address) closed the connection mid-reply")
                }
                return nil
            }
        }
    }

    /// The element count of an array reply about to arrive (its elements then come one by one
    /// from `receive`), or the reply itself when it is not an array.
    func receiveArrayHeader() throws(Failure) -> ArrayHeader {
        while true {
            if let end = pending.firstIndex(of: 0x0A) {
                guard pending.first == UInt8(ascii: "*") else {
                    parser.append(contentsOf: pending)
                    pending = []
                    guard let value = try receive() else {
                        throw Failure(description: "syncnode at \(address) closed the connection without answering")
                    }
                    return .other(value)
                }
                let text = String(decoding: pending[1 ..< end], as: UTF8.self).trimmingCharacters(in: .whitespaces)
                guard let count = Int(text.hasSuffix("\r") ? String(text.dropLast()) : text), count >= 0 else {
                    throw Failure(description: "syncnode at \(address) sent a malformed array header")
                }
                parser.append(contentsOf: pending[(end + 1)...])
                pending = []
                return .count(count)
            }
            guard pending.count < 64 else { throw Failure(description: "syncnode at \(address) sent a malformed array header") }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = try read(into: &chunk)
            guard count > 0 else { throw Failure(description: "syncnode at \(address) closed the connection without answering") }
            pending += chunk[0 ..< count]
        }
    }

    /// What `receiveArrayHeader` found.
    enum ArrayHeader {
        /// An array of this many elements; each comes from `receive`.
        case count(Int)
        /// Another reply (an error, say), whole.
        case other(RESPValue)
    }

    /// Reads more bytes into the parser; false at end of stream.
    private func fill() throws(Failure) -> Bool {
        if !pending.isEmpty {
            parser.append(contentsOf: pending)
            pending = []
            return true
        }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let count = try read(into: &chunk)
        guard count > 0 else { return false }
        chunk.withUnsafeBytes { parser.append(UnsafeRawBufferPointer(rebasing: $0[0 ..< count])) }
        return true
    }

    private func read(into chunk: inout [UInt8]) throws(Failure) -> Int {
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count >= 0 { return count }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                throw Failure(description: "syncnode at \(address) did not answer in time — is it overloaded or stuck?")
            }
            throw Failure(description: "lost the connection to syncnode at \(address): \(String(cString: strerror(errno)))")
        }
    }
}
