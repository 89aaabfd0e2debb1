import Decide
import DecideTesting
import DecideCore
import DecideRESP
import DecideUV
import Foundation
import Logging
import Synchronization
import Prometheus
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import SyncNodeServer
@testable import syncnode

/// Every suite of this target runs one test at a time: the tests start peers with their
/// own threads and sockets, and some measure back-pressure, which parallel tests on a
/// 2-core box would blur. The suites are nested here (in their own files) so that
/// `.serialized` covers all of them.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SyncNodeTests {}

/// A test failure with a message (a timeout, a closed connection, an unexpected reply).
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: peers

/// Log lines of one or more peers, kept in memory (nothing on stderr), to assert on.
final class LogCapture: @unchecked Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let lines = Mutex<[Line]>([])

    var all: [Line] { lines.withLock { $0 } }

    func append(_ line: Line) { lines.withLock { $0.append(line) } }

    func contains(_ message: String) -> Bool { all.contains { $0.message == message } }

    /// A logger writing here, at `level` and above.
    func logger(_ label: String, level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: label) { _ in CaptureHandler(capture: self) }
        logger.logLevel = level
        return logger
    }
}

struct CaptureHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        capture.append(.init(level: event.level, message: "\(event.message)", metadata: all.mapValues { "\($0)" }))
    }
}

/// A temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init(_ prefix: String = "syncnode-test") throws {
        // Short: Unix socket paths must fit in 108 bytes.
        path = "/tmp/\(prefix)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    func file(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// One in-process syncnode peer (`PeerProcess`) on free loopback ports.
final class TestPeer: @unchecked Sendable {
    let process: PeerProcess
    let logs: LogCapture
    var node: Node { process.node }
    /// The first client endpoint (TCP `HOST:PORT` unless only a Unix socket was asked for).
    var admin: String { process.adminAddresses[0] }
    var listenAddress: String { process.listenAddress }

    /// Starts peer `id`; `configure` adjusts the flags (listen and admin default to
    /// `127.0.0.1:0`). With a data directory, it is prepared as `syncnode run` does.
    init(_ id: String, peers: [String] = [], adminPassword: [UInt8]? = nil, logs: LogCapture = LogCapture(),
         metricsRegistry: PrometheusCollectorRegistry? = nil, disk: StoreFaults? = nil,
         configure: (inout RunSettings.Flags) -> Void = { _ in }) throws {
        var flags = RunSettings.Flags(listen: "127.0.0.1:0", admin: "127.0.0.1:0", peers: peers)
        flags.id = id
        // Quick anti-entropy: tests that restart a peer wait for its catch-up.
        flags.antiEntropyIntervalMilliseconds = "500"
        configure(&flags)
        let settings = try RunSettings.resolve(flags: flags, environment: [:])
        if let directory = settings.dataDirectory { _ = try PeerFiles.prepareDataDirectory(directory, id: id) }
        self.logs = logs
        process = try PeerProcess(settings: settings, id: id, secrets: try PeerFiles.readKeyring(settings), adminPassword: adminPassword,
                                  metricsRegistry: metricsRegistry, storeFileWrapper: disk?.wrap) { label in
            logs.logger(label)
        }
    }

    func stop() async { await process.stop() }

    /// Whether this peer's link to `nodeID` is connected.
    func isConnected(to nodeID: String) -> Bool {
        process.replicator.status.members.contains { $0.nodeID == nodeID && $0.link == .connected }
    }

    /// A new client of this peer's endpoint.
    func client(receiveBufferBytes: Int? = nil) throws -> TestClient {
        try TestClient(admin, receiveBufferBytes: receiveBufferBytes)
    }
}

/// Two peers, `b` dialling `a`, linked both ways.
func startPair() async throws -> (a: TestPeer, b: TestPeer) {
    let a = try TestPeer("a")
    let b = try TestPeer("b", peers: [a.listenAddress])
    guard await eventually(10, { a.isConnected(to: "b") && b.isConnected(to: "a") }) else {
        await b.stop()
        await a.stop()
        throw TestFailure("peers a and b did not link within the deadline")
    }
    return (a, b)
}

/// Polls `condition` every 5 ms until it holds or `seconds` passed; its last value.
extension TestClient {
    /// `connected_clients` from INFO clients: how many clients the peer holds, this one included.
    func connectedClients() throws -> Int? {
        guard case .bulk(let bytes) = try call("INFO", "clients") else { return nil }
        let line = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("connected_clients:") }
        return line.flatMap { Int($0.dropFirst("connected_clients:".count)) }
    }
}

func eventually(_ seconds: Double = 10, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try condition()
}

