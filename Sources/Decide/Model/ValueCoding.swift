import Foundation
import DecideCore

/// Encodes values and element ids as JSON (UTF-8), the one encoding every node and every tool
/// (`syncnode put KEY JSON-VALUE`) agrees on. Bool, integers and plain strings take a fast path
/// that writes the same text JSONEncoder would.
@usableFromInline
package enum ValueCoding {
    @usableFromInline
    package enum Failure: Error, CustomStringConvertible {
        case encoding(type: String, underlying: String)
        case decoding(type: String, underlying: String)
        @usableFromInline
        package var description: String {
            switch self {
            case let .encoding(type, underlying): return "cannot encode \(type) as JSON: \(underlying)"
            case let .decoding(type, underlying): return "cannot decode \(type) from the stored JSON: \(underlying)"
            }
        }
    }

    @usableFromInline
    package static func encode<Value: Encodable>(_ value: Value) throws(Failure) -> [UInt8] {
        // Metadata comparisons, not dynamic casts: this runs on every write.
        if let number = integer(value) { return encodeInteger(number) }
        if Value.self == Bool.self {
            return unsafeBitCast(value, to: Bool.self) ? Array("true".utf8) : Array("false".utf8)
        }
        if Value.self == String.self { return encodeString(unsafeBitCast(value, to: String.self)) }
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return Array(try encoder.encode(value))
        } catch {
            throw .encoding(type: String(describing: Value.self), underlying: "\(error)")
        }
    }

    /// `encode(_:)` as a pending write and the table hold it: an integer, a flag or a short
    /// string with nothing to escape (up to `PackedBytes.inlineCapacity` bytes of JSON) is
    /// written in place, without an array. Inlinable, so a decision's module specialises it for
    /// its own value types: unspecialised, it ran through the value's witness tables.
    @inlinable
    package static func encodePacked<Value: Encodable>(_ value: Value) throws(Failure) -> PackedBytes {
        if let number = integer(value) { return packedInteger(number) }
        if Value.self == Bool.self {
            return unsafeBitCast(value, to: Bool.self) ? trueText : falseText
        }
        if Value.self == String.self {
            var text = unsafeBitCast(value, to: String.self)
            return text.withUTF8 { quotedPacked(UnsafeRawBufferPointer($0)) }
        }
        return PackedBytes(try encode(value))
    }

    @usableFromInline static let trueText = PackedBytes(Array("true".utf8))
    @usableFromInline static let falseText = PackedBytes(Array("false".utf8))

    package static func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws(Failure) -> Value {
        try bytes.withUnsafeBytes { decode(type, fromBytes: $0) }.get()
    }

    /// `decode(_:from:)` of a value as the table holds it: one held in place is read where it
    /// lies, without an array.
    package static func decode<Value: Decodable>(_ type: Value.Type, from packed: PackedBytes) throws(Failure) -> Value {
        try packed.withUnsafeBytes { decode(type, fromBytes: $0) }.get()
    }

    private static func decode<Value: Decodable>(_ type: Value.Type, fromBytes bytes: UnsafeRawBufferPointer) -> Result<Value, Failure> {
        if Value.self == Bool.self {
            if bytes.elementsEqual("true".utf8) { return .success(true as! Value) }
            if bytes.elementsEqual("false".utf8) { return .success(false as! Value) }
        } else if Value.self == Int.self, let number = decodeInteger(bytes) {
            return .success(Int(number) as! Value)
        } else if Value.self == Int64.self, let number = decodeInteger(bytes) {
            return .success(number as! Value)
        } else if Value.self == String.self, let text = decodePlainString(bytes) {
            return .success(text as! Value)
        }
        do {
            return .success(try JSONDecoder().decode(Value.self, from: Data(bytes)))
        } catch {
            return .failure(.decoding(type: String(describing: Value.self), underlying: "\(error)"))
        }
    }

    /// `value` as a 64-bit integer when its type is `Int`, `Int64` or `Int32` (the types whose
    /// JSON is their decimal digits, `withIntegerText`), else nil. Metadata comparisons only.
    @inlinable @inline(__always)
    package static func integer<Value>(_ value: Value) -> Int64? {
        if Value.self == Int.self { return Int64(unsafeBitCast(value, to: Int.self)) }
        if Value.self == Int64.self { return unsafeBitCast(value, to: Int64.self) }
        if Value.self == Int32.self { return Int64(unsafeBitCast(value, to: Int32.self)) }
        return nil
    }

    /// The decimal text of `number` (as `withIntegerText` writes it) held in place, built in
    /// its two words directly, eight digits at a time (`eightDigits`). A number of more than
    /// 15 digits goes through the text.
    ///
    /// A digit at a time, each division by 10 waited on the one before: seven digits were a
    /// chain of about 60 cycles, a sixth of a one-write decision
    /// (docs/design/0018-the-decision-path.md, "Integers eight digits at a time").
    @usableFromInline
    package static func packedInteger(_ number: Int64) -> PackedBytes {
        let magnitude = number.magnitude
        guard magnitude < 1_000_000_000_000_000 else { return withIntegerText(number) { PackedBytes($0) } }
        var low: UInt64, high: UInt64, count: Int
        if magnitude < 100_000_000 {
            (low, count) = strippedDigits(magnitude)
            high = 0
        } else {
            // The upper digits (at most seven) stripped, then the lower eight in full.
            let (upper, upperCount) = strippedDigits(magnitude / 100_000_000)
            let lower = eightDigits(magnitude % 100_000_000)
            let shift = UInt64(8 &* upperCount)
            low = upper | lower &<< shift
            high = lower &>> (64 &- shift)
            count = upperCount &+ 8
        }
        if number < 0 {
            high = high &<< 8 | low &>> 56
            low = low &<< 8 | UInt64(UInt8(ascii: "-"))
            count &+= 1
        }
        return .inline(low, high, count: UInt8(truncatingIfNeeded: count))
    }

    /// The digits of `value` (below 10^8) without leading zeros, first digit in the low byte,
    /// and how many there are (one for zero).
    @inline(__always)
    private static func strippedDigits(_ value: UInt64) -> (word: UInt64, count: Int) {
        let digits = eightDigits(value)
        // Leading zeros are the low bytes equal to "0"; the digit values without the ASCII
        // offset are zero exactly there.
        let values = digits &- 0x3030_3030_3030_3030
        let leading = values == 0 ? 7 : values.trailingZeroBitCount &>> 3
        return (digits &>> UInt64(8 &* leading), 8 &- leading)
    }

    /// The eight decimal digits of `value` (below 10^8, leading zeros kept) as ASCII, the most
    /// significant in the low byte. Lane arithmetic in one word: the two halves of four digits
    /// in 32-bit lanes, split into pairs in 16-bit lanes, split into digits in bytes; each
    /// division a multiplication by a reciprocal and a shift, exact for the lane's range, with
    /// the bits a shift brings in from the next lane masked off.
    @inline(__always)
    static func eightDigits(_ value: UInt64) -> UInt64 {
        let fours = value / 10_000 | (value % 10_000) &<< 32
        // x / 100 = x * 5243 >> 19 for x < 10^4.
        let hundreds = (fours &* 5243) &>> 19 & 0x0000_007F_0000_007F
        let pairs = hundreds | (fours &- hundreds &* 100) &<< 16
        // x / 10 = x * 103 >> 10 for x < 100.
        let tens = (pairs &* 103) &>> 10 & 0x000F_000F_000F_000F
        let digits = tens | (pairs &- tens &* 10) &<< 8
        return digits | 0x3030_3030_3030_3030
    }

    /// Exactly as many bytes as the digits: element ids are kept per key, so no spare capacity.
    private static func encodeInteger(_ number: Int64) -> [UInt8] {
        withIntegerText(number) { [UInt8](copying: $0) }
    }

    /// The JSON text of `number` (its decimal digits), lent for the call from scratch memory:
    /// a key made from it holds a short id in place and allocates nothing. Digits are written
    /// backwards into a stack buffer, dividing by the constant 10 (a multiply and a shift).
    package static func withIntegerText<Result>(_ number: Int64, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var magnitude = number.magnitude
        var buffer: (UInt64, UInt64, UInt64) = (0, 0, 0)
        return withUnsafeMutableBytes(of: &buffer) { bytes in
            var start = bytes.count
            repeat {
                start -= 1
                bytes[start] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if number < 0 {
                start -= 1
                bytes[start] = UInt8(ascii: "-")
            }
            return body(UnsafeRawBufferPointer(rebasing: bytes[start...]))
        }
    }

    /// Plain decimal integers only (no exponent, no leading '+' or zeros); anything else goes to
    /// JSONDecoder, which decides. Also the number reader of counter slots and of syncnode's INCR.
    package static func decodeInteger(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        let negative = bytes[0] == UInt8(ascii: "-")
        let digits = negative ? bytes.dropFirst() : bytes[...]
        guard let first = digits.first, first != UInt8(ascii: "0") || digits.count == 1 else { return nil }
        var magnitude: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = sum
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// A byte JSON writes escaped inside a string: the quote, the backslash, a control character.
    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20
    }

    /// Whether any byte of `utf8` needs an escape (`needsEscape`): sixteen bytes at a time as a
    /// vector (a compare for each of the three cases and one test of the lanes), then eight at a
    /// time in a word (a word has a byte below 0x20 iff `(w - 0x20…) & ~w & 0x80…` is non-zero,
    /// and a byte equal to `c` iff the same test for zero holds of `w ^ c…`), then bytes.
    static func anyNeedsEscape(_ raw: UnsafeRawBufferPointer) -> Bool {
        guard let base = raw.baseAddress else { return false }
        var offset = 0
        let space = SIMD16<UInt8>(repeating: 0x20)
        let quoteLanes = SIMD16<UInt8>(repeating: UInt8(ascii: "\""))
        let backslashLanes = SIMD16<UInt8>(repeating: UInt8(ascii: "\\"))
        while offset + 16 <= raw.count {
            let lanes = base.loadUnaligned(fromByteOffset: offset, as: SIMD16<UInt8>.self)
            if any((lanes .< space) .| (lanes .== quoteLanes) .| (lanes .== backslashLanes)) { return true }
            offset += 16
        }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while offset + 8 <= raw.count {
            let word = base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let control = (word &- ones &* 0x20) & ~word & highs
            let quoteWord = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
            let quote = (quoteWord &- ones) & ~quoteWord & highs
            let backslashWord = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
            let backslash = (backslashWord &- ones) & ~backslashWord & highs
            if control | quote | backslash != 0 { return true }
            offset += 8
        }
        while offset < raw.count {
            if needsEscape(raw[offset]) { return true }
            offset += 1
        }
        return false
    }

    private static func encodeString(_ text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { quoted(UnsafeRawBufferPointer($0)) }
    }

    /// Strings up to this many bytes with nothing to escape are quoted in scratch memory;
    /// longer ones go the appending way (scratch memory that large would come from the heap
    /// and be copied twice).
    static let maxScratchQuotedBytes = 4_096

    /// `quoted(_:)` as a pending write holds it: in place when the quoted string fits and needs
    /// no escape.
    @usableFromInline
    package static func quotedPacked(_ utf8: UnsafeRawBufferPointer) -> PackedBytes {
        guard utf8.count + 2 <= PackedBytes.inlineCapacity, !anyNeedsEscape(utf8) else { return PackedBytes(quoted(utf8)) }
        var scratch: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &scratch) { out in
            out[0] = UInt8(ascii: "\"")
            if let source = utf8.baseAddress, utf8.count > 0 {
                out.baseAddress!.advanced(by: 1).copyMemory(from: source, byteCount: utf8.count)
            }
            out[utf8.count + 1] = UInt8(ascii: "\"")
            return PackedBytes(UnsafeRawBufferPointer(rebasing: out[0 ..< utf8.count + 2]))
        }
    }

    /// `utf8` (valid UTF-8) as a JSON string: the quote, the backslash and control characters
    /// escaped, nothing else. The one escaping of strings in the package: typed values here and
    /// syncnode's Redis-protocol values both use it, so they write the same bytes.
    package static func quoted(_ utf8: UnsafeRawBufferPointer) -> [UInt8] {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        // Most strings need no escape: one word-at-a-time scan says so, and only the rest are
        // counted byte by byte (to size the result once).
        var escapes = 0
        if anyNeedsEscape(utf8) {
            for byte in utf8 where needsEscape(byte) { escapes += 1 }
        } else if utf8.count <= maxScratchQuotedBytes {
            // Written whole into scratch memory and copied once into an array of exactly that
            // size, without the unspecialised `reserveCapacity` and `append(contentsOf:)`:
            // 748 → 651 instructions for a 64-byte string (docs/design/0018-the-decision-path.md,
            // "Strings quoted in scratch memory").
            return withUnsafeTemporaryAllocation(byteCount: utf8.count + 2, alignment: 1) { out in
                out[0] = quote
                if let source = utf8.baseAddress, utf8.count > 0 {
                    out.baseAddress!.advanced(by: 1).copyMemory(from: source, byteCount: utf8.count)
                }
                out[utf8.count + 1] = quote
                return [UInt8](UnsafeRawBufferPointer(out))
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count + 2 + escapes * 5)
        out.append(quote)
        if escapes == 0 {
            out.append(contentsOf: utf8)
        } else {
            let hex = Array("0123456789abcdef".utf8)
            for byte in utf8 {
                switch byte {
                case quote: out += [backslash, quote]
                case backslash: out += [backslash, backslash]
                case 0x0A: out += [backslash, UInt8(ascii: "n")]
                case 0x0D: out += [backslash, UInt8(ascii: "r")]
                case 0x09: out += [backslash, UInt8(ascii: "t")]
                case 0x08: out += [backslash, UInt8(ascii: "b")]
                case 0x0C: out += [backslash, UInt8(ascii: "f")]
                case 0 ..< 0x20: out += [backslash, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
                default: out.append(byte)
                }
            }
        }
        out.append(quote)
        return out
    }

    /// A quoted string with no escapes and no control characters; anything else goes to JSONDecoder.
    private static func decodePlainString(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") else { return nil }
        let body = UnsafeRawBufferPointer(rebasing: bytes[1..<bytes.count - 1])
        if anyNeedsEscape(body) { return nil }
        return String(validating: body, as: UTF8.self)
    }
}
