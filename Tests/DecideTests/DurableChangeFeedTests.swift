@testable import Decide
import CSQLite
import DecideCore
import DecideTesting
import Foundation
import Testing

/// A durable node's change feed across restarts and crashes (docs/design/0020-the-change-feed.md,
/// "Durable retention"): the same feed and positions after a restart, readers given only what a
/// crash cannot take back, retention trimmed on disk too, and a new feed after a run that kept
/// none.
@Suite struct DurableChangeFeedTests {
    typealias Scratch = StorageTests.Scratch

    static func open(_ scratch: Scratch, durability: Durability, faults: StoreFaults? = nil,
                     configure: (inout Node.Configuration) -> Void = { _ in }) throws -> Node {
        try StorageTests.open(scratch, durability: durability, faults: faults) { configuration in
            configuration.changeFeed = ChangeFeedConfiguration()
            configure(&configuration)
        }
    }

    static func readAll(_ node: Node, after position: FeedPosition, feed: ChangeFeedID? = nil) throws -> [FeedChange] {
        try ChangeFeedTests.readAll(node, after: position, feed: feed).changes
    }

    @Test(arguments: StorageTests.durableLevels)
    func theFeedGoesOnAcrossARestartWithTheSamePositions(durability: Durability) throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let node = try Self.open(scratch, durability: durability)
        for index in 0..<500 { node.decide(ChangeFeedTests.Put(keys: ["k\(index % 40)"], value: index)) }
        try node.flush()
        let feed = try #require(node.changeFeedBounds).feed
        let before = try Self.readAll(node, after: .start, feed: feed)
        #expect(before.count == 500)
        try node.close()

        let reopened = try Self.open(scratch, durability: durability)
        let bounds = try #require(reopened.changeFeedBounds)
        #expect(bounds.feed == feed && bounds.oldest == FeedPosition(rawValue: 1) && bounds.newest == FeedPosition(rawValue: 500))
        // A reader that had read 300 goes on with 301..500, the same changes.
        let rest = try Self.readAll(reopened, after: FeedPosition(rawValue: 300), feed: feed)
        #expect(rest.map(\.position.rawValue) == Array(301...500))
        #expect(rest.map(\.delta) == before.suffix(200).map(\.delta))
        // New changes are numbered on from there.
        reopened.decide(ChangeFeedTests.Put(keys: ["after"], value: 1))
        try reopened.flush()
        #expect(try Self.readAll(reopened, after: FeedPosition(rawValue: 500), feed: feed).map(\.position.rawValue) == [501])
        try reopened.close()
    }

    @Test func aReaderIsGivenOnlyWhatIsOnDiskSoACrashTakesBackNothingItRead() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let disk = StoreFaults()
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 60_000), faults: disk)
        // The first group is written at once; the next waits for the interval (longer than the test).
        node.decide(ChangeFeedTests.Put(keys: ["k0"], value: 0))
        try node.flush()
        for index in 1..<10 { node.decide(ChangeFeedTests.Put(keys: ["k\(index)"], value: index)) }
        // Not on disk yet: the reader gets only the first.
        #expect(try Self.readAll(node, after: .start).map(\.position.rawValue) == [1])
        #expect(node.changeFeedBounds?.newest == FeedPosition(rawValue: 1))
        try node.flush()
        var mirror = ChangeFeedTests.Mirror()
        let read = try Self.readAll(node, after: .start)
        #expect(read.map(\.position.rawValue) == Array(1...10))
        read.forEach { mirror.apply($0) }
        // Ten more that never reach the disk: never read, then lost with the process.
        for index in 10..<20 { node.decide(ChangeFeedTests.Put(keys: ["k\(index)"], value: index)) }
        #expect(try Self.readAll(node, after: FeedPosition(rawValue: 10)).isEmpty)
        disk.crash()

        let reopened = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5))
        let feed = try #require(reopened.changeFeedBounds).feed
        #expect(reopened.changeFeedBounds?.newest == FeedPosition(rawValue: 10))
        // The positions the crash took back are given again, to changes no reader ever saw.
        reopened.decide(ChangeFeedTests.Put(keys: ["k3"], value: 333))
        try reopened.flush()
        let rest = try Self.readAll(reopened, after: FeedPosition(rawValue: 10), feed: feed)
        #expect(rest.map(\.position.rawValue) == [11])
        rest.forEach { mirror.apply($0) }
        #expect(mirror.values == ChangeFeedTests.Mirror.of(reopened))
        try reopened.close()
    }

    @Test(arguments: StorageTests.durableLevels)
    func aStrictOrBatchedNodeGivesEachChangeOnceItIsOnDisk(durability: Durability) async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let node = try Self.open(scratch, durability: durability)
        let seen = Recorder<UInt64>()
        let reader = Task {
            for try await change in node.changes(from: .after(.start)) { seen.append(change.position.rawValue) }
        }
        for index in 0..<50 { node.decide(ChangeFeedTests.Put(keys: ["k"], value: index)) }
        // The batched one at 60 s writes only when flushed.
        if durability == .batched(intervalMilliseconds: 60_000) { try node.flush() }
        #expect(await seen.wait { $0 == Array(1...50) })
        reader.cancel()
        try node.close()
    }

    @Test func retentionIsTrimmedOnDiskToo() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let small: (inout Node.Configuration) -> Void = { $0.changeFeed = ChangeFeedConfiguration(maxRetainedChanges: 100, maxRetainedBytes: 64 * 1024 * 1024) }
        let node = try Self.open(scratch, durability: .strict, configure: small)
        for index in 0..<1_000 { node.decide(ChangeFeedTests.Put(keys: ["k\(index % 9)"], value: index)) }
        try node.close()
        // Reopened with room for all: only the retained hundred were kept.
        let reopened = try Self.open(scratch, durability: .strict)
        let bounds = try #require(reopened.changeFeedBounds)
        #expect(bounds.oldest == FeedPosition(rawValue: 901) && bounds.newest == FeedPosition(rawValue: 1_000) && bounds.retainedChanges == 100)
        try reopened.close()
        // Reopened with less room: trimmed at load, and on disk.
        let tighter = try Self.open(scratch, durability: .strict) { $0.changeFeed?.maxRetainedChanges = 10 }
        #expect(tighter.changeFeedBounds?.oldest == FeedPosition(rawValue: 991))
        tighter.decide(ChangeFeedTests.Put(keys: ["x"], value: 1))
        try tighter.close()
        let last = try Self.open(scratch, durability: .strict)
        #expect(last.changeFeedBounds?.oldest == FeedPosition(rawValue: 992) && last.changeFeedBounds?.newest == FeedPosition(rawValue: 1_001))
        try last.close()
    }

    @Test func aRunThatKeptNoFeedMakesTheNextFeedANewOne() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let node = try Self.open(scratch, durability: .strict)
        node.decide(ChangeFeedTests.Put(keys: ["a"], value: 1))
        let first = try #require(node.changeFeedBounds).feed
        try node.close()
        let without = try Self.open(scratch, durability: .strict) { $0.changeFeed = nil }
        without.decide(ChangeFeedTests.Put(keys: ["a"], value: 2))   // a change no feed records
        try without.close()
        let again = try Self.open(scratch, durability: .strict)
        let second = try #require(again.changeFeedBounds).feed
        #expect(second != first)
        #expect(throws: ChangeFeedError.otherFeed(requested: first, current: second)) {
            try again.readChanges(after: FeedPosition(rawValue: 1), feed: first, maxChanges: 10)
        }
        #expect(again.changeFeedBounds?.newest == .start)
        try again.close()
    }

    @Test func aSnapshotOfADurableNodeIsOnDiskBeforeItIsHandedOut() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let disk = StoreFaults()
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 60_000), faults: disk)
        for index in 0..<20 { node.decide(ChangeFeedTests.Put(keys: ["k\(index % 5)"], value: index)) }
        let snapshot = try node.changeFeedSnapshot()
        #expect(snapshot.position == FeedPosition(rawValue: 20) && snapshot.entries.count == 5)
        disk.crash()
        let reopened = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5))
        // Everything the snapshot showed survived the crash.
        #expect(reopened.changeFeedBounds?.newest == FeedPosition(rawValue: 20))
        #expect(Set(try reopened.changeFeedSnapshot().entries) == Set(snapshot.entries))
        try reopened.close()
    }
}

