// libFuzzer entry for syncnode's Redis-protocol service (SyncNodeServer's RESPService on a real
// UVStreamServer), not only its parser: every input is played by one or two clients over Unix
// sockets against a one-node peer, and the service's books are checked once they have gone.
// Built by `make fuzz` / `make fuzz-smoke` (mk/fuzz.mk) through SwiftPM with
// `--sanitize=fuzzer --sanitize=address` and DECIDE_FUZZING defined; built without it (every
// `swift build`), the same target replays inputs given as files or directories
// (`FuzzRESPService Fuzz/resp-service-seeds`), so a crash found by the fuzzer is rerun under a
// debugger with no sanitizer build.
//
// Input: byte 0 picks the endpoint (bit 0: the one with a password, whose clients start
// unauthenticated), whether a second client plays (bit 1) and how the bytes are cut into writes
// (bits 2-3: all at once, small random pieces, line by line); bytes 1-2 are where the first
// client's stream ends and the second's begins; the rest is the stream.
//
// Oracles, besides no trap and no sanitizer report:
// - every byte the service writes is well-formed RESP (RESP2, or RESP3 after HELLO 3), and what
//   it wrote before closing a connection parses whole;
// - without a password (the request limits are then fixed), a client that neither subscribes nor
//   WAITs gets exactly one reply per request the parser finds in its stream, in order, or fewer
//   when the service closed it, the last of them then an error that says why; never more;
// - once both clients have gone, the service holds nothing for them: no open or unauthenticated
//   session, no client bytes charged, no subscriber, no subscription in the index, no commit
//   listener left on the node.

@testable import SyncNodeServer
import Decide
import DecideCore
import DecideRESP
import DecideUV
import Dispatch
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The endpoints every input plays against, started once per process.
private final class Harness: @unchecked Sendable {
    struct Endpoint {
        let server: UVStreamServer
        let service: RESPService
        let path: String
        let limits: RESPLimits
        let hasPassword: Bool
    }

    let node: Node
    let transport: UVTransport
    let replicator: Replicator
    let open: Endpoint
    let guarded: Endpoint
    let directory: String

    /// The request limits of the endpoint without a password: small, so that inputs reach them.
    static let smallLimits: RESPLimits = {
        var limits = RESPLimits()
        limits.maxArguments = 64
        limits.maxBulkBytes = 1024
        limits.maxInlineBytes = 1024
        limits.maxRequestBytes = 4096
        return limits
    }()

    static let password = Array("fuzz-pw".utf8)

    init() throws {
        var logger = Logger(label: "fuzz")
        logger.logLevel = .critical
        var nodeConfiguration = Node.Configuration(id: "fuzz")
        nodeConfiguration.logger = logger
        node = try Node(configuration: nodeConfiguration)
        transport = try UVTransport(configuration: .init(nodeID: "fuzz", clusterName: "fuzz", insecure: true, logger: logger))
        var replication = Replicator.Configuration()
        replication.logger = logger
        replicator = Replicator(node: node, transport: transport, configuration: replication)
        _ = try replicator.start(listeningOn: "127.0.0.1:0")
        // WAIT's deadlines and the lease timers are settled on the replicator's tick.
        replicator.startTimer(intervalMilliseconds: 50)
        var template = "/tmp/decide-fuzz-XXXXXX".utf8CString
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            fatalError("mkdtemp failed: errno \(errno)")
        }
        directory = String(cString: made)
        open = try Self.endpoint(node: node, replicator: replicator, path: directory + "/open.sock", password: nil, logger: logger)
        guarded = try Self.endpoint(node: node, replicator: replicator, path: directory + "/guarded.sock",
                                    password: Self.password, logger: logger)
    }

    private static func endpoint(node: Node, replicator: Replicator, path: String, password: [UInt8]?,
                                 logger: Logger) throws -> Endpoint {
        var configuration = RESPService.Configuration()
        configuration.password = password
        configuration.limits = smallLimits
        // Small bounds, so inputs of a few KiB reach every one of them.
        configuration.maxReplyBytes = 16 << 10
        configuration.maxSubscriberOutputBytes = 16 << 10
        configuration.maxSubscriptionsPerConnection = 8
        configuration.maxSubscriptionNameBytes = 64
        configuration.maxQueuedNotificationBytes = 64 << 10
        configuration.dumpChunkBytes = 512
        configuration.maxClientMemoryBytes = 64 << 10
        configuration.maxUnauthenticatedClientMemoryBytes = 16 << 10
        configuration.maxClientsMemoryBytes = 96 << 10
        configuration.maxUnauthenticatedClients = 1
        let service = RESPService(node: node, replicator: replicator, configuration: configuration,
                                  identity: .init(cluster: "fuzz", listen: "", admin: "unix:" + path, durability: "memory"),
                                  logger: logger)
        var serverConfiguration = UVStreamServer.Configuration()
        serverConfiguration.logger = logger
        serverConfiguration.pauseReadingAboveBytes = 8 << 10
        serverConfiguration.tooManyConnectionsReply = RESPService.tooManyClientsReply
        let server = try UVStreamServer(configuration: serverConfiguration, delegate: service)
        service.attach(server)
        _ = try server.listen(unixSocket: path)
        return Endpoint(server: server, service: service, path: path,
                        limits: password == nil ? smallLimits : .unauthenticated, hasPassword: password != nil)
    }

    /// What the service holds for clients, read on its loop thread.
    struct Books: Equatable, CustomStringConvertible {
        var openSessions = 0
        var unauthenticatedSessions = 0
        var clientBytes = 0
        var subscribers = 0
        var indexEmpty = true
        var listening = false

        var description: String {
            "open=\(openSessions) unauthenticated=\(unauthenticatedSessions) bytes=\(clientBytes) subscribers=\(subscribers) indexEmpty=\(indexEmpty) listener=\(listening)"
        }
    }

    func books(of endpoint: Endpoint) -> Books {
        let service = endpoint.service
        let result = LockedBox<Books?>(nil)
        let done = DispatchSemaphore(value: 0)
        let accepted = endpoint.server.execute {
            result.value = Books(openSessions: service.openSessions, unauthenticatedSessions: service.unauthenticatedSessions,
                                 clientBytes: service.clientBytes, subscribers: service.subscribers.count,
                                 indexEmpty: service.subscriptionIndex.isEmpty, listening: service.notificationListener != nil)
            done.signal()
        }
        precondition(accepted, "the endpoint's loop is gone")
        done.wait()
        return result.value!
    }

    /// Deletes every key the input left, so that the next input starts from an empty node.
    func clearKeys() {
        var cursor = 0
        repeat {
            let page = node.scanKeys(cursor: cursor, minimumKeys: 1024, maximumBuckets: 4096)
            for key in page.keys { _ = node.decide(RawWrite(key: key, value: nil)) }
            cursor = page.next
        } while cursor != 0
    }
}

