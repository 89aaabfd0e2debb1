import Decide
import DecideCore
import DecideRESP
import DecideUV
import Dispatch

/// MULTI, EXEC, DISCARD and UNWATCH: the keyspace commands sent between MULTI and EXEC run as
/// one decision, in order, each seeing what the ones before it wrote, so the block commits with
/// one version and applies whole on every replica, as MSET does (docs/operations.md,
/// "Transactions"). What Redis's clients send as a transaction (redis-py's `pipeline()`,
/// go-redis's `TxPipelined`, ioredis's `multi()`) then means here what it means there.
///
/// Guarantees:
/// - between MULTI and EXEC a keyspace command (`queueable`) is answered `+QUEUED` and kept; any
///   other command, an unknown one, one with the wrong number of arguments, or one past the
///   block's bounds (`maxArguments` commands, `maxRequestBytes` of arguments, as one request)
///   is answered with an error and makes EXEC answer `EXECABORT`, nothing run (each argument
///   is counted with `queuedArgumentOverheadBytes` beside its bytes);
/// - EXEC answers an array with each command's reply, in order; a command whose arguments are
///   wrong (a syntax error, a value that is not UTF-8) answers its error in its place and the
///   others run; conditions (NX, XX, GT, LT) are judged on this node when EXEC runs;
/// - when the node refuses the decision, EXEC answers one error and nothing was written;
/// - once the reply passes `maxReplyBytes`, each later read answers an error in its place
///   (GETSET and GETDEL still write); the block stays one decision;
/// - WATCH stays refused: a check that no other writer touched a key needs one server to
///   order every write, which replicas that each accept writes do not have.
extension RESPService {
    /// The commands a MULTI block may hold: the keyspace's reads and writes, PING and ECHO.
    static func queueable(_ command: RESPCommand) -> Bool {
        switch command {
        case .get, .mget, .exists, .type, .ttl, .pttl, .expiretime, .pexpiretime,
             .set, .setnx, .getset, .getdel, .mset, .del, .unlink, .setex, .psetex, .incr, .incrby, .decr, .decrby,
             .sadd, .srem, .smembers, .sismember, .smismember, .scard,
             .hset, .hmset, .hsetnx, .hdel, .hincrby, .hget, .hmget, .hgetall, .hkeys, .hvals, .hlen, .hexists,
             .zadd, .zrem, .zscore, .zmscore, .zcard, .zcount, .zrank, .zrevrank, .zrange, .zrangebyscore, .zrevrange, .zrevrangebyscore,
             .expire, .pexpire, .expireat, .pexpireat, .persist, .ping, .echo:
            return true
        default:
            return false
        }
    }

    /// The commands that run at once inside a block rather than being queued: those that end
    /// or leave it, and MULTI (which answers that blocks do not nest).
    static func runsInsideBlock(_ command: RESPCommand) -> Bool {
        command == .exec || command == .discard || command == .multi || command == .quit || command == .reset
    }

    /// What keeping one argument costs beyond its bytes (its array's header and the
    /// allocator's), charged against the block's bound so that many short arguments are bounded
    /// by what they hold, not only by their payload. The charge is below the whole cost: a
    /// queued SET's step prepared at EXEC holds about as much again (docs/operations.md).
    static let queuedArgumentOverheadBytes = 64

    /// MULTI: starts a block.
    func multi(_ session: RESPSession) {
        guard session.block == nil else {
            session.writer.error("ERR MULTI calls can not be nested")
            return
        }
        session.block = QueuedBlock()
        session.writer.simpleString("OK")
    }

    /// DISCARD: drops the block.
    func discard(_ session: RESPSession) {
        guard session.block != nil else {
            session.writer.error("ERR DISCARD without MULTI")
            return
        }
        session.block = nil
        session.writer.simpleString("OK")
    }

