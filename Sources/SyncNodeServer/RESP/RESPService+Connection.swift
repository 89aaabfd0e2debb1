import Decide
import DecideCore
import DecideRESP
import DecideUV
import Foundation

/// The connection and server commands: PING, HELLO, AUTH, SELECT, RESET, CLIENT, COMMAND,
/// INFO, CONFIG, TIME. Reply shapes and error texts follow Redis 7's.
extension RESPService {
    /// The Redis version syncnode answers like (HELLO, INFO): the protocol level, not a Redis.
    static let redisCompatibleVersion = "7.0.0"

    func ping(_ arguments: [ArraySlice<UInt8>], session: RESPSession) {
        guard arguments.count <= 2 else {
            session.writer.error("ERR wrong number of arguments for 'ping' command")
            return
        }
        if session.isSubscribed && session.protocolVersion == 2 {
            session.writer.arrayHeader(2)
            session.writer.bulk("pong")
            session.writer.bulk(arguments.count == 2 ? arguments[1] : [])
        } else if arguments.count == 2 {
            session.writer.bulk(arguments[1])
        } else {
            session.writer.simpleString("PONG")
        }
    }

    /// Whether `given` is the configured password, compared in constant time.
    private func passwordMatches(_ given: ArraySlice<UInt8>) -> Bool {
        guard let password = configuration.password else { return false }
        var difference: UInt8 = given.count == password.count ? 0 : 1  // not truncated: lengths 256 apart differ too
        for index in 0 ..< password.count {
            let byte = index < given.count ? given[given.startIndex + index] : 0
            difference |= byte ^ password[index]
        }
        return difference == 0
    }

    /// Checks AUTH's user and password; writes the error and returns false when they fail.
    private func authenticate(user: ArraySlice<UInt8>?, password: ArraySlice<UInt8>, session: RESPSession) -> Bool {
        guard configuration.password != nil else {
            session.writer.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
            return false
        }
        guard user.map({ Self.matches($0, "default") }) ?? true, passwordMatches(password) else {
            logger.warning("client failed to authenticate", metadata: [
                "client": "\(session.connection.id)", "peer": "\(session.connection.peer)"])
            session.writer.error("WRONGPASS invalid username-password pair or user is disabled.")
            return false
        }
        setAuthenticated(session, true)
        return true
    }

    func auth(_ arguments: [ArraySlice<UInt8>], session: RESPSession) {
        guard arguments.count <= 3 else {
            session.writer.error("ERR syntax error")
            return
        }
        let user = arguments.count == 3 ? arguments[1] : nil
        if authenticate(user: user, password: arguments[arguments.count - 1], session: session) {
            session.writer.simpleString("OK")
        }
    }

    /// HELLO [protover [AUTH user pass] [SETNAME name]].
    func hello(_ arguments: [ArraySlice<UInt8>], session: RESPSession) {
        var version = session.protocolVersion
        if arguments.count >= 2 {
            guard let asked = Self.integer(arguments[1]) else {
                session.writer.error("ERR Protocol version is not an integer or out of range")
                return
            }
            guard asked == 2 || asked == 3 else {
                session.writer.error("NOPROTO unsupported protocol version")
                return
            }
            version = asked
        }
        var index = 2
        var name: String?
        var credentials: (ArraySlice<UInt8>, ArraySlice<UInt8>)?
        while index < arguments.count {
            if Self.matches(arguments[index], "AUTH"), index + 2 < arguments.count {
                credentials = (arguments[index + 1], arguments[index + 2])
                index += 3
            } else if Self.matches(arguments[index], "SETNAME"), index + 1 < arguments.count {
                name = String(decoding: arguments[index + 1], as: UTF8.self)
                index += 2
            } else {
                session.writer.error("ERR Syntax error in HELLO option '\(Self.printable(arguments[index]))'")
                return
            }
        }
        if let (user, password) = credentials {
            guard authenticate(user: user, password: password, session: session) else { return }
        }
        guard session.authenticated else {
            session.writer.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
            return
        }
        if let name {
            guard Self.validClientName(name) else {
                session.writer.error("ERR Client names cannot contain spaces, newlines or special characters.")
                return
            }
            session.name = name
        }
        session.protocolVersion = version
        session.writer.mapHeader(7)
        session.writer.bulk("server")
        session.writer.bulk("syncnode")
        session.writer.bulk("version")
        session.writer.bulk(Self.redisCompatibleVersion)
        session.writer.bulk("proto")
        session.writer.integer(version)
        session.writer.bulk("id")
        session.writer.integer(Int(session.connection.id))
        session.writer.bulk("mode")
        session.writer.bulk("standalone")
        session.writer.bulk("role")
        session.writer.bulk("master")
        session.writer.bulk("modules")
        session.writer.arrayHeader(0)
    }

