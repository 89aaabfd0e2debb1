import CoreMetrics
import DecideCore
import Foundation
import Logging
import Synchronization

/// A node's store in SQLite: `<dataDirectory>/decide.sqlite` (WAL mode), written by one
/// dedicated thread in group commits.
///
/// Guarantees:
/// - the node's lock is never held while the disk works: commits are handed to a bounded
///   `StoreWriteQueue` (`maxQueuedCommits`); when it is full, `admit` — and so `decide` and
///   `apply` — waits for the writer (back-pressure, never unbounded memory);
/// - `strict`: the writer writes as soon as there is work; every commit queued while it syncs
///   goes into the next transaction, so concurrent deciders share one sync;
/// - `batched(intervalMilliseconds: n)`: the writer writes at most every n ms; a commit waits
///   at most n ms in memory before its transaction starts;
/// - a group commit writes each key once (its last-writer-wins winner in the group).
package final class SQLiteStore: NodeStore, @unchecked Sendable {
    /// The file name of the store inside a data directory.
    package static let fileName = "decide.sqlite"

    package let path: String
    package let durability: Durability
    package var persists: Bool { true }
    private let queue: StoreWriteQueue
    /// Touched by the opening thread until `load` starts the writer, then only by the writer.
    private let database: any StoreFile
    private let logger: Logger
    /// `decide_store_sync_seconds{node}`: each group commit's write and sync (docs/operations.md, "Metrics").
    private let syncTimer: CoreMetrics.Timer
    /// Told the position of the newest feed record each group commit made durable
    /// (`onFeedDurable`), on the writer thread.
    private let feedDurable = Mutex<(@Sendable (UInt64) -> Void)?>(nil)
    package var feedID: UInt64? { database.feedID }
    private let loaded = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)

    /// Opens (creating when absent) the store of node `nodeID` in `directory`. Throws when the
    /// directory cannot be created, the file is corrupt or in use, or belongs to another node.
    /// `wrapFile`, when given, is put in front of the opened file (`StoreFile`).
    package init(
        directory: String, nodeID: String, durability: Durability, maxQueuedCommits: Int, logger: Logger,
        wrapFile: (@Sendable (any StoreFile) -> any StoreFile)? = nil
    ) throws(StorageError) {
        precondition(durability != .memory, "SQLiteStore is for batched or strict durability")
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .unreadable(path: directory, reason: "cannot create the data directory: \(error.localizedDescription)")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .unreadable(path: directory, reason: "not a directory")
        }
        self.path = (directory as NSString).appendingPathComponent(Self.fileName)
        self.durability = durability
        self.logger = logger
        self.syncTimer = CoreMetrics.Timer(label: "decide_store_sync_seconds", dimensions: [("node", nodeID)], preferredDisplayUnit: .seconds)
        let opened = try SQLiteDatabase(path: path, nodeID: nodeID)
        self.database = wrapFile?(opened) ?? opened
        self.queue = StoreWriteQueue(capacityCommits: maxQueuedCommits, eager: durability == .strict)
    }

    deinit {
        // Without a writer thread (never started) or once closed, there is nothing to flush.
        if !started.load(ordering: .acquiring) { database.close() }
    }

    package func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp {
        precondition(!loaded.exchange(true, ordering: .acquiringAndReleasing), "a store is loaded once")
        return try database.load(body)
    }

    package func start(exclusion: @escaping StoreExclusion) {
        precondition(loaded.load(ordering: .acquiring), "a store is started after it is loaded")
        precondition(!started.exchange(true, ordering: .acquiringAndReleasing), "a store is started once")
        queue.start(exclusion: exclusion)
        queue.writerStarted()
        let thread = Thread { [self] in runWriter() }
        thread.name = "decide.storage"
        thread.start()
    }

    package func admit() -> StorageError? { queue.admit() }

    package func admitHoldingExclusion() -> StoreAdmission { queue.admitHoldingExclusion() }

    package func tryAdmitHoldingExclusion() -> Bool { queue.tryAdmitHoldingExclusion() }

    package func waitForRoom() { queue.waitForRoom() }

    package func cancelAdmission() { queue.cancelAdmissionHoldingExclusion() }

    package func append(changeCount: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) -> UInt64 {
        queue.appendHoldingExclusion(changeCount: changeCount, clock: clock, change: change)
    }

    package func appendUpserts(clock: HLCTimestamp, offering upserts: ((borrowing StateKey, () -> Entry) -> Void) -> Void) -> UInt64 {
        queue.appendTableUpsertsHoldingExclusion(clock: clock, offering: upserts)
    }

    package func wakeWriterIfAsked() { queue.wakeWriterIfAsked() }

    package func waitUntilDurable(_ ticket: UInt64) -> StorageError? { queue.waitUntilDurable(ticket) }

    package var failure: StorageError? { queue.failure }

    package func flush() throws(StorageError) {
        if let error = queue.flush() { throw error }
    }

    package func close() throws(StorageError) {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let flushError = queue.flush()
        queue.stop(with: .closed(path: path))
        if !started.load(ordering: .acquiring) { database.close() }
        if let flushError, flushError != .closed(path: path) { throw flushError }
    }

    // MARK: the change feed

    package func loadFeed(_ body: (UInt64, UnsafeRawBufferPointer) -> Void) throws(StorageError) {
        try database.loadFeed(body)
    }

    package func appendFeedRecordHoldingExclusion(_ record: UnsafeRawBufferPointer, position: UInt64) {
        queue.appendFeedHoldingExclusion(record, position: position)
    }

    package func startNewFeed() throws(StorageError) {
        try database.startNewFeed()
    }

    package func trimFeedHoldingExclusion(below position: UInt64) {
        queue.trimFeedHoldingExclusion(below: position)
    }

    package func onFeedDurable(_ handler: @escaping @Sendable (UInt64) -> Void) {
        feedDurable.withLock { $0 = handler }
    }

    // MARK: the writer thread

    private func runWriter() {
        let interval: TimeInterval
        if case .batched(let milliseconds) = durability { interval = Double(milliseconds) / 1_000 } else { interval = 0 }
        var due = Date.distantPast
        while let (group, lastTicket) = queue.take(dueAt: due) {
            if interval > 0 { due = Date(timeIntervalSinceNow: interval) }
            do {
                let started = ContinuousClock.now
                try database.write(group.changes, clock: group.clock, feed: group.feed)
                // The write and its sync (synchronous=FULL): what a strict decision waits for.
                let (seconds, attoseconds) = (ContinuousClock.now - started).components
                syncTimer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
                // Readers are given the records before a flush returns: what it waited for is readable.
                if group.feed.count > 0, let handler = feedDurable.withLock({ $0 }) { handler(group.feed.last) }
                queue.markDurable(lastTicket)
            } catch {
                let failure = StorageError.writeFailed(path: path, reason: "\(error)")
                logger.critical("\(failure): later decisions are refused; restart to recover from disk and peers")
                queue.fail(failure)
                break
            }
        }
        database.close()
        queue.writerExited()
    }
}
