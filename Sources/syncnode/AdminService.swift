import Decide
import DecideCore
import DecideUV
import Logging
import Synchronization

/// Answers the admin protocol for one running peer: each request line gets one reply line,
/// except `dump` (a header line, then one line per entry) and `watch` (a header line, then one
/// line per change until the client closes).
///
/// Guarantees:
/// - a malformed request gets `{"ok":false,...}` and the connection stays usable;
/// - `put` and `delete` reply after the decision committed on this node;
/// - memory per connection stays bounded: a dump is written in chunks as the socket drains,
///   at most `maxQueuedRequests` lines wait behind a dump, and a watcher that stops reading is
///   disconnected when the server's per-connection output bound is reached.
final class AdminService: UVLineServer.Delegate, Sendable {
    /// Lines that may wait on a connection while a dump is being written.
    static let maxQueuedRequests = 64
    /// Bytes of dump lines handed to the server at a time.
    static let dumpChunkBytes = 256 * 1024
    /// Deltas a watcher may fall behind by before it is told of a gap.
    static let watchBufferedDeltas = 4096

    /// What the status reply tells beside the node's own numbers.
    struct Identity: Sendable {
        var cluster: String
        var listen: String
        var admin: String
    }

    private struct Session {
        /// Entries of a dump still to send, and where it stands.
        var dump: [KeyedEntry] = []
        var dumpIndex = 0
        var dumping = false
        var queued: [[UInt8]] = []
        var watch: Task<Void, Never>?
        var closeAfterDump = false
    }

    let node: Node
    let replicator: Replicator
    private let identityBox: Mutex<Identity>
    let logger: Logger
    private let sessions = Mutex<[UInt64: Session]>([:])
    private let serverBox = Mutex<UVLineServer?>(nil)

    init(node: Node, replicator: Replicator, identity: Identity, logger: Logger) {
        self.node = node
        self.replicator = replicator
        self.identityBox = Mutex(identity)
        self.logger = logger
    }

    /// The server this service answers for (set once, before it listens).
    func attach(_ server: UVLineServer) {
        serverBox.withLock { $0 = server }
    }

    private var server: UVLineServer? { serverBox.withLock { $0 } }

    /// Records the admin address actually bound (the real port when 0 was asked for).
    func setAdminAddress(_ address: String) {
        identityBox.withLock { $0.admin = address }
    }

    /// Ends every watch (each watcher's connection is closed by the server's shutdown).
    func stopWatches() {
        let watches = sessions.withLock { table in table.values.compactMap(\.watch) }
        for watch in watches { watch.cancel() }
    }

    // MARK: UVLineServer.Delegate

    func lineServer(_ server: UVLineServer, didReceive line: [UInt8], from connection: UInt64) {
        enum Disposition { case handle, queue, tooMany, watching }
        let disposition = sessions.withLock { table -> Disposition in
            var session = table[connection, default: Session()]
            defer { table[connection] = session }
            if session.watch != nil { return .watching }
            guard session.dumping else { return .handle }
            guard session.queued.count < Self.maxQueuedRequests else { return .tooMany }
            session.queued.append(line)
            return .queue
        }
        switch disposition {
        case .handle: handle(line, from: connection, server: server)
        case .queue: break
        case .watching:
            server.send(AdminReply.error("this connection is watching; open another connection for requests"), to: connection)
        case .tooMany:
            server.send(AdminReply.error("more than \(Self.maxQueuedRequests) requests wait behind a dump; closing"), to: connection)
            server.closeWhenWritten(connection)
        }
    }

    func lineServer(_ server: UVLineServer, didDrain connection: UInt64) {
        continueDump(on: connection, server: server)
    }

    func lineServer(_ server: UVLineServer, inputEndedOn connection: UInt64) {
        enum Next { case closeNow, closeWhenWritten, afterDump }
        let next = sessions.withLock { table -> Next in
            guard var session = table[connection] else { return .closeWhenWritten }
            if session.watch != nil { return .closeNow }
            if session.dumping || !session.queued.isEmpty {
                session.closeAfterDump = true
                table[connection] = session
                return .afterDump
            }
            return .closeWhenWritten
        }
        switch next {
        case .closeNow: server.close(connection)
        case .closeWhenWritten: server.closeWhenWritten(connection)
        case .afterDump: break
        }
    }