    /// A command received inside a block: kept and answered `+QUEUED`, or refused (which aborts
    /// the block). Its arguments are copied out of the parser's buffer.
    func enqueue(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], session: RESPSession) {
        guard Self.queueable(command) else {
            refuseInBlock("ERR Command not allowed inside a transaction: \(command.name.uppercased()) (only keyspace commands, PING and ECHO are queued)", session)
            return
        }
        guard let block = session.block else { return }
        // An aborted block runs nothing: what comes after the refusal is answered as Redis
        // answers it, and not kept.
        guard !block.aborted else {
            session.writer.simpleString("QUEUED")
            return
        }
        let bytes = arguments.reduce(0) { $0 + $1.count + Self.queuedArgumentOverheadBytes }
        let limits = configuration.limits
        guard block.commands.count < limits.maxArguments, block.argumentBytes + bytes <= limits.maxRequestBytes else {
            refuseInBlock("ERR transaction past its bounds (\(limits.maxArguments) commands, \(limits.maxRequestBytes) bytes of arguments): EXEC in smaller blocks", session)
            return
        }
        block.commands.append((command, arguments.map { ArraySlice(Array($0)) }))
        block.argumentBytes += bytes
        session.writer.simpleString("QUEUED")
    }

    /// Answers `message` for a refused command, and marks the open block (if any) aborted.
    func refuseInBlock(_ message: String, _ session: RESPSession) {
        abortBlock(session)
        session.writer.error(message)
    }

    /// Marks the open block (if any) aborted and lets go of what it kept: EXEC will answer
    /// `EXECABORT` and run none of it, so its arguments need not stay in memory.
    func abortBlock(_ session: RESPSession) {
        guard let block = session.block else { return }
        block.aborted = true
        block.commands = []
        block.argumentBytes = 0
    }

    /// EXEC: runs the block as one decision (off the loop when the node waits for the disk).
    func exec(_ session: RESPSession, server: UVStreamServer) {
        guard let block = session.block else {
            session.writer.error("ERR EXEC without MULTI")
            return
        }
        session.block = nil
        guard !block.aborted else {
            session.writer.error("EXECABORT Transaction discarded because of previous errors.")
            return
        }
        let decision = BlockDecision(steps: block.commands.map { prepareStep($0.command, $0.arguments, protocolVersion: session.protocolVersion) },
                                     protocolVersion: session.protocolVersion, maxReplyBytes: configuration.maxReplyBytes)
        guard node.acknowledgesAfterDisk && decision.writes else {
            run(decision, into: &session.writer)
            return
        }
        let answer = answerLater(session, server: server)
        DispatchQueue.global().async { [self] in
            answer { writer in run(decision, into: &writer) }
        }
    }

    /// Commits `decision` and writes EXEC's reply.
    private func run(_ decision: BlockDecision, into writer: inout RESPWriter) {
        guard commit(decision, "EXEC", into: &writer) else { return }
        writer.bytes += decision.outcome.reply
    }

    /// A queued command made ready to run: its error when its arguments are wrong.
    private func prepareStep(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], protocolVersion: Int) -> BlockDecision.Step {
        var writer = RESPWriter(protocolVersion: protocolVersion)
        switch command {
        case .ping:
            if arguments.count > 1 { writer.bulk(arguments[1]) } else { writer.simpleString("PONG") }
            return .reply(writer.bytes)
        case .echo:
            writer.bulk(arguments[1])
            return .reply(writer.bytes)
        case .get, .type, .ttl, .pttl, .expiretime, .pexpiretime:
            guard let key = key(arguments[1], into: &writer) else { return .reply(writer.bytes) }
            return .read { access, writer in
                let held = access.entry(key)
                let kind = held?.value == nil ? access.kind(key) : nil
                switch command {
                case .get: if kind != nil { writer.error(KeySetChange.wrongType) } else { ValueMapping.reply(held?.value, into: &writer) }
                case .type: writer.simpleString(kind?.typeName ?? Self.typeName(holding: held?.value))
                default:
                    Self.replyLifetime(command, expiringAt: kind != nil ? .some(KeyLifetime.instant(access, key)) : held.flatMap { $0.value == nil ? nil : .some($0.expiresAtMilliseconds) },
                                       now: access.nowMilliseconds, into: &writer)
                }
            }
        case _ where CollectionRead.reads(command):
            guard let read = prepareCollectionRead(command, arguments, into: &writer) else { return .reply(writer.bytes) }
            return .read { access, writer in
                guard !KeyKind.holdsOther(than: read.kind, access, read.key) else { return writer.error(KeySetChange.wrongType) }
                read.run(access.read, { access.value($0) }, &writer)
            }
        case .mget, .exists:
            guard let keys = stateKeys(arguments.dropFirst(), into: &writer) else { return .reply(writer.bytes) }
            let maxReplyBytes = configuration.maxReplyBytes
            return .read { access, writer in
                let values = keys.map { access.value($0) }
                if command == .exists {
                    writer.integer(zip(keys, values).reduce(0) { $0 + ($1.1 != nil || access.kind($1.0) != nil ? 1 : 0) })
                } else {
                    Self.replyValues(values, maxReplyBytes: maxReplyBytes, into: &writer)
                }
            }
        default:
            guard let prepared = prepareWrite(command, arguments, into: &writer) else { return .reply(writer.bytes) }
            let repliesValue = command == .getset || command == .getdel
                || (command == .set && arguments.dropFirst(3).contains { Self.matches($0, "GET") })
            return .write(prepared, repliesValue: repliesValue)
        }
    }
}

