import DecideRESP
import DecideUV
import Dispatch
import Logging
import Synchronization

/// What any one client may cost, and for how long (docs/operations.md, "Limits"):
/// - before it authenticated (with a password), a client's requests are small
///   (`unauthenticatedLimits`, refused from the header), its memory share is
///   `maxUnauthenticatedClientMemoryBytes`, it has `authTimeoutMilliseconds` to authenticate,
///   and at most `maxUnauthenticatedClients` such connections are open at once;
/// - every client's memory is one figure (`RESPSession.heldBytes`), charged after each batch of
///   its commands, each end-of-turn answer, each notification burst and each drain; over its
///   share (`maxClientMemoryBytes`) it gets an error and is closed; when every client together
///   holds more than `maxClientsMemoryBytes`, the largest are closed first until they do not;
/// - a client whose replies stay above half the read pause without any being written for
///   `outputStallTimeoutMilliseconds` (it writes a pipeline and never reads) is told and
///   closed: the server stops reading it at the pause, so without the deadline both would wait
///   for ever;
/// - with `idleTimeoutMilliseconds`, a client that sent nothing for that long is closed, unless
///   it subscribed or waits for an answer (WAIT, a write waiting for the disk, a dump);
/// - each of these closes writes a log line through `throttledLog`: a flood of them writes a
///   few lines a second with the count of the others.
///
/// A client closed by a bound has its queued replies, request buffer, block and
/// subscriptions released at once; its connection is closed once the error is written, or
/// `evictionGraceMilliseconds` later if it does not read it.
extension RESPService {
    /// How long a client closed by a bound has to read its error before its connection is cut.
    static let evictionGraceMilliseconds: UInt64 = 1_000

    /// What one subscription costs beyond its name's bytes (its array, its set entry, its
    /// compiled pattern's header), charged to the client with the name.
    static let subscriptionOverheadBytes = 64

    /// Records that `session` authenticated (or, after RESET with a password, no longer is):
    /// its request limits, its memory share and the unauthenticated count follow.
    func setAuthenticated(_ session: RESPSession, _ authenticated: Bool) {
        guard session.authenticated != authenticated else { return }
        session.authenticated = authenticated
        unauthenticatedSessions += authenticated ? -1 : 1
        session.parser.setLimits(authenticated ? configuration.limits : configuration.unauthenticatedLimits)
    }

    /// The memory `session` may hold now.
    func memoryShare(of session: RESPSession) -> Int {
        session.authenticated ? configuration.maxClientMemoryBytes : configuration.maxUnauthenticatedClientMemoryBytes
    }

    /// Counts what `session` holds now into the total, and enforces both memory bounds: the
    /// client over its share is closed, and past the total the largest clients are.
    func charge(_ session: RESPSession, server: UVStreamServer) {
        guard !session.closed else { return }
        let held = session.heldBytes
        clientBytes += held - session.chargedBytes
        session.chargedBytes = held
        if clientBytes > peakClientBytes { peakClientBytes = clientBytes }
        guard !session.finished else { return }
        let share = memoryShare(of: session)
        if held > share {
            let now = Self.nowMilliseconds()
            throttledLog.log(logger, .warning, "client closed: it held more memory than its share", metadata: [
                "client": "\(session.connection.id)", "peer": "\(session.connection.peer)", "heldBytes": "\(held)",
                "maxClientMemoryBytes": "\(share)", "authenticated": "\(session.authenticated)"], now: now)
            evict(session, reply: "ERR client memory limit reached: \(held) bytes held (queued replies, requests, subscriptions, MULTI block), more than its share of \(share); closing",
                  server: server, now: now)
            return
        }
        if clientBytes > configuration.maxClientsMemoryBytes { evictLargest(server) }
    }

