import Decide
import DecideCore
import DecideRESP
import DecideUV
import Dispatch

/// The node's change feed over the Redis protocol (docs/operations.md, "The change feed"):
///
/// - `DECIDE.CHANGES AFTER [FEED ID] [COUNT N] [BLOCK MS] [PREFIX P]` answers an array: a JSON
///   header `{"feed":F,"end":E,"oldest":O,"newest":N}`, then one JSON line per change after
///   position AFTER (`-`: before the oldest retained; `$`: the newest), oldest first, at most N
///   (default 100, at most 10,000), each with the writes of keys whose text starts with P. A
///   reader goes on from E, which also moves past changes the prefix left out. With BLOCK and
///   nothing to answer, the client waits up to MS (0: a day) for a change, as XREAD BLOCK does.
///   A position the retention dropped, one past the newest, or a FEED that is not this node's
///   gets an error saying so (`-OUTOFRETENTION`, `-AHEAD`, `-OTHERFEED`), never a silent skip.
/// - `DECIDE.SNAPSHOT [PREFIX P]` answers an array: `{"feed":F,"position":E}`, then one JSON
///   line per key that reads as present, sorted by key: a reader that applies them, then the
///   changes after E, holds exactly what the node holds.
extension RESPService {
    static let defaultFeedCount = 100
    static let maxFeedCount = 10_000

    /// What a DECIDE.CHANGES asks.
    struct FeedRequest: Sendable {
        /// nil: `$`, the newest at the time of asking.
        var after: FeedPosition?
        var fromOldest = false
        var feed: ChangeFeedID?
        var count = RESPService.defaultFeedCount
        var blockMilliseconds: UInt64?
        var prefix: [UInt8] = []
    }

    func decideChanges(_ arguments: [ArraySlice<UInt8>], session: RESPSession, server: UVStreamServer) {
        guard var request = parseFeedRequest(arguments, into: &session.writer) else { return }
        if request.fromOldest || request.after == nil {
            guard let bounds = node.changeFeedBounds else {
                session.writer.error("ERR \(ChangeFeedError.disabled)")
                return
            }
            request.after = request.fromOldest ? FeedPosition(rawValue: bounds.oldest.rawValue - 1) : bounds.newest
            if request.feed == nil { request.feed = bounds.feed }
        }
        let outcome = answerChanges(request, into: &session.writer, answerEmpty: request.blockMilliseconds == nil)
        guard !outcome.answered, let block = request.blockMilliseconds else { return }
        request.after = outcome.end
        FeedBlock(service: self, session: session, server: server, request: request,
                  milliseconds: block == 0 ? Self.maxWaitMilliseconds : min(block, Self.maxWaitMilliseconds)).start()
    }

    /// Writes the reply to `request` (answered), unless there is no change to give and
    /// `answerEmpty` is false: then nothing is written, and `end` is where a blocked read goes
    /// on waiting from (past the changes the prefix left out).
    @discardableResult
    func answerChanges(_ request: FeedRequest, into writer: inout RESPWriter, answerEmpty: Bool) -> (answered: Bool, end: FeedPosition) {
        let read: (changes: [FeedChange], end: FeedPosition)
        do throws(ChangeFeedError) {
            read = try node.readChanges(after: request.after!, feed: request.feed, maxChanges: request.count)
        } catch {
            writer.error(Self.feedErrorReply(error))
            return (true, request.after!)
        }
        var lines: [[UInt8]] = []
        for change in read.changes {
            let writes = request.prefix.isEmpty ? change.delta.writes
                : change.delta.writes.filter { Array($0.key.description.utf8).starts(with: request.prefix) }
            if writes.isEmpty { continue }
            lines.append(Self.changeJSON(change, writes: writes))
        }
        if lines.isEmpty && !answerEmpty { return (false, read.end) }
        let bounds = node.changeFeedBounds
        writer.arrayHeader(lines.count + 1)
        writer.bulk(ReplyJSON.object([
            ("feed", .string(bounds?.feed.description ?? "")),
            ("end", .number(String(read.end.rawValue))),
            ("oldest", .number(String(bounds?.oldest.rawValue ?? 0))),
            ("newest", .number(String(bounds?.newest.rawValue ?? 0))),
        ]))
        for line in lines { writer.bulk(line) }
        return (true, read.end)
    }

