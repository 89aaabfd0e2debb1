import Decide
import Foundation

/// A disk that misbehaves on a test's command, for a node with a data directory: set
/// `Node.Configuration.storeFileWrapper` to `wrap`, and the node's store writes through it.
///
/// - `stall()` holds every write until `resume()`: the store's writer waits, commits queue up,
///   and whatever waits for the disk (strict decisions, back-pressure) waits with them.
/// - `crash()` stands for the process killed at that instant. A write under way completes,
///   nothing later reaches the file, and the file is closed so another node can open the
///   directory. The store sees later writes fail and refuses decisions from then on.
///
/// Guarantees: a write that returned before `crash()` is in the file; none after it is.
/// Package-only: the production store has no hooks of its own.
package final class StoreFaults: @unchecked Sendable {
    private let condition = NSCondition()
    private var stalled = false
    private var crashed = false
    /// Writes in progress on the inner file (the store's writer makes one at a time).
    private var writing = 0
    /// Writes waiting in `stall()`.
    private var held = 0
    private var file: (any StoreFile)?
    private var closed = false

    package init() {}

    /// Puts these faults in front of the store's file (`Node.Configuration.storeFileWrapper`).
    /// One `StoreFaults` serves one node.
    package var wrap: @Sendable (any StoreFile) -> any StoreFile {
        { [self] inner in
            condition.lock()
            defer { condition.unlock() }
            precondition(file == nil, "one StoreFaults serves one node's store")
            file = inner
            return FaultyFile(faults: self)
        }
    }

    /// Holds every write from now on until `resume()`.
    package func stall() {
        condition.lock()
        stalled = true
        condition.unlock()
    }

    /// Waits until the store's writer is held in a stalled write (after `stall()`).
    package func waitUntilAWriteIsHeld() {
        condition.lock()
        while held == 0 { condition.wait() }
        condition.unlock()
    }

    /// Lets held and later writes through.
    package func resume() {
        condition.lock()
        stalled = false
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for a write under way, then drops every later write and closes the file.
    package func crash() {
        condition.lock()
        crashed = true
        condition.broadcast()
        while writing > 0 { condition.wait() }
        closeFile()
        condition.unlock()
    }

    /// Call with the lock held.
    private func closeFile() {
        guard !closed, let file else { return }
        closed = true
        file.close()
    }

    fileprivate func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp {
        condition.lock()
        let file = self.file!
        condition.unlock()
        return try file.load(body)
    }

    fileprivate func loadFeed(_ body: (UInt64, UnsafeRawBufferPointer) -> Void) throws(StorageError) {
        condition.lock()
        let file = self.file!
        condition.unlock()
        try file.loadFeed(body)
    }

    fileprivate func startNewFeed() throws(StorageError) {
        condition.lock()
        let file = self.file!
        condition.unlock()
        try file.startNewFeed()
    }

    fileprivate var feedID: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return file!.feedID
    }

    fileprivate func write(_ changes: [(key: StateKey, change: StoreFileChange)], clock: HLCTimestamp, feed: FeedRows) throws(StorageError) {
        condition.lock()
        while stalled && !crashed {
            held += 1
            condition.broadcast()
            condition.wait()
            held -= 1
        }
        guard !crashed, let file else {
            condition.unlock()
            throw .writeFailed(path: "(a test's crashed disk)", reason: "the process stands killed (StoreFaults.crash)")
        }
        writing += 1
        condition.unlock()
        defer {
            condition.lock()
            writing -= 1
            condition.broadcast()
            condition.unlock()
        }
        try file.write(changes, clock: clock, feed: feed)
    }

    fileprivate func close() {
        condition.lock()
        closeFile()
        condition.unlock()
    }
}

/// The file a node's store sees: every call goes through its `StoreFaults`.
private final class FaultyFile: StoreFile {
    let faults: StoreFaults

    init(faults: StoreFaults) { self.faults = faults }

    func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp { try faults.load(body) }

    func write(_ changes: [(key: StateKey, change: StoreFileChange)], clock: HLCTimestamp, feed: FeedRows) throws(StorageError) {
        try faults.write(changes, clock: clock, feed: feed)
    }

    var feedID: UInt64 { faults.feedID }

    func loadFeed(_ body: (UInt64, UnsafeRawBufferPointer) -> Void) throws(StorageError) { try faults.loadFeed(body) }

    func startNewFeed() throws(StorageError) { try faults.startNewFeed() }

    func close() { faults.close() }
}