    /// Closes the largest clients until every client together holds at most
    /// `maxClientsMemoryBytes` (each one is a pass over the open connections: at most
    /// `maxClients` passes, and only while the total is over).
    private func evictLargest(_ server: UVStreamServer) {
        let now = Self.nowMilliseconds()
        while clientBytes > configuration.maxClientsMemoryBytes {
            var largest: RESPSession?
            for connection in server.openConnections {
                guard let other = connection.context as? RESPSession, !other.finished, other.chargedBytes > 0 else { continue }
                if other.chargedBytes > (largest?.chargedBytes ?? 0) { largest = other }
            }
            guard let largest else { return }
            throttledLog.log(logger, .warning, "client closed: clients together held more memory than maxClientsMemoryBytes", metadata: [
                "client": "\(largest.connection.id)", "peer": "\(largest.connection.peer)", "heldBytes": "\(largest.chargedBytes)",
                "clientsBytes": "\(clientBytes)", "maxClientsMemoryBytes": "\(configuration.maxClientsMemoryBytes)"], now: now)
            evict(largest, reply: "ERR clients memory limit reached: this client held the most (\(largest.chargedBytes) bytes); closing",
                  server: server, now: now)
        }
    }

    /// Closes `session` for a bound: releases what it holds (queued replies not yet handed to
    /// the socket, its request buffer, its block, its subscriptions), writes `reply` as an
    /// error (if any), and closes the connection once that is written, or after
    /// `evictionGraceMilliseconds` (`sweep`) if the client does not read it.
    func evict(_ session: RESPSession, reply: String?, server: UVStreamServer, now: UInt64) {
        guard !session.finished, !session.closed else { return }
        evictedClients += 1
        session.finished = true
        session.dump = nil
        session.block = nil
        session.parser = RESPRequestParser(limits: RESPLimits.unauthenticated)
        session.arguments = []
        if session.isSubscribed { dropSubscriptions(session) }
        var writer = RESPWriter(protocolVersion: session.protocolVersion)
        if let reply { writer.error(reply) }
        session.writer.bytes = []
        session.connection.output = writer.bytes
        session.forceCloseAtMilliseconds = now + Self.evictionGraceMilliseconds
        server.closeWhenWritten(session.connection)
        charge(session, server: server)
    }

    /// Runs `sweep` on the loop every few milliseconds (a quarter of the shortest deadline in
    /// force, within 10...250 ms) until the server is shut down.
    func startSweeping(_ server: UVStreamServer) {
        let deadlines = [configuration.authTimeoutMilliseconds, configuration.idleTimeoutMilliseconds,
                         configuration.outputStallTimeoutMilliseconds, Self.evictionGraceMilliseconds].filter { $0 > 0 }
        let interval = min(max((deadlines.min() ?? 1_000) / 4, 10), 250)
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
        let service = LoopBound(value: self)
        timer.schedule(deadline: .now() + .milliseconds(Int(interval)), repeating: .milliseconds(Int(interval)),
                       leeway: .milliseconds(Int(interval / 4)))
        // The handler holds the timer until it cancels it, once the server refuses tasks (it
        // was shut down) or is gone: a cancelled source lets its handler go, and the cycle ends.
        timer.setEventHandler { [weak server] in
            guard let server, server.execute({ [weak server] in
                if let server { service.value.sweep(server) }
            }) else {
                timer.cancel()
                return
            }
        }
        sweepTimer = timer
        timer.resume()
    }

