import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import DecideUV

/// `UVStreamServer`: replies coalesced per read, back-pressure on clients that do not read,
/// loopback-only binding, Unix sockets with their mode, half-close, connection limits, shutdown.
@Suite(.serialized) struct StreamServerTests {
    /// Answers each `\n`-terminated line upper-cased; counts reads and events.
    final class EchoDelegate: UVStreamServer.Delegate, @unchecked Sendable {
        let events = Mutex<[String]>([])
        let reads = Atomic<Int>(0)
        /// Bytes appended per line read, to fill the output (for back-pressure).
        let replyBytesPerLine = Atomic<Int>(0)
        /// The most reply bytes ever waiting on one connection.
        let mostUnwritten = Atomic<Int>(0)
        final class Session { var pending: [UInt8] = [] }

        func streamServer(_ server: UVStreamServer, didAccept connection: UVStreamServer.Connection) {
            connection.context = Session()
            events.withLock { $0.append("accept") }
        }
        func streamServer(_ server: UVStreamServer, didRead bytes: UnsafeRawBufferPointer, on connection: UVStreamServer.Connection) {
            reads.add(1, ordering: .relaxed)
            let session = connection.context as! Session
            session.pending += bytes
            answer(connection, server: server)
        }
        /// Answers waiting lines until the replies waiting pass the server's read pause, as a
        /// protocol delegate must (the rest at the next drain).
        func answer(_ connection: UVStreamServer.Connection, server: UVStreamServer) {
            let session = connection.context as! Session
            while connection.unwrittenBytes <= server.configuration.pauseReadingAboveBytes,
                  let newline = session.pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: session.pending[..<newline], as: UTF8.self)
                session.pending.removeSubrange(...newline)
                let extra = replyBytesPerLine.load(ordering: .relaxed)
                connection.output += Array((line.uppercased() + "\n").utf8)
                if extra > 0 { connection.output += [UInt8](repeating: UInt8(ascii: "."), count: extra) }
                mostUnwritten.max(connection.unwrittenBytes, ordering: .relaxed)
            }
        }
        func streamServer(_ server: UVStreamServer, didDrain connection: UVStreamServer.Connection) {
            answer(connection, server: server)
        }
        func streamServer(_ server: UVStreamServer, inputEndedOn connection: UVStreamServer.Connection) {
            events.withLock { $0.append("eof") }
            server.closeWhenWritten(connection)
        }
        func streamServer(_ server: UVStreamServer, didClose connection: UVStreamServer.Connection) {
            events.withLock { $0.append("closed") }
        }
        func count(_ event: String) -> Int { events.withLock { $0.filter { $0 == event }.count } }
    }

    /// A blocking client socket (TCP or Unix).
    final class Client {
        let fd: Int32
        private var buffer: [UInt8] = []

        init(_ address: String) throws {
            if address.hasPrefix("unix:") {
                fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                var target = sockaddr_un()
                target.sun_family = sa_family_t(AF_UNIX)
                let path = Array(address.dropFirst(5).utf8)
                withUnsafeMutableBytes(of: &target.sun_path) { $0.copyBytes(from: path + [0]) }
                let status = withUnsafePointer(to: &target) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
                guard status == 0 else { Glibc.close(fd); throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED) }
            } else {
                let target = SocketAddress(literal: HostPort(address)!)!
                fd = socket(target.family, Int32(SOCK_STREAM.rawValue), 0)
                let status = target.withSockaddr { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                guard status == 0 else { Glibc.close(fd); throw POSIXError(.ECONNREFUSED) }
            }
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
                guard fill(until: deadline) else { return nil }
            }
        }

        /// Reads whatever arrives until `deadline` or EOF; returns the byte count read.
        func drain(for seconds: Double) -> Int {
            let deadline = Date(timeIntervalSinceNow: seconds)
            var total = buffer.count
            buffer = []
            while fill(until: deadline) {
                total += buffer.count
                buffer = []
            }
            return total
        }

        private func fill(until deadline: Date) -> Bool {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
            guard poll(&descriptor, 1, milliseconds) > 0 else { return false }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return false }
            buffer += chunk[0 ..< n]
            return true
        }
    }

    func makeServer(_ configure: (inout UVStreamServer.Configuration) -> Void = { _ in }) throws -> (UVStreamServer, EchoDelegate, String) {
        let delegate = EchoDelegate()
        var configuration = UVStreamServer.Configuration()
        configure(&configuration)
        let server = try UVStreamServer(configuration: configuration, delegate: delegate)
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

    @Test func pipelinedRequestsOfOneReadAreAnsweredInOrder() throws {
        let (server, delegate, address) = try makeServer()
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }
        let client = try Client(address)
        for byte in "hel".utf8 { client.write(String(UnicodeScalar(byte))) }
        client.write("lo\nsecond\nthird\n")
        #expect(client.readLine() == "HELLO")
        #expect(client.readLine() == "SECOND")
        #expect(client.readLine() == "THIRD")
    }

    @Test func aClientThatDoesNotReadIsNotReadFromEither() throws {
        // Each 1 KiB request line gets a 4 KiB reply; the client writes lines and never reads.
        // The server must stop reading it once its unwritten replies pass the bound: the client's
        // sends stall, and the replies waiting never pass the bound by more than one reply.
        let bound = 256 * 1024
        let (server, delegate, address) = try makeServer { $0.pauseReadingAboveBytes = bound }
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }
        delegate.replyBytesPerLine.store(4096, ordering: .relaxed)
        let client = try Client(address)
        let flags = fcntl(client.fd, F_GETFL)
        _ = fcntl(client.fd, F_SETFL, flags | O_NONBLOCK)
        let line = [UInt8](repeating: UInt8(ascii: "r"), count: 1023) + [UInt8(ascii: "\n")]
        var sentBytes = 0
        var stalledFor = 0
        while stalledFor < 100 && sentBytes < 1 << 30 {
            let n = line[(sentBytes % line.count)...].withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sentBytes += n
                stalledFor = 0
            } else {
                stalledFor += 1
                usleep(2_000)
            }
        }
        #expect(stalledFor >= 100, "the server kept reading a client that never read its replies (\(sentBytes) bytes taken)")
        #expect(delegate.mostUnwritten.load(ordering: .relaxed) <= bound + 4096 + 1024 + 1)
        // Read everything, finishing the last line as the server makes room (the socket stays
        // non-blocking: a blocking send here would wait for a server that waits for us): the
        // server resumes and answers every line.
        var remainder = Array(line[(sentBytes % line.count == 0 ? line.count : sentBytes % line.count)...])
        let lines = (sentBytes + line.count - 1) / line.count
        let expected = lines * (1024 + 4096)
        var received = 0
        let deadline = Date(timeIntervalSinceNow: 60)
        while (received < expected || !remainder.isEmpty) && Date() < deadline {
            if !remainder.isEmpty {
                let n = remainder.withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n > 0 { remainder.removeFirst(n) }
            }
            received += client.drain(for: 0.1)
        }
        #expect(remainder.isEmpty)
        #expect(received == expected)
    }

    @Test func nonLoopbackAddressesAreRefusedUnlessAllowed() throws {
        let delegate = EchoDelegate()
        let server = try UVStreamServer(delegate: delegate)
        defer { server.shutdown() }
        #expect(throws: UVTransportError.insecureListenRefused("0.0.0.0:0")) { try server.listen(on: "0.0.0.0:0") }
        var open = UVStreamServer.Configuration()
        open.allowsNonLoopback = true
        let allowed = try UVStreamServer(configuration: open, delegate: delegate)
        defer { allowed.shutdown() }
        #expect(try allowed.listen(on: "0.0.0.0:0").hasPrefix("0.0.0.0:"))
    }

    @Test func aUnixSocketGetsItsModeAnswersAndIsRemovedAtShutdown() throws {
        let path = NSTemporaryDirectory() + "decide-stream-\(getpid()).sock"
        unlink(path)
        let delegate = EchoDelegate()
        var configuration = UVStreamServer.Configuration()
        configuration.unixSocketMode = 0o660
        let server = try UVStreamServer(configuration: configuration, delegate: delegate)
        let bound = try server.listen(unixSocket: path)
        #expect(bound == "unix:" + path)
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o660)
        let client = try Client(bound)
        client.write("over unix\n")
        #expect(client.readLine() == "OVER UNIX")
        server.shutdown()
        #expect(access(path, F_OK) != 0)
        withExtendedLifetime(delegate) {}
    }

    @Test func aFileThatIsNotASocketIsNotReplaced() throws {
        let path = NSTemporaryDirectory() + "decide-not-a-socket-\(getpid())"
        _ = FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8))
        defer { unlink(path) }
        let delegate = EchoDelegate()
        let server = try UVStreamServer(delegate: delegate)
        defer { server.shutdown() }
        #expect(throws: UVTransportError.self) { try server.listen(unixSocket: path) }
        #expect(FileManager.default.contents(atPath: path) == Data("keep me".utf8))
    }

    @Test func halfCloseGetsTheRepliesThenTheClose() throws {
        let (server, delegate, address) = try makeServer()
        defer { server.shutdown() }
        let client = try Client(address)
        client.write("one\ntwo\n")
        client.shutdownWrite()
        #expect(client.readLine() == "ONE")
        #expect(client.readLine() == "TWO")
        #expect(client.readLine() == nil)
        #expect(eventually { delegate.count("eof") == 1 && delegate.count("closed") == 1 })
    }

    @Test func shutdownClosesEveryConnectionAndIsIdempotent() throws {
        let (server, delegate, address) = try makeServer()
        let first = try Client(address)
        let second = try Client(address)
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

    @Test func theDelegateIsHeldUntilShutdownAndLetGoThen() throws {
        // The server answers reads through a delegate nobody else holds, and lets it go only
        // once `shutdown` returned, after its last call.
        weak var released: EchoDelegate?
        let server: UVStreamServer
        let address: String
        do {
            let delegate = EchoDelegate()
            released = delegate
            server = try UVStreamServer(delegate: delegate)
            address = try server.listen(on: "127.0.0.1:0")
        }
        let client = try Client(address)
        client.write("kept\n")
        #expect(client.readLine() == "KEPT")
        #expect(released != nil)
        server.shutdown()
        #expect(released == nil)
        #expect(client.readLine() == nil)
    }

    @Test func aServerNeverStartedLetsItsDelegateGoAtShutdown() throws {
        weak var released: EchoDelegate?
        let server: UVStreamServer
        do {
            let delegate = EchoDelegate()
            released = delegate
            server = try UVStreamServer(delegate: delegate)
        }
        #expect(released != nil)
        server.shutdown()
        #expect(released == nil)
    }

    @Test func extraConnectionsPastTheLimitGetTheRefusalAndAreClosed() throws {
        let (server, delegate, address) = try makeServer {
            $0.maxConnections = 1
            $0.tooManyConnectionsReply = Array("too many\n".utf8)
        }
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }
        let first = try Client(address)
        first.write("x\n")
        #expect(first.readLine() == "X")
        let second = try Client(address)
        #expect(second.readLine() == "too many")
        #expect(second.readLine() == nil)
        #expect(delegate.count("accept") == 1)
    }

    /// Issue 58: a stranger that keeps opening connections past the limit wrote a line per
    /// refusal. Now a few lines a second carry the count of the rest.
    @Test func refusalsPastTheLimitWriteAFewLinesWithTheCount() throws {
        let logs = LogCapture()
        let (server, delegate, address) = try makeServer {
            $0.maxConnections = 1
            $0.tooManyConnectionsReply = Array("too many\n".utf8)
            $0.logger = logs.logger("server")
        }
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }
        let first = try Client(address)
        first.write("x\n")
        #expect(first.readLine() == "X")
        for _ in 0 ..< 40 {
            let refused = try Client(address)
            #expect(refused.readLine() == "too many")
        }
        let lines = logs.lines.filter { $0.message == "connection refused: too many connections" }
        // One interval, or two if the refusals straddle a boundary.
        #expect(lines.count <= 2 * LogThrottle().maxLinesPerInterval, "\(lines.count) lines for 40 refusals")
        #expect(lines.count >= 1)
    }

    @Test func workFromOtherThreadsRunsOnTheLoopAndIsFlushed() throws {
        let (server, delegate, address) = try makeServer()
        defer { server.shutdown(); withExtendedLifetime(delegate) {} }
        let client = try Client(address)
        client.write("hi\n")
        #expect(client.readLine() == "HI")
        let sent = server.execute {
            for connection in server.openConnections {
                connection.output += Array("pushed\n".utf8)
                server.flush(connection)
            }
        }
        #expect(sent)
        #expect(client.readLine() == "pushed")
    }
}
