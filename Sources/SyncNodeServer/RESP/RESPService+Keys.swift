import Decide
import DecideCore
import DecideRESP

/// The keyspace commands: GET, SET (NX, XX, GET), SETNX, GETSET, GETDEL, MGET, MSET, DEL,
/// UNLINK, EXISTS, TYPE, SCAN, KEYS, DBSIZE, and DECIDE.PUT / DECIDE.DELETE. Values cross
/// through `ValueMapping`; keys are NAME or NAME[ID] (`KeySyntax`).
extension RESPService {
    func get(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        let stored: PackedBytes?
        var key: StateKey?
        if Self.isPlainName(arguments[1]) {
            // A Redis-style key (an atomic state's name): looked up by its bytes, no StateKey.
            let plain = arguments[1].withUnsafeBytes { node.value(ofAtomicNamed: $0) } ?? nil
            // No value of its own (never written, or a tombstone): a counter of that name may hold one.
            stored = plain ?? (node.compoundPresence.exists
                ? node.read { KeyCounterChange.heldTotal($0, name: String(decoding: arguments[1], as: UTF8.self)) } : nil)
        } else {
            guard let parsed = self.key(arguments[1], into: &writer) else { return }
            key = parsed
            stored = node.read { KeyCounterChange.value($0, parsed) }
        }
        // Nothing to read: a set, hash or sorted set of that name answers WRONGTYPE.
        if stored == nil {
            let named = key ?? StateKey(name: String(decoding: arguments[1], as: UTF8.self))
            if named.elementCount == 0, node.read({ KeyKind.of($0, named) != nil }) {
                return writer.error(KeySetChange.wrongType)
            }
        }
        // Written into the reply from where the value is held: no array between.
        ValueMapping.reply(stored, into: &writer)
    }

