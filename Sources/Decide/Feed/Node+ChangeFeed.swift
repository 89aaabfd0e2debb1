import DecideCore

/// Where a node's change feed stands.
public struct ChangeFeedBounds: Sendable, Equatable {
    /// The feed these positions belong to.
    public let feed: ChangeFeedID
    /// The oldest change retained (`newest + 1` when none is).
    public let oldest: FeedPosition
    /// The newest change readers can have (0 before the first): on a durable node, the newest
    /// on disk with its change.
    public let newest: FeedPosition
    /// How many changes are retained.
    public let retainedChanges: Int
    /// How many bytes the retained changes take (their records: header and encoded delta).
    public let retainedBytes: Int
    /// How many changes were dropped from retention since the feed began.
    public let droppedChanges: UInt64
}

/// What a reader resynchronises from: the values a node held (`entries`: keys that read as
/// present, sorted by key) and the feed position they cover.
///
/// Guarantees: applying `entries`, then every change of `changes(from: .after(position, feed:
/// feed))` in order, gives exactly what the node holds after the last change applied. The
/// entries are read in slices (no decision waits for the whole state), so a key changed while
/// they were read may show its newer value already; the change comes again on the feed, and
/// applying it again gives the same result.
public struct ChangeFeedSnapshot: Sendable {
    /// The feed `position` is on.
    public let feed: ChangeFeedID
    /// The newest change the entries cover: read on from the change after it.
    public let position: FeedPosition
    /// Every key that read as present, with its entry, sorted by key.
    public let entries: [KeyedEntry]
}

extension Node {
    /// Every change this node takes, from `start` on, with the writes `filter` accepts: the
    /// retained ones first, then each new one as it is taken (see `ChangeFeed` for what is
    /// guaranteed). Throws from the sequence, at the point it would skip a change, when the
    /// retention no longer holds the changes after the start (`ChangeFeedError.outOfRetention`);
    /// `changeFeedSnapshot` is how to go on from there.
    public func changes(from start: FeedStart = .now, filter: ChangeFilter = .everything) -> ChangeFeed {
        ChangeFeed(node: self, start: start, filter: filter)
    }

    /// Where the change feed stands; nil when this node keeps none.
    public var changeFeedBounds: ChangeFeedBounds? {
        core.withLock { core in
            core.feed.map { feed in
                ChangeFeedBounds(feed: feed.id, oldest: FeedPosition(rawValue: feed.oldest), newest: FeedPosition(rawValue: feed.servable),
                                 retainedChanges: feed.count, retainedBytes: feed.bytes, droppedChanges: feed.evicted)
            }
        }
    }

    /// The values this node holds that `filter` accepts, with the feed position they cover:
    /// what a reader the retention overtook, or one that moves to this node, starts again from.
    public func changeFeedSnapshot(filter: ChangeFilter = .everything) throws(ChangeFeedError) -> ChangeFeedSnapshot {
        guard let feed = changeFeedID else { throw .disabled }
        // Under the node's lock: no commit is half recorded, so every change at or below the
        // position is in the table the slices read after it.
        let position = FeedPosition(rawValue: core.withLock { $0.feed!.newest })
        let stored = entriesReadInSlices()
        if persists {
            // The entries may show changes up to the newest taken by now: on disk before the
            // snapshot is handed out, so that a crash cannot take back what a reader holds.
            let end = core.withLock { $0.feed!.newest }
            do throws(StorageError) {
                try store.flush()
            } catch {
                throw .storeFailed("\(error)")
            }
            guard core.withLock({ $0.feed!.servable }) >= end else { throw .storeFailed("the store did not make the feed durable") }
        }
        var entries: [KeyedEntry] = []
        var start = 0
        while start < stored.count {
            let end = min(stored.count, start + Self.readSliceRecords)
            core.withLock { core in
                let now = hybridNow(core)
                for item in stored[start..<end] where item.entry.packedValue != nil && filter.accepts(item.key) && core.isVisible(item.entry, now: now) {
                    entries.append(item)
                }
            }
            start = end
        }
        return ChangeFeedSnapshot(feed: feed, position: position, entries: entries)
    }

    /// One page of the feed for a front end that cannot await (the Redis protocol's loop, the
    /// simulator): up to `maxChanges` changes after `after` (on `feed`, when given), those
    /// `filter` accepts, and the position the page ends at (the last change looked at, kept
    /// or not: where the next page starts). An empty page at `after` means the reader is up to
    /// date; `waitForChange` tells it when that ends.
    package func readChanges(after: FeedPosition, feed: ChangeFeedID? = nil, maxChanges: Int,
                             filter: ChangeFilter = .everything) throws(ChangeFeedError) -> (changes: [FeedChange], end: FeedPosition) {
        guard let current = changeFeedID else { throw .disabled }
        if let feed, feed != current { throw .otherFeed(requested: feed, current: current) }
        // The bytes are copied under the lock, and decoded after it.
        let (read, codec) = core.withLock { core in
            (core.feed!.copy(after: after.rawValue, maxChanges: maxChanges, maxBytes: Self.feedPageBytes), core.feed!.codec)
        }
        switch read {
        case .records(let records, let count):
            let page = ChangeFeedLog.decode(records, first: after.rawValue + 1, codec: codec)
            return (page.compactMap { $0.filtered(by: filter) }, FeedPosition(rawValue: after.rawValue + UInt64(count)))
        case .upToDate, .finished:
            return ([], after)
        case .outOfRetention(let oldest):
            throw .outOfRetention(requested: after, oldest: oldest)
        case .ahead(let newest):
            throw .aheadOfFeed(requested: after, newest: newest)
        }
    }

    /// The most bytes of changes one `readChanges` call copies under the node's lock (at least
    /// one change, whatever its size).
    static let feedPageBytes = 256 * 1024

    /// Whether the feed has ended (the node shut down): a reader up to date stops then.
    package var changeFeedFinished: Bool { core.withLock { $0.feed?.finished ?? true } }

    /// Calls `wake` once, from whichever thread takes it (with the node's lock held: it must only
    /// hand the news on), when a change after `after` is taken or the feed ends; returns a token
    /// for `cancelChangeWait`, or nil (and never calls `wake`) when such a change is already
    /// there, the feed ended, or there is none.
    package func waitForChange(after: FeedPosition, _ wake: @escaping @Sendable () -> Void) -> UInt64? {
        core.withLock { $0.feed?.wait(after: after.rawValue, wake) }
    }

    /// How many `waitForChange` waits are registered (for tests and status: each is a reader
    /// parked until the next change).
    package var changeFeedWaiters: Int { core.withLock { $0.feed?.waiterCount ?? 0 } }

    /// Drops a `waitForChange` wait before it was called.
    package func cancelChangeWait(_ token: UInt64) {
        core.withLock { $0.feed?.cancelWait(token) }
    }
}
