/// Decimal integers as RESP spells them, in both directions, without going through `String`.
enum RESPDecimal {
    /// The value of `bytes[range]` if it is strictly a 64-bit decimal integer, as Redis's
    /// `string2ll` accepts it: an optional `-`, no `+`, no leading zeros (only "0" itself, and
    /// no "-0"), no spaces, at most 20 characters, no overflow. Otherwise nil. Touches only
    /// indices inside `range`, which must lie inside `bytes`.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int64? {
        let count = range.count
        guard count > 0, count < 21 else { return nil }
        var index = range.lowerBound
        if count == 1 && bytes[index] == UInt8(ascii: "0") { return 0 }
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative {
            index += 1
            guard index < range.upperBound else { return nil }
        }
        let first = bytes[index] &- UInt8(ascii: "0")
        guard first >= 1, first <= 9 else { return nil }
        var magnitude = UInt64(first)
        index += 1
        while index < range.upperBound {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit <= 9 else { return nil }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = sum
            index += 1
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// `parse` over a contiguous array slice (tests and the reply parser's small lines).
    static func parse(_ bytes: ArraySlice<UInt8>) -> Int64? {
        bytes.withUnsafeBufferPointer { parse($0, 0..<$0.count) }
    }

    /// Appends `value` in decimal (a `-` and then digits, no leading zeros) to `bytes`.
    static func append(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        append(magnitude: value.magnitude, to: &bytes)
    }

    /// Appends `magnitude` in decimal digits to `bytes`: fills a 20-byte stack buffer from
    /// the last digit backwards, then appends the digits in one go.
    static func append(magnitude: UInt, to bytes: inout [UInt8]) {
        if magnitude < 10 {
            bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude))
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var index = digits.count
            var remaining = magnitude
            repeat {
                index -= 1
                digits[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
                remaining /= 10
            } while remaining > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[index...]))
        }
    }
}
