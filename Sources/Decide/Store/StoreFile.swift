import DecideCore

/// One key's changes in a group commit, applied in this order: delete the stored row if its
/// version is at most `removeUpTo` (tombstone collection), then upsert `upsert`.
package struct StoreFileChange: Sendable {
    package var removeUpTo: Version?
    /// The entry to write; meaningful only while `hasUpsert`. Held without an `Optional`: a
    /// group commit replaces it for every write of a hot key, and replacing an optional entry
    /// destroyed the old one through `Optional`'s generic value witness (about 106
    /// instructions, against 54 for an entry's own: docs/design/0016-group-commit.md, "The
    /// technique").
    private var upsertEntry: Entry
    private var hasUpsert: Bool

    package init(removeUpTo: Version? = nil, upsert: consuming Entry? = nil) {
        self.removeUpTo = removeUpTo
        if let upsert {
            (upsertEntry, hasUpsert) = (upsert, true)
        } else {
            (upsertEntry, hasUpsert) = (Self.noEntry, false)
        }
    }

    /// The entry to write, if any.
    package var upsert: Entry? {
        get { hasUpsert ? upsertEntry : nil }
        set {
            if let newValue { (upsertEntry, hasUpsert) = (newValue, true) } else { (upsertEntry, hasUpsert) = (Self.noEntry, false) }
        }
    }

    /// Keeps the last-writer-wins winner of the held upsert and `entry` (`Entry.merged`),
    /// compared and replaced where it lies.
    package mutating func mergeUpsert(_ entry: consuming Entry) {
        if hasUpsert && upsertEntry.wins(over: entry) { return }
        upsertEntry = entry
        hasUpsert = true
    }

    /// What `upsertEntry` holds while there is no upsert: a tombstone no one reads.
    private static let noEntry = Entry(version: Version(timestamp: .zero, node: "", nodeHash: 0), packedValue: nil)
}

/// The file a `SQLiteStore` keeps its entries in: read once at start, then written one group
/// commit at a time by the store's writer thread. `SQLiteDatabase` is the file a node opens.
/// `Node.Configuration.storeFileWrapper` lets a caller put another in front of it, such as a
/// test's file that stalls or drops writes to stand for a slow disk or a killed process.
///
/// Guarantees asked of an implementation: `load` runs before any `write`, and both run on one
/// thread at a time; a `write` that returns without throwing is durable as the store's
/// durability level promises; `close` comes after the last `write`, and may come again (a store
/// closed before it was loaded closes once more when it goes): after the first, it does nothing.
package protocol StoreFile: AnyObject {
    /// Calls `body` with every stored entry and returns the stored clock.
    func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp
    /// Writes one group commit (one change per key), the node's clock and the group's change
    /// feed records and trim, in one transaction.
    func write(_ changes: [(key: StateKey, change: StoreFileChange)], clock: HLCTimestamp, feed: FeedRows) throws(StorageError)
    /// The id of the change feed the file keeps, made with it.
    var feedID: UInt64 { get }
    /// Calls `body` with every stored feed record and its position, in position order.
    func loadFeed(_ body: (UInt64, UnsafeRawBufferPointer) -> Void) throws(StorageError)
    /// Drops every feed record and takes a new feed id, in one transaction (before any `write`).
    func startNewFeed() throws(StorageError)
    /// Releases the file (and its lock) for another node.
    func close()
}