    /// The error a reader gets, with the word it can test for first.
    static func feedErrorReply(_ error: ChangeFeedError) -> String {
        switch error {
        case .outOfRetention: "OUTOFRETENTION \(error)"
        case .aheadOfFeed: "AHEAD \(error)"
        case .otherFeed: "OTHERFEED \(error)"
        case .disabled, .storeFailed: "ERR \(error)"
        }
    }

    /// One change as DECIDE.CHANGES and `syncnode watch` show it:
    /// `{"position":P,"origin":O,"version":V,"writes":[ENTRY…]}`, each write as a dump line.
    static func changeJSON(_ change: FeedChange, writes: [Delta.Write]) -> [UInt8] {
        ReplyJSON.object([
            ("position", .number(String(change.position.rawValue))),
            ("origin", .string(originName(change.origin))),
            ("version", ReplyJSON.version(change.delta.version)),
            ("writes", .array(writes.map { ReplyJSON.entry(key: $0.key, entry: $0.entry(at: change.delta.version)) })),
        ])
    }

    /// An origin's name in watch lines, notifications and the feed.
    static func originName(_ origin: CommittedDelta.Origin) -> String {
        switch origin {
        case .local: "local"
        case .remote: "remote"
        case .catchUp: "catch-up"
        case .expired: "expired"
        case .ownerGone: "owner-gone"
        case .ownerBack: "owner-back"
        }
    }

    private func parseFeedRequest(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> FeedRequest? {
        let usage = "ERR syntax error: DECIDE.CHANGES AFTER|-|$ [FEED ID] [COUNT N] [BLOCK MS] [PREFIX P]"
        var request = FeedRequest()
        let after = arguments[1]
        if Self.matches(after, "-") {
            request.fromOldest = true
        } else if Self.matches(after, "$") {
            request.after = nil
        } else if let position = Self.integer(after), position >= 0 {
            request.after = FeedPosition(rawValue: UInt64(position))
        } else {
            writer.error("ERR the position is not a whole number, - or $")
            return nil
        }
        var seen: Set<String> = []
        var index = 2
        while index < arguments.count {
            guard index + 1 < arguments.count else {
                writer.error(usage)
                return nil
            }
            let option = arguments[index], value = arguments[index + 1]
            index += 2
            let name = String(decoding: option, as: UTF8.self).uppercased()
            guard seen.insert(name).inserted else {
                writer.error(usage)
                return nil
            }
            switch name {
            case "FEED":
                guard let feed = ChangeFeedID(String(decoding: value, as: UTF8.self)) else {
                    writer.error("ERR the feed is 16 hex digits, as the header's \"feed\" gives it")
                    return nil
                }
                request.feed = feed
            case "COUNT":
                guard let count = Self.integer(value), (1...Self.maxFeedCount).contains(count) else {
                    writer.error("ERR COUNT must be 1 to \(Self.maxFeedCount)")
                    return nil
                }
                request.count = count
            case "BLOCK":
                guard let milliseconds = Self.integer(value), milliseconds >= 0 else {
                    writer.error("ERR timeout is not an integer or out of range")
                    return nil
                }
                request.blockMilliseconds = UInt64(milliseconds)
            case "PREFIX":
                request.prefix = Array(value)
            default:
                writer.error(usage)
                return nil
            }
        }
        return request
    }

    /// DECIDE.SNAPSHOT [PREFIX P]: the header, then the entries, written in chunks as DUMP's are.
    func startSnapshot(_ arguments: [ArraySlice<UInt8>], session: RESPSession) {
        var prefix: [UInt8] = []
        if arguments.count == 3, Self.matches(arguments[1], "PREFIX") {
            prefix = Array(arguments[2])
        } else if arguments.count != 1 {
            session.writer.error("ERR syntax error: DECIDE.SNAPSHOT [PREFIX P]")
            return
        }
        let snapshot: ChangeFeedSnapshot
        do throws(ChangeFeedError) {
            snapshot = try node.changeFeedSnapshot()
        } catch {
            session.writer.error(Self.feedErrorReply(error))
            return
        }
        let entries = prefix.isEmpty ? snapshot.entries : snapshot.entries.filter { Array($0.key.description.utf8).starts(with: prefix) }
        session.writer.arrayHeader(entries.count + 1)
        session.writer.bulk(ReplyJSON.object([
            ("feed", .string(snapshot.feed.description)),
            ("position", .number(String(snapshot.position.rawValue))),
        ]))
        session.dump = RESPSession.DumpCursor(entries: entries, now: node.nowMilliseconds)
        session.busy = true
    }
}

/// A DECIDE.CHANGES BLOCK waiting for a change (loop thread, but for the wake-up and the
/// timer, which only hop onto the loop). Answered once: by the first change that passes its
/// prefix, or empty at the deadline; a client that leaves meanwhile is closed, unanswered. Its
/// timer is cancelled once it is answered, so a client that blocks again and again holds one
/// timer at a time.
final class FeedBlock: @unchecked Sendable {
    private let service: RESPService
    private let session: RESPSession
    private let server: UVStreamServer
    private var request: RESPService.FeedRequest
    private let milliseconds: UInt64
    private var answer: (@Sendable (_ reply: (inout RESPWriter) -> Void) -> Void)?
    private var token: UInt64?
    private var timer: DispatchSourceTimer?
    private var done = false