    /// Enforces the deadlines (loop thread): closes what `evict` left to close, unauthenticated
    /// clients past `authTimeoutMilliseconds`, clients whose replies stalled past
    /// `outputStallTimeoutMilliseconds`, and idle clients past `idleTimeoutMilliseconds`.
    func sweep(_ server: UVStreamServer) {
        let now = Self.nowMilliseconds()
        let pause = server.configuration.pauseReadingAboveBytes
        let sessions = server.openConnections.compactMap { $0.context as? RESPSession }
        for session in sessions where !session.closed {
            let connection = session.connection
            if let at = session.forceCloseAtMilliseconds {
                if now >= at { server.close(connection) }
                continue
            }
            // Replies that do not drain: above the level where reading resumes (half the read
            // pause: a client paused above the pause stays paused until then, and one that
            // drained part of its replies may stay between the two for ever) for a client still
            // served, any at all for one that is closing (QUIT or an error, its replies going out).
            let unwritten = connection.unwrittenBytes
            let stallTimeout = configuration.outputStallTimeoutMilliseconds
            if stallTimeout > 0 && unwritten > (session.finished ? 0 : pause / 2) {
                // Progress is a reply written (fewer unwritten than at the mark) or a command
                // run (it was read again): a client that reads and pipelines at once moves
                // between half the pause and the pause, and is never stalled.
                if let since = session.stallSinceMilliseconds, unwritten >= session.stallMarkBytes,
                   session.commandsProcessed == session.stallMarkCommands {
                    if now - since >= stallTimeout {
                        throttledLog.log(logger, .warning, "client closed: it stopped reading its replies", metadata: [
                            "client": "\(connection.id)", "peer": "\(connection.peer)", "unwrittenBytes": "\(unwritten)",
                            "outputStallTimeoutMilliseconds": "\(stallTimeout)"], now: now)
                        if session.finished {
                            server.close(connection)
                        } else {
                            evict(session, reply: "ERR client stopped reading its replies: \(unwritten) bytes unwritten for \(stallTimeout) ms (read replies while pipelining, or pipeline in smaller batches); closing",
                                  server: server, now: now)
                        }
                        continue
                    }
                } else {
                    session.stallSinceMilliseconds = now
                    session.stallMarkBytes = unwritten
                    session.stallMarkCommands = session.commandsProcessed
                }
            } else {
                session.stallSinceMilliseconds = nil
            }
            guard !session.finished else { continue }
            let authTimeout = configuration.authTimeoutMilliseconds
            if !session.authenticated && authTimeout > 0 && now - session.createdMilliseconds >= authTimeout {
                throttledLog.log(logger, .warning, "client closed: it did not authenticate in time", metadata: [
                    "client": "\(connection.id)", "peer": "\(connection.peer)",
                    "authTimeoutMilliseconds": "\(authTimeout)"], now: now)
                evict(session, reply: "ERR authentication timeout: AUTH within \(authTimeout) ms of connecting; closing",
                      server: server, now: now)
                continue
            }
            let idleTimeout = configuration.idleTimeoutMilliseconds
            if idleTimeout > 0 && now - session.lastReadMilliseconds >= idleTimeout && !session.isSubscribed
                && !session.busy && session.dump == nil && session.waitingWrites == 0 {
                throttledLog.log(logger, .info, "client closed: idle", metadata: [
                    "client": "\(connection.id)", "peer": "\(connection.peer)",
                    "idleTimeoutMilliseconds": "\(idleTimeout)"], now: now)
                evict(session, reply: nil, server: server, now: now)
            }
        }
    }

    /// The client accounting as the loop thread sees it: what INFO's clients section shows.
    struct ClientAccounting: Sendable {
        var clientsBytes: Int
        var peakClientsBytes: Int
        var evictedClients: UInt64
        var unauthenticatedClients: Int
        var openClients: Int
        /// Glob steps of notification matching, in all and in the busiest loop turn.
        var notificationMatchSteps: UInt64
        var busiestNotificationTurnSteps: Int
    }

    /// Reads `ClientAccounting` on the loop thread, waiting for it (not from the loop itself);
    /// nil once the server is shut down.
    func clientAccounting() -> ClientAccounting? {
        guard let server else { return nil }
        let result = Mutex<ClientAccounting?>(nil)
        let done = DispatchSemaphore(value: 0)
        let service = LoopBound(value: self)
        guard server.execute({
            let this = service.value
            result.withLock {
                $0 = ClientAccounting(clientsBytes: this.clientBytes, peakClientsBytes: this.peakClientBytes,
                                      evictedClients: this.evictedClients,
                                      unauthenticatedClients: this.unauthenticatedSessions, openClients: this.openSessions,
                                      notificationMatchSteps: this.notificationMatchSteps,
                                      busiestNotificationTurnSteps: this.busiestNotificationTurnSteps)
            }
            done.signal()
        }) else { return nil }
        done.wait()
        return result.withLock { $0 }
    }
}
