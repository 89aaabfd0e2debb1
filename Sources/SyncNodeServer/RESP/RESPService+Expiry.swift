import Decide
import DecideCore
import DecideRESP

/// The expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (with NX, XX, GT, LT), PERSIST,
/// TTL, PTTL, EXPIRETIME, PEXPIRETIME, SETEX, PSETEX, and SET's EX / PX / EXAT / PXAT / KEEPTTL.
/// An expiry is part of the replicated entry: every replica removes the key at the same
/// hybrid-clock instant (docs/consistency.md, "Expiring keys").
extension RESPService {
    /// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX | XX | GT | LT], and PERSIST key.
    func prepareExpire(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        guard let key = key(arguments[1], into: &writer) else { return nil }
        if command == .persist {
            let decision = KeyExpiry(key: key, change: .persist, condition: .always)
            return PreparedWrite(command: .persist, apply: decision.apply) { decision.reply(into: &$0) }
        }
        guard let amount = Self.integer(arguments[2]) else {
            writer.error("ERR value is not an integer or out of range")
            return nil
        }
        var condition = KeyExpiry.Condition.always
        for option in arguments.dropFirst(3) {
            let next: KeyExpiry.Condition
            if Self.matches(option, "NX") { next = .ifNone }
            else if Self.matches(option, "XX") { next = .ifSome }
            else if Self.matches(option, "GT") { next = .ifGreater }
            else if Self.matches(option, "LT") { next = .ifLess }
            else {
                writer.error("ERR Unsupported option \(String(decoding: option, as: UTF8.self))")
                return nil
            }
            switch (condition, next) {
            case (.always, _): condition = next
            case (.ifNone, _), (_, .ifNone):
                writer.error("ERR NX and XX, GT or LT options at the same time are not compatible")
                return nil
            case (.ifGreater, .ifLess), (.ifLess, .ifGreater):
                writer.error("ERR GT and LT options at the same time are not compatible")
                return nil
            default: condition = next
            }
        }
        let name = command.name
        let inSeconds = command == .expire || command == .expireat
        let absolute = command == .expireat || command == .pexpireat
        guard let instant = Self.expiryInstant(amount, inSeconds: inSeconds, absolute: absolute, now: node.nowMilliseconds) else {
            writer.error("ERR invalid expire time in '\(name)' command")
            return nil
        }
        let decision = KeyExpiry(key: key, change: .at(milliseconds: instant), condition: condition)
        return PreparedWrite(command: command, apply: decision.apply) { decision.reply(into: &$0) }
    }

    /// TTL / PTTL / EXPIRETIME / PEXPIRETIME key: -2 when the key holds no value, -1 when it
    /// never expires; else the time left (TTL rounds to the nearest second, as Redis does) or
    /// the instant.
    func ttl(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let key = key(arguments[1], into: &writer) else { return }
        let (instant, now) = node.read { read -> (UInt64??, UInt64) in
            if let entry = read.entry(key), !entry.isTombstone { return (.some(entry.expiresAtMilliseconds), read.nowMilliseconds) }
            // A counter, a set, a hash or a sorted set of that name: its lifetime as a whole, if
            // it has one (`StorageReader.lifetime(ofCollectionNamed:)`).
            guard key.elementCount == 0 else { return (nil, read.nowMilliseconds) }
            guard KeyKind.of(read, key) != nil || KeyCounterChange.heldTotal(read, name: key.name) != nil else { return (nil, read.nowMilliseconds) }
            return (.some(read.lifetime(ofCollectionNamed: key.name)), read.nowMilliseconds)
        }
        Self.replyLifetime(command, expiringAt: instant, now: now, into: &writer)
    }

    /// TTL / PTTL / EXPIRETIME / PEXPIRETIME's reply for a key whose value expires at
    /// `instant` (`.some(nil)`: never), or holds none (nil), at `now`.
    static func replyLifetime(_ command: RESPCommand, expiringAt instant: UInt64??, now: UInt64, into writer: inout RESPWriter) {
        guard let instant else {
            writer.integer(-2)
            return
        }
        guard let instant else {
            writer.integer(-1)
            return
        }
        let left = instant > now ? instant - now : 0
        switch command {
        case .ttl: writer.integer(Int((left + 500) / 1000))
        case .pttl: writer.integer(Int(left))
        case .expiretime: writer.integer(Int(instant / 1000))
        default: writer.integer(Int(instant))
        }
    }

    /// SETEX key seconds value, PSETEX key milliseconds value.
    func prepareSetex(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        guard let amount = Self.integer(arguments[2]), amount > 0,
              let lifetime = Self.lifetimeMilliseconds(amount, inSeconds: command == .setex) else {
            writer.error("ERR invalid expire time in '\(command.name)' command")
            return nil
        }
        guard let key = key(arguments[1], into: &writer), let value = storedValue(arguments[3], into: &writer) else { return nil }
        let decision = KeyWrites(writes: [(key, value)], expiry: .given(.after(milliseconds: lifetime)))
        return PreparedWrite(command: command, apply: decision.apply) { $0.simpleString("OK") }
    }

    /// A positive lifetime in milliseconds, nil when it overflows the clock's range.
    static func lifetimeMilliseconds(_ amount: Int, inSeconds: Bool) -> UInt64? {
        guard amount > 0 else { return nil }
        let (milliseconds, overflow) = inSeconds ? amount.multipliedReportingOverflow(by: 1000) : (amount, false)
        guard !overflow, UInt64(milliseconds) <= HLCTimestamp.maxPhysicalMilliseconds else { return nil }
        return UInt64(milliseconds)
    }

    /// The expiry instant (Unix milliseconds) of an EXPIRE-family amount at `now`, clamped to 0
    /// for times in the past (which delete the key); nil when it overflows the clock's range.
    static func expiryInstant(_ amount: Int, inSeconds: Bool, absolute: Bool, now: UInt64) -> UInt64? {
        let (milliseconds, overflow) = inSeconds ? amount.multipliedReportingOverflow(by: 1000) : (amount, false)
        guard !overflow else { return nil }
        let (instant, sumOverflow) = absolute ? (milliseconds, false) : milliseconds.addingReportingOverflow(Int(now))
        guard !sumOverflow else { return nil }
        guard instant > 0 else { return 0 }
        guard UInt64(instant) <= HLCTimestamp.maxPhysicalMilliseconds else { return nil }
        return UInt64(instant)
    }
}