    func lineServer(_ server: UVLineServer, didClose connection: UInt64) {
        let session = sessions.withLock { $0.removeValue(forKey: connection) }
        session?.watch?.cancel()
    }

    // MARK: requests

    private func handle(_ line: [UInt8], from connection: UInt64, server: UVLineServer) {
        let request: AdminRequest
        do {
            request = try AdminRequest.parse(line)
        } catch {
            server.send(AdminReply.error(error.description), to: connection)
            return
        }
        switch request {
        case let .put(key, value):
            reply(write(key: key, value: value.compactBytes, op: "put"), to: connection, server: server)
        case .delete(let key):
            reply(write(key: key, value: nil, op: "delete"), to: connection, server: server)
        case .get(let key):
            reply(get(key), to: connection, server: server)
        case .status:
            reply(status(), to: connection, server: server)
        case .forget(let nodeID):
            reply(forget(nodeID), to: connection, server: server)
        case .dump:
            startDump(on: connection, server: server)
        case .watch(let prefix):
            startWatch(prefix: prefix, on: connection, server: server)
        }
    }

    /// Queues one reply line. A client that pipelines requests without reading the replies
    /// until `maxOutboundBytes` are queued loses its connection (logged) rather than a reply:
    /// a reply silently missing would leave it waiting forever.
    private func reply(_ line: [UInt8], to connection: UInt64, server: UVLineServer) {
        guard server.send(line, to: connection) == .overLimit else { return }
        logger.warning("admin client disconnected: it stopped reading its replies", metadata: ["connection": "\(connection)"])
        server.close(connection)
    }

    private func forget(_ nodeID: String) -> [UInt8] {
        do {
            try replicator.forget(nodeID)
            return AdminReply.ok([("removed", .string(nodeID))])
        } catch {
            return AdminReply.error(error.description, [("node", .string(nodeID))])
        }
    }

    private func write(key: StateKey, value: [UInt8]?, op: String) -> [UInt8] {
        switch node.decide(RawWrite(key: key, value: value)) {
        case .committed(let version):
            return AdminReply.ok([("key", .string(key.description)), ("version", AdminReply.version(version))])
        case .unchanged:
            return AdminReply.ok([("key", .string(key.description)), ("unchanged", .bool(true))])
        case .aborted(let reason):
            return AdminReply.error("\(op) \(key) refused: \(reason)")
        }
    }

    private func get(_ key: StateKey) -> [UInt8] {
        guard let entry = node.entry(for: key) else {
            return AdminReply.error("\(key) has no value on this node", [("key", .string(key.description)), ("absent", .bool(true))])
        }
        guard let value = entry.value else {
            return AdminReply.error("\(key) was deleted", [
                ("key", .string(key.description)), ("deleted", .bool(true)), ("version", AdminReply.version(entry.version)),
            ])
        }
        return AdminReply.ok([
            ("key", .string(key.description)), ("value", AdminReply.value(value)), ("version", AdminReply.version(entry.version)),
        ])
    }

    private func status() -> [UInt8] {
        let identity = identityBox.withLock { $0 }
        let summary = node.stateSummary
        let replication = replicator.status
        let members: [JSONValue] = replication.members.map { member in
            .object([
                ("id", .string(member.nodeID)),
                ("address", .string(member.address)),
                ("link", .string(member.link.rawValue)),
                ("lastHeardMsAgo", member.lastHeardMillisecondsAgo.map { .number(String($0)) } ?? .null),
                ("queuedBytes", .number(String(member.outboundBytesQueued))),
                ("catchUp", .string(member.catchUp.rawValue)),
                ("droppedDeltas", .number(String(member.droppedDeltas))),
                ("droppedIncomingDeltas", .number(String(member.droppedIncomingDeltas))),
                ("protocolViolations", .number(String(member.protocolViolations))),
                ("coveredClock", AdminReply.hlc(member.coveredClock)),
                ("reportedCoverage", AdminReply.hlc(member.reportedCoverage)),
            ])
        }
        return AdminReply.ok([
            ("node", .string(node.id)),
            ("cluster", .string(identity.cluster)),
            ("listen", .string(identity.listen)),
            ("admin", .string(identity.admin)),
            ("incarnation", .number(String(replication.incarnation))),
            ("entries", .number(String(summary.entryCount))),
            ("tombstones", .number(String(summary.tombstoneCount))),
            ("digest", .string(AdminReply.hex(summary.digest))),
            ("highestVersion", summary.highestVersion.map(AdminReply.version) ?? .null),
            ("committedDecisions", .number(String(summary.committedDecisions))),
            ("appliedRemoteDeltas", .number(String(summary.appliedRemoteDeltas))),
            ("coverage", AdminReply.hlc(replication.coverage)),
            ("tombstoneBound", AdminReply.hlc(replication.tombstoneBound)),
            ("members", .array(members)),
        ])
    }

