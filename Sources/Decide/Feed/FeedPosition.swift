/// Where a change stands in one node's change feed: the node numbers every change it takes
/// (its own decisions, peers' deltas, catch-up, expiry, owned values hidden or shown) 1, 2, 3…
/// in the order it applied them (docs/consistency.md, "The change feed").
///
/// Guarantees: on one feed (`ChangeFeedID`) a position names one change for good; a later
/// change has a larger position; 0 stands before the first change. Positions of two nodes,
/// or of two feeds of one node (a memory node restarted), are unrelated.
public struct FeedPosition: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The change's number on its feed.
    public let rawValue: UInt64

    /// The position numbered `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Before the first change of a feed.
    public static let start = FeedPosition(rawValue: 0)

    public static func < (lhs: FeedPosition, rhs: FeedPosition) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { String(rawValue) }
}

/// Which feed a position belongs to: a node's feed starts with a new id when its history of
/// positions starts over (a node without a data directory starts; a store is created), so a
/// reader that resumes with the id it read from is told when its position means nothing here
/// (`ChangeFeedError.otherFeed`) instead of silently skipping changes.
public struct ChangeFeedID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The id's bits; never 0.
    public let rawValue: UInt64

    /// The id `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// A fresh id, never 0.
    static func random() -> ChangeFeedID {
        var generator = SystemRandomNumberGenerator()
        return ChangeFeedID(rawValue: UInt64.random(in: 1...UInt64.max, using: &generator))
    }

    /// Sixteen lower-case hex digits, as syncnode prints it.
    public var description: String {
        let digits = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The id `description` printed, nil for anything else.
    public init?(_ text: some StringProtocol) {
        guard text.count == 16, let value = UInt64(text, radix: 16), value != 0 else { return nil }
        rawValue = value
    }
}