    /// Whether `bytes` is a KEY that `KeySyntax` reads as `StateKey(name:)` of the same bytes:
    /// non-empty ASCII without `[` or `]` (so also valid UTF-8).
    static func isPlainName(_ bytes: some Collection<UInt8>) -> Bool {
        guard !bytes.isEmpty else { return false }
        for byte in bytes where byte >= 0x80 || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]") { return false }
        return true
    }

    func mget(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let keys = stateKeys(arguments.dropFirst(), into: &writer) else { return }
        // The keys' table lines are fetched together, not one miss per key (`prefetchGets`).
        node.prefetchValues(stableHashes: keys.map(\.stableHash))
        let values = node.read { read in keys.map { KeyCounterChange.value(read, $0) } }
        Self.replyValues(values, maxReplyBytes: configuration.maxReplyBytes, into: &writer)
    }

    /// MGET's reply for `values`, in order, or its refusal when it would pass `maxReplyBytes`.
    static func replyValues(_ values: [PackedBytes?], maxReplyBytes: Int, into writer: inout RESPWriter) {
        let replyBytes = values.reduce(0) { $0 + 16 + ($1?.count ?? 0) }
        guard replyBytes <= maxReplyBytes else {
            writer.error("ERR MGET would reply \(replyBytes) bytes, more than maxReplyBytes \(maxReplyBytes): ask for fewer keys")
            return
        }
        writer.arrayHeader(values.count)
        for value in values {
            ValueMapping.reply(value, into: &writer)
        }
    }

    /// The keys named by `arguments`, in order; nil (with the error written) at the first that
    /// is not a valid key.
    func stateKeys(_ arguments: ArraySlice<ArraySlice<UInt8>>, into writer: inout RESPWriter) -> [StateKey]? {
        var keys: [StateKey] = []
        keys.reserveCapacity(arguments.count)
        for argument in arguments {
            guard let key = key(argument, into: &writer) else { return nil }
            keys.append(key)
        }
        return keys
    }

    func exists(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let keys = stateKeys(arguments.dropFirst(), into: &writer) else { return }
        writer.integer(node.read { read in
            keys.reduce(0) { $0 + (KeyCounterChange.value(read, $1) != nil || KeyKind.of(read, $1) != nil ? 1 : 0) }
        })
    }

    func type(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let key = key(arguments[1], into: &writer) else { return }
        writer.simpleString(node.read { read in
            let value = KeyCounterChange.value(read, key)
            guard value == nil else { return Self.typeName(holding: value) }
            return KeyKind.of(read, key)?.typeName ?? "none"
        })
    }

    /// TYPE's answer for a key holding `value` (nil: none).
    static func typeName(holding value: PackedBytes?) -> String {
        value == nil ? "none" : "string"
    }

    func dbsize(into writer: inout RESPWriter) {
        let summary = node.stateSummary
        writer.integer(summary.liveCount)
    }

    /// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: the cursor walks the digest's leaves,
    /// so a key held throughout a full walk is returned exactly once.
    func scan(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let cursor = Self.integer(arguments[1]), cursor >= 0, cursor < node.scanCursorLimit else {
            writer.error("ERR invalid cursor")
            return
        }
        var pattern: ArraySlice<UInt8>?
        var count = 10
        var type: String?
        var index = 2
        while index < arguments.count {
            guard index + 1 < arguments.count else {
                writer.error("ERR syntax error")
                return
            }
            let value = arguments[index + 1]
            if Self.matches(arguments[index], "MATCH") {
                pattern = value
            } else if Self.matches(arguments[index], "COUNT") {
                guard let number = Self.integer(value) else {
                    writer.error("ERR value is not an integer or out of range")
                    return
                }
                guard number >= 1 else {
                    writer.error("ERR syntax error")
                    return
                }
                count = min(number, 100_000)
            } else if Self.matches(arguments[index], "TYPE") {
                type = String(decoding: value, as: UTF8.self).lowercased()
            } else {
                writer.error("ERR syntax error")
                return
            }
            index += 2
        }
        // The reply stays under maxReplyBytes: COUNT is capped so a page of short keys fits
        // (25 bytes each, as estimated below), and a page of longer keys is read again shorter
        // (pages are whole digest leaves, so the walk still returns every key once).
        count = min(count, max(1, configuration.maxReplyBytes / 25))
        var page = node.scanKeys(cursor: cursor, minimumKeys: count, maximumBuckets: max(16_384, count * 64))
        while count > 1 {
            let replyBytes = page.keys.reduce(32) { $0 + $1.name.utf8.count + $1.elementCount + 24 }
            guard replyBytes > configuration.maxReplyBytes else { break }
            count = max(1, min(count / 2, page.keys.count * configuration.maxReplyBytes / replyBytes))
            page = node.scanKeys(cursor: cursor, minimumKeys: count, maximumBuckets: max(16_384, count * 64))
        }
        var names: [[UInt8]] = []
        var seen = Set<[UInt8]>()
        for key in page.keys where !CollectionLifetime.isMarker(key) {
            if let type, type != Self.typeName(of: key) { continue }
            let name = Self.redisName(of: key)
            if let pattern, !RESPGlob.matches(pattern, name) { continue }
            // A counter's slots or a set's dots are one Redis key (and a plain value of its name too).
            if CompoundPresence.isCompound(key) || key.elementCount == 0 { guard seen.insert(name).inserted else { continue } }
            names.append(name)
        }
        writer.arrayHeader(2)
        writer.bulk(String(page.next))
        writer.arrayHeader(names.count)
        for name in names { writer.bulk(name) }
    }

    /// KEYS pattern: every key holding a value whose name matches, read page by page (the node
    /// is not held for the whole walk); refused when the reply would pass `maxReplyBytes`.
    func keys(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        let pattern = arguments[1]
        var names: [[UInt8]] = []
        var counters = Set<[UInt8]>()
        var replyBytes = 0
        var cursor = 0
        repeat {
            let page = node.scanKeys(cursor: cursor, minimumKeys: 10_000, maximumBuckets: 4096)
            for key in page.keys where !CollectionLifetime.isMarker(key) {
                let name = Self.redisName(of: key)
                guard RESPGlob.matches(pattern, name) else { continue }
                if CompoundPresence.isCompound(key) || key.elementCount == 0 { guard counters.insert(name).inserted else { continue } }
                replyBytes += name.count + 16
                guard replyBytes <= configuration.maxReplyBytes else {
                    writer.error("ERR KEYS would reply more than maxReplyBytes \(configuration.maxReplyBytes) bytes: use SCAN")
                    return
                }
                names.append(name)
            }
            cursor = page.next
        } while cursor != 0
        writer.arrayHeader(names.count)
        for name in names { writer.bulk(name) }
    }

    /// The Redis key `key` is part of: its name for a counter's slot or a set's dot, else NAME
    /// or NAME[ID].
    static func redisName(of key: StateKey) -> [UInt8] {
        CompoundPresence.isCompound(key) ? Array(key.name.utf8) : Array(key.description.utf8)
    }

    /// The Redis type of the key that live stored key `key` is part of (SCAN's TYPE).
    static func typeName(of key: StateKey) -> String {
        if SetDot.member(of: key) != nil { return "set" }
        if SortedSetMember.member(of: key) != nil { return "zset" }
        return CounterSlot.field(of: key) != nil ? "hash" : "string"
    }

    // MARK: writes

    /// Every write command; runs on the loop, or off it when the node waits for the disk (so
    /// it touches no session state).
    func write(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        if command == .decidePut || command == .decideDelete {
            decideWrite(command, arguments, into: &writer)
            return
        }
        guard let prepared = prepareWrite(command, arguments, into: &writer) else { return }
        if let plain = prepared.plainSet {
            guard commit(RawWrite(key: plain.key, value: plain.value, replacesOtherKinds: true), "SET", into: &writer) else { return }
        } else {
            guard commit(prepared, prepared.command.name.uppercased(), into: &writer) else { return }
        }
        prepared.reply(&writer)
    }

    /// A keyspace write command read from its arguments, not yet run: nil (with the error
    /// written) when they are wrong. Every write command of the keyspace but DECIDE.PUT and
    /// DECIDE.DELETE; alone it is one decision (`write`), between MULTI and EXEC one step of
    /// the block's decision (`exec`).
    func prepareWrite(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        switch command {
        case .set: return prepareSet(arguments, into: &writer)
        case .setnx:
            guard let key = key(arguments[1], into: &writer), let value = storedValue(arguments[2], into: &writer) else { return nil }
            let decision = KeyWrites(writes: [(key, value)], condition: .ifAbsent)
            return PreparedWrite(command: command, apply: decision.apply) { $0.integer(decision.outcome.wrote ? 1 : 0) }
        case .getset:
            guard let key = key(arguments[1], into: &writer), let value = storedValue(arguments[2], into: &writer) else { return nil }
            let decision = KeyWrites(writes: [(key, value)])
            return PreparedWrite(command: command, apply: decision.apply) { ValueMapping.reply(decision.outcome.previous[0], into: &$0) }
        case .getdel:
            guard let key = key(arguments[1], into: &writer) else { return nil }
            let decision = KeyWrites(writes: [(key, nil)], deleteOnlyLive: true)
            return PreparedWrite(command: command, apply: decision.apply) { ValueMapping.reply(decision.outcome.previous[0], into: &$0) }
        case .mset:
            guard arguments.count % 2 == 1 else {
                writer.error("ERR wrong number of arguments for 'mset' command")
                return nil
            }
            var writes: [(StateKey, PackedBytes?)] = []
            writes.reserveCapacity(arguments.count / 2)
            var index = 1
            while index < arguments.count {
                guard let key = key(arguments[index], into: &writer),
                      let value = storedValue(arguments[index + 1], into: &writer) else { return nil }
                writes.append((key, value))
                index += 2
            }
            let decision = KeyWrites(writes: writes)
            return PreparedWrite(command: command, apply: decision.apply) { $0.simpleString("OK") }
        case .del, .unlink:
            guard let keys = stateKeys(arguments.dropFirst(), into: &writer) else { return nil }
            let decision = KeyWrites(writes: keys.map { ($0, nil) }, deleteOnlyLive: true)
            return PreparedWrite(command: command, apply: decision.apply) { $0.integer(decision.outcome.deleted) }
        case .expire, .pexpire, .expireat, .pexpireat, .persist:
            return prepareExpire(command, arguments, into: &writer)
        case .setex, .psetex:
            return prepareSetex(command, arguments, into: &writer)
        case .incr, .decr, .incrby, .decrby:
            return prepareCounterChange(command, arguments, into: &writer)
        case .sadd, .srem:
            return prepareSetChange(command, arguments, into: &writer)
        case .hset, .hmset, .hsetnx, .hdel:
            return prepareHashChange(command, arguments, into: &writer)
        case .hincrby:
            return prepareHashCounterChange(arguments, into: &writer)
        case .zadd, .zrem:
            return prepareSortedSetChange(command, arguments, into: &writer)
        default:
            preconditionFailure("\(command) is not a keyspace write")
        }
    }

    /// SET key value [NX | XX] [GET] [EX seconds | PX milliseconds | EXAT unix-seconds |
    /// PXAT unix-milliseconds | KEEPTTL] [OWNED] (OWNED is Decide's: the value belongs to this
    /// node, docs/consistency.md "Node-owned keys").
    private func prepareSet(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        var condition = KeyWrites.Condition.always
        var returnPrevious = false
        var expiry = KeyWrites.Expiry.never
        var owned = false
        var index = 3
        while index < arguments.count {
            let option = arguments[index]
            index += 1
            if Self.matches(option, "NX"), condition == .always {
                condition = .ifAbsent
            } else if Self.matches(option, "XX"), condition == .always {
                condition = .ifPresent
            } else if Self.matches(option, "GET"), !returnPrevious {
                returnPrevious = true
            } else if Self.matches(option, "KEEPTTL"), expiry == .never {
                expiry = .keep
            } else if Self.matches(option, "OWNED"), !owned {
                owned = true
            } else if expiry == .never, let unit = Self.setExpiryUnit(option) {
                guard index < arguments.count else {
                    writer.error("ERR syntax error")
                    return nil
                }
                guard let amount = Self.integer(arguments[index]) else {
                    writer.error("ERR value is not an integer or out of range")
                    return nil
                }
                index += 1
                guard let milliseconds = Self.lifetimeMilliseconds(amount, inSeconds: unit.seconds) else {
                    writer.error("ERR invalid expire time in 'set' command")
                    return nil
                }
                expiry = .given(unit.absolute ? .at(milliseconds: milliseconds) : .after(milliseconds: milliseconds))
            } else {
                writer.error("ERR syntax error")
                return nil
            }
        }
        guard let key = key(arguments[1], into: &writer), let value = storedValue(arguments[2], into: &writer) else { return nil }
        let decision = KeyWrites(writes: [(key, value)], condition: condition, expiry: expiry, owned: owned)
        let plain = condition == .always && !returnPrevious && expiry == .never && !owned
        let repliesPrevious = returnPrevious
        return PreparedWrite(command: .set, apply: decision.apply, plainSet: plain ? (key, value) : nil) { writer in
            if repliesPrevious {
                ValueMapping.reply(decision.outcome.previous[0], into: &writer)
            } else if plain || decision.outcome.wrote {
                writer.simpleString("OK")
            } else {
                writer.null()
            }
        }
    }

    /// SET's EX, PX, EXAT and PXAT: whether the amount is in seconds and is an instant.
    private static func setExpiryUnit(_ option: ArraySlice<UInt8>) -> (seconds: Bool, absolute: Bool)? {
        if matches(option, "EX") { return (true, false) }
        if matches(option, "PX") { return (false, false) }
        if matches(option, "EXAT") { return (true, true) }
        if matches(option, "PXAT") { return (false, true) }
        return nil
    }

    /// Runs `decision`; false (with the error written) when it was aborted.
    @discardableResult
    func commit(_ decision: some Decision, _ name: @autoclosure () -> String, into writer: inout RESPWriter) -> Bool {
        if case .aborted(let reason) = node.decide(decision) {
            writer.error("ERR \(name()) refused, nothing written: \(reason)")
            return false
        }
        return true
    }

    func storedValue(_ bytes: ArraySlice<UInt8>, into writer: inout RESPWriter) -> PackedBytes? {
        do {
            return try ValueMapping.stored(bytes)
        } catch {
            writer.error("ERR \(error)")
            return nil
        }
    }

    /// INCR key, DECR key, INCRBY key n, DECRBY key n: the counter named by a plain key
    /// (`KeyCounterChange`), answered with its total after the change.
    private func prepareCounterChange(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        guard let key = key(arguments[1], into: &writer) else { return nil }
        guard key.elementCount == 0 else {
            writer.error("ERR \(command.name.uppercased()) needs a plain key: \(key) names an element of a collection, and a counter is a key of its own")
            return nil
        }
        var amount: Int64 = 1
        if command == .incrby || command == .decrby {
            guard let given = Self.integer(arguments[2]).flatMap({ Int64(exactly: $0) }) else {
                writer.error(KeyCounterChange.notAnInteger)
                return nil
            }
            amount = given
        }
        if command == .decr || command == .decrby {
            guard amount != .min else {
                writer.error("ERR decrement would overflow")
                return nil
            }
            amount = -amount
        }
        let change = KeyCounterChange(key: key, amount: amount)
        return PreparedWrite(command: command, apply: change.apply) { writer in
            if let error = change.outcome.error { writer.error(error) } else { writer.integer(Int(change.outcome.total)) }
        }
    }
}