    // MARK: dump

    private func startDump(on connection: UInt64, server: UVLineServer) {
        let entries = node.entries()
        sessions.withLock { table in
            var session = table[connection, default: Session()]
            session.dump = entries
            session.dumpIndex = 0
            session.dumping = true
            table[connection] = session
        }
        server.send(AdminReply.ok([("entries", .number(String(entries.count)))]), to: connection)
        continueDump(on: connection, server: server)
    }

    /// Hands the next chunk of a dump to the server; when the dump is done, handles what waited.
    private func continueDump(on connection: UInt64, server: UVLineServer) {
        var chunk: [UInt8] = []
        enum After { case nothing, more, finished([[UInt8]], close: Bool) }
        let after = sessions.withLock { table -> After in
            guard var session = table[connection], session.dumping else { return .nothing }
            defer { table[connection] = session }
            while session.dumpIndex < session.dump.count && chunk.count < Self.dumpChunkBytes {
                let item = session.dump[session.dumpIndex]
                chunk += AdminReply.line(AdminReply.entry(key: item.key, entry: item.entry))
                session.dumpIndex += 1
            }
            if session.dumpIndex < session.dump.count { return .more }
            session.dumping = false
            session.dump = []
            let waiting = session.queued
            session.queued = []
            return .finished(waiting, close: session.closeAfterDump)
        }
        if !chunk.isEmpty, server.send(chunk, to: connection) == .overLimit {
            // Cannot happen while chunks are smaller than the bound and sent only when drained;
            // if the bound is set smaller, say so rather than send a truncated dump.
            server.send(AdminReply.error("dump chunk larger than the admin output bound"), to: connection)
            server.closeWhenWritten(connection)
            return
        }
        if case let .finished(waiting, close) = after {
            for line in waiting { lineServer(server, didReceive: line, from: connection) }
            if close { server.closeWhenWritten(connection) }
        }
    }

    // MARK: watch

    private func startWatch(prefix: String, on connection: UInt64, server: UVLineServer) {
        // Registered before the reply goes out: every change committed after the client reads
        // the reply is in the stream.
        let stream = node.deltas(maxBuffered: Self.watchBufferedDeltas)
        server.send(AdminReply.ok([("watching", .string(prefix))]), to: connection)
        let logger = self.logger
        let task = Task.detached {
            for await event in stream {
                var lines: [UInt8] = []
                switch event {
                case .delta(let committed):
                    let origin: JSONValue
                    switch committed.origin {
                    case .local: origin = .string("local")
                    case .remote: origin = .string("remote")
                    case .catchUp: origin = .string("catch-up")
                    }
                    for item in committed.delta.entries where item.key.description.hasPrefix(prefix) {
                        lines += AdminReply.line(AdminReply.entry(key: item.key, entry: item.entry, extra: [("origin", origin)]))
                    }
                case .gap(let dropped):
                    lines = AdminReply.line(.object([
                        ("gap", .number(String(dropped))),
                        ("note", .string("this watcher fell behind and missed \(dropped) changes; re-read with get or dump")),
                    ]))
                }
                guard !lines.isEmpty else { continue }
                switch server.send(lines, to: connection) {
                case .queued: continue
                case .notConnected: return
                case .overLimit:
                    logger.warning("admin watcher disconnected: it stopped reading", metadata: ["connection": "\(connection)"])
                    server.close(connection)
                    return
                }
            }
        }
        let orphan = sessions.withLock { table -> Bool in
            guard table[connection] != nil else { return true }
            table[connection]!.watch = task
            return false
        }
        if orphan { task.cancel() }
    }
}
