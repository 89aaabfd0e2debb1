import Decide
import DecideCore
import DecideRESP

/// The one mapping between Redis-protocol strings and Decide's stored JSON values
/// (docs/operations.md, "Values"), so a typed Swift state, the CLI and a Redis client read each
/// other's writes:
///
/// - writing: a string that is one valid JSON text is stored as exactly those bytes (`5`,
///   `true`, `{"a":1}`, `"quoted"`); any other UTF-8 string is stored as a JSON string (`hello`
///   becomes `"hello"`, which a Swift `String` state reads as `hello`); bytes that are not UTF-8
///   are refused (JSON cannot hold them);
/// - reading: a stored JSON string is returned as its text (`"hello"` reads `hello`); any other
///   stored JSON is returned as its text (`5`, `{"a":1}`).
///
/// So every string a client writes reads back byte for byte, except a string that is itself a
/// quoted JSON string (`"x"` reads back `x`).
enum ValueMapping {
    /// Nesting deeper than this is not taken as JSON (it is stored as a JSON string instead):
    /// the depth syncnode's own JSON reader (DECIDE.GET, dumps, watch) goes to.
    static let maxJSONDepth = JSONValue.maxDepth

    /// Why a value cannot be stored.
    enum Refusal: Error, CustomStringConvertible {
        case notUTF8
        var description: String {
            "value is not valid UTF-8: Decide stores JSON, which holds text only (docs/operations.md, Values)"
        }
    }

    /// The JSON bytes to store for a client's string, packed as the table holds them (one copy,
    /// from the request into the value the table keeps).
    static func stored(_ bytes: ArraySlice<UInt8>) throws(Refusal) -> PackedBytes {
        let stored = bytes.withUnsafeBytes { raw -> PackedBytes? in
            if isJSON(raw) { return PackedBytes(raw) }
            guard isUTF8(raw) else { return nil }
            return ValueCoding.quotedPacked(raw)
        }
        guard let stored else { throw .notUTF8 }
        return stored
    }

    /// Lends `body` the string a client reads for the stored JSON bytes `stored` (see the type's
    /// rules): a slice of them, or their unescaped text.
    static func withResp<Result>(_ stored: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var start = 0, end = stored.count
        while start < end && isSpace(stored[start]) { start += 1 }
        while end > start && isSpace(stored[end - 1]) { end -= 1 }
        guard end - start >= 2, stored[start] == quote, stored[end - 1] == quote else { return body(stored) }
        let inner = UnsafeRawBufferPointer(rebasing: stored[start + 1 ..< end - 1])
        guard contains(backslash, in: inner) else { return body(inner) }
        // Escapes that do not read as JSON: the stored bytes as they are.
        guard let text = unescaped(inner) else { return body(stored) }
        return text.withUnsafeBytes(body)
    }

    /// The whole number a stored value reads as for INCR (its Redis string is `-?[0-9]+` with no
    /// leading zero and fits `Int64`), or nil.
    static func integer(_ stored: PackedBytes) -> Int64? {
        stored.withUnsafeBytes { raw in
            withResp(raw) { text -> Int64? in
                // Redis refuses "-0", which the shared reader takes as 0.
                guard !(text.count == 2 && text[0] == UInt8(ascii: "-") && text[1] == UInt8(ascii: "0")) else { return nil }
                return ValueCoding.decodeInteger(text)
            }
        }
    }

    /// Writes the reply of a stored value, read where the table keeps it: a bulk string, or a
    /// null for none.
    static func reply(_ stored: PackedBytes?, into writer: inout RESPWriter) {
        guard let stored else { return writer.null() }
        stored.withUnsafeBytes { raw in withResp(raw) { writer.bulk($0) } }
    }

