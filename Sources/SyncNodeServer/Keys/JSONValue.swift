/// A JSON value as syncnode reads and writes it: numbers keep their exact text, objects keep
/// their member order, and `compact` writes one line with no insignificant whitespace and
/// strings escaped the way the library's JSON encoding escapes them (so an element id written
/// here addresses the same element as the typed API).
///
/// Why not Foundation: `JSONSerialization` reads numbers into `NSNumber`. A 64-bit id above
/// 2^53 and a text like `1.10` then come back changed. It also reorders object members, and its
/// output escapes `/`. Any of those would store a different element id or value than the client
/// sent. `JSONDecoder` needs a type to decode into, and syncnode stores values of any shape. The
/// mirror has no JSON package that keeps number text. So syncnode keeps this one, for exactness
/// rather than speed (issue 17).
package enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// The number's text as given (validated against the JSON grammar).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// Why a text is not JSON: what was expected and the byte offset where it went wrong.
    package struct ParseError: Error, CustomStringConvertible {
        package let message: String
        package let offset: Int
        package var description: String { "invalid JSON at byte \(offset): \(message)" }
    }

    /// Nesting deeper than this is refused (the parser recurses once per level). Foundation's
    /// JSONDecoder, which typed Swift states decode with, goes to 512 as well.
    package static let maxDepth = 512

    /// Parses exactly one JSON value (surrounding whitespace allowed).
    package static func parse(_ text: String) throws(ParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Parses exactly one JSON value from UTF-8 bytes (surrounding whitespace allowed).
    package static func parse(_ bytes: [UInt8]) throws(ParseError) -> JSONValue {
        var parser = Parser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.offset == bytes.count else { throw parser.error("unexpected text after the value") }
        return value
    }

    /// One line of JSON text with no insignificant whitespace. With `sortedKeys`, object members
    /// are written in key order (as the library encodes element ids).
    package func compact(sortedKeys: Bool = false) -> String {
        var out = ""
        write(into: &out, sortedKeys: sortedKeys)
        return out
    }

    /// `compact()` as UTF-8 bytes.
    package var compactBytes: [UInt8] { Array(compact().utf8) }

    private func write(into out: inout String, sortedKeys: Bool) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): JSONValue.writeString(text, into: &out)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(into: &out, sortedKeys: sortedKeys)
            }
            out += "]"
        case .object(let members):
            out += "{"
            let ordered = sortedKeys ? members.sorted { $0.0 < $1.0 } : members
            for (index, (key, value)) in ordered.enumerated() {
                if index > 0 { out += "," }
                JSONValue.writeString(key, into: &out)
                out += ":"
                value.write(into: &out, sortedKeys: sortedKeys)
            }
            out += "}"
        }
    }

    /// Writes `text` quoted, escaping `"`, `\` and control characters only.
    package static func writeString(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    /// `text` as a JSON string literal.
    package static func quoted(_ text: String) -> String {
        var out = ""
        writeString(text, into: &out)
        return out
    }

    /// The member `key` of an object (nil for other values or a missing member).
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// The text of a string value.
    package var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The value of a boolean.
    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// An integer number that fits `Int`.
    package var intValue: Int? {
        if case .number(let text) = self { return Int(text) }
        return nil
    }

    private struct Parser {
        let bytes: [UInt8]
        var offset = 0

        func error(_ message: String) -> ParseError { ParseError(message: message, offset: offset) }

        mutating func skipWhitespace() {
            while offset < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[offset]) { offset += 1 }
        }

        mutating func value(depth: Int) throws(ParseError) -> JSONValue {
            guard depth < JSONValue.maxDepth else { throw error("nested deeper than \(JSONValue.maxDepth) levels") }
            guard offset < bytes.count else { throw error("expected a value, found the end") }
            switch bytes[offset] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0") ... UInt8(ascii: "9"): return .number(try number())
            default: throw error("unexpected character '\(Character(Unicode.Scalar(bytes[offset])))'")
            }
        }

        mutating func literal(_ word: String) throws(ParseError) {
            let expected = Array(word.utf8)
            guard offset + expected.count <= bytes.count, Array(bytes[offset ..< offset + expected.count]) == expected else {
                throw error("unexpected text (only true, false and null may start with '\(word.first!)'; a string needs quotes)")
            }
            offset += expected.count
        }

        mutating func object(depth: Int) throws(ParseError) -> JSONValue {
            offset += 1
            var members: [(String, JSONValue)] = []
            skipWhitespace()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") {
                offset += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { throw error("expected a member name in quotes") }
                let key = try string()
                skipWhitespace()
                guard offset < bytes.count, bytes[offset] == UInt8(ascii: ":") else { throw error("expected ':' after a member name") }
                offset += 1
                skipWhitespace()
                members.append((key, try value(depth: depth + 1)))
                skipWhitespace()
                guard offset < bytes.count else { throw error("unterminated object") }
                if bytes[offset] == UInt8(ascii: ",") { offset += 1; continue }
                if bytes[offset] == UInt8(ascii: "}") { offset += 1; return .object(members) }
                throw error("expected ',' or '}' in an object")
            }
        }

        mutating func array(depth: Int) throws(ParseError) -> JSONValue {
            offset += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") {
                offset += 1
                return .array(items)
            }
            while true {
                skipWhitespace()
                items.append(try value(depth: depth + 1))
                skipWhitespace()
                guard offset < bytes.count else { throw error("unterminated array") }
                if bytes[offset] == UInt8(ascii: ",") { offset += 1; continue }
                if bytes[offset] == UInt8(ascii: "]") { offset += 1; return .array(items) }
                throw error("expected ',' or ']' in an array")
            }
        }

        mutating func number() throws(ParseError) -> String {
            let start = offset
            func digits() -> Int {
                let from = offset
                while offset < bytes.count, bytes[offset] >= UInt8(ascii: "0"), bytes[offset] <= UInt8(ascii: "9") { offset += 1 }
                return offset - from
            }
            if bytes[offset] == UInt8(ascii: "-") { offset += 1 }
            guard offset < bytes.count else { throw error("expected digits after '-'") }
            if bytes[offset] == UInt8(ascii: "0") {
                offset += 1
            } else {
                guard digits() > 0 else { throw error("expected a digit") }
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
                offset += 1
                guard digits() > 0 else { throw error("expected a digit after '.'") }
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
                offset += 1
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") { offset += 1 }
                guard digits() > 0 else { throw error("expected a digit in the exponent") }
            }
            return String(decoding: bytes[start ..< offset], as: UTF8.self)
        }

        mutating func string() throws(ParseError) -> String {
            offset += 1
            var scalars = String.UnicodeScalarView()
            var runStart = offset
            func flushRun() throws(ParseError) {
                guard runStart < offset else { return }
                guard let run = String(validating: bytes[runStart ..< offset], as: UTF8.self) else {
                    throw ParseError(message: "a string is not valid UTF-8", offset: runStart)
                }
                scalars.append(contentsOf: run.unicodeScalars)
            }
            while true {
                guard offset < bytes.count else { throw error("unterminated string") }
                let byte = bytes[offset]
                if byte == UInt8(ascii: "\"") {
                    try flushRun()
                    offset += 1
                    return String(scalars)
                }
                if byte < 0x20 { throw error("a raw control character in a string (escape it)") }
                if byte != UInt8(ascii: "\\") {
                    offset += 1
                    continue
                }
                try flushRun()
                offset += 1
                guard offset < bytes.count else { throw error("unterminated escape") }
                let escape = bytes[offset]
                offset += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var unit = try hex4()
                    if unit >= 0xD800 && unit < 0xDC00 {
                        guard offset + 1 < bytes.count, bytes[offset] == UInt8(ascii: "\\"), bytes[offset + 1] == UInt8(ascii: "u") else {
                            throw error("a lone high surrogate")
                        }
                        offset += 2
                        let low = try hex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw error("a high surrogate without its low half") }
                        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    } else if unit >= 0xDC00 && unit < 0xE000 {
                        throw error("a lone low surrogate")
                    }
                    guard let scalar = Unicode.Scalar(unit) else { throw error("an invalid code point") }
                    scalars.append(scalar)
                default:
                    throw error("unknown escape '\\\(Character(Unicode.Scalar(escape)))'")
                }
                runStart = offset
            }
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard offset + 4 <= bytes.count else { throw error("expected four hex digits") }
            var value: UInt32 = 0
            for _ in 0 ..< 4 {
                let byte = bytes[offset]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0") ... UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw error("expected a hex digit")
                }
                value = value * 16 + digit
                offset += 1
            }
            return value
        }
    }
}
