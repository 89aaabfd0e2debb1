/// How much of its change feed a node retains for readers that fell behind or reconnect
/// (docs/operations.md, "The change feed").
///
/// A node keeps a feed only when its `Node.Configuration.changeFeed` is set (syncnode sets it
/// unless `--feed-max-changes 0`).
///
/// Guarantees: the feed holds at most `maxRetainedChanges` changes and about
/// `maxRetainedBytes` (the newest change is always held, whatever its size); the oldest go
/// first, and a reader whose position they passed is told so (`ChangeFeedError.outOfRetention`),
/// never skipped silently.
public struct ChangeFeedConfiguration: Sendable, Equatable {
    /// The most changes retained: 1 to 100,000,000. (A node keeps no feed at all when its
    /// `Node.Configuration.changeFeed` is nil.)
    public var maxRetainedChanges = 1_000_000
    /// The most bytes retained, counted as the feed keeps them: per change a 5-byte header and
    /// its delta's wire encoding (`ChangeFeedLog`). At least 64 KiB, at most 64 GiB.
    public var maxRetainedBytes = 64 * 1024 * 1024

    /// The defaults: a million changes or 64 MiB, whichever is reached first.
    public init() {}

    /// A feed retaining at most `maxRetainedChanges` changes and `maxRetainedBytes` bytes.
    public init(maxRetainedChanges: Int, maxRetainedBytes: Int) {
        self.maxRetainedChanges = maxRetainedChanges
        self.maxRetainedBytes = maxRetainedBytes
    }

    static let maxRetainedChangesLimit = 100_000_000
    static let retainedBytesRange = (64 * 1024)...(64 * 1024 * 1024 * 1024)

    /// Why these bounds cannot be used, nil when they can.
    var problem: String? {
        if !(1...Self.maxRetainedChangesLimit).contains(maxRetainedChanges) {
            return "changeFeed.maxRetainedChanges must be 1 to \(Self.maxRetainedChangesLimit), not \(maxRetainedChanges)"
        }
        if !Self.retainedBytesRange.contains(maxRetainedBytes) {
            return "changeFeed.maxRetainedBytes must be \(Self.retainedBytesRange.lowerBound) to \(Self.retainedBytesRange.upperBound), not \(maxRetainedBytes)"
        }
        return nil
    }
}
