import DecideCore

/// The storage of a node without a data directory: it keeps nothing, so a restarted node
/// starts empty. Costs nothing — the node skips it (`persists == false`).
package final class InMemoryStore: NodeStore {
    package init() {}
    package var persists: Bool { false }
    package var durability: Durability { .memory }
    package func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp { .zero }
    package func start(exclusion: @escaping StoreExclusion) {}
    package func admit() -> StorageError? { nil }
    package func admitHoldingExclusion() -> StoreAdmission { .admitted }
    package func tryAdmitHoldingExclusion() -> Bool { true }
    package func waitForRoom() {}
    package func cancelAdmission() {}
    package func append(changeCount: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) -> UInt64 { 0 }
    package func appendUpserts(clock: HLCTimestamp, offering upserts: ((borrowing StateKey, () -> Entry) -> Void) -> Void) -> UInt64 { 0 }
    package func wakeWriterIfAsked() {}
    package func waitUntilDurable(_ ticket: UInt64) -> StorageError? { nil }
    package var failure: StorageError? { nil }
    package func flush() throws(StorageError) {}
    package func close() throws(StorageError) {}
    package var feedID: UInt64? { nil }
    package func loadFeed(_ body: (UInt64, UnsafeRawBufferPointer) -> Void) throws(StorageError) {}
    package func appendFeedRecordHoldingExclusion(_ record: UnsafeRawBufferPointer, position: UInt64) {}
    package func trimFeedHoldingExclusion(below position: UInt64) {}
    package func startNewFeed() throws(StorageError) {}
    package func onFeedDurable(_ handler: @escaping @Sendable (UInt64) -> Void) {}
}
