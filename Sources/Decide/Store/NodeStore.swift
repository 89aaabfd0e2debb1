import DecideCore

/// Where a node keeps its entries across restarts, as the node's commit path sees it.
///
/// The node calls, for each commit (a local decision, an applied delta or catch-up batch that
/// changed something, or a tombstone collection):
/// 1. `admit()` *before* taking its lock — this is where back-pressure waits, so a full queue
///    never holds the lock;
/// 2. under its lock, either `append(_:)` (consuming the admission, in commit order) or
///    `cancelAdmission()` when there is nothing to write;
/// 3. after unlocking, with `Durability.strict`, `waitUntilDurable(_:)` on the ticket.
///
/// Guarantees an implementation must give: `load` yields every entry appended (and not
/// removed) before the last successful flush, merged last-writer-wins, so a replay of any
/// change is idempotent; at most the bound it documents of admitted commits wait in memory.
package protocol NodeStore: AnyObject, Sendable {
    /// False for a storage that keeps nothing: the node then skips every other call.
    var persists: Bool { get }
    /// The durability it was opened with.
    var durability: Durability { get }
    /// Calls `body` with every stored entry, then returns the stored clock (at least the
    /// highest timestamp this node ever took or merged). Called once, before any `append`.
    func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp
    /// Waits while the write queue is full; returns nil once a slot is reserved, or the error
    /// that makes the store refuse writes (failed or closed).
    func admit() -> StorageError?
    /// Gives back a slot `admit` reserved, for a commit that wrote nothing.
    func cancelAdmission()
    /// Queues one commit (consuming one admission) and returns its ticket: `changeCount`
    /// changes, the i-th being `change(i)`, in commit order, and the node's clock after it.
    /// Never blocks on disk; `change` is called before it returns and is not kept.
    func append(changeCount: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) -> UInt64
    /// `append` for a commit of upserts only (a local decision's): `upserts(offer)` calls
    /// `offer` with each key, lent for the call, and its entry, in commit order. The store
    /// copies a key only when it keeps it, not for a key it already holds a pending change of.
    func appendUpserts(clock: HLCTimestamp, offering upserts: ((borrowing StateKey, consuming Entry) -> Void) -> Void) -> UInt64
    /// Waits until the commit with `ticket`, and every one before it, is on disk; returns the
    /// error instead when the store failed first.
    func waitUntilDurable(_ ticket: UInt64) -> StorageError?
    /// Waits until everything appended so far is on disk.
    func flush() throws(StorageError)
    /// Flushes, then closes the store; later `admit` calls return `.closed`. Idempotent.
    func close() throws(StorageError)
}

/// One change to the store.
package enum StoreChange: Sendable {
    /// Offer this entry for the key (kept only when it wins last-writer-wins).
    case upsert(StateKey, Entry)
    /// Delete the key's entry if its version is at most this one: tombstone collection, or any
    /// other removal of an entry the node no longer holds. Every entry the store holds for a key
    /// is one the node merged, so one at most the removed version is superseded by the removal.
    case remove(StateKey, upTo: Version)
}
