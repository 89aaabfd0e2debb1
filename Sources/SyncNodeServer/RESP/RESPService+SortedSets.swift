import Decide
import DecideCore
import DecideRESP

/// The sorted set commands: ZADD, ZREM (writes, `KeySortedSetChange`), ZSCORE, ZMSCORE, ZCARD,
/// ZCOUNT, ZRANK, ZREVRANK, ZRANGE (by rank or BYSCORE, REV, LIMIT, WITHSCORES),
/// ZRANGEBYSCORE, ZREVRANGE and ZREVRANGEBYSCORE (reads, `CollectionRead`), on the
/// `SortedSetState` a plain key names, with Redis's replies in RESP2 and RESP3 and members in
/// Redis's order: by score, then by their bytes (docs/operations.md, "Sorted sets").
extension RESPService {
    /// ZADD key [NX | XX] [GT | LT] [CH] score member [score member …] (the members added, or
    /// with CH changed, judged on this node), ZREM key member … (the members removed).
    func prepareSortedSetChange(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        guard let key = plainKey(command, arguments[1], kind: "a sorted set", into: &writer) else { return nil }
        var writes: [(member: [UInt8], score: Double?)] = []
        var presence = KeySortedSetChange.Presence.any, direction = KeySortedSetChange.Direction.any, countsUpdates = false
        if command == .zrem {
            for argument in arguments.dropFirst(2) {
                guard let member = sortedSetMember(argument, into: &writer) else { return nil }
                writes.append((member, nil))
            }
        } else {
            var index = 2
            var nx = false, xx = false, gt = false, lt = false
            while index < arguments.count {
                let option = arguments[index]
                if Self.matches(option, "NX") { nx = true } else if Self.matches(option, "XX") { xx = true }
                else if Self.matches(option, "GT") { gt = true } else if Self.matches(option, "LT") { lt = true }
                else if Self.matches(option, "CH") { countsUpdates = true }
                else if Self.matches(option, "INCR") {
                    writer.error("ERR ZADD INCR is refused: \(RESPCommand.refused["zincrby"]!)")
                    return nil
                } else { break }
                index += 1
            }
            if nx && xx {
                writer.error("ERR XX and NX options at the same time are not compatible")
                return nil
            }
            if (gt && lt) || (nx && (gt || lt)) {
                writer.error("ERR GT, LT, and/or NX options at the same time are not compatible")
                return nil
            }
            guard index < arguments.count, (arguments.count - index) % 2 == 0 else {
                writer.error("ERR syntax error")
                return nil
            }
            presence = nx ? .absent : xx ? .present : .any
            direction = gt ? .greater : lt ? .less : .any
            while index < arguments.count {
                guard let score = memberScore(arguments[index], into: &writer),
                      let member = sortedSetMember(arguments[index + 1], into: &writer) else { return nil }
                writes.append((member, score))
                index += 2
            }
        }
        let change = KeySortedSetChange(key: key, writes: writes, presence: presence, direction: direction, countsUpdates: countsUpdates)
        let outcome = change.outcome
        return PreparedWrite(command: command, apply: change.apply) { writer in
            if let error = outcome.error { writer.error(error) } else { writer.integer(outcome.changed) }
        }
    }

