import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking client of the admin protocol, for the syncnode subcommands: one TCP connection,
/// requests written as lines, replies read as lines.
///
/// Guarantees: a reply line longer than `maxReplyBytes` is refused rather than buffered, and
/// every failure to reach or hear from the server is a `Failure` whose text says what to do.
final class AdminClient {
    /// The longest reply line accepted.
    static let maxReplyBytes = 64 << 20

    /// Why the admin endpoint could not be used (syncnode exits 2 on it).
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let address: String
    private let socket: Int32
    private var buffer: [UInt8] = []
    private var start = 0

    /// Connects to `address` (`HOST:PORT`). `replyTimeoutSeconds` bounds each wait for a reply
    /// (0: wait forever, for `watch`).
    init(address: String, replyTimeoutSeconds: Int) throws(Failure) {
        self.address = address
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw Failure(description: "invalid admin address '\(address)': expected HOST:PORT, e.g. 127.0.0.1:7501")
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
            if code == ECONNREFUSED {
                throw Failure(description: "no syncnode answers at \(address) — is it running? (start one with `syncnode run`, or pass --admin HOST:PORT)")
            }
            throw Failure(description: "cannot reach syncnode at \(address): \(String(cString: strerror(code)))")
        }
        if replyTimeoutSeconds > 0 {
            var timeout = timeval(tv_sec: replyTimeoutSeconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        socket = fd
    }

    deinit { Glibc.close(socket) }

    /// Writes one request line.
    func send(_ request: JSONValue) throws(Failure) {
        let bytes = Array((request.compact() + "\n").utf8)
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

    /// The next reply line, parsed; nil when the server closed the connection cleanly.
    func receive() throws(Failure) -> JSONValue? {
        guard let line = try nextLine() else { return nil }
        do {
            return try JSONValue.parse(line)
        } catch {
            throw Failure(description: "syncnode at \(address) sent a line that is not JSON (\(error)) — is that a syncnode admin port?")
        }
    }

    /// Sends `request` and returns its one reply line.
    func request(_ request: JSONValue) throws(Failure) -> JSONValue {
        try send(request)
        guard let reply = try receive() else {
            throw Failure(description: "syncnode at \(address) closed the connection without answering")
        }
        return reply
    }

    /// The next raw line (without `\n`); nil at a clean end of stream.
    func nextLine() throws(Failure) -> [UInt8]? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[start ..< newline])
                start = newline + 1
                if start > 1 << 16 {
                    buffer.removeFirst(start)
                    start = 0
                }
                return line
            }
            guard buffer.count - start <= Self.maxReplyBytes else {
                throw Failure(description: "a reply from \(address) is longer than \(Self.maxReplyBytes) bytes")
            }
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count == 0 {
                guard start == buffer.count else {
                    throw Failure(description: "syncnode at \(address) closed the connection mid-line")
                }
                return nil
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw Failure(description: "syncnode at \(address) did not answer in time — is it overloaded or stuck?")
                }
                throw Failure(description: "lost the connection to syncnode at \(address): \(String(cString: strerror(errno)))")
            }
            buffer.append(contentsOf: chunk[0 ..< count])
        }
    }
}
