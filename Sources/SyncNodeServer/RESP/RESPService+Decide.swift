import Decide
import DecideCore
import DecideRESP
import DecideUV

/// syncnode's own commands, for its CLI and for tools that want versions: each replies one
/// bulk string of JSON (docs/operations.md, "Decide's own commands"), except DECIDE.DUMP,
/// an array of one JSON line per entry.
extension RESPService {
    /// DECIDE.PUT KEY JSON / DECIDE.DELETE KEY: `{"key":K,"version":V}`, or
    /// `{"key":K,"unchanged":true}`.
    func decideWrite(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let key = key(arguments[1], into: &writer) else { return }
        var value: PackedBytes?
        var lifetime: UInt64?
        var owned = false
        // DECIDE.PUT KEY VALUE [PX MILLISECONDS] [OWNED]
        var index = 3
        while command == .decidePut, index < arguments.count {
            if Self.matches(arguments[index], "OWNED"), !owned {
                owned = true
                index += 1
            } else if Self.matches(arguments[index], "PX"), lifetime == nil, index + 1 < arguments.count {
                guard let amount = Self.integer(arguments[index + 1]),
                      let milliseconds = Self.lifetimeMilliseconds(amount, inSeconds: false) else {
                    writer.error("ERR invalid expire time in 'decide.put' command")
                    return
                }
                lifetime = milliseconds
                index += 2
            } else {
                writer.error("ERR syntax error: DECIDE.PUT KEY VALUE [PX MILLISECONDS] [OWNED]")
                return
            }
        }
        if command == .decidePut {
            guard arguments[2].withUnsafeBytes({ ValueMapping.isJSON($0) }) else {
                writer.error("ERR the value is not JSON; a string needs its quotes, e.g. '\"text\"'")
                return
            }
            value = arguments[2].withUnsafeBytes { PackedBytes($0) }
        }
        let verb = command == .decidePut ? "put" : "delete"
        switch node.decide(RawWrite(key: key, value: value, lifetimeMilliseconds: lifetime, owned: owned)) {
        case .committed(let version):
            writer.bulk(ReplyJSON.object([("key", .string(key.description)), ("version", ReplyJSON.version(version))]))
        case .unchanged:
            writer.bulk(ReplyJSON.object([("key", .string(key.description)), ("unchanged", .bool(true))]))
        case .aborted(let reason):
            writer.error("ERR \(verb) \(key) refused: \(reason)")
        }
    }

    /// DECIDE.GET KEY: null when this node never held the key or its value expired, else
    /// `{"key":K,"value":V|null,"deleted":bool,"version":V}` (and `"expiresAt"` for an
    /// expiring value). A plain key with no value that names a counter:
    /// `{"key":K,"counter":TOTAL,"slots":[{"node","incarnation","increments","decrements"}…]}`;
    /// that names a set: `{"key":K,"set":[{"member":M,"dots":N}…]}` (members in byte order, each
    /// with its live dots: more than one after concurrent inserts); that names a hash:
    /// `{"key":K,"hash":{FIELD:VALUE…},"counterFields":[FIELD…]}` (fields in byte order; a
    /// counter field, HINCRBY's, reads as its total and is listed in `counterFields`, left out
    /// when there is none); that names a sorted set:
    /// `{"key":K,"sortedSet":[{"member":M,"score":S}…]}` (in score order).
    func decideGet(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let key = key(arguments[1], into: &writer) else { return }
        let entry = node.read({ $0.entry(key) })
        if entry?.packedValue == nil, key.elementCount == 0, node.compoundPresence.exists {
            let total = node.read { $0.counterTotal(named: key.name) }
            let slots = node.counterSlots(named: key.name)
            if total != 0 || !slots.isEmpty {
                let listed: [JSONValue] = slots.map { slot in
                    var fields: [(String, JSONValue)] = [("node", .string(slot.node)), ("incarnation", .string(ReplyJSON.hex(slot.incarnation))),
                                                         ("increments", .number(String(slot.increments))), ("decrements", .number(String(slot.decrements)))]
                    if let instant = slot.expiresAtMilliseconds { fields.append(("expiresAt", .number(String(instant)))) }
                    return .object(fields)
                }
                writer.bulk(ReplyJSON.object([("key", .string(key.name)), ("counter", .number(String(total))), ("slots", .array(listed))]))
                return
            }
            let members = node.read { $0.hasMembers(ofSetNamed: key.name) ? $0.members(ofSetNamed: key.name) : [] }
            if !members.isEmpty {
                let listed: [JSONValue] = members.sorted { $0.lexicographicallyPrecedes($1) }.map { member in
                    let dots = node.setDots(named: key.name, member: member).count
                    return .object([("member", (try? JSONValue.parse(member)) ?? .null), ("dots", .number(String(dots)))])
                }
                writer.bulk(ReplyJSON.object([("key", .string(key.name)), ("set", .array(listed))]))
                return
            }
            let (fields, counted) = node.read { read in
                read.hasFields(ofHashNamed: key.name) ? (read.fields(ofHashNamed: key.name), read.counterFields(ofHashNamed: key.name)) : ([], [])
            }
            if !fields.isEmpty {
                let listed: [(String, JSONValue)] = fields.sorted { $0.field < $1.field }.map { field, value in
                    (ReplyJSON.value(field.element).stringValue ?? field.description, ReplyJSON.value(value.array))
                }
                var reply: [(String, JSONValue)] = [("key", .string(key.name)), ("hash", .object(listed))]
                let counters = counted.map(\.field).sorted { $0.lexicographicallyPrecedes($1) }.map(ReplyJSON.value)
                if !counters.isEmpty { reply.append(("counterFields", .array(counters))) }
                writer.bulk(ReplyJSON.object(reply))
                return
            }
            let scored = node.read { $0.hasScoredMembers(ofSortedSetNamed: key.name) ? $0.scoredMembers(ofSortedSetNamed: key.name) : [] }
            if !scored.isEmpty {
                let listed: [JSONValue] = scored.map { item in
                    .object([("member", (try? JSONValue.parse(item.member)) ?? .null), ("score", .number(item.score.description))])
                }
                writer.bulk(ReplyJSON.object([("key", .string(key.name)), ("sortedSet", .array(listed))]))
                return
            }
        }
        guard let entry else {
            writer.null()
            return
        }
        writer.bulk(Array(ReplyJSON.entry(key: key, entry: entry).compact().utf8))
    }