    /// A read of a sorted set made ready to run, or nil (with the error written) when its
    /// arguments are wrong.
    func prepareSortedSetRead(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> CollectionRead? {
        guard let key = plainKey(command, arguments[1], kind: "a sorted set", into: &writer) else { return nil }
        let name = key.name
        switch command {
        case .zscore, .zmscore:
            var probes: [[UInt8]] = []
            for argument in arguments.dropFirst(2) {
                guard let member = sortedSetMember(argument, into: &writer) else { return nil }
                probes.append(member)
            }
            let single = command == .zscore, asked = probes
            return CollectionRead(key: key, kind: .sortedSet) { read, _, writer in
                if !single { writer.arrayHeader(asked.count) }
                for probe in asked {
                    if let score = read.score(of: probe, inSortedSetNamed: name) { writer.double(score) } else { writer.null() }
                }
            }
        case .zcard:
            return CollectionRead(key: key, kind: .sortedSet) { read, _, writer in
                writer.integer(read.hasScoredMembers(ofSortedSetNamed: name) ? read.scoredMembers(ofSortedSetNamed: name).count : 0)
            }
        case .zcount:
            guard let range = scoreRange(arguments[2], arguments[3], into: &writer) else { return nil }
            return CollectionRead(key: key, kind: .sortedSet) { read, _, writer in
                writer.integer(Self.ordered(read, name).reduce(0) { $0 + (range.contains($1.score) ? 1 : 0) })
            }
        case .zrank, .zrevrank:
            guard arguments.count <= 4, let member = sortedSetMember(arguments[2], into: &writer) else {
                if arguments.count > 4 { writer.error("ERR syntax error") }
                return nil
            }
            var withScore = false
            if arguments.count == 4 {
                guard Self.matches(arguments[3], "WITHSCORE") else {
                    writer.error("ERR syntax error")
                    return nil
                }
                withScore = true
            }
            let reverse = command == .zrevrank, scored = withScore
            return CollectionRead(key: key, kind: .sortedSet) { read, _, writer in
                guard let score = read.score(of: member, inSortedSetNamed: name) else { return scored ? writer.nullArray() : writer.null() }
                let members = Self.ordered(read, name)
                let raw = Self.rawMember(member)
                let rank = members.firstIndex { $0.score == score && $0.member == raw } ?? 0
                let placed = reverse ? members.count - 1 - rank : rank
                if scored {
                    writer.arrayHeader(2)
                    writer.integer(placed)
                    writer.double(score)
                } else {
                    writer.integer(placed)
                }
            }
        default:
            guard let query = rangeQuery(command, arguments, into: &writer) else { return nil }
            let maxReplyBytes = configuration.maxReplyBytes
            return CollectionRead(key: key, kind: .sortedSet) { read, _, writer in
                let chosen = query.select(Self.ordered(read, name))
                let replyBytes = chosen.reduce(0) { $0 + 16 + $1.member.count + (query.withScores ? 40 : 0) }
                guard replyBytes <= maxReplyBytes else {
                    return writer.error("ERR \(command.name.uppercased()) would reply about \(replyBytes) bytes, more than maxReplyBytes \(maxReplyBytes): ask for a narrower range or use LIMIT")
                }
                let pairs = query.withScores && writer.protocolVersion == 3
                writer.arrayHeader(query.withScores && !pairs ? chosen.count * 2 : chosen.count)
                for item in chosen {
                    if pairs { writer.arrayHeader(2) }
                    writer.bulk(item.member)
                    if query.withScores { writer.double(item.score) }
                }
            }
        }
    }

    /// The members of the sorted set named `name` as Redis orders them: by score, then by their
    /// bytes (the client's strings, not their JSON). O(n log n).
    private static func ordered(_ read: StorageReader, _ name: String) -> [(member: [UInt8], score: Double)] {
        guard read.hasScoredMembers(ofSortedSetNamed: name) else { return [] }
        return read.scoredMembers(ofSortedSetNamed: name)
            .map { (rawMember($0.member), $0.score) }
            .sorted { $0.score != $1.score ? $0.score < $1.score : $0.member.lexicographicallyPrecedes($1.member) }
    }

    /// The client's bytes of a stored member (a JSON string).
    private static func rawMember(_ stored: [UInt8]) -> [UInt8] {
        stored.withUnsafeBytes { raw in ValueMapping.withResp(raw) { Array($0) } }
    }

    /// A member as stored (a JSON string of its text), or nil (with the error written) when it
    /// is not UTF-8.
    private func sortedSetMember(_ argument: ArraySlice<UInt8>, into writer: inout RESPWriter) -> [UInt8]? {
        storedText(argument, refusal: "ERR sorted set member is not valid UTF-8: Decide stores members as JSON strings, which hold text only", into: &writer)
    }

    /// A member's score as ZADD gives it, or nil (with the error written): not a number, or
    /// infinite (a score is stored as a JSON number, which cannot be).
    private func memberScore(_ argument: ArraySlice<UInt8>, into writer: inout RESPWriter) -> Double? {
        guard let score = Self.double(argument) else {
            writer.error("ERR value is not a valid float")
            return nil
        }
        guard score.isFinite else {
            writer.error("ERR a score here is stored as a JSON number, which cannot be infinite: give a finite score (1e308 is the largest)")
            return nil
        }
        return score
    }

    /// The double `bytes` spell as Redis reads one (`inf`, `+inf`, `-inf` in any case, decimal
    /// or scientific text), nil for anything else, NaN included.
    static func double(_ bytes: ArraySlice<UInt8>) -> Double? {
        guard !bytes.isEmpty, bytes.count <= 64 else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        switch text.lowercased() {
        case "inf", "+inf", "infinity", "+infinity": return .infinity
        case "-inf", "-infinity": return -.infinity
        default: break
        }
        guard let first = bytes.first, first != UInt8(ascii: " "), bytes.last != UInt8(ascii: " "),
              let value = Double(text), !value.isNaN, !value.isInfinite else { return nil }
        return value
    }

    /// A range of scores, each end inclusive or exclusive (`(1.5`).
    struct ScoreRange: Sendable {
        var min: Double, minExclusive: Bool
        var max: Double, maxExclusive: Bool

        func contains(_ score: Double) -> Bool {
            (minExclusive ? score > min : score >= min) && (maxExclusive ? score < max : score <= max)
        }
    }

    /// The score range `min` to `max` spell, or nil (with Redis's error written).
    private func scoreRange(_ min: ArraySlice<UInt8>, _ max: ArraySlice<UInt8>, into writer: inout RESPWriter) -> ScoreRange? {
        func bound(_ bytes: ArraySlice<UInt8>) -> (Double, Bool)? {
            let exclusive = bytes.first == UInt8(ascii: "(")
            return Self.double(exclusive ? bytes.dropFirst() : bytes).map { ($0, exclusive) }
        }
        guard let low = bound(min), let high = bound(max) else {
            writer.error("ERR min or max is not a float")
            return nil
        }
        return ScoreRange(min: low.0, minExclusive: low.1, max: high.0, maxExclusive: high.1)
    }

    /// What ZRANGE and its older forms select: ranks or scores, in which direction, what part,
    /// and whether scores are replied.
    struct RangeQuery: Sendable {
        enum Span: Sendable { case ranks(Int, Int), scores(ScoreRange) }
        var span: Span
        var reverse = false
        var limit: (offset: Int, count: Int)?
        var withScores = false

        /// The members chosen from `members` (in ascending order).
        func select(_ members: [(member: [UInt8], score: Double)]) -> ArraySlice<(member: [UInt8], score: Double)> {
            let ordered = reverse ? Array(members.reversed()) : members
            switch span {
            case .ranks(var start, var stop):
                let count = ordered.count
                if start < 0 { start += count }
                if stop < 0 { stop += count }
                start = Swift.max(start, 0)
                stop = Swift.min(stop, count - 1)
                guard start <= stop, start < count else { return [] }
                return ordered[start...stop]
            case .scores(let range):
                var chosen = ordered.filter { range.contains($0.score) }[...]
                if let limit {
                    guard limit.offset >= 0, limit.offset < chosen.count else { return [] }
                    chosen = chosen.dropFirst(limit.offset)
                    if limit.count >= 0 { chosen = chosen.prefix(limit.count) }
                }
                return chosen
            }
        }
    }

    /// The range ZRANGE, ZRANGEBYSCORE, ZREVRANGE or ZREVRANGEBYSCORE asks for, or nil (with
    /// the error written).
    private func rangeQuery(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> RangeQuery? {
        var byScore = command == .zrangebyscore || command == .zrevrangebyscore
        var reverse = command == .zrevrange || command == .zrevrangebyscore
        var withScores = false
        var limit: (offset: Int, count: Int)?
        var index = 4
        while index < arguments.count {
            let option = arguments[index]
            if Self.matches(option, "WITHSCORES") {
                withScores = true
            } else if command == .zrange && Self.matches(option, "BYSCORE") {
                byScore = true
            } else if command == .zrange && Self.matches(option, "REV") {
                reverse = true
            } else if command == .zrange && Self.matches(option, "BYLEX") {
                writer.error("ERR ZRANGE BYLEX is not built yet: members here are ordered by score, then by their bytes; read a score range (BYSCORE) or ranks")
                return nil
            } else if command != .zrevrange && Self.matches(option, "LIMIT") {
                guard index + 2 < arguments.count, let offset = Self.integer(arguments[index + 1]), let count = Self.integer(arguments[index + 2]) else {
                    writer.error(index + 2 < arguments.count ? "ERR value is not an integer or out of range" : "ERR syntax error")
                    return nil
                }
                limit = (offset, count)
                index += 2
            } else {
                writer.error("ERR syntax error")
                return nil
            }
            index += 1
        }
        if limit != nil && !byScore {
            writer.error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
            return nil
        }
        let span: RangeQuery.Span
        if byScore {
            // Reversed, the first bound is the maximum.
            let (low, high) = reverse ? (arguments[3], arguments[2]) : (arguments[2], arguments[3])
            guard let range = scoreRange(low, high, into: &writer) else { return nil }
            span = .scores(range)
        } else {
            guard let start = Self.integer(arguments[2]), let stop = Self.integer(arguments[3]) else {
                writer.error("ERR value is not an integer or out of range")
                return nil
            }
            span = .ranks(start, stop)
        }
        return RangeQuery(span: span, reverse: reverse, limit: limit, withScores: withScores)
    }
}