/// A value handed from the loop thread to the fuzzer's (the semaphore orders the accesses).
private final class LockedBox<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

private let harness: Harness = {
    signal(SIGPIPE, SIG_IGN)
    do { return try Harness() } catch { fatalError("fuzz harness did not start: \(error)") }
}()

/// One client of an input: its stream, how it is cut, and what came back.
private struct Client {
    let fd: Int32
    let stream: [UInt8]
    var written = 0
    var shutDown = false
    var received: [UInt8] = []
    /// The service closed the connection (end of file, or a reset).
    var closedByService = false
    var cuts: Cutter

    init(path: String, stream: [UInt8], cuts: Cutter) {
        self.stream = stream
        self.cuts = cuts
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        precondition(fd >= 0, "socket failed")
        self.fd = fd
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes + [0]) }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        precondition(status == 0, "connect to \(path) failed: errno \(errno)")
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    var done: Bool { closedByService }

    /// Writes the next piece, or ends the input once all is written.
    mutating func writeSome() {
        guard !shutDown else { return }
        if written == stream.count {
            shutdown(fd, Int32(SHUT_WR))
            shutDown = true
            return
        }
        let length = cuts.next(stream, from: written)
        let sent = stream[written..<written + length].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent > 0 {
            written += sent
        } else if sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
            // The service closed it (a malformed request, a bound): nothing more can be sent.
            shutDown = true
        }
    }

    /// Reads what arrived; true when anything did.
    mutating func readSome() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var any = false
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += buffer[..<count]
                any = true
            } else if count == 0 {
                closedByService = true
                return true
            } else {
                if errno == ECONNRESET { closedByService = true; return true }
                return any
            }
        }
    }
}

/// How a stream is cut into writes: all at once, small pieces, or line by line.
private struct Cutter {
    let mode: UInt8
    var seed: UInt64

    mutating func next(_ stream: [UInt8], from offset: Int) -> Int {
        let left = stream.count - offset
        switch mode {
        case 1:
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return min(left, Int(seed >> 60) + 1)
        case 2:
            var end = offset
            while end < stream.count && stream[end] != UInt8(ascii: "\n") { end += 1 }
            return min(left, end - offset + 1)
        default:
            return left
        }
    }
}

/// Plays `stream` into `endpoint` with up to two clients until the service has answered and closed
/// them, or it stops answering for a while (a WAIT, a subscriber): then they are closed here.
private func play(_ streams: [[UInt8]], endpoint: Harness.Endpoint, mode: UInt8, seed: UInt64) -> [Client] {
    var clients = streams.enumerated().map { index, stream in
        Client(path: endpoint.path, stream: stream, cuts: Cutter(mode: mode, seed: seed &+ UInt64(index)))
    }
    let started = DispatchTime.now().uptimeNanoseconds
    var lastProgress = started
    while !clients.allSatisfy(\.done) {
        var progressed = false
        for index in clients.indices where !clients[index].done {
            let before = clients[index].written
            clients[index].writeSome()
            if clients[index].written != before { progressed = true }
            if clients[index].readSome() { progressed = true }
        }
        let now = DispatchTime.now().uptimeNanoseconds
        if progressed { lastProgress = now }
        // Everything written and nothing heard for 200 ms (a WAIT with a timeout, a subscriber
        // kept open), or 3 s in all: close them here.
        if clients.allSatisfy(\.shutDown) && now - lastProgress > 200_000_000 || now - started > 3_000_000_000 { break }
        if !progressed {
            var polls = clients.filter { !$0.done }.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            _ = poll(&polls, nfds_t(polls.count), 5)
        }
    }
    for client in clients { close(client.fd) }
    return clients
}

