import Decide
import DecideCore

/// The JSON syncnode's own commands reply with (DECIDE.GET, DECIDE.PUT, DECIDE.STATUS,
/// DECIDE.DUMP, and the `__decide@0__` notifications): the shapes docs/operations.md documents.
enum ReplyJSON {
    /// `members` as one compact JSON object's bytes.
    static func object(_ members: [(String, JSONValue)]) -> [UInt8] {
        Array(JSONValue.object(members).compact().utf8)
    }

    /// A version as `{"ms":physical,"logical":n,"node":id}`: ordered by ms, then logical, then node.
    static func version(_ version: Version) -> JSONValue {
        .object([
            ("ms", .number(String(version.timestamp.physicalMilliseconds))),
            ("logical", .number(String(version.timestamp.logical))),
            ("node", .string(version.node)),
        ])
    }

    /// A raw hybrid-clock reading as `{"ms":physical,"logical":n}`; null for nil or 0 (nothing
    /// known yet).
    static func hlc(_ raw: UInt64?) -> JSONValue {
        guard let raw, raw > 0 else { return .null }
        let timestamp = HLCTimestamp(rawValue: raw)
        return .object([
            ("ms", .number(String(timestamp.physicalMilliseconds))),
            ("logical", .number(String(timestamp.logical))),
        ])
    }

    /// Stored value bytes as JSON: the value itself when it parses (every value the library or
    /// syncnode writes does), else `{"bytesHex":"..."}` so nothing is hidden.
    static func value(_ bytes: [UInt8]) -> JSONValue {
        if let parsed = try? JSONValue.parse(bytes) { return parsed }
        return .object([("bytesHex", .string(bytes.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()))])
    }

    /// One entry as dumps and watches show it:
    /// `{"key":K,"value":V|null,"deleted":bool,"version":{...}}`, and `"layout"` for a counter's
    /// slot, a set's dot, a sorted set's member or a lifetime marker (`layout(of:)`).
    /// An expiring value adds `"expiresAt"` (Unix milliseconds), and `"expired":true` once
    /// `now` (hybrid-clock milliseconds, when given) has reached it.
    static func entry(key: StateKey, entry: Entry, now: UInt64? = nil, extra: [(String, JSONValue)] = []) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("key", .string(key.description)),
            ("value", entry.value.map(value) ?? .null),
            ("deleted", .bool(entry.isTombstone)),
            ("version", version(entry.version)),
        ]
        if let layout = layout(of: key) { fields.append(("layout", layout)) }
        if entry.ownedByWriter { fields.append(("owned", .bool(true))) }
        if let expiresAt = entry.expiresAtMilliseconds {
            fields.append(("expiresAt", .number(String(expiresAt))))
            if let now, entry.isExpired(atMilliseconds: now) { fields.append(("expired", .bool(true))) }
        }
        return .object(fields + extra)
    }

    /// What a key laid out on a collection is (docs/replication.md: counter slots, set dots,
    /// sorted set members, lifetime markers), so a dump or watch reads as the counter, set or
    /// sorted set it belongs to; nil for any other key. Read from the key alone, so two replicas'
    /// dumps stay equal line for line.
    static func layout(of key: StateKey) -> JSONValue? {
        guard CompoundPresence.isCompound(key) else { return nil }
        let name = JSONValue.string(key.name)
        // A hash's counter field (HINCRBY's) names its hash and field; a counter, itself.
        let field = CounterSlot.field(of: key)
        let prefix = field == nil ? "counter" : "hashCounter"
        let counter: [(String, JSONValue)] = field.map { [("hash", name), ("field", value($0))] } ?? [("counter", name)]
        if let owner = CounterSlot.owner(of: key) {
            return .object([("kind", .string(prefix + "Slot"))] + counter + [("node", .string(owner.node)),
                            ("incarnation", .string(hex(owner.incarnation)))])
        }
        if CounterSlot.counts(key) { return .object([("kind", .string(prefix + "Base"))] + counter) }
        if let bytes = SetDot.member(of: key) { return .object([("kind", .string("setDot")), ("set", name), ("member", value(bytes))]) }
        if let bytes = SortedSetMember.member(of: key) {
            return .object([("kind", .string("sortedSetMember")), ("sortedSet", name), ("member", value(bytes))])
        }
        if CollectionLifetime.isMarker(key) { return .object([("kind", .string("lifetime")), ("of", name)]) }
        return nil
    }

    /// A 64-bit digest as 16 hex digits.
    static func hex(_ value: UInt64) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}