/// The commands received between MULTI and EXEC, kept on their session (a class: queuing
/// appends in place, and the request loop's test for an open block is a pointer's).
final class QueuedBlock {
    /// Each command with its arguments (copied: the parser's buffer moves on).
    var commands: [(command: RESPCommand, arguments: [ArraySlice<UInt8>])] = []
    /// The bytes of every argument kept, each with `queuedArgumentOverheadBytes`, against
    /// `RESPLimits.maxRequestBytes`.
    var argumentBytes = 0
    /// A command was refused while queuing: EXEC answers EXECABORT.
    var aborted = false
}

/// A MULTI block as one decision: each step runs in order through one tracking `KeyAccess`
/// (so it sees the writes of the steps before it) and appends its reply to EXEC's.
struct BlockDecision: Decision {
    enum Step: Sendable {
        /// A reply known before running: an error in the command's arguments, PING, ECHO.
        case reply([UInt8])
        /// A read: answers from the access.
        case read(@Sendable (KeyAccess, inout RESPWriter) -> Void)
        /// A write, and whether its reply may carry a stored value (GETSET, GETDEL, SET GET).
        case write(PreparedWrite, repliesValue: Bool)
    }

    /// What the decision answered; read after `decide` returns, on the same thread.
    final class Outcome: @unchecked Sendable {
        /// EXEC's reply: the array of every step's reply.
        var reply: [UInt8] = []
    }

    let steps: [Step]
    let protocolVersion: Int
    let maxReplyBytes: Int
    let outcome = Outcome()

    /// Whether any step writes (then, under strict durability, EXEC answers off the loop).
    var writes: Bool {
        steps.contains { if case .write = $0 { return true } else { return false } }
    }

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        var access = KeyAccess(read: read, write: write, tracking: true)
        var writer = RESPWriter(protocolVersion: protocolVersion)
        writer.arrayHeader(steps.count)
        for step in steps {
            let full = writer.bytes.count > maxReplyBytes
            switch step {
            case .reply(let bytes):
                writer.bytes += bytes
            case .read(let answer):
                if full { writer.error(Self.fullReply(maxReplyBytes)) } else { answer(access, &writer) }
            case .write(let prepared, let repliesValue):
                prepared.apply(&access)
                if full && repliesValue { writer.error(Self.fullReply(maxReplyBytes)) } else { prepared.reply(&writer) }
            }
        }
        outcome.reply = writer.bytes
        return .none
    }

    static func fullReply(_ maxReplyBytes: Int) -> String {
        "ERR EXEC's reply passed maxReplyBytes \(maxReplyBytes) before this command's: read fewer keys in one transaction (writes were made)"
    }
}
