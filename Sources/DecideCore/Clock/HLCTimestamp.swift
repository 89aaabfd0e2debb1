/// A hybrid logical clock reading: 48 bits of physical milliseconds since the Unix epoch and a
/// 16-bit logical counter, packed so that comparing `rawValue` compares (physical, logical).
///
/// Guarantees: the packing is total and order-preserving; `physicalMilliseconds` fits 48 bits
/// (until the year 10889); the encoding on the wire is `rawValue` as a little-endian u64.
public struct HLCTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// `physicalMilliseconds << 16 | logical`.
    public let rawValue: UInt64

    /// The largest physical part a timestamp can hold.
    public static let maxPhysicalMilliseconds: UInt64 = (1 << 48) - 1
    /// The largest logical counter before the clock borrows the next millisecond.
    public static let maxLogical: UInt16 = .max
    /// The timestamp before every other; the version of nothing.
    public static let zero = HLCTimestamp(rawValue: 0)

    /// The timestamp whose packed form is `rawValue` (physical milliseconds in the top 48 bits,
    /// the logical counter in the low 16); every value is a valid timestamp.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Packs the two parts; `physicalMilliseconds` must fit 48 bits.
    public init(physicalMilliseconds: UInt64, logical: UInt16) {
        precondition(physicalMilliseconds <= Self.maxPhysicalMilliseconds, "HLC physical time past 48 bits")
        self.rawValue = physicalMilliseconds << 16 | UInt64(logical)
    }

    /// Milliseconds since the Unix epoch, as the clock that made this timestamp saw them.
    public var physicalMilliseconds: UInt64 { rawValue >> 16 }
    /// The logical counter within `physicalMilliseconds`.
    public var logical: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    public static func < (lhs: HLCTimestamp, rhs: HLCTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "\(physicalMilliseconds).\(logical)" }
}