    /// Whether `byte` occurs in `bytes`, eight bytes at a time (every GET of a string scans its
    /// value for an escape).
    private static func contains(_ byte: UInt8, in bytes: UnsafeRawBufferPointer) -> Bool {
        let pattern = UInt64(byte) &* 0x0101_0101_0101_0101
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self) ^ pattern
            // A zero byte in `word` is an occurrence (the classic has-zero-byte test).
            if (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080 != 0 { return true }
            offset += 8
        }
        while offset < bytes.count {
            if bytes[offset] == byte { return true }
            offset += 1
        }
        return false
    }

    // MARK: JSON grammar

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    /// Whether `bytes` is exactly one JSON text (RFC 8259; surrounding whitespace allowed),
    /// nested at most `maxJSONDepth` deep. No allocation below one level of nesting.
    static func isJSON(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // Most values a Redis client sends are plain text: decide on the first byte.
        var index = 0
        let count = bytes.count
        while index < count && isSpace(bytes[index]) { index += 1 }
        guard index < count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"), UInt8(ascii: "["), quote, UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"),
             UInt8(ascii: "-"), UInt8(ascii: "0") ... UInt8(ascii: "9"):
            break
        default:
            return false
        }
        enum Expect { case value, key, after }
        var stack: [UInt8] = []
        var expect = Expect.value
        while true {
            while index < count && isSpace(bytes[index]) { index += 1 }
            switch expect {
            case .value:
                guard index < count else { return false }
                let byte = bytes[index]
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") {
                    guard stack.count < maxJSONDepth else { return false }
                    stack.append(byte)
                    index += 1
                    while index < count && isSpace(bytes[index]) { index += 1 }
                    let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                    if index < count && bytes[index] == close {
                        stack.removeLast()
                        index += 1
                        expect = .after
                    } else {
                        expect = byte == UInt8(ascii: "{") ? .key : .value
                    }
                    continue
                }
                switch byte {
                case quote: guard skipString(bytes, &index) else { return false }
                case UInt8(ascii: "t"): guard skipLiteral(bytes, &index, "true") else { return false }
                case UInt8(ascii: "f"): guard skipLiteral(bytes, &index, "false") else { return false }
                case UInt8(ascii: "n"): guard skipLiteral(bytes, &index, "null") else { return false }
                default: guard skipNumber(bytes, &index) else { return false }
                }
                expect = .after
            case .key:
                guard index < count, bytes[index] == quote, skipString(bytes, &index) else { return false }
                while index < count && isSpace(bytes[index]) { index += 1 }
                guard index < count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                expect = .value
            case .after:
                guard let open = stack.last else { return index == count }
                guard index < count else { return false }
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: ",") {
                    expect = open == UInt8(ascii: "{") ? .key : .value
                } else if (open == UInt8(ascii: "{") && byte == UInt8(ascii: "}"))
                            || (open == UInt8(ascii: "[") && byte == UInt8(ascii: "]")) {
                    stack.removeLast()
                } else {
                    return false
                }
            }
        }
    }

    private static func skipLiteral(_ bytes: UnsafeRawBufferPointer, _ index: inout Int, _ word: StaticString) -> Bool {
        let length = word.utf8CodeUnitCount
        guard bytes.count - index >= length else { return false }
        for offset in 0 ..< length where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += length
        return true
    }

    private static func skipNumber(_ bytes: UnsafeRawBufferPointer, _ index: inout Int) -> Bool {
        func isDigit(_ i: Int) -> Bool { i < bytes.count && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9") }
        if index < bytes.count && bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { return false }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { return false }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
            guard isDigit(index) else { return false }
            while isDigit(index) { index += 1 }
        }
        return true
    }

    /// Skips a JSON string starting at its opening quote: escapes checked, no raw control
    /// characters, valid UTF-8.
    private static func skipString(_ bytes: UnsafeRawBufferPointer, _ index: inout Int) -> Bool {
        var i = index + 1
        let count = bytes.count
        while i < count {
            let byte = bytes[i]
            if byte == quote {
                index = i + 1
                return true
            }
            if byte == backslash {
                guard i + 1 < count else { return false }
                switch bytes[i + 1] {
                case quote, backslash, UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                     UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 2
                case UInt8(ascii: "u"):
                    guard i + 5 < count else { return false }
                    for offset in 2 ... 5 where hexValue(bytes[i + offset]) == nil { return false }
                    i += 6
                default:
                    return false
                }
            } else if byte < 0x20 {
                return false
            } else if byte < 0x80 {
                i += 1
            } else {
                guard let length = utf8SequenceLength(bytes, at: i) else { return false }
                i += length
            }
        }
        return false
    }

    private static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a") ... UInt8(ascii: "f"): return UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A") ... UInt8(ascii: "F"): return UInt32(byte - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    // MARK: UTF-8 and strings

    /// The length of the well-formed UTF-8 sequence of a non-ASCII lead byte at `index`, or nil
    /// (overlong forms, surrogates and code points past U+10FFFF are not well-formed).
    private static func utf8SequenceLength(_ bytes: UnsafeRawBufferPointer, at index: Int) -> Int? {
        let lead = bytes[index]
        let count = bytes.count
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80 ... 0xBF) -> Bool {
            index + offset < count && range.contains(bytes[index + offset])
        }
        switch lead {
        case 0xC2 ... 0xDF: return continuation(1) ? 2 : nil
        case 0xE0: return continuation(1, 0xA0 ... 0xBF) && continuation(2) ? 3 : nil
        case 0xE1 ... 0xEC, 0xEE ... 0xEF: return continuation(1) && continuation(2) ? 3 : nil
        case 0xED: return continuation(1, 0x80 ... 0x9F) && continuation(2) ? 3 : nil
        case 0xF0: return continuation(1, 0x90 ... 0xBF) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF1 ... 0xF3: return continuation(1) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF4: return continuation(1, 0x80 ... 0x8F) && continuation(2) && continuation(3) ? 4 : nil
        default: return nil
        }
    }

    static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < bytes.count {
            if bytes[index] < 0x80 {
                index += 1
            } else {
                guard let length = utf8SequenceLength(bytes, at: index) else { return false }
                index += length
            }
        }
        return true
    }

    /// The text of a JSON string's body (between its quotes), escapes resolved; nil when an
    /// escape is malformed. A lone surrogate escape becomes U+FFFD.
    private static func unescaped(_ body: UnsafeRawBufferPointer) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(body.count)
        var i = 0
        func hex4(_ at: Int) -> UInt32? {
            guard at + 4 <= body.count else { return nil }
            var value: UInt32 = 0
            for offset in 0 ..< 4 {
                guard let digit = hexValue(body[at + offset]) else { return nil }
                value = value << 4 | digit
            }
            return value
        }
        while i < body.count {
            let byte = body[i]
            guard byte == backslash else {
                out.append(byte)
                i += 1
                continue
            }
            guard i + 1 < body.count else { return nil }
            let escape = body[i + 1]
            i += 2
            switch escape {
            case quote, backslash, UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard var scalar = hex4(i) else { return nil }
                i += 4
                if (0xD800 ... 0xDBFF).contains(scalar), i + 6 <= body.count, body[i] == backslash,
                   body[i + 1] == UInt8(ascii: "u"), let low = hex4(i + 2), (0xDC00 ... 0xDFFF).contains(low) {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                out.append(contentsOf: Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8))
            default:
                return nil
            }
        }
        return out
    }
}
