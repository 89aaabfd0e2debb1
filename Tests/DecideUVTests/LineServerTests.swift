import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import DecideUV

/// `UVLineServer`: line framing, bounds, loopback-only binding, half-close and shutdown.
@Suite(.serialized) struct LineServerTests {
    /// Echoes each line back upper-cased; records every event.
    final class EchoDelegate: UVLineServer.Delegate, @unchecked Sendable {
        let events = Mutex<[String]>([])
        let server = Mutex<UVLineServer?>(nil)
        /// Connections whose input ended are closed once written (as syncnode does).
        func lineServer(_ server: UVLineServer, didReceive line: [UInt8], from connection: UInt64) {
            let text = String(decoding: line, as: UTF8.self)
            events.withLock { $0.append("line \(text)") }
            server.send(Array((text.uppercased() + "\n").utf8), to: connection)
        }
        func lineServer(_ server: UVLineServer, didDrain connection: UInt64) {}
        func lineServer(_ server: UVLineServer, inputEndedOn connection: UInt64) {
            events.withLock { $0.append("eof") }
            server.closeWhenWritten(connection)
        }
        func lineServer(_ server: UVLineServer, didClose connection: UInt64) {
            events.withLock { $0.append("closed") }
        }
        func count(_ event: String) -> Int { events.withLock { $0.filter { $0 == event }.count } }
    }

    /// A blocking client socket reading lines.
    final class LineClient {
        let fd: Int32
        private var buffer: [UInt8] = []

        init(_ address: String) throws {
            let target = SocketAddress(literal: HostPort(address)!)!
            fd = socket(target.family, Int32(SOCK_STREAM.rawValue), 0)
            let status = target.withSockaddr { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            guard status == 0 else { Glibc.close(fd); throw POSIXError(.ECONNREFUSED) }
        }
        deinit { Glibc.close(fd) }

        func write(_ text: String) {
            let bytes = Array(text.utf8)
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { return }
                sent += n
            }
        }

        func shutdownWrite() { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

        /// The next line, or nil on EOF or after `timeoutSeconds`.
        func readLine(timeoutSeconds: Double = 5) -> String? {
            let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
            while true {
                if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[..<newline], as: UTF8.self)
                    buffer.removeSubrange(...newline)
                    return line
                }
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
                guard poll(&descriptor, 1, milliseconds) > 0 else { return nil }
                var chunk = [UInt8](repeating: 0, count: 65536)
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { return nil }
                buffer += chunk[0 ..< n]
            }
        }
    }

    func makeServer(_ configure: (inout UVLineServer.Configuration) -> Void = { _ in }) throws -> (UVLineServer, EchoDelegate, String) {
        let delegate = EchoDelegate()
        var configuration = UVLineServer.Configuration()
        configure(&configuration)
        let server = try UVLineServer(configuration: configuration, delegate: delegate)
        delegate.server.withLock { $0 = server }
        let address = try server.listen(on: "127.0.0.1:0")
        return (server, delegate, address)
    }

    func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(5_000)
        }
        return condition()
    }

    @Test func linesSplitAcrossWritesAndPipelinedAreAnsweredInOrder() throws {
        let (server, delegate, address) = try makeServer()
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }  // the server holds its delegate weakly
        let client = try LineClient(address)
        for byte in "hel".utf8 { client.write(String(UnicodeScalar(byte))) }
        client.write("lo\r\nsecond\nthird\n")
        #expect(client.readLine() == "HELLO")
        #expect(client.readLine() == "SECOND")
        #expect(client.readLine() == "THIRD")
    }

    @Test func aLineOverTheBoundGetsAnErrorAndTheConnectionCloses() throws {
        let (server, delegate, address) = try makeServer { $0.maxLineBytes = 16 }
        defer { server.shutdown() }
        let client = try LineClient(address)
        client.write("short\n" + String(repeating: "x", count: 100))
        #expect(client.readLine() == "SHORT")
        let error = client.readLine()
        #expect(error?.contains("longer than 16 bytes") == true, "got \(error ?? "nil")")
        #expect(client.readLine() == nil)  // closed
        #expect(eventually { delegate.count("closed") == 1 })
        #expect(delegate.events.withLock { $0.filter { $0.hasPrefix("line") } } == ["line short"])
    }

    @Test func nonLoopbackAddressesAreRefused() throws {
        let delegate = EchoDelegate()
        let server = try UVLineServer(delegate: delegate)
        defer { server.shutdown() }
        #expect(throws: UVTransportError.insecureListenRefused("0.0.0.0:0")) { try server.listen(on: "0.0.0.0:0") }
    }

    @Test func halfCloseGetsTheRepliesThenTheClose() throws {
        let (server, delegate, address) = try makeServer()
        defer { server.shutdown() }
        let client = try LineClient(address)
        client.write("one\ntwo\n")
        client.shutdownWrite()
        #expect(client.readLine() == "ONE")
        #expect(client.readLine() == "TWO")
        #expect(client.readLine() == nil)
        #expect(eventually { delegate.count("eof") == 1 && delegate.count("closed") == 1 })
    }

    @Test func outputPastTheBoundIsRefusedNotBuffered() throws {
        let (server, delegate, address) = try makeServer { $0.maxOutboundBytes = 64 * 1024 }
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }
        let client = try LineClient(address)
        client.write("hi\n")
        #expect(client.readLine() == "HI")
        // The connection is id 1 (the first accepted). The client reads nothing more, so the
        // socket buffers fill and then the server's bound answers.
        let line = Array((String(repeating: "y", count: 1023) + "\n").utf8)
        var refused = false
        for _ in 0 ..< 100_000 where !refused {
            switch server.send(line, to: 1) {
            case .queued: continue
            case .overLimit: refused = true
            case .notConnected: Issue.record("connection 1 vanished"); return
            }
        }
        #expect(refused)
        #expect(server.send(line, to: 99) == .notConnected)
    }

    @Test func shutdownClosesEveryConnectionAndIsIdempotent() throws {
        let (server, delegate, address) = try makeServer()
        let first = try LineClient(address)
        let second = try LineClient(address)
        first.write("a\n")
        second.write("b\n")
        #expect(first.readLine() == "A")
        #expect(second.readLine() == "B")
        server.shutdown()
        server.shutdown()
        #expect(delegate.count("closed") == 2)
        #expect(first.readLine() == nil)
        #expect(second.readLine() == nil)
    }

    @Test func extraConnectionsPastTheLimitGetOneErrorLine() throws {
        let (server, delegate, address) = try makeServer { $0.maxConnections = 1 }
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }
        let first = try LineClient(address)
        first.write("x\n")
        #expect(first.readLine() == "X")
        let second = try LineClient(address)
        let refusal = second.readLine()
        #expect(refusal?.contains("too many admin connections") == true, "got \(refusal ?? "nil")")
        #expect(second.readLine() == nil)
    }
}
