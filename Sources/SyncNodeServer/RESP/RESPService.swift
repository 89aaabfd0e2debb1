import Decide
import DecideCore
import DecideRESP
import DecideUV
import Dispatch
import Logging
import Synchronization

/// syncnode's client endpoint: the Redis protocol (RESP2, and RESP3 after `HELLO 3`, inline
/// commands too) over a `UVStreamServer`, answered from the node (docs/operations.md, "The Redis
/// protocol").
///
/// Guarantees:
/// - each client's commands are answered in order; the replies to the requests of one read go
///   out in one write;
/// - a write command replies once its decision committed on this node (under strict
///   durability: once it is on disk, answered off the loop so other clients are not held);
/// - a malformed request gets Redis's protocol error and the connection is closed after it;
///   an unknown or refused command gets an error and the connection stays usable;
/// - memory per client is bounded: a request by `RESPLimits` (`unauthenticatedLimits` before
///   AUTH, refused from the header), queued replies by the server's `pauseReadingAboveBytes`
///   (the client is not read while they wait, and is closed if they do not drain for
///   `outputStallTimeoutMilliseconds`), one command's reply by `maxReplyBytes`, a subscriber's
///   unread notifications by `maxSubscriberOutputBytes` (it is disconnected, with a log line),
///   the notifications waiting for the loop by `maxQueuedNotificationBytes`; and everything a
///   client holds together by `maxClientMemoryBytes`, every client together by
///   `maxClientsMemoryBytes` (`RESPService+ClientBounds`);
/// - an unauthenticated client is closed after `authTimeoutMilliseconds`, at most
///   `maxUnauthenticatedClients` are open at once, and with `idleTimeoutMilliseconds` an idle
///   client is closed.
package final class RESPService: UVStreamServer.Delegate, @unchecked Sendable {  // loop-thread state below is touched only on the server's loop
    package struct Configuration: Sendable {
        /// Clients must `AUTH` with this first (nil: no password).
        package var password: [UInt8]?
        package var limits = RESPLimits()
        /// The largest reply one command may build (KEYS, MGET, SCAN with a large COUNT).
        package var maxReplyBytes = 64 << 20
        /// Unwritten notification bytes past which a subscriber is disconnected.
        package var maxSubscriberOutputBytes = 32 << 20
        /// Channels and patterns one connection may subscribe to.
        package var maxSubscriptionsPerConnection = 10_000
        /// Changes waiting to be turned into notifications, in bytes, past which they are
        /// dropped (and every subscriber told, or disconnected).
        package var maxQueuedNotificationBytes = 64 << 20
        /// Bytes of a dump reply written at a time, the next once the socket drained.
        package var dumpChunkBytes = 256 << 10
        /// The server's connection bound, for CONFIG GET maxclients.
        package var maxClients = 1024
        /// The cluster secrets: reload them, and show which seal each link (nil: no secret).
        package var secrets: SecretsControl?
        /// What a client may send before it authenticated (only with a password).
        package var unauthenticatedLimits = RESPLimits.unauthenticated
        /// A client still unauthenticated this long after it connected is closed (0: never).
        package var authTimeoutMilliseconds: UInt64 = 10_000
        /// Connections not yet authenticated at once (only with a password); more are refused.
        package var maxUnauthenticatedClients = 64
        /// A client that sent nothing for this long is closed (0: never). Subscribers and
        /// clients waiting for a reply (WAIT, a write waiting for the disk, a dump) are not idle.
        package var idleTimeoutMilliseconds: UInt64 = 0
        /// Memory one client may hold (`RESPSession.heldBytes`: its partial requests, replies
        /// not yet written, subscriptions, open MULTI block); past it, it is told and closed.
        package var maxClientMemoryBytes = 256 << 20
        /// Memory one unauthenticated client may hold: its requests are small
        /// (`unauthenticatedLimits`), so only unread replies can grow, and they need not.
        package var maxUnauthenticatedClientMemoryBytes = 1 << 20
        /// Memory every client together may hold; past it, the largest clients are closed.
        package var maxClientsMemoryBytes = 2 << 30
        /// A client whose unwritten replies stayed above half the read pause this long without any
        /// of them being written (it does not read) is told and closed (0: never).
        package var outputStallTimeoutMilliseconds: UInt64 = 30_000
        /// The longest one pattern (PSUBSCRIBE) or channel (SUBSCRIBE) name may be.
        package var maxSubscriptionNameBytes = 4096

        package init() {}
    }

    /// What `INFO` and `DECIDE.STATUS` tell beside the node's own numbers.
    package struct Identity: Sendable {
        package var cluster: String
        package var listen: String
        package var admin: String
        package var durability: String

        package init(cluster: String, listen: String, admin: String, durability: String) {
            self.cluster = cluster
            self.listen = listen
            self.admin = admin
            self.durability = durability
        }
    }

    let node: Node
    let replicator: Replicator
    let configuration: Configuration
    let logger: Logger
    package let identity: Mutex<Identity>
    let startedMilliseconds: UInt64
    let notifications: NotificationQueue
    /// Sessions with at least one subscription (loop thread).
    var subscribers: [UInt64: RESPSession] = [:]
    /// Their channels and patterns, indexed for one channel's lookup (loop thread).
    var subscriptionIndex = SubscriptionIndex()
    /// Changes taken from `notifications` whose notifications wait for a later loop turn, the
    /// first from item `deferredItem` on: the matching work of one turn is bounded
    /// (`notificationStepsPerTurn`), so subscribers cannot hold other clients (loop thread).
    var deferredDeltas: [CommittedDelta] = []
    var deferredItem = 0
    /// The key's change whose candidates were only partly gone through when the turn's bound
    /// came: it goes on first.
    var deferredWork: NotificationWork?
    /// Pattern-matching work done for notifications, in glob steps, in all and in the busiest
    /// loop turn (INFO, tests).
    var notificationMatchSteps: UInt64 = 0
    var busiestNotificationTurnSteps = 0
    /// The node commit listener feeding `notifications` while there are subscribers (loop thread).
    var notificationListener: UInt64?
    /// Counters for INFO (loop thread).
    var totalConnections: UInt64 = 0
    /// Counted on every command. It and the turn's state below are used on the loop thread
    /// only, by code that calls nothing back while it holds an access: they skip Swift's
    /// dynamic exclusivity check (docs/design/0008-in-place-access.md, "Exclusivity left out
    /// where one thread owns the state").
    @exclusivity(unchecked) var totalCommands: UInt64 = 0
    var rejectedConnections: UInt64 = 0
    var openSessions = 0
    /// Sessions not yet authenticated (with a password), against `maxUnauthenticatedClients`.
    var unauthenticatedSessions = 0
    /// The sum of every open session's `chargedBytes`, against `maxClientsMemoryBytes`, and
    /// the most it has been (loop thread; tests read both).
    @exclusivity(unchecked) var clientBytes = 0
    var peakClientBytes = 0
    /// Clients closed by a bound of `RESPService+ClientBounds` (loop thread, for INFO and tests).
    var evictedClients: UInt64 = 0
    /// Lines about hostile or broken clients, at most a few a second each (loop thread).
    var throttledLog = LogThrottle()
    /// Fires `sweep` on the loop (`startSweeping`); cancelled once the server is shut down.
    var sweepTimer: DispatchSourceTimer?
    /// The server this service answers for; set once by `attach`, before it listens.
    private(set) var server: UVStreamServer?
    /// Batchable writes (`WriteBatch`) that ended a client's read in this loop turn, from every
    /// client read in it, committed together at the end of the turn (`streamServerWillEndTurn`)
    /// or sooner when full or when one of those clients is read again (loop thread;
    /// docs/operations.md, "Pipelined writes").
    @exclusivity(unchecked) private var turnBatch = WriteBatch()
    /// Whose writes `turnBatch` holds, in order, and how many in a row: who gets each reply.
    @exclusivity(unchecked) private var turnClients: [(session: RESPSession, writes: Int)] = []
    /// The keys `prefetchGets` hands the node, kept to reuse its storage (loop thread).
    @exclusivity(unchecked) private var prefetchHashes: [UInt64] = []

    package init(node: Node, replicator: Replicator, configuration: Configuration, identity: Identity, logger: Logger) {
        self.node = node
        self.replicator = replicator
        self.configuration = configuration
        self.identity = Mutex(identity)
        self.logger = logger
        self.startedMilliseconds = Self.nowMilliseconds()
        self.notifications = NotificationQueue(maxBytes: configuration.maxQueuedNotificationBytes)
    }

    /// Records the server this service answers for (once, before it listens).
    package func attach(_ server: UVStreamServer) {
        self.server = server
        startSweeping(server)
    }

    static func nowMilliseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds / 1_000_000 }

    /// The reply a connection past `maxConnections` gets before it is closed.
    package static let tooManyClientsReply = Array("-ERR max number of clients reached\r\n".utf8)

    // MARK: UVStreamServer.Delegate

    package func streamServer(_ server: UVStreamServer, didAccept connection: UVStreamServer.Connection) {
        let authenticated = configuration.password == nil
        let now = Self.nowMilliseconds()
        let session = RESPSession(connection: connection,
                                  limits: authenticated ? configuration.limits : configuration.unauthenticatedLimits,
                                  authenticated: authenticated, now: now)
        connection.context = session
        totalConnections += 1
        openSessions += 1
        if !authenticated {
            unauthenticatedSessions += 1
            if unauthenticatedSessions > configuration.maxUnauthenticatedClients {
                rejectedConnections += 1
                throttledLog.log(logger, .warning, "connection refused: too many unauthenticated connections", metadata: [
                    "peer": "\(connection.peer)", "maxUnauthenticatedClients": "\(configuration.maxUnauthenticatedClients)"],
                    now: now)
                evict(session, reply: "ERR max number of unauthenticated clients reached", server: server, now: now)
                return
            }
        }
        logger.debug("client connected", metadata: ["client": "\(connection.id)", "peer": "\(connection.peer)"])
    }

    package func streamServer(_ server: UVStreamServer, didRead bytes: UnsafeRawBufferPointer, on connection: UVStreamServer.Connection) {
        guard let session = connection.context as? RESPSession, !session.finished else { return }
        // The idle timeout's clock, read only when there is one (a clock read a read saved).
        if configuration.idleTimeoutMilliseconds > 0 { session.lastReadMilliseconds = Self.nowMilliseconds() }
        session.parser.append(bytes)
        guard session.busy else { return process(session, server: server) }
        // A client waiting for a reply is still read, so that its leaving is seen (`inputEndedOn`),
        // until what it sent behind the wait passes the read pause; it is charged for it.
        if session.parser.bufferedBytes > server.configuration.pauseReadingAboveBytes { connection.pauseReading() }
        charge(session, server: server)
    }

    package func streamServer(_ server: UVStreamServer, didDrain connection: UVStreamServer.Connection) {
        guard let session = connection.context as? RESPSession, !session.finished else { return }
        charge(session, server: server)
        if session.dump != nil {
            continueDump(session, server: server)
        } else if !session.busy && session.parser.bufferedBytes > 0 {
            process(session, server: server)
        }
    }

    package func streamServer(_ server: UVStreamServer, inputEndedOn connection: UVStreamServer.Connection) {
        guard let session = connection.context as? RESPSession, !session.finished else { return }
        if session.busy && (session.waitsForAcknowledgements || session.blocksOnFeed) {
            // A client that leaves during a WAIT is closed now, unanswered, as Redis frees a
            // blocked client that disconnects: otherwise `WAIT 1 0` would hold its connection
            // for a day after it went.
            session.finished = true
            server.closeWhenWritten(connection)
            return
        }
        process(session, server: server)
    }

    package func streamServer(_ server: UVStreamServer, didClose connection: UVStreamServer.Connection) {
        guard let session = connection.context as? RESPSession else { return }
        session.finished = true
        session.closed = true
        session.dump = nil
        // A blocked DECIDE.CHANGES lets go of its wait and its timer now, not at the next
        // change or a day later.
        session.feedBlock?.abandon()
        openSessions -= 1
        if !session.authenticated { unauthenticatedSessions -= 1 }
        clientBytes -= session.chargedBytes
        session.chargedBytes = 0
        if session.isSubscribed { subscriptionIndex.removeAll(of: session) }
        if subscribers.removeValue(forKey: connection.id) != nil { subscribersChanged() }
        logger.debug("client disconnected", metadata: ["client": "\(connection.id)"])
    }

    // MARK: requests

    /// Answers the commands waiting in `session`'s parser, in order, until one must wait (off
    /// the loop, or a long reply), the replies waiting pass the server's read pause, or the
    /// input runs out (then a client that sent EOF is closed once answered).
    func process(_ session: RESPSession, server: UVStreamServer) {
        let connection = session.connection
        guard !session.busy, !session.finished, !connection.isClosing else { return }
        // Its writes of an earlier read in this turn are answered before anything it sends next.
        if session.waitingWrites > 0 { commitTurn(server) }
        swap(&session.writer.bytes, &connection.output)
        var inputDone = false
        var closeAfter = false
        var batch = WriteBatch()
        // Commands after the current one whose GET keys were prefetched (`prefetchGets`).
        var prefetchedAhead = 0
        // The session's array, its storage reused for every command (`next(into:)`); emptied
        // before it goes back, so no slice of the parser's buffer outlives this call, and a
        // huge command's storage is not kept (`removeAllKeepingStorage`).
        var arguments: [ArraySlice<UInt8>] = []
        swap(&arguments, &session.arguments)
        defer {
            arguments.removeAllKeepingStorage()
            swap(&arguments, &session.arguments)
        }
        while !session.busy && !session.finished {
            if session.writer.bytes.count + connection.bytesInFlight > server.configuration.pauseReadingAboveBytes { break }
            do {
                guard try session.parser.next(into: &arguments) else {
                    inputDone = true
                    break
                }
            } catch {
                // The writes read before the bad request are answered before its error.
                commit(&batch, into: &session.writer)
                session.writer.error("ERR \(error)")
                throttledLog.log(logger, .info, "client sent a malformed request; closing it", metadata: [
                    "client": "\(connection.id)", "peer": "\(connection.peer)", "error": "\(error)",
                    "authenticated": "\(session.authenticated)"], now: Self.nowMilliseconds())
                session.finished = true
                closeAfter = true
                break
            }
            totalCommands += 1
            session.commandsProcessed += 1
            if session.block == nil, let write = batchable(arguments, session: session) {
                batch.append(write, weight: (arguments.count - 1, arguments.dropFirst().reduce(0) { $0 + $1.count }))
                if batch.isFull { commit(&batch, into: &session.writer) }
                continue
            }
            commit(&batch, into: &session.writer)
            if prefetchedAhead > 0 {
                prefetchedAhead -= 1
            } else if Self.isPlainGet(argumentCount: arguments.count, name: arguments[0], key: arguments[1]) {
                prefetchedAhead = prefetchGets(after: arguments[1], session: session)
            }
            if execute(arguments, session: session, server: server) == .closeAfterReply {
                session.finished = true
                closeAfter = true
            }
        }
        let closing = closeAfter || (inputDone && connection.inputEnded && !session.busy)
        if closing { commit(&batch, into: &session.writer) }
        swap(&session.writer.bytes, &connection.output)
        // Writes that ended the read wait for the end of the turn, to be committed with those of
        // every other client read in it.
        if !batch.isEmpty { park(&batch, of: session, server: server) }
        if closing {
            server.closeWhenWritten(connection)
        } else if session.dump != nil {
            continueDump(session, server: server)
        }
        charge(session, server: server)
    }

    enum Outcome { case done, closeAfterReply }

    /// How many received commands past a GET `prefetchGets` looks at.
    static let prefetchLookaheadCommands = 32

    /// A GET of a plain name (`isPlainName`), answered by the node's lookup by bytes: what
    /// `prefetchGets` prefetches. `key` is read only when there are two arguments.
    static func isPlainGet<Bytes: RandomAccessCollection<UInt8>>(argumentCount: Int, name: Bytes, key: @autoclosure () -> Bytes) -> Bool
    where Bytes.Index == Int {
        argumentCount == 2 && RESPCommand.named(name) == .get && isPlainName(key())
    }

    /// Has the node prefetch the table lines of the GET of plain name `key` about to run and
    /// of the plain GETs among the next `prefetchLookaheadCommands` commands already received,
    /// so the cache misses of a pipelined run of GETs over a large table overlap instead of
    /// coming one per GET (docs/design/0010-prefetch.md, "Pipelined GETs"). It only
    /// looks (`RESPRequestParser.peekCommands`): nothing is consumed, and a fault ahead is met
    /// in its turn. Returns how many commands it looked at, which need no look of their own.
    private func prefetchGets(after key: ArraySlice<UInt8>, session: RESPSession) -> Int {
        // Nothing received after this GET (every request of a client that waits for each
        // reply): no lookahead, and no copy of the parser for `peekCommands`.
        guard session.parser.bufferedBytes > 0 else { return 0 }
        prefetchHashes.removeAll(keepingCapacity: true)
        var looked = 0
        session.parser.peekCommands(maxCommands: Self.prefetchLookaheadCommands) { command in
            looked += 1
            if Self.isPlainGet(argumentCount: command.count, name: command[0], key: command[1]) {
                prefetchHashes.append(EntryTable.stableHash(ofAtomicNamed: UnsafeRawBufferPointer(command[1])))
            }
            return true
        }
        if !prefetchHashes.isEmpty {
            prefetchHashes.append(key.withUnsafeBytes { EntryTable.stableHash(ofAtomicNamed: $0) })
            node.prefetchValues(stableHashes: prefetchHashes)
        }
        return looked
    }

    /// A write `process` may commit together with its neighbours (`WriteBatch`): a SET without
    /// options, or INCR, INCRBY, DECR, DECRBY, SADD, SREM, HSET, HDEL, HINCRBY, ZADD or ZREM made ready;
    /// nil for any other command, for one whose arguments are wrong (it runs alone, in its turn,
    /// and answers its error), and when the node waits for the disk (writes answer off the loop).
    private func batchable(_ arguments: [ArraySlice<UInt8>], session: RESPSession) -> BatchedWrite? {
        guard let command = RESPCommand.named(arguments[0]) else { return nil }
        switch command {
        case .set: guard arguments.count == 3 else { return nil }
        case .incr, .incrby, .decr, .decrby, .sadd, .srem, .hset, .hdel, .hincrby, .zadd, .zrem: break
        default: return nil
        }
        guard refusal(of: command, argumentCount: arguments.count, session: session) == nil, !node.acknowledgesAfterDisk else { return nil }
        if command == .set {
            guard let key = try? KeySyntax.parse(bytes: arguments[1]), let value = try? ValueMapping.stored(arguments[2]) else { return nil }
            return .plainSet(key: key, value: value)
        }
        var scratch = RESPWriter(protocolVersion: session.protocolVersion)
        return prepareWrite(command, arguments, into: &scratch).map { .prepared($0) }
    }

    /// Commits the writes waiting in `batch` as one decision and answers each, in order. When
    /// that decision is refused (a limit the writes reach only together, or a refusal that holds
    /// for each), they run one by one, so every write gets the answer it would have had alone.
    private func commit(_ batch: inout WriteBatch, into writer: inout RESPWriter) {
        guard !batch.isEmpty else { return }
        defer { batch.removeAll() }
        let together = commitTogether(batch.writes)
        for write in batch.writes { answer(write, committedTogether: together, into: &writer) }
    }

    /// Commits `writes` as one decision when there are several; false for a single write or
    /// when the node refused them together (then `answer` runs each alone).
    private func commitTogether(_ writes: [BatchedWrite]) -> Bool {
        writes.count > 1 && node.decide(BatchedWrites(writes: writes)).version != nil
    }

    /// Answers one write of a batch: its reply when the batch committed together, otherwise
    /// commits it alone and answers what that gave.
    private func answer(_ write: BatchedWrite, committedTogether: Bool, into writer: inout RESPWriter) {
        switch write {
        case .plainSet(let key, let value):
            if committedTogether || commit(RawWrite(key: key, value: value, replacesOtherKinds: true), "SET", into: &writer) {
                writer.simpleString("OK")
            }
        case .prepared(let prepared):
            if committedTogether || commit(prepared, prepared.command.name.uppercased(), into: &writer) {
                prepared.reply(&writer)
            }
        }
    }

    /// Moves `batch` (writes that ended `session`'s read) into the turn's batch, committing that
    /// first whenever it is full.
    private func park(_ batch: inout WriteBatch, of session: RESPSession, server: UVStreamServer) {
        for (write, weight) in zip(batch.writes, batch.weights) {
            if turnBatch.isFull { commitTurn(server) }
            turnBatch.append(write, weight: weight)
            if let last = turnClients.indices.last, turnClients[last].session === session {
                turnClients[last].writes += 1
            } else {
                turnClients.append((session, 1))
            }
            session.waitingWrites += 1
        }
        batch.removeAll()
    }

    /// Commits the turn's writes as one decision and appends each client's replies (or, when
    /// the node refuses them together, each write's own answer) to its output, written at the
    /// end of the turn. A client gone meanwhile has its writes committed all the same (it sent
    /// them), unanswered.
    private func commitTurn(_ server: UVStreamServer) {
        guard !turnBatch.isEmpty else { return }
        // Moved out, not copied: emptying the turn's arrays while copies held them allocated
        // new storage for both every turn. Their storage goes back for the next turn.
        var batch = WriteBatch()
        var clients: [(session: RESPSession, writes: Int)] = []
        swap(&batch, &turnBatch)
        swap(&clients, &turnClients)
        defer {
            batch.removeAll()
            clients.removeAll(keepingCapacity: true)
            if turnBatch.isEmpty { swap(&batch, &turnBatch) }
            if turnClients.isEmpty { swap(&clients, &turnClients) }
        }
        let together = commitTogether(batch.writes)
        var next = 0
        for (session, count) in clients {
            session.waitingWrites -= count
            let connection = session.connection
            let answered = !connection.isClosing
            if answered { swap(&session.writer.bytes, &connection.output) }
            for index in next..<next + count { answer(batch.writes[index], committedTogether: together, into: &session.writer) }
            if answered {
                swap(&session.writer.bytes, &connection.output)
                server.writeAtEndOfTurn(connection)
                charge(session, server: server)
            } else {
                session.writer.bytes.removeAll()
            }
            next += count
        }
    }

    package func streamServerWillEndTurn(_ server: UVStreamServer) {
        commitTurn(server)
    }

    /// The error a known command gets instead of running (its arity, authentication, a RESP2
    /// subscriber's context), or nil when it may run.
    private func refusal(of command: RESPCommand, argumentCount: Int, session: RESPSession) -> String? {
        guard command.accepts(argumentCount: argumentCount) else {
            return "ERR wrong number of arguments for '\(command.name)' command"
        }
        if !session.authenticated && !command.allowedBeforeAuth { return "NOAUTH Authentication required." }
        if session.isSubscribed && session.protocolVersion == 2 && !command.allowedWhileSubscribed {
            return "ERR Can't execute '\(command.name)': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        }
        return nil
    }

    /// Answers one command into `session.writer`.
    private func execute(_ arguments: [ArraySlice<UInt8>], session: RESPSession, server: UVStreamServer) -> Outcome {
        let name = arguments[0]
        guard let command = RESPCommand.named(name) else {
            abortBlock(session)
            refuseUnknown(arguments, into: &session.writer)
            return .done
        }
        if let refusal = refusal(of: command, argumentCount: arguments.count, session: session) {
            refuseInBlock(refusal, session)
            return .done
        }
        if session.block != nil && !Self.runsInsideBlock(command) {
            enqueue(command, arguments, session: session)
            return .done
        }
        if command.writes && node.acknowledgesAfterDisk {
            answerOffLoop(command, arguments, session: session, server: server)
            return .done
        }
        switch command {
        case .get: get(arguments, into: &session.writer)
        case .set, .setnx, .getset, .getdel, .mset, .del, .unlink, .decidePut, .decideDelete,
             .expire, .pexpire, .expireat, .pexpireat, .persist, .setex, .psetex, .incr, .incrby, .decr, .decrby, .sadd, .srem,
             .hset, .hmset, .hsetnx, .hdel, .hincrby, .zadd, .zrem:
            write(command, arguments, into: &session.writer)
        case .smembers, .sismember, .smismember, .scard, .hget, .hmget, .hgetall, .hkeys, .hvals, .hlen, .hexists,
             .zscore, .zmscore, .zcard, .zcount, .zrank, .zrevrank, .zrange, .zrangebyscore, .zrevrange, .zrevrangebyscore:
            collectionRead(command, arguments, into: &session.writer)
        case .ttl, .pttl, .expiretime, .pexpiretime: ttl(command, arguments, into: &session.writer)
        case .wait: wait(arguments, session: session, server: server)
        case .decideLease: lease(arguments, session: session, server: server)
        case .decideRelease: release(arguments, session: session, server: server)
        case .decideRekey: rekey(into: &session.writer)
        case .mget: mget(arguments, into: &session.writer)
        case .exists: exists(arguments, into: &session.writer)
        case .type: type(arguments, into: &session.writer)
        case .scan: scan(arguments, into: &session.writer)
        case .keys: keys(arguments, into: &session.writer)
        case .dbsize: dbsize(into: &session.writer)
        case .ping: ping(arguments, session: session)
        case .echo: session.writer.bulk(arguments[1])
        case .hello: hello(arguments, session: session)
        case .auth: auth(arguments, session: session)
        case .select: select(arguments, into: &session.writer)
        case .quit:
            session.writer.simpleString("OK")
            return .closeAfterReply
        case .reset: reset(session)
        case .client: client(arguments, session: session, server: server)
        case .command: commandInfo(arguments, into: &session.writer)
        case .info: info(arguments, into: &session.writer)
        case .config: config(arguments, into: &session.writer)
        case .time: time(into: &session.writer)
        case .multi: multi(session)
        case .exec: exec(session, server: server)
        case .discard: discard(session)
        case .unwatch: session.writer.simpleString("OK")
        case .subscribe, .psubscribe: subscribe(arguments, patterns: command == .psubscribe, session: session)
        case .unsubscribe, .punsubscribe: unsubscribe(arguments, patterns: command == .punsubscribe, session: session)
        case .decideGet: decideGet(arguments, into: &session.writer)
        case .decideStatus: decideStatus(into: &session.writer)
        case .decideDump: startDump(session)
        case .decideChanges: decideChanges(arguments, session: session, server: server)
        case .decideSnapshot: startSnapshot(arguments, session: session)
        case .decideForget: decideForget(arguments, into: &session.writer)
        }
        return .done
    }

    /// A write whose decision waits for the disk runs on another thread; the client's later
    /// commands wait (its reading is paused), other clients go on.
    private func answerOffLoop(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], session: RESPSession,
                               server: UVStreamServer) {
        let answer = answerLater(session, server: server)
        DispatchQueue.global().async { [self] in
            answer { writer in write(command, arguments, into: &writer) }
        }
    }

    /// Holds `session` (its later commands wait; it is read only until they pass the read
    /// pause) until the returned closure is called, from any thread, with what writes the reply:
    /// the reply is then queued on the loop thread and the session goes on. Call it once.
    func answerLater(_ session: RESPSession, server: UVStreamServer) -> @Sendable (_ reply: (inout RESPWriter) -> Void) -> Void {
        session.busy = true
        let bound = LoopBound(value: session)
        let protocolVersion = session.protocolVersion
        return { [self] makeReply in
            var writer = RESPWriter(protocolVersion: protocolVersion)
            makeReply(&writer)
            let reply = writer.bytes
            server.execute { [self] in
                let session = bound.value
                guard !session.finished else { return }
                session.busy = false
                session.waitsForAcknowledgements = false
                session.blocksOnFeed = false
                session.connection.output += reply
                session.connection.resumeReading()
                server.flush(session.connection)
                process(session, server: server)
            }
        }
    }

    private func refuseUnknown(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        let name = String(decoding: arguments[0], as: UTF8.self)
        if let reason = RESPCommand.refused[name.lowercased()] {
            writer.error("ERR \(name.uppercased()) is not supported: \(reason)")
            return
        }
        // Redis's wording, trailing space included: each argument quoted and followed by a
        // space, until 128 characters of them were written.
        var listed = ""
        for argument in arguments.dropFirst() where listed.utf8.count < 128 {
            listed += "'\(Self.printable(argument.prefix(128 - listed.utf8.count)))' "
        }
        writer.error("ERR unknown command '\(Self.printable(arguments[0]))', with args beginning with: \(listed)")
    }

    /// A client's bytes for an error text: at most 128 bytes, control characters as spaces.
    static func printable(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix(128).map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }

    // MARK: helpers for commands

    /// The state key a client names (NAME or NAME[ID]), or the error written and nil.
    func key(_ bytes: ArraySlice<UInt8>, into writer: inout RESPWriter) -> StateKey? {
        do {
            return try KeySyntax.parse(bytes: bytes)
        } catch {
            writer.error("ERR \(error)")
            return nil
        }
    }

    /// `bytes` as a whole decimal number, or nil.
    static func integer(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self))
    }

    /// Whether `bytes` equals the ASCII `word`, ignoring case.
    static func matches(_ bytes: ArraySlice<UInt8>, _ word: StaticString) -> Bool {
        guard bytes.count == word.utf8CodeUnitCount else { return false }
        var index = bytes.startIndex
        for offset in 0 ..< word.utf8CodeUnitCount {
            let a = bytes[index], b = word.utf8Start[offset]
            let lowerA = (a >= UInt8(ascii: "A") && a <= UInt8(ascii: "Z")) ? a | 0x20 : a
            let lowerB = (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z")) ? b | 0x20 : b
            guard lowerA == lowerB else { return false }
            index += 1
        }
        return true
    }
}

/// Changes committed or applied on the node, waiting for the loop thread to turn them into
/// notifications. Bounded in bytes: past `maxBytes`, changes are counted as dropped instead.
final class NotificationQueue: Sendable {
    private struct State {
        var deltas: [CommittedDelta] = []
        var bytes = 0
        var dropped = 0
        var scheduled = false
    }

    let maxBytes: Int
    private let state = Mutex(State())

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    /// Queues `delta` (or counts it dropped); true when the loop must be woken to drain.
    func push(_ delta: CommittedDelta) -> Bool {
        var size = 64
        for item in delta.delta.entries { size += 64 + item.key.name.utf8.count + item.key.elementCount + (item.entry.packedValue?.count ?? 0) }
        return state.withLock { state in
            if state.bytes + size > maxBytes {
                state.dropped += 1
            } else {
                state.deltas.append(delta)
                state.bytes += size
            }
            guard !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
    }

    /// Everything queued and the count dropped since the last call.
    func takeAll() -> (deltas: [CommittedDelta], dropped: Int) {
        state.withLock { state in
            defer { state = State() }
            return (state.deltas, state.dropped)
        }
    }
}
