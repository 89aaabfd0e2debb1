import DecideCore

/// One change a node took, as its change feed hands it out: every write it made to the node's
/// state at once (a decision's writes arrive together), where they came from, and the change's
/// position.
///
/// Guarantees: `delta` holds only writes that changed what this node stores (a peer's write
/// that lost to a newer one here is not in it); an `.expired`, `.ownerGone` or `.ownerBack`
/// change wrote nothing: each of its writes says a key now reads absent (no value) or, for
/// `.ownerBack`, reads its value again.
public struct FeedChange: Sendable {
    /// Where the change stands on its node's feed.
    public let position: FeedPosition
    /// The writes, under the one version they share.
    public let delta: Delta
    /// Where they came from.
    public let origin: CommittedDelta.Origin

    /// The change at `position`.
    init(position: FeedPosition, delta: Delta, origin: CommittedDelta.Origin) {
        self.position = position
        self.delta = delta
        self.origin = origin
    }

    /// The change with only the writes `filter` accepts; nil when it accepts none.
    func filtered(by filter: ChangeFilter) -> FeedChange? {
        if filter.acceptsEverything { return self }
        let writes = delta.writes.filter { filter.accepts($0.key) }
        if writes.isEmpty { return nil }
        if writes.count == delta.writes.count { return self }
        return FeedChange(position: position, delta: Delta(version: delta.version, writes: writes), origin: origin)
    }
}

/// Which writes a reader of a change feed wants: of keys whose state name is one of `names`,
/// or starts with `namePrefix`, or both conditions when both are given. A change with no
/// write left is not delivered (its position is skipped, so a filtered reader sees positions
/// with holes: they are still strictly increasing).
public struct ChangeFilter: Sendable {
    /// State names accepted (`AtomicState.name` and the like), nil for any.
    public var names: Set<String>?
    /// A prefix every accepted state name starts with, nil for any.
    public var namePrefix: String?

    /// A filter of `names` and `namePrefix`.
    public init(names: Set<String>? = nil, namePrefix: String? = nil) {
        self.names = names
        self.namePrefix = namePrefix
    }

    /// Every write of every change.
    public static let everything = ChangeFilter()

    /// Writes of keys whose state name starts with `prefix`.
    public static func prefix(_ prefix: String) -> ChangeFilter { ChangeFilter(namePrefix: prefix) }

    /// Writes of the states named `names`.
    public static func names(_ names: Set<String>) -> ChangeFilter { ChangeFilter(names: names) }

    var acceptsEverything: Bool { names == nil && (namePrefix?.isEmpty ?? true) }

    /// Whether a write of `key` passes.
    func accepts(_ key: StateKey) -> Bool {
        if let names, !names.contains(key.name) { return false }
        if let namePrefix, !key.name.hasPrefix(namePrefix) { return false }
        return true
    }
}

/// Why a change feed cannot go on from where a reader asked.
public enum ChangeFeedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The changes right after the reader's position were dropped from retention (`oldest` is
    /// the oldest still held): take a snapshot (`Node.changeFeedSnapshot`) and read on from
    /// its position.
    case outOfRetention(requested: FeedPosition, oldest: FeedPosition)
    /// The reader's position is past this feed's newest change: it came from another feed
    /// (another node, or this node before its history started over) or was made up.
    case aheadOfFeed(requested: FeedPosition, newest: FeedPosition)
    /// The reader named a feed this node's is not (`current`): its position means nothing
    /// here. Take a snapshot and read on from its position.
    case otherFeed(requested: ChangeFeedID, current: ChangeFeedID)
    /// This node keeps no change feed (its `Node.Configuration.changeFeed` is nil; syncnode's
    /// `--feed-max-changes` is 0).
    case disabled
    /// The node's store failed, so a snapshot cannot be made durable (the node refuses writes
    /// too; restart it).
    case storeFailed(String)

    public var description: String {
        switch self {
        case .outOfRetention(let requested, let oldest):
            "the changes after position \(requested) are no longer retained (the oldest is \(oldest)): take a snapshot and read on from its position"
        case .aheadOfFeed(let requested, let newest):
            "position \(requested) is past this feed's newest change \(newest): it belongs to another feed; take a snapshot and read on from its position"
        case .otherFeed(let requested, let current):
            "feed \(requested) is not this node's feed \(current): take a snapshot and read on from its position"
        case .disabled:
            "this node keeps no change feed (Node.Configuration.changeFeed is nil, or syncnode's --feed-max-changes is 0)"
        case .storeFailed(let reason):
            "the store failed, so no snapshot can be made durable: \(reason)"
        }
    }
}

/// Where a change feed reader starts.
public enum FeedStart: Sendable, Equatable {
    /// The oldest change still retained: every retained change, then the live ones.
    case oldestRetained
    /// The change right after `position`, which must be on the feed `feed` when one is given.
    case after(FeedPosition, feed: ChangeFeedID? = nil)
    /// Only changes taken from now on.
    case now
}