/// The commands `stream` holds as the service's parser reads it, and whether it ends in a
/// malformed request.
private func requests(_ stream: [UInt8], limits: RESPLimits) -> (commands: [[ArraySlice<UInt8>]], malformed: Bool) {
    var parser = RESPRequestParser(limits: limits)
    parser.append(contentsOf: stream)
    var commands: [[ArraySlice<UInt8>]] = []
    var arguments: [ArraySlice<UInt8>] = []
    while true {
        do {
            guard try parser.next(into: &arguments) else { return (commands, false) }
            commands.append(arguments.map { ArraySlice(Array($0)) })
        } catch {
            return (commands, true)
        }
    }
}

/// The replies in `bytes`: every one well-formed, and nothing left over once the service closed.
private func replies(_ bytes: [UInt8], closed: Bool) -> [RESPValue] {
    var parser = RESPReplyParser()
    parser.append(contentsOf: bytes)
    var values: [RESPValue] = []
    while true {
        let value: RESPValue?
        do { value = try parser.next() } catch { preconditionFailure("the service wrote malformed RESP: \(error)") }
        guard let value else { break }
        values.append(value)
    }
    if closed { precondition(parser.bufferedBytes == 0, "the service closed in the middle of a reply") }
    return values
}

/// Whether the command may have more or fewer replies than one: (un)subscribing (one per
/// channel, then messages), QUIT (closes), WAIT (a client whose input ends during it is closed
/// unanswered, and this one's always ends).
private func outsideCount(_ command: [ArraySlice<UInt8>]) -> Bool {
    let name = String(decoding: command[0], as: UTF8.self).lowercased()
    return ["subscribe", "psubscribe", "unsubscribe", "punsubscribe", "quit", "wait"].contains(name)
}

/// One fuzz input (also the replayer's).
func fuzzRESPServiceInput(_ input: [UInt8]) {
    guard input.count >= 3 else { return }
    let knob = input[0]
    let stream = Array(input[3...])
    let endpoint = knob & 1 == 0 ? harness.open : harness.guarded
    let split = (Int(input[1]) << 8 | Int(input[2])) % (stream.count + 1)
    let streams = knob & 2 == 0 ? [stream] : [Array(stream[..<split]), Array(stream[split...])]
    let clients = play(streams, endpoint: endpoint, mode: knob >> 2 & 3, seed: UInt64(input[1]) << 8 | UInt64(input[2]))

    for client in clients {
        let values = replies(client.received, closed: client.closedByService)
        guard !endpoint.hasPassword else { continue }
        let parsed = requests(client.stream, limits: endpoint.limits)
        guard !parsed.commands.contains(where: outsideCount) else { continue }
        // A malformed request is answered with the protocol error, then the connection closes.
        let expected = parsed.commands.count + (parsed.malformed ? 1 : 0)
        precondition(values.count <= expected, "\(values.count) replies to \(expected) requests: \(values.suffix(3))")
        if client.closedByService && values.count < expected {
            precondition(values.last?.isError ?? false,
                         "closed after \(values.count) of \(expected) replies without an error saying why")
        }
        if client.closedByService && parsed.malformed && values.count == expected {
            precondition(values[values.count - 1].isError, "a malformed request was not answered with an error: \(values.suffix(3))")
        }
    }

    // The service lets go of both clients: their sessions close on its loop shortly after.
    let deadline = DispatchTime.now().uptimeNanoseconds + 5_000_000_000
    var books = harness.books(of: endpoint)
    while books.openSessions > 0 && DispatchTime.now().uptimeNanoseconds < deadline {
        usleep(200)
        books = harness.books(of: endpoint)
    }
    precondition(books == Harness.Books(), "the service still holds something for clients that left: \(books)")
    harness.clearKeys()
}

#if DECIDE_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRESPService(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    fuzzRESPServiceInput(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
#else
/// Replays inputs: each argument is a file (one input) or a directory of them.
@main
struct ReplayRESPServiceInputs {
    static func main() {
        var count = 0
        for path in CommandLine.arguments.dropFirst() {
            for file in files(at: path) {
                guard let input = read(file) else { fatalError("cannot read \(file)") }
                fuzzRESPServiceInput(input)
                count += 1
            }
        }
        print("replayed \(count) inputs")
    }

    static func files(at path: String) -> [String] {
        guard let directory = opendir(path) else { return [path] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if !name.hasPrefix(".") { names.append(path + "/" + name) }
        }
        return names.sorted()
    }

    static func read(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        return bytes
    }
}
#endif