    /// DECIDE.FORGET NODE: `{"removed":NODE}`.
    func decideForget(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        let nodeID = String(decoding: arguments[1], as: UTF8.self)
        do {
            try replicator.forget(nodeID)
            writer.bulk(ReplyJSON.object([("removed", .string(nodeID))]))
        } catch {
            writer.error("ERR \(error)")
        }
    }

    /// DECIDE.STATUS: the node, its members and their links, as one JSON object.
    func decideStatus(into writer: inout RESPWriter) {
        let identity = identity.withLock { $0 }
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
                ("coveredClock", ReplyJSON.hlc(member.coveredClock)),
                ("reportedCoverage", ReplyJSON.hlc(member.reportedCoverage)),
            ])
        }
        writer.bulk(ReplyJSON.object([
            ("node", .string(node.id)),
            ("cluster", .string(identity.cluster)),
            ("listen", .string(identity.listen)),
            ("admin", .string(identity.admin)),
            ("incarnation", .number(String(replication.incarnation))),
            ("entries", .number(String(summary.entryCount))),
            ("tombstones", .number(String(summary.tombstoneCount))),
            ("expiring", .number(String(summary.expiringCount))),
            ("expired", .number(String(summary.expiredCount))),
            ("ownedHidden", .number(String(summary.hiddenOwnedCount))),
            ("digest", .string(ReplyJSON.hex(summary.digest))),
            ("highestVersion", summary.highestVersion.map(ReplyJSON.version) ?? .null),
            ("committedDecisions", .number(String(summary.committedDecisions))),
            ("appliedRemoteDeltas", .number(String(summary.appliedRemoteDeltas))),
            ("coverage", ReplyJSON.hlc(replication.coverage)),
            ("tombstoneBound", ReplyJSON.hlc(replication.tombstoneBound)),
            ("forgottenMembers", .number(String(replication.forgottenMemberIDs))),
            ("members", .array(members)),
        ]))
    }

    // MARK: dump

    /// DECIDE.DUMP: every entry, tombstones included, sorted by key, as an array of JSON lines,
    /// written `dumpChunkBytes` at a time as the socket drains. The entries are read in slices
    /// (`Node.entriesReadInSlices`), so the node's decisions and peers never wait for the whole
    /// state: each key once, as of when its slice was read. The client's later commands wait
    /// until it is written.
    func startDump(_ session: RESPSession) {
        let entries = node.entriesReadInSlices()
        let now = node.nowMilliseconds
        session.writer.arrayHeader(entries.count)
        session.dump = RESPSession.DumpCursor(entries: entries, now: now)
        session.busy = true
    }

    /// Writes the next chunk of `session`'s dump; when it is done, answers what waited.
    func continueDump(_ session: RESPSession, server: UVStreamServer) {
        guard var dump = session.dump, !session.finished else { return }
        let connection = session.connection
        // Only once what was written before has left: the chunk bounds the memory.
        guard connection.bytesInFlight == 0 else { return }
        var writer = RESPWriter(protocolVersion: session.protocolVersion)
        swap(&writer.bytes, &connection.output)
        while dump.index < dump.entries.count && writer.bytes.count < configuration.dumpChunkBytes {
            let item = dump.entries[dump.index]
            writer.bulk(Array(ReplyJSON.entry(key: item.key, entry: item.entry, now: dump.now).compact().utf8))
            dump.index += 1
        }
        swap(&writer.bytes, &connection.output)
        let finished = dump.index == dump.entries.count
        session.dump = finished ? nil : dump
        server.flush(connection)
        if finished {
            session.busy = false
            process(session, server: server)
        }
    }
}