/// A store written before the change feed (format 2) gains it when opened: its entries stay,
/// and the feed starts at position 1 with an id that the next start keeps.
extension DurableChangeFeedTests {
    @Test func aStoreFromBeforeTheFeedGainsOneAndKeepsItsEntries() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let node = try Self.open(scratch, durability: .strict) { $0.changeFeed = nil }
        node.decide(ChangeFeedTests.Put(keys: ["kept"], value: 7))
        try node.close()
        // Back to format 2: no feed table, no feed id.
        var handle: OpaquePointer?
        #expect(sqlite3_open(scratch.store, &handle) == SQLITE_OK)
        for sql in ["DROP TABLE feed", "DELETE FROM meta WHERE key = 'feed_id'", "UPDATE meta SET value = 2 WHERE key = 'format'"] {
            #expect(sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK, "\(sql)")
        }
        sqlite3_close(handle)

        let upgraded = try Self.open(scratch, durability: .strict)
        #expect(upgraded.entry(for: StateKey(name: "kept"))?.value == Array("7".utf8))
        let feed = try #require(upgraded.changeFeedBounds).feed
        upgraded.decide(ChangeFeedTests.Put(keys: ["new"], value: 8))
        #expect(try Self.readAll(upgraded, after: .start, feed: feed).map(\.position.rawValue) == [1])
        try upgraded.close()
        let again = try Self.open(scratch, durability: .strict)
        #expect(again.changeFeedBounds?.feed == feed && again.changeFeedBounds?.newest == FeedPosition(rawValue: 1))
        try again.close()
    }

    /// The store tells the node's state what is durable; the state's feed holds the store: the
    /// node's state must still go with the node (it once stayed, with every entry).
    @Test func aDurableNodesStateGoesWithTheNode() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        weak var state: NodeLock<NodeCore>?
        do {
            let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5))
            node.decide(ChangeFeedTests.Put(keys: ["k"], value: 1))
            try node.flush()
            state = node.core
            try node.close()
        }
        #expect(state == nil, "the node's state outlived it")
    }
}
