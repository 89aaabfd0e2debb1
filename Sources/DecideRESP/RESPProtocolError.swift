/// Why a peer's bytes are not valid RESP. Parsers throw one of these instead of trapping; the
/// connection is then answered with `-ERR <description>` and closed.
///
/// `description` is exactly the text that follows `-ERR ` on the wire (no "ERR " prefix, never
/// a CR or LF). Where Redis has a message for the same fault, the text is Redis's.
public enum RESPProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    // Requests (RESPRequestParser).

    /// A `*N` header whose N is not an integer or is over `RESPLimits.maxArguments`.
    case invalidMultibulkLength
    /// A `$N` header whose N is not an integer, negative, or over `RESPLimits.maxBulkBytes`.
    case invalidBulkLength
    /// A multibulk argument whose header does not start with `$`; `got` is its first byte.
    case expectedDollar(got: UInt8)
    /// An inline command line longer than `RESPLimits.maxInlineBytes`.
    case tooBigInlineRequest
    /// A `*N` header line longer than `RESPLimits.maxInlineBytes`.
    case tooBigMultibulkCountString
    /// A `$N` header line longer than `RESPLimits.maxInlineBytes`.
    case tooBigBulkCountString
    /// An inline command with an unterminated quote, or a closing quote followed by a
    /// character other than whitespace.
    case unbalancedQuotes
    /// Bulk data (request argument or reply string) not followed by `\r\n`.
    case expectedCRLFAfterBulkData
    /// A multibulk command whose headers and arguments take more than `maxRequestBytes`.
    case requestTooLarge(maxRequestBytes: Int)

    // Replies (RESPReplyParser).

    /// A reply starting with a byte that is no RESP2/RESP3 type.
    case invalidReplyType(UInt8)
    /// A reply line that does not hold what its type requires (an integer, a length, a
    /// double, `t`/`f`, a big number), or a line whose `\r` is not followed by `\n`.
    case invalidReplyLine(type: UInt8)
    /// A reply length or element count over the parser's limit (`maxBulkBytes`, `maxElements`).
    case replyLengthOverLimit(type: UInt8, limit: Int)
    /// A reply line (simple string, error, number) longer than `limit`: the parser's
    /// `maxBulkBytes`, but at least 64.
    case replyLineTooLong(limit: Int)
    /// Aggregates nested deeper than the parser's `maxDepth`.
    case replyTooDeep(maxDepth: Int)
    /// A verbatim string (`=`) shorter than 4 bytes or without `:` after its 3-byte format.
    case invalidVerbatimString

    /// The text after `-ERR ` in the reply: one line, Redis's wording where Redis has one.
    public var description: String {
        switch self {
        case .invalidMultibulkLength: return "Protocol error: invalid multibulk length"
        case .invalidBulkLength: return "Protocol error: invalid bulk length"
        case .expectedDollar(let got): return "Protocol error: expected '$', got '\(Self.printed(got))'"
        case .tooBigInlineRequest: return "Protocol error: too big inline request"
        case .tooBigMultibulkCountString: return "Protocol error: too big mbulk count string"
        case .tooBigBulkCountString: return "Protocol error: too big bulk count string"
        case .unbalancedQuotes: return "Protocol error: unbalanced quotes in request"
        case .expectedCRLFAfterBulkData: return "Protocol error: expected CRLF after bulk data"
        case .requestTooLarge(let limit):
            return "Protocol error: request of more than \(limit) bytes (maxRequestBytes)"
        case .invalidReplyType(let type): return "Protocol error: invalid reply type '\(Self.printed(type))'"
        case .invalidReplyLine(let type): return "Protocol error: invalid '\(Self.printed(type))' reply line"
        case let .replyLengthOverLimit(type, limit):
            return "Protocol error: '\(Self.printed(type))' length over the limit of \(limit)"
        case .replyLineTooLong(let limit): return "Protocol error: reply line longer than \(limit) bytes"
        case .replyTooDeep(let maxDepth): return "Protocol error: reply nested deeper than \(maxDepth) levels"
        case .invalidVerbatimString: return "Protocol error: invalid verbatim string"
        }
    }

    /// A byte as Redis's `%c` prints it into an error reply: itself, except CR and LF, which
    /// Redis turns into spaces so the reply stays one line. Bytes over 0x7F become the
    /// Unicode scalar of the same value (Redis sends the raw byte, which is not UTF-8).
    static func printed(_ byte: UInt8) -> Character {
        if byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") { return " " }
        return Character(Unicode.Scalar(byte))
    }
}
