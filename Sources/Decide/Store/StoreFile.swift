import DecideCore

/// One key's changes in a group commit, applied in this order: delete the stored row if its
/// version is at most `removeUpTo` (tombstone collection), then upsert `upsert`.
package struct StoreFileChange: Sendable {
    package var removeUpTo: Version?
    package var upsert: Entry?

    package init(removeUpTo: Version? = nil, upsert: Entry? = nil) {
        self.removeUpTo = removeUpTo
        self.upsert = upsert
    }
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
    /// Writes one group commit (one change per key) and the node's clock, in one transaction.
    func write(_ changes: [StateKey: StoreFileChange], clock: HLCTimestamp) throws(StorageError)
    /// Releases the file (and its lock) for another node.
    func close()
}