/// Starts a second endpoint on `peer`'s node with `configure`d service settings (small bounds
/// the peer's own endpoint does not offer); `stop` it after.
final class CustomEndpoint {
    let server: UVStreamServer
    let service: RESPService
    let address: String

    init(on peer: TestPeer, server configureServer: (inout UVStreamServer.Configuration) -> Void = { _ in },
         configure: (inout RESPService.Configuration) -> Void) throws {
        var configuration = RESPService.Configuration()
        configure(&configuration)
        service = RESPService(node: peer.node, replicator: peer.process.replicator, configuration: configuration,
                              identity: .init(cluster: "decide", listen: peer.listenAddress, admin: "", durability: "memory"),
                              logger: peer.logs.logger("syncnode.admin.custom"))
        var serverConfiguration = UVStreamServer.Configuration()
        serverConfiguration.logger = peer.logs.logger("syncnode.admin.custom")
        configureServer(&serverConfiguration)
        server = try UVStreamServer(configuration: serverConfiguration, delegate: service)
        service.attach(server)
        address = try server.listen(on: "127.0.0.1:0")
    }

    func client(receiveBufferBytes: Int? = nil) throws -> TestClient {
        try TestClient(address, receiveBufferBytes: receiveBufferBytes)
    }

    func stop() { server.shutdown() }
}

// MARK: clients

/// A blocking client socket (TCP `HOST:PORT` or `unix:PATH`) with deadlines on every read:
/// RESP commands and replies, or raw bytes for malformed input.
final class TestClient {
    let fd: Int32
    private var parser = RESPReplyParser()
    /// Every byte received, and how many of them the parser consumed as whole replies.
    private(set) var received: [UInt8] = []
    private var consumed = 0
    /// Pushes (RESP3 `>`) that arrived while `reply(skippingPushes:)` waited for a reply.
    var pushes: [RESPValue] = []
    private(set) var closed = false

    init(_ address: String, receiveBufferBytes: Int? = nil) throws {
        if address.hasPrefix("unix:") {
            fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var target = sockaddr_un()
            target.sun_family = sa_family_t(AF_UNIX)
            let path = Array(address.dropFirst(5).utf8)
            withUnsafeMutableBytes(of: &target.sun_path) { $0.copyBytes(from: path + [0]) }
            let status = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard status == 0 else {
                Glibc.close(fd)
                throw TestFailure("cannot connect to \(address): \(String(cString: strerror(errno)))")
            }
            return
        }
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw TestFailure("bad address \(address)")
        }
        var host = String(address[..<colon])
        if host == "0.0.0.0" { host = "127.0.0.1" }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBufferBytes.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &target.sin_addr)
        let status = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            Glibc.close(fd)
            throw TestFailure("cannot connect to \(address): \(String(cString: strerror(errno)))")
        }
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { Glibc.close(fd) }

    /// Writes all of `bytes` (one `send` when the socket takes it).
    func send(raw bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw TestFailure("send failed: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    func send(raw text: String) throws { try send(raw: Array(text.utf8)) }

    /// Writes one command as a RESP multibulk.
    func send(_ arguments: String...) throws { try send(raw: encode(arguments)) }

    func send(bytes arguments: [[UInt8]]) throws { try send(raw: encode(bytes: arguments)) }

    /// Closes the sending side: the server sees EOF.
    func shutdownWrite() { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// Sends one command and returns its reply.
    @discardableResult
    func call(_ arguments: String...) throws -> RESPValue {
        try send(raw: encode(arguments))
        return try reply()
    }

    @discardableResult
    func call(list arguments: [String]) throws -> RESPValue {
        try call(bytes: arguments.map { Array($0.utf8) })
    }

    func call(bytes arguments: [[UInt8]]) throws -> RESPValue {
        try send(raw: encode(bytes: arguments))
        return try reply()
    }

    /// The next reply; with `skippingPushes`, RESP3 pushes are set aside in `pushes`.
    func reply(timeout: Double = 10, skippingPushes: Bool = false) throws -> RESPValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let value = try parser.next() {
                consumed = received.count - parser.bufferedBytes
                if skippingPushes, case .push = value {
                    pushes.append(value)
                    continue
                }
                return value
            }
            guard try fill(until: deadline) else {
                throw TestFailure(closed ? "the server closed the connection" : "no reply within \(timeout) s")
            }
        }
    }

    /// The next reply and its exact bytes on the wire.
    func rawReply(timeout: Double = 10) throws -> (value: RESPValue, bytes: [UInt8]) {
        let start = consumed
        let value = try reply(timeout: timeout)
        return (value, Array(received[start ..< consumed]))
    }

    /// Whether a reply (or EOF) arrives within `seconds`: for "nothing was answered yet".
    func hasData(within seconds: Double) -> Bool {
        if parser.bufferedBytes > 0 { return true }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, Int32(seconds * 1000)) > 0
    }

    /// Reads until the server closes the connection or `timeout` passes; returns the bytes
    /// not yet taken as replies, and whether the connection was closed.
    func readUntilClosed(timeout: Double = 10) -> (bytes: [UInt8], closed: Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        while (try? fill(until: deadline)) == true {}
        return (Array(received[consumed...]), closed)
    }

    /// Reads what arrives; false on EOF or at the deadline.
    private func fill(until deadline: Date) throws -> Bool {
        guard !closed else { return false }
        while true {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return false }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(remaining, 1) * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 256 * 1024)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                closed = true
                return false
            }
            received += chunk[0 ..< count]
            chunk.withUnsafeBytes { parser.append(UnsafeRawBufferPointer(rebasing: $0[0 ..< count])) }
            return true
        }
    }

    private func encode(_ arguments: [String]) -> [UInt8] { encode(bytes: arguments.map { Array($0.utf8) }) }

    private func encode(bytes arguments: [[UInt8]]) -> [UInt8] {
        var bytes = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            bytes += Array("$\(argument.count)\r\n".utf8)
            bytes += argument
            bytes += [0x0D, 0x0A]
        }
        return bytes
    }
}

