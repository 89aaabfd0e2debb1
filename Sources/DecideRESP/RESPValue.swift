/// One parsed reply (RESP2 or RESP3), for clients and tests. Aggregates hold their elements in
/// wire order; maps hold keys and values alternating, so the value stays `Equatable` whatever
/// the keys are. Equality is structural (`.double(.nan)` is not equal to itself).
public indirect enum RESPValue: Sendable, Equatable {
    /// `+text` (invalid UTF-8 repaired with U+FFFD).
    case simple(String)
    /// `-text` or a RESP3 blob error `!len`, without the leading `-`: "ERR …", "WRONGTYPE …".
    case error(String)
    /// `:n`.
    case integer(Int64)
    /// `$len` bytes.
    case bulk([UInt8])
    /// `$-1`, `*-1` or RESP3 `_`.
    case null
    /// `*n` elements.
    case array([RESPValue])
    /// RESP3 `%n`: 2n elements, key, value, key, value…
    case map([RESPValue])
    /// RESP3 `~n`.
    case set([RESPValue])
    /// RESP3 `>n`: an out-of-band message (pub/sub, invalidation).
    case push([RESPValue])
    /// RESP3 `,text`.
    case double(Double)
    /// RESP3 `#t` / `#f`.
    case boolean(Bool)
    /// RESP3 `(digits`, as its decimal text.
    case bigNumber(String)
    /// RESP3 `=len` with its 3-byte format ("txt", "mkd") and text.
    case verbatim(format: String, text: [UInt8])

    /// The text of a simple string, bulk string or verbatim string when it is valid UTF-8;
    /// nil for any other value.
    public var text: String? {
        switch self {
        case .simple(let text): return text
        case .bulk(let bytes), .verbatim(_, let bytes): return String(validating: bytes, as: UTF8.self)
        default: return nil
        }
    }

    /// Whether this is an error reply.
    public var isError: Bool {
        if case .error = self { return true }
        return false
    }
}
