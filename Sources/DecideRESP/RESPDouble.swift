/// Doubles spelled as Redis's `d2string` spells them in replies, so clients see the same text
/// from us as from Redis:
/// - `nan`, `inf`, `-inf`, `0`, `-0`;
/// - an integral value within ±2^62 as a plain integer (`3`, not `3.0`);
/// - otherwise the shortest digits that read back as the same double, laid out like Redis's
///   `fpconv_dtoa`: plain (`1234.5`, `0.00012`) for moderate exponents, else scientific with
///   an unpadded exponent (`1.5e+20`, `1e-7`).
///
/// The digits come from Swift's shortest round-trip formatting; Redis's grisu2 may pick a
/// longer spelling in rare cases, but both parse back to the same double.
enum RESPDouble {
    /// The text of `value`.
    static func text(_ value: Double) -> [UInt8] {
        if value.isNaN { return Array("nan".utf8) }
        if value.isInfinite { return Array((value < 0 ? "-inf" : "inf").utf8) }
        if value == 0 { return Array((value.sign == .minus ? "-0" : "0").utf8) }
        var bytes: [UInt8] = []
        // Redis's double2ll: integral and within ±LLONG_MAX/2 prints as an integer.
        let bound = Double(Int64.max / 2)
        if value >= -bound, value <= bound, value == value.rounded(.towardZero) {
            RESPDecimal.append(Int(Int64(value)), to: &bytes)
            return bytes
        }
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        let (digits, exponent) = shortestDigits(value.magnitude)
        emit(digits, exponent: exponent, negative: value < 0, into: &bytes)
        return bytes
    }

    /// The shortest round-trip decimal digits of a finite, positive `value` (no leading or
    /// trailing zeros) and the power of ten of the last digit: value = digits × 10^exponent.
    static func shortestDigits(_ value: Double) -> (digits: [UInt8], exponent: Int) {
        var digits: [UInt8] = []
        var exponent = 0
        var fractionDigits = 0
        var afterPoint = false
        var explicitExponent = 0
        var exponentSign = 1
        var inExponent = false
        for byte in value.description.utf8 {
            switch byte {
            case UInt8(ascii: "."): afterPoint = true
            case UInt8(ascii: "e"), UInt8(ascii: "E"): inExponent = true
            case UInt8(ascii: "-") where inExponent: exponentSign = -1
            case UInt8(ascii: "+"): break
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if inExponent {
                    explicitExponent = explicitExponent * 10 + Int(byte - UInt8(ascii: "0"))
                } else {
                    if !(digits.isEmpty && byte == UInt8(ascii: "0")) { digits.append(byte) }
                    if afterPoint { fractionDigits += 1 }
                }
            default: break
            }
        }
        exponent = exponentSign * explicitExponent - fractionDigits
        while digits.count > 1, digits.last == UInt8(ascii: "0") {
            digits.removeLast()
            exponent += 1
        }
        if digits.isEmpty { digits = [UInt8(ascii: "0")] }
        return (digits, exponent)
    }

    /// `fpconv_dtoa`'s layout of digits × 10^exponent (the sign is already written).
    static func emit(_ digits: [UInt8], exponent k: Int, negative: Bool, into bytes: inout [UInt8]) {
        let count = digits.count
        let decimalExponent = abs(k + count - 1)
        if k >= 0 && decimalExponent < count + 7 {
            bytes.append(contentsOf: digits)
            bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: k))
            return
        }
        if k < 0 && (k > -7 || decimalExponent < 4) {
            let offset = count - abs(k)
            if offset <= 0 {
                bytes.append(contentsOf: "0.".utf8)
                bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: -offset))
                bytes.append(contentsOf: digits)
            } else {
                bytes.append(contentsOf: digits[..<offset])
                bytes.append(UInt8(ascii: "."))
                bytes.append(contentsOf: digits[offset...])
            }
            return
        }
        let kept = min(count, 18 - (negative ? 1 : 0))
        bytes.append(digits[0])
        if kept > 1 {
            bytes.append(UInt8(ascii: "."))
            bytes.append(contentsOf: digits[1..<kept])
        }
        bytes.append(UInt8(ascii: "e"))
        bytes.append(k + kept - 1 < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
        RESPDecimal.append(magnitude: UInt(decimalExponent), to: &bytes)
    }
}