/// A multibulk request's bytes, for pipelined batches.
func request(_ arguments: String...) -> [UInt8] { request(arguments) }

func request(_ arguments: [String]) -> [UInt8] {
    var bytes = Array("*\(arguments.count)\r\n".utf8)
    for argument in arguments {
        bytes += Array("$\(argument.utf8.count)\r\n".utf8)
        bytes += Array(argument.utf8)
        bytes += [0x0D, 0x0A]
    }
    return bytes
}

// MARK: replies

let ok = RESPValue.simple("OK")

/// A bulk string reply of `text`.
func bulk(_ text: String) -> RESPValue { .bulk(Array(text.utf8)) }

/// An array of bulk strings.
func bulks(_ texts: String...) -> RESPValue { .array(texts.map(bulk)) }

extension RESPValue {
    /// The error text, or nil.
    var errorText: String? {
        if case .error(let text) = self { return text }
        return nil
    }

    /// The elements of an array, set, push or map (keys and values alternating).
    var elements: [RESPValue]? {
        switch self {
        case .array(let items), .set(let items), .push(let items), .map(let items): return items
        default: return nil
        }
    }

    /// The text elements of an array.
    var texts: [String]? { elements?.compactMap(\.text) }

    var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// A bulk reply's JSON, parsed.
    var json: [String: Any]? {
        guard case .bulk(let bytes) = self else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }
}

/// A seeded generator (SplitMix64), so a failure replays from its seed.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed &* 0x2545_F491_4F6C_DD1D &+ 1 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Flags for a peer that keeps its state in `directory` and answers writes once on disk.
func strictDurability(in directory: TemporaryDirectory) -> (inout RunSettings.Flags) -> Void {
    { flags in
        flags.dataDirectory = directory.path
        flags.durability = "strict"
    }
}

/// Runs `body` with a started peer, and stops it after (also when `body` throws).
func withPeer(_ id: String, peers: [String] = [], adminPassword: [UInt8]? = nil, disk: StoreFaults? = nil,
              configure: (inout RunSettings.Flags) -> Void = { _ in },
              _ body: (TestPeer) async throws -> Void) async throws {
    let peer = try TestPeer(id, peers: peers, adminPassword: adminPassword, disk: disk, configure: configure)
    do {
        try await body(peer)
    } catch {
        await peer.stop()
        throw error
    }
    await peer.stop()
}

/// Sends `onA`'s requests (raw RESP, each piece any number of commands) to peer `a` and `onB`'s
/// to `b` at once, each pipelined whole, then reads every reply of both: two peers written at
/// the same moment.
func pipelineOnBoth(_ a: TestPeer, _ onA: [String], _ b: TestPeer, _ onB: [String]) throws {
    let clientA = try a.client(), clientB = try b.client()
    let raw = (onA.joined(), onB.joined())
    try clientA.send(raw: raw.0)
    try clientB.send(raw: raw.1)
    let count = { (text: String) in text.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count }
    for _ in 0..<count(raw.0) { _ = try clientA.reply() }
    for _ in 0..<count(raw.1) { _ = try clientB.reply() }
}

/// Runs `body` with two linked peers (`startPair`), and stops them after.
func withPair(_ body: (TestPeer, TestPeer) async throws -> Void) async throws {
    let (a, b) = try await startPair()
    do {
        try await body(a, b)
    } catch {
        await b.stop()
        await a.stop()
        throw error
    }
    await b.stop()
    await a.stop()
}