    func select(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let index = Self.integer(arguments[1]) else {
            writer.error("ERR value is not an integer or out of range")
            return
        }
        guard index == 0 else {
            writer.error("ERR DB index is out of range")
            return
        }
        writer.simpleString("OK")
    }

    func reset(_ session: RESPSession) {
        dropSubscriptions(session)
        session.block = nil
        session.protocolVersion = 2
        session.name = nil
        setAuthenticated(session, configuration.password == nil)
        session.writer.simpleString("RESET")
    }

    static func validClientName(_ name: String) -> Bool {
        name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    // MARK: CLIENT

    func client(_ arguments: [ArraySlice<UInt8>], session: RESPSession, server: UVStreamServer) {
        let sub = arguments[1]
        if Self.matches(sub, "ID"), arguments.count == 2 {
            session.writer.integer(Int(session.connection.id))
        } else if Self.matches(sub, "SETNAME"), arguments.count == 3 {
            let name = String(decoding: arguments[2], as: UTF8.self)
            guard Self.validClientName(name) || name.isEmpty else {
                session.writer.error("ERR Client names cannot contain spaces, newlines or special characters.")
                return
            }
            session.name = name.isEmpty ? nil : name
            session.writer.simpleString("OK")
        } else if Self.matches(sub, "GETNAME"), arguments.count == 2 {
            if let name = session.name { session.writer.bulk(name) } else { session.writer.null() }
        } else if Self.matches(sub, "SETINFO"), arguments.count == 4 {
            let value = String(decoding: arguments[3], as: UTF8.self)
            if Self.matches(arguments[2], "LIB-NAME") {
                session.libraryName = value
            } else if Self.matches(arguments[2], "LIB-VER") {
                session.libraryVersion = value
            } else {
                session.writer.error("ERR Unrecognized option '\(Self.printable(arguments[2]))'")
                return
            }
            session.writer.simpleString("OK")
        } else if Self.matches(sub, "INFO"), arguments.count == 2 {
            session.writer.verbatim(clientLine(session) + "\n")
        } else if Self.matches(sub, "LIST") {
            var text = ""
            for connection in server.openConnections.sorted(by: { $0.id < $1.id }) {
                if let other = connection.context as? RESPSession { text += clientLine(other) + "\n" }
            }
            session.writer.verbatim(text)
        } else if Self.matches(sub, "NO-EVICT") || Self.matches(sub, "NO-TOUCH") {
            session.writer.simpleString("OK")
        } else if Self.matches(sub, "HELP") {
            let lines = ["CLIENT <subcommand> [<arg> ...]. Subcommands are:", "ID", "INFO", "LIST", "GETNAME",
                         "SETNAME <name>", "SETINFO <LIB-NAME|LIB-VER> <value>", "NO-EVICT (ON|OFF)", "NO-TOUCH (ON|OFF)", "HELP"]
            session.writer.arrayHeader(lines.count)
            for line in lines { session.writer.simpleString(line) }
        } else {
            session.writer.error("ERR unknown subcommand or wrong number of arguments for '\(Self.printable(sub))'. Try CLIENT HELP.")
        }
    }

    private func clientLine(_ session: RESPSession) -> String {
        let age = (Self.nowMilliseconds() - session.createdMilliseconds) / 1000
        let subscriptions = session.channels.count, patterns = session.patterns.count
        return "id=\(session.connection.id) addr=\(session.connection.peer) name=\(session.name ?? "") age=\(age) db=0 "
            + "sub=\(subscriptions) psub=\(patterns) cmds=\(session.commandsProcessed) "
            + "omem=\(session.connection.unwrittenBytes) resp=\(session.protocolVersion) "
            + "lib-name=\(session.libraryName ?? "") lib-ver=\(session.libraryVersion ?? "")"
    }

    // MARK: COMMAND

    /// COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND LIST, COMMAND DOCS (empty: no docs here).
    func commandInfo(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        func reply(_ command: RESPCommand) {
            let info = command.info
            writer.arrayHeader(10)
            writer.bulk(info.name)
            writer.integer(info.arity)
            writer.setHeader(info.flags.count)
            for flag in info.flags { writer.simpleString(flag) }
            writer.integer(info.firstKey)
            writer.integer(info.lastKey)
            writer.integer(info.step)
            writer.setHeader(0)
            writer.setHeader(0)
            writer.setHeader(0)
            writer.arrayHeader(0)
        }
        guard arguments.count >= 2 else {
            writer.arrayHeader(RESPCommand.allCases.count)
            for command in RESPCommand.allCases { reply(command) }
            return
        }
        let sub = arguments[1]
        if Self.matches(sub, "COUNT") {
            writer.integer(RESPCommand.allCases.count)
        } else if Self.matches(sub, "INFO") {
            writer.arrayHeader(arguments.count - 2)
            for name in arguments.dropFirst(2) {
                if let command = RESPCommand.named(name) { reply(command) } else { writer.nullArray() }
            }
        } else if Self.matches(sub, "LIST") {
            writer.arrayHeader(RESPCommand.allCases.count)
            for command in RESPCommand.allCases { writer.bulk(command.name) }
        } else if Self.matches(sub, "DOCS") {
            writer.mapHeader(0)
        } else {
            writer.error("ERR unknown subcommand '\(Self.printable(sub))'. Try COMMAND HELP.")
        }
    }

    // MARK: CONFIG

    /// CONFIG GET pattern...: the few settings clients ask for; CONFIG SET is refused (settings
    /// come from flags, environment and the config file).
    func config(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        let sub = arguments[1]
        if Self.matches(sub, "GET"), arguments.count >= 3 {
            let durability = identity.withLock { $0.durability }
            let settings: [(String, String)] = [
                ("appendonly", durability == "memory" ? "no" : "yes"),
                ("databases", "1"),
                ("maxclients", "\(configuration.maxClients)"),
                ("notify-keyspace-events", "KEA"),
                ("save", ""),
                ("timeout", "0"),
            ]
            let matched = settings.filter { setting in
                arguments.dropFirst(2).contains { RESPGlob.matches($0, Array(setting.0.utf8)) }
            }
            writer.mapHeader(matched.count)
            for (name, value) in matched {
                writer.bulk(name)
                writer.bulk(value)
            }
        } else if Self.matches(sub, "SET") {
            writer.error("ERR CONFIG SET is not supported: syncnode takes its settings from flags, environment or its config file when it starts (docs/operations.md)")
        } else if Self.matches(sub, "RESETSTAT") {
            writer.simpleString("OK")
        } else {
            writer.error("ERR unknown subcommand '\(Self.printable(sub))'. Try CONFIG HELP.")
        }
    }

    func time(into writer: inout RESPWriter) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        writer.arrayHeader(2)
        writer.bulk(String(now.tv_sec))
        writer.bulk(String(now.tv_nsec / 1000))
    }

