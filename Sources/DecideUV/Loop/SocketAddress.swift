import CLibUV
#if canImport(Glibc)
import Glibc
#endif

/// A `HOST:PORT` text split into its parts: `127.0.0.1:7401`, `[::1]:7401`, `node-a.local:7401`.
struct HostPort: Equatable, Sendable, CustomStringConvertible {
    var host: String
    var port: UInt16

    /// Parses `HOST:PORT`; an IPv6 literal must be in brackets. Nil when it is not of that shape.
    init?(_ text: String) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = String(text[text.index(after: text.startIndex) ..< close])
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()) else { return nil }
            self.port = port
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = String(text[..<colon])
            guard !host.contains(":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
            self.port = port
        }
        guard !host.isEmpty else { return nil }
    }

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// An IPv4 or IPv6 socket address, ready for libuv.
struct SocketAddress: @unchecked Sendable, CustomStringConvertible {
    var storage = sockaddr_storage()

    /// The address of an IP literal host, or nil when the host is not a literal.
    init?(literal hostPort: HostPort) {
        var v4 = sockaddr_in()
        if uv_ip4_addr(hostPort.host, Int32(hostPort.port), &v4) == 0 {
            withUnsafeMutableBytes(of: &storage) { raw in
                withUnsafeBytes(of: v4) { raw.copyMemory(from: $0) }
            }
            return
        }
        var v6 = sockaddr_in6()
        if uv_ip6_addr(hostPort.host, Int32(hostPort.port), &v6) == 0 {
            withUnsafeMutableBytes(of: &storage) { raw in
                withUnsafeBytes(of: v6) { raw.copyMemory(from: $0) }
            }
            return
        }
        return nil
    }

    /// Copies a `sockaddr` of family AF_INET or AF_INET6; nil for any other family.
    init?(_ address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            withUnsafeMutableBytes(of: &storage) { raw in
                raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: MemoryLayout<sockaddr_in>.size))
            }
        case AF_INET6:
            withUnsafeMutableBytes(of: &storage) { raw in
                raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: MemoryLayout<sockaddr_in6>.size))
            }
        default:
            return nil
        }
    }

    /// Resolves `hostPort` now, on the calling thread (literals without a lookup). Throws when
    /// the name does not resolve to any IPv4 or IPv6 address.
    static func resolveBlocking(_ hostPort: HostPort) throws(UVTransportError) -> SocketAddress {
        if let literal = SocketAddress(literal: hostPort) { return literal }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(hostPort.host, String(hostPort.port), &hints, &result)
        guard status == 0, let first = result else {
            throw .cannotResolve(hostPort.description, String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(first) }
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let raw = entry.pointee.ai_addr, let address = SocketAddress(raw) { return address }
            cursor = entry.pointee.ai_next
        }
        throw .cannotResolve(hostPort.description, "no IPv4 or IPv6 address")
    }

    var family: Int32 { Int32(storage.ss_family) }

    /// True for 127.0.0.0/8, ::1 and ::ffff:127.x.x.x.
    var isLoopback: Bool {
        withUnsafeBytes(of: storage) { raw -> Bool in
            let pointer = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
            if family == AF_INET {
                let v4 = decide_sockaddr_as_in(pointer)!.pointee
                return UInt32(bigEndian: v4.sin_addr.s_addr) >> 24 == 127
            }
            if family == AF_INET6 {
                let v6 = decide_sockaddr_as_in6(pointer)!.pointee
                let bytes = withUnsafeBytes(of: v6.sin6_addr) { Array($0) }
                if bytes[0 ..< 15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
                return bytes[0 ..< 10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
            }
            return false
        }
    }

    var port: UInt16 {
        withUnsafeBytes(of: storage) { raw -> UInt16 in
            let pointer = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
            if family == AF_INET { return UInt16(bigEndian: decide_sockaddr_as_in(pointer)!.pointee.sin_port) }
            return UInt16(bigEndian: decide_sockaddr_as_in6(pointer)!.pointee.sin6_port)
        }
    }

    /// `a.b.c.d:port` or `[v6]:port`.
    var description: String {
        var text = [CChar](repeating: 0, count: 64)
        withUnsafeBytes(of: storage) { raw in
            let pointer = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
            if family == AF_INET {
                var v4 = decide_sockaddr_as_in(pointer)!.pointee
                _ = uv_ip4_name(&v4, &text, text.count)
            } else {
                var v6 = decide_sockaddr_as_in6(pointer)!.pointee
                _ = uv_ip6_name(&v6, &text, text.count)
            }
        }
        let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return HostPort(host: host, port: port).description
    }

    /// Calls `body` with this address as a `sockaddr` pointer.
    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
        withUnsafeBytes(of: storage) { raw in body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)) }
    }
}
