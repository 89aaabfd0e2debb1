import DecideCore

/// Where a node keeps its entries across restarts, as the node's commit path sees it.
///
/// The store is started with an *exclusion* (`start(exclusion:)`): the node's lock, which every
/// commit holds while it admits and appends, so queueing a commit takes no lock of the store's
/// (docs/design/0016-group-commit.md, "The technique"). The node calls, for each commit
/// (a local decision, an applied delta or catch-up batch that changed something, or a
/// tombstone collection):
/// 1. `admitHoldingExclusion()` under its lock — on `.full`, it releases the lock, waits in
///    `waitForRoom()` (back-pressure, so a full queue never holds the lock) and tries again; or
///    `admit()` before taking its lock, which takes the exclusion itself and waits;
/// 2. under its lock, either `append` or `appendUpserts` (consuming the admission, in commit
///    order) or `cancelAdmission()` when there is nothing to write;
/// 3. after unlocking, `wakeWriterIfAsked()`, and with `Durability.strict`,
///    `waitUntilDurable(_:)` on the ticket.
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
    /// highest timestamp this node ever took or merged). Called once, before `start`.
    func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp
    /// Starts writing, with `exclusion` as the lock the commit calls below are made under (the
    /// node's); the store's writer takes it to take the queued commits. Called once, after
    /// `load` and before any commit.
    func start(exclusion: @escaping StoreExclusion)
    /// Not under the exclusion: waits while the write queue is full; returns nil once a slot is
    /// reserved, or the error that makes the store refuse writes (failed or closed).
    func admit() -> StorageError?
    /// Under the exclusion: reserves a slot if there is room; never waits.
    func admitHoldingExclusion() -> StoreAdmission
    /// `admitHoldingExclusion()` that only says whether it reserved a slot (a decision's
    /// admission, which on false lets go of the lock and calls `admit()`, which says why).
    func tryAdmitHoldingExclusion() -> Bool
    /// Not under the exclusion: waits until the queue may have room, or the store stopped.
    func waitForRoom()
    /// Under the exclusion: gives back a slot `admit` reserved, for a commit that wrote nothing.
    func cancelAdmission()
    /// Under the exclusion: queues one commit (consuming one admission) and returns its ticket:
    /// `changeCount` changes, the i-th being `change(i)`, in commit order, and the node's clock
    /// after it. Never blocks on disk; `change` is called before it returns and is not kept.
    func append(changeCount: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) -> UInt64
    /// `append` for a commit of upserts only (a local decision's), each already merged into the
    /// node's table: `upserts(offer)` calls `offer` with each key, lent for the call, and a way
    /// to build its entry, in commit order. The store copies a key only when it keeps it, not
    /// for a key it already holds a pending change of; for such a key it may skip the entry and
    /// read the key's entry from the table when it writes (through the exclusion's `StoredEntries`).
    func appendUpserts(clock: HLCTimestamp, offering upserts: ((borrowing StateKey, () -> Entry) -> Void) -> Void) -> UInt64
    /// Not under the exclusion: wakes the writer and waiting admitters if a commit call asked
    /// for it (one atomic load when none did).
    func wakeWriterIfAsked()
    /// Waits until the commit with `ticket`, and every one before it, is on disk; returns the
    /// error instead when the store failed first.
    func waitUntilDurable(_ ticket: UInt64) -> StorageError?
    /// The error that makes the store refuse writes from now on (it failed or closed), nil
    /// while it takes them. Never waits; once set, it stays set.
    var failure: StorageError? { get }
    /// Waits until everything appended so far is on disk.
    func flush() throws(StorageError)
    /// Flushes, then closes the store; later `admit` calls return `.closed`. Idempotent.
    func close() throws(StorageError)

    // The change feed (docs/design/0020-the-change-feed.md, "Durable retention").

    /// The id of the change feed kept in this store, made with it; nil for a store that keeps
    /// nothing (the node then starts a fresh feed each time).
    var feedID: UInt64? { get }
    /// Calls `body` with every stored feed record (a `ChangeFeedLog` record) and its position,
    /// in position order. Called once, before `start`.
    func loadFeed(_ body: (UInt64, UnsafeRawBufferPointer) -> Void) throws(StorageError)
    /// Under the exclusion: queues the record of the change at `position` with the pending
    /// group, written in the same transaction as the entries committed around it.
    func appendFeedRecordHoldingExclusion(_ record: UnsafeRawBufferPointer, position: UInt64)
    /// Drops every stored feed record and gives the store a new feed id (a node that keeps no
    /// feed this time: a feed later would miss what changed meanwhile). Before `start`.
    func startNewFeed() throws(StorageError)
    /// Under the exclusion: the stored feed records below `position` go with the next group.
    func trimFeedHoldingExclusion(below position: UInt64)
    /// `handler` is told, on the store's writer thread, the position of the newest feed record
    /// each group commit made durable.
    func onFeedDurable(_ handler: @escaping @Sendable (UInt64) -> Void)
}

/// Runs its argument while holding the lock the node holds for every commit (`NodeStore.start`),
/// and hands it the node's stored entries to read while it holds it.
package typealias StoreExclusion = @Sendable ((StoredEntries) -> Void) -> Void

/// The entry the node's table holds for a key (nil: none), valid only inside the exclusion
/// that handed it over.
package typealias StoredEntries = (borrowing StateKey) -> Entry?

/// What a store's admission under the node's lock found (`NodeStore.admitHoldingExclusion`).
package enum StoreAdmission: Equatable, Sendable {
    /// A slot is reserved for one commit.
    case admitted
    /// The queue is full: release the lock, `waitForRoom`, and try again.
    case full
    /// The store failed or closed: nothing more is written.
    case refused(StorageError)
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