    // MARK: INFO

    /// INFO [section ...]: server, clients, memory, replication (every peer's link and lag),
    /// keyspace, and decide; `all`, `everything` and `default` name them all.
    func info(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        let all = ["server", "clients", "memory", "replication", "keyspace", "decide"]
        var wanted: [String] = []
        for argument in arguments.dropFirst() {
            let name = String(decoding: argument, as: UTF8.self).lowercased()
            if ["all", "everything", "default"].contains(name) {
                wanted = all
            } else if all.contains(name), !wanted.contains(name) {
                wanted.append(name)
            }
        }
        if arguments.count == 1 { wanted = all }
        var text = ""
        for section in all where wanted.contains(section) {
            if !text.isEmpty { text += "\r\n" }
            text += infoSection(section)
        }
        writer.verbatim(text)
    }

    private func infoSection(_ section: String) -> String {
        let identity = identity.withLock { $0 }
        var lines: [String] = []
        switch section {
        case "server":
            lines = ["# Server",
                     "redis_version:\(Self.redisCompatibleVersion)",
                     "redis_mode:standalone",
                     "server_name:syncnode",
                     "process_id:\(getpid())",
                     "tcp_port:\(identity.admin.split(separator: ":").last.map(String.init) ?? "0")",
                     "uptime_in_seconds:\((Self.nowMilliseconds() - startedMilliseconds) / 1000)",
                     "decide_node:\(node.id)",
                     "decide_cluster:\(identity.cluster)"]
        case "clients":
            lines = ["# Clients",
                     "connected_clients:\(openSessions)",
                     "pubsub_clients:\(subscribers.count)",
                     "unauthenticated_clients:\(unauthenticatedSessions)",
                     "clients_memory_bytes:\(clientBytes)",
                     "clients_memory_peak_bytes:\(peakClientBytes)",
                     "evicted_clients:\(evictedClients)",
                     "notification_match_steps:\(notificationMatchSteps)",
                     "notification_busiest_turn_steps:\(busiestNotificationTurnSteps)",
                     "total_connections_received:\(totalConnections)",
                     "total_commands_processed:\(totalCommands)"]
        case "memory":
            lines = ["# Memory"]
            if let resident = MemoryAllocator.residentBytes() { lines.append("used_memory_rss:\(resident)") }
            lines.append("mem_allocator:\(MemoryAllocator.name)")
        case "replication":
            let status = replicator.status
            let links = configuration.secrets?.links() ?? []
            let connected = status.members.filter { $0.link == .connected }.count
            lines = ["# Replication",
                     "role:master",
                     "decide_replication:leaderless (every node takes writes; last-writer-wins)",
                     "connected_peers:\(connected)",
                     "known_peers:\(status.members.count)"]
            for (index, member) in status.members.enumerated() {
                let heard = member.lastHeardMillisecondsAgo.map(String.init) ?? "never"
                // lag: whole seconds since it was last heard, as Redis reports a replica's.
                let lag = member.lastHeardMillisecondsAgo.map { String($0 / 1000) } ?? "-1"
                lines.append("peer\(index):id=\(member.nodeID),addr=\(member.address),link=\(member.link.rawValue),lag=\(lag),"
                             + "last_heard_ms=\(heard),queued_bytes=\(member.outboundBytesQueued),catch_up=\(member.catchUp.rawValue),"
                             + "dropped_deltas=\(member.droppedDeltas),protocol_violations=\(member.protocolViolations)"
                             + sealDescription(of: member.nodeID, links: links))
            }
        case "keyspace":
            let summary = node.stateSummary
            lines = ["# Keyspace"]
            let live = summary.liveCount
            if live > 0 { lines.append("db0:keys=\(live),expires=\(summary.expiringCount),avg_ttl=0") }
        default:
            let summary = node.stateSummary
            let status = replicator.status
            lines = ["# Decide",
                     "node:\(node.id)",
                     "cluster:\(identity.cluster)",
                     "listen:\(identity.listen)",
                     "durability:\(identity.durability)",
                     "incarnation:\(status.incarnation)",
                     "forgotten_members:\(status.forgottenMemberIDs)",
                     "entries:\(summary.entryCount)",
                     "tombstones:\(summary.tombstoneCount)",
                     "expiring:\(summary.expiringCount)",
                     "expired_awaiting_collection:\(summary.expiredCount)",
                     "owned_hidden:\(summary.hiddenOwnedCount)",
                     "digest:\(ReplyJSON.hex(summary.digest))",
                     "committed_decisions:\(summary.committedDecisions)",
                     "applied_remote_deltas:\(summary.appliedRemoteDeltas)"] + secretInfoLines()
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
