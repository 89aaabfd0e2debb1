/// Why bytes could not be decoded. Decoding either returns a whole value or throws one of
/// these; it never crashes and never returns part of a value.
package enum WireDecodeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The input ended `needed` bytes early while reading `field`.
    case truncated(field: String, needed: Int)
    /// A length or count in the input is over the configured limit.
    case tooLarge(field: String, length: UInt64, limit: Int)
    /// The first byte names a codec format this build does not speak.
    case unsupportedFormat(UInt8)
    /// The kind byte is not a kind this decoder was asked for.
    case unexpectedKind(expected: UInt8, found: UInt8)
    /// The message type byte is not one this build knows.
    case unknownMessageType(UInt8)
    /// A variable-length integer is longer than 10 bytes or overflows 64 bits.
    case malformedVarint(field: String)
    /// A text field is not valid UTF-8.
    case invalidUTF8(field: String)
    /// A flag byte holds a value with no meaning.
    case invalidFlag(field: String, value: UInt8)
    /// Bytes remain after a complete value.
    case trailingBytes(count: Int)
    /// A number lies outside the range its field allows.
    case outOfRange(field: String, value: UInt64)

    public var description: String {
        switch self {
        case let .truncated(field, needed): return "input ends \(needed) byte(s) early in \(field)"
        case let .tooLarge(field, length, limit): return "\(field) is \(length), over the limit \(limit)"
        case let .unsupportedFormat(format): return "unsupported codec format \(format)"
        case let .unexpectedKind(expected, found): return "expected kind \(expected), found \(found)"
        case let .unknownMessageType(type): return "unknown message type \(type)"
        case let .malformedVarint(field): return "malformed varint in \(field)"
        case let .invalidUTF8(field): return "\(field) is not valid UTF-8"
        case let .invalidFlag(field, value): return "\(field) has invalid value \(value)"
        case let .trailingBytes(count): return "\(count) unexpected byte(s) after the value"
        case let .outOfRange(field, value): return "\(field) is \(value), outside the range it allows"
        }
    }
}
