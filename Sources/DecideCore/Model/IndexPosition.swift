/// Where one element sits in an ordered index: a string of 64-bit digits, compared
/// lexicographically (a proper prefix sorts first). Every replica orders an index's elements by
/// (position, element id bytes), so they all compute the same order from the same entries
/// whatever order the entries arrived in (docs/consistency.md, "Ordered indexes").
///
/// Guarantees:
/// - `appending(after:writer:)` is greater than its argument, and `between(_:_:writer:)` lies
///   strictly between two ordered positions; neither needs any other element;
/// - every made position ends with a non-zero digit, so there is always room before it;
/// - runs stay together: positions one writer makes by appending after its own last element
///   share a first digit and its tag, so two writers that each append a run while partitioned
///   end with each run contiguous (not interleaved) once they heal;
/// - any bytes from a peer are safe: `init?(encoded:)` refuses what is not a position, and the
///   functions never trap on positions that are out of order or degenerate.
package struct IndexPosition: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let digits: [UInt64]

    /// The most digits a position may have (a peer's longer one is refused; a decision that
    /// would make one aborts: about 64 inserts at exactly one place add one digit).
    package static let maxDigits = 64

    package init(digits: [UInt64]) { self.digits = digits }

    /// The first position of an empty index: a first digit with room on both sides.
    package static func first(writer tag: UInt64) -> IndexPosition {
        IndexPosition(digits: [1 << 32, tag, 1])
    }

    /// A writer's tag: its node id's stable hash, made odd so it is never 0.
    package static func tag(ofNodeHash hash: UInt64) -> UInt64 { hash | 1 }

    /// A position after `last` (the greatest in the index): the next of `writer`'s run when
    /// `last` is one of its run positions, else the start of a new run one first digit later.
    package static func appending(after last: IndexPosition, writer tag: UInt64) -> IndexPosition {
        let digits = last.digits
        if digits.count == 3, digits[1] == tag, digits[2] < UInt64.max {
            return IndexPosition(digits: [digits[0], tag, digits[2] + 1])
        }
        if let head = digits.first, head < UInt64.max {
            return IndexPosition(digits: [head + 1, tag, 1])
        }
        return between(last, nil, writer: tag)
    }

    /// A position strictly after `lower` and strictly before `upper` (nil: unbounded on that
    /// side), ending with `writer`'s tag so two writers inserting at one place concurrently
    /// make different positions. When `lower` is not below `upper` (only a peer's bad data can
    /// do that) the result is after `lower`.
    package static func between(_ lower: IndexPosition?, _ upper: IndexPosition?, writer tag: UInt64) -> IndexPosition {
        var result: [UInt64] = []
        // Whether the digits so far equal `lower`'s (`upper`'s) first digits.
        var tiedLower = lower != nil
        var tiedUpper = upper != nil
        let low = lower?.digits ?? []
        let high = upper?.digits ?? []
        var index = 0
        while index <= max(low.count, high.count) {
            // Open bounds for this digit: -1 and 2^64 mean "none".
            let floor: Int128 = tiedLower && index < low.count ? Int128(low[index]) : -1
            let ceiling: Int128
            if tiedUpper {
                guard index < high.count else { break }  // equal to `upper` so far: nothing fits below it
                ceiling = Int128(high[index])
            } else {
                ceiling = Int128(UInt64.max) + 1
            }
            if ceiling - floor >= 2 {
                result.append(UInt64(floor + (ceiling - floor) / 2))
                return IndexPosition(digits: result + [tag])
            }
            // No digit strictly between: take the lower bound's (or 0) and go one digit deeper.
            let digit = UInt64(max(floor, 0))
            result.append(digit)
            if Int128(digit) > floor { tiedLower = false }
            if Int128(digit) < ceiling { tiedUpper = false }
            index += 1
        }
        // Only when `lower` is not below `upper`: after `lower`, by extending it.
        return IndexPosition(digits: low + [tag])
    }

    package static func < (lhs: IndexPosition, rhs: IndexPosition) -> Bool {
        lhs.digits.lexicographicallyPrecedes(rhs.digits)
    }

    /// The order of an index's elements, the same on every replica: by position, then (for equal
    /// positions) by the element id's bytes.
    package static func orders(_ lhs: IndexPosition, _ lhsElement: [UInt8], before rhs: IndexPosition, _ rhsElement: [UInt8]) -> Bool {
        lhs != rhs ? lhs < rhs : lhsElement.lexicographicallyPrecedes(rhsElement)
    }

    /// 16 lowercase hex digits per digit, joined by dots: fixed width, so the text sorts as the
    /// position does, and it reads well in a dump.
    package var encoded: String {
        digits.map { digit in
            let hex = String(digit, radix: 16)
            return String(repeating: "0", count: 16 - hex.utf8.count) + hex
        }.joined(separator: ".")
    }

    /// The position `encoded` wrote; nil for anything else (wrong width, not hex, empty, more
    /// than `maxDigits`).
    package init?(encoded text: String) {
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= Self.maxDigits else { return nil }
        var digits: [UInt64] = []
        digits.reserveCapacity(parts.count)
        for part in parts {
            guard part.count == 16 else { return nil }
            var digit: UInt64 = 0
            for byte in part {
                let nibble: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
                default: return nil
                }
                digit = digit << 4 | UInt64(nibble)
            }
            digits.append(digit)
        }
        self.digits = digits
    }

    package var description: String { encoded }
}