    init(service: RESPService, session: RESPSession, server: UVStreamServer, request: RESPService.FeedRequest, milliseconds: UInt64) {
        self.service = service
        self.session = session
        self.server = server
        self.request = request
        self.milliseconds = milliseconds
    }

    func start() {
        answer = service.answerLater(session, server: server)
        session.blocksOnFeed = true
        session.feedBlock = self
        let bound = LoopBound(value: self)
        let server = self.server
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + .milliseconds(Int(milliseconds)))
        timer.setEventHandler { _ = server.execute { bound.value.timedOut() } }
        timer.resume()
        self.timer = timer
        waitAgain()
    }

    /// Reads again: answers if there is something, else waits for the next change.
    private func tryAgain() {
        guard !done else { return }
        if session.finished { return finish() }
        var writer = RESPWriter(protocolVersion: session.protocolVersion)
        let outcome = service.answerChanges(request, into: &writer, answerEmpty: service.node.changeFeedFinished)
        if outcome.answered { return reply(writer.bytes) }
        request.after = outcome.end
        waitAgain()
    }

    private func waitAgain() {
        let bound = LoopBound(value: self)
        let server = self.server
        token = service.node.waitForChange(after: request.after!) {
            _ = server.execute { bound.value.tryAgain() }
        }
        // A change came meanwhile, or the feed ended: read again (in a later turn).
        if token == nil { _ = server.execute { bound.value.tryAgain() } }
    }

    private func timedOut() {
        guard !done else { return }
        if let token { service.node.cancelChangeWait(token) }
        var writer = RESPWriter(protocolVersion: session.protocolVersion)
        service.answerChanges(request, into: &writer, answerEmpty: true)
        reply(writer.bytes)
    }

    private func reply(_ bytes: [UInt8]) {
        finish()
        answer?({ $0.bytes += bytes })
    }

    /// The client's connection closed: no answer, and nothing of it waits any longer.
    func abandon() {
        guard !done else { return }
        finish()
    }

    private func finish() {
        done = true
        session.blocksOnFeed = false
        session.feedBlock = nil
        timer?.cancel()
        timer = nil
        if let token { service.node.cancelChangeWait(token) }
        token = nil
    }
}
