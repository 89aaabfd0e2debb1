import Decide
import DecideCore
import DecideTesting
import Foundation
import Testing

/// A node's change feed on its own (docs/consistency.md, "The change feed"): positions, what
/// counts as a change, retention and the reader it overtakes, snapshots, feeds that are not
/// this one, filters, and the AsyncSequence's waits, cancellation and end.
@Suite struct ChangeFeedTests {
    static let start: UInt64 = 1_700_000_000_000

    struct Put: Decision {
        let keys: [String]
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for key in keys { write.raw(Array(String(value).utf8), into: StateKey(name: key)) }
            return .none
        }
    }

    /// A node keeping the default change feed (and whatever `configure` sets).
    static func node(_ id: String = "a", clock: TestClock = TestClock(), configure: (inout Node.Configuration) -> Void = { _ in }) -> Node {
        Fixture.node(id, clock: clock) { configuration in
            configuration.changeFeed = ChangeFeedConfiguration()
            configure(&configuration)
        }
    }

    /// Every change after `position` on `node`'s feed, read page by page.
    static func readAll(_ node: Node, after position: FeedPosition, feed: ChangeFeedID? = nil,
                        filter: ChangeFilter = .everything) throws(ChangeFeedError) -> (changes: [FeedChange], end: FeedPosition) {
        var changes: [FeedChange] = []
        var cursor = position
        while true {
            let page = try node.readChanges(after: cursor, feed: feed, maxChanges: 100, filter: filter)
            changes += page.changes
            if page.end == cursor { return (changes, cursor) }
            cursor = page.end
        }
    }

    /// What a reader that mirrors a node holds: each key's value, by applying changes in order.
    struct Mirror {
        var values: [StateKey: [UInt8]] = [:]
        mutating func apply(_ change: FeedChange) {
            for write in change.delta.writes { values[write.key] = write.value }
        }
        /// What `node` holds that reads as present (its visible values).
        static func of(_ node: Node) -> [StateKey: [UInt8]] {
            var values: [StateKey: [UInt8]] = [:]
            for entry in (try! node.changeFeedSnapshot()).entries { values[entry.key] = entry.entry.value }
            return values
        }
    }

    @Test func positionsCountEveryChangeOnceInOrderAndADecisionsWritesComeTogether() throws {
        let node = Self.node()
        let feed = try #require(node.changeFeedBounds).feed
        var versions: [Version] = []
        for index in 0..<50 {
            versions.append(try #require(node.decide(Put(keys: ["x\(index % 7)", "y\(index % 3)"], value: index)).version))
        }
        let read = try Self.readAll(node, after: .start, feed: feed)
        #expect(read.changes.map(\.position.rawValue) == Array(1...50))
        #expect(read.changes.map(\.delta.version) == versions)
        #expect(read.changes.allSatisfy { $0.delta.writes.count == 2 && $0.origin == .local })
        #expect(read.end == FeedPosition(rawValue: 50))
        // From the middle: exactly the rest.
        let rest = try Self.readAll(node, after: FeedPosition(rawValue: 20))
        #expect(rest.changes.map(\.position.rawValue) == Array(21...50))
        // Up to date: nothing, and the position stays.
        let none = try node.readChanges(after: read.end, maxChanges: 10)
        #expect(none.changes.isEmpty && none.end == read.end)
        var mirror = Mirror()
        read.changes.forEach { mirror.apply($0) }
        #expect(mirror.values == Mirror.of(node))
    }

    @Test func aPeersWriteThatLostHereIsNoChange() throws {
        let node = Self.node("a")
        let newer = Version(timestamp: HLCTimestamp(physicalMilliseconds: Self.start + 10_000, logical: 0), node: "b")
        let older = Version(timestamp: HLCTimestamp(physicalMilliseconds: Self.start, logical: 0), node: "b")
        try node.apply(Delta(version: newer, writes: [Delta.Write(key: StateKey(name: "k"), value: Array("2".utf8))]))
        let before = try #require(node.changeFeedBounds).newest
        #expect(before == FeedPosition(rawValue: 1))
        // Wholly lost: no change at all.
        try node.apply(Delta(version: older, writes: [Delta.Write(key: StateKey(name: "k"), value: Array("1".utf8))]))
        #expect(try #require(node.changeFeedBounds).newest == before)
        // Half lost: a change with only the write that won.
        let middle = Version(timestamp: HLCTimestamp(physicalMilliseconds: Self.start + 5_000, logical: 0), node: "c")
        try node.apply(Delta(version: middle, writes: [
            Delta.Write(key: StateKey(name: "k"), value: Array("3".utf8)),
            Delta.Write(key: StateKey(name: "j"), value: Array("4".utf8)),
        ]))
        let changes = try Self.readAll(node, after: before).changes
        #expect(changes.count == 1)
        #expect(changes.first?.delta.writes.map(\.key) == [StateKey(name: "j")])
        #expect(changes.first?.origin == .remote)
        // The same delta again changes nothing, so it is not on the feed twice.
        try node.apply(Delta(version: middle, writes: [Delta.Write(key: StateKey(name: "j"), value: Array("4".utf8))]))
        #expect(try Self.readAll(node, after: before).changes.count == 1)
    }

    @Test func retentionIsBoundedAndAReaderItOvertookIsToldThenResynchronisesFromASnapshot() throws {
        let node = Fixture.node { $0.changeFeed = ChangeFeedConfiguration(maxRetainedChanges: 1_000, maxRetainedBytes: 64 * 1024 * 1024) }
        for index in 0..<5_000 { node.decide(Put(keys: ["k\(index % 300)"], value: index)) }
        let bounds = try #require(node.changeFeedBounds)
        #expect(bounds.retainedChanges == 1_000 && bounds.oldest == FeedPosition(rawValue: 4_001) && bounds.newest == FeedPosition(rawValue: 5_000))
        #expect(bounds.droppedChanges == 4_000)
        // A reader at 3,999 would miss 4,000: told so, not skipped to 4,001.
        #expect(throws: ChangeFeedError.outOfRetention(requested: FeedPosition(rawValue: 3_999), oldest: FeedPosition(rawValue: 4_001))) {
            try node.readChanges(after: FeedPosition(rawValue: 3_999), maxChanges: 10)
        }
        // At 4,000 nothing is missing.
        #expect(try Self.readAll(node, after: FeedPosition(rawValue: 4_000)).changes.count == 1_000)
        // The snapshot, then the feed from its position, while writes go on.
        var mirror = Mirror()
        let snapshot = try node.changeFeedSnapshot()
        for entry in snapshot.entries { mirror.values[entry.key] = entry.entry.value }
        for index in 5_000..<5_500 { node.decide(Put(keys: ["k\(index % 300)", "new\(index % 11)"], value: index)) }
        let rest = try Self.readAll(node, after: snapshot.position, feed: snapshot.feed)
        #expect(rest.changes.count == 500)
        rest.changes.forEach { mirror.apply($0) }
        #expect(mirror.values == Mirror.of(node))
        #expect(mirror.values.count == 311)
    }

    @Test func retainedBytesAreBounded() throws {
        let limit = 64 * 1024
        let node = Fixture.node { $0.changeFeed = ChangeFeedConfiguration(maxRetainedChanges: 1_000_000, maxRetainedBytes: limit) }
        struct Large: Decision {
            let index: Int
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write.raw(Array(("\"" + String(repeating: "v", count: 1_000) + "\"").utf8), into: StateKey(name: "big\(index % 5)"))
                return .none
            }
        }
        for index in 0..<2_000 { node.decide(Large(index: index)) }
        let bounds = try #require(node.changeFeedBounds)
        #expect(bounds.retainedBytes <= limit)
        #expect(bounds.retainedChanges >= 50 && bounds.retainedChanges <= 64, "about 1,020 bytes a record: \(bounds.retainedChanges) retained")
        #expect(bounds.newest == FeedPosition(rawValue: 2_000) && bounds.oldest.rawValue == 2_001 - UInt64(bounds.retainedChanges))
    }

    @Test func expiryAndOwnersComingAndGoingAreChangesWithTheirOrigin() throws {
        let clock = TestClock(startMilliseconds: Self.start)
        let node = Self.node(clock: clock) { $0.expiryCheckIntervalMilliseconds = 60_000 }
        struct Expiring: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write("held", into: Fixture.Label.self, expiringAfter: .seconds(5))
                return .none
            }
        }
        node.decide(Expiring())
        clock.set(milliseconds: Self.start + 5_000)
        #expect(node.expireDue() == 1)
        let owned = KeyedEntry(key: StateKey(name: "presence"), entry: Entry(
            version: Version(timestamp: HLCTimestamp(physicalMilliseconds: Self.start, logical: 0), node: "b"),
            value: Array("\"up\"".utf8), ownedByWriter: true))
        try node.apply(entries: [owned])
        node.setPresentOwners([], removed: [])
        node.setPresentOwners(["b"], removed: [])
        let changes = try Self.readAll(node, after: .start).changes
        #expect(changes.map(\.origin) == [.local, .expired, .catchUp, .ownerGone, .ownerBack])
        #expect(changes[1].delta.writes.map(\.value) == [nil], "expired: the key reads absent")
        #expect(changes[3].delta.writes.map(\.value) == [nil] && changes[4].delta.writes.map(\.value) == [Array("\"up\"".utf8)])
        var mirror = Mirror()
        changes.forEach { mirror.apply($0) }
        #expect(mirror.values == Mirror.of(node))
    }

    @Test func aPositionOfAnotherFeedIsRefusedWithWhatToDo() throws {
        let node = Self.node()
        node.decide(Put(keys: ["a"], value: 1))
        let other = Self.node("b")
        let otherFeed = try #require(other.changeFeedBounds).feed
        let feed = try #require(node.changeFeedBounds).feed
        #expect(feed != otherFeed)
        #expect(throws: ChangeFeedError.otherFeed(requested: otherFeed, current: feed)) {
            try node.readChanges(after: .start, feed: otherFeed, maxChanges: 10)
        }
        #expect(throws: ChangeFeedError.aheadOfFeed(requested: FeedPosition(rawValue: 7), newest: FeedPosition(rawValue: 1))) {
            try node.readChanges(after: FeedPosition(rawValue: 7), maxChanges: 10)
        }
        #expect(ChangeFeedID(feed.description) == feed)
        #expect(ChangeFeedID("not hex at all!!") == nil && ChangeFeedID("0000000000000000") == nil)
        let disabled = Self.node("c") { $0.changeFeed = nil }
        disabled.decide(Put(keys: ["a"], value: 1))
        #expect(disabled.changeFeedBounds == nil)
        #expect(throws: ChangeFeedError.disabled) { try disabled.readChanges(after: .start, maxChanges: 1) }
        #expect(throws: NodeConfigurationError.self) {
            var configuration = Node.Configuration(id: "d")
            configuration.changeFeed = ChangeFeedConfiguration(maxRetainedChanges: 10, maxRetainedBytes: 10)
            _ = try Node(configuration: configuration)
        }
    }

    @Test func aFilterKeepsItsWritesAndPositionsStillOnlyGrow() throws {
        let node = Self.node()
        node.decide(Put(keys: ["quota.a", "flags"], value: 1))
        node.decide(Put(keys: ["flags"], value: 2))
        node.decide(Put(keys: ["quota.b"], value: 3))
        let quotas = try Self.readAll(node, after: .start, filter: .prefix("quota."))
        #expect(quotas.changes.map(\.position.rawValue) == [1, 3])
        #expect(quotas.changes.map { $0.delta.writes.map(\.key.name) } == [["quota.a"], ["quota.b"]])
        #expect(quotas.end == FeedPosition(rawValue: 3))
        let flags = try Self.readAll(node, after: .start, filter: .names(["flags"]))
        #expect(flags.changes.map(\.position.rawValue) == [1, 2])
        let snapshot = try node.changeFeedSnapshot(filter: .prefix("quota."))
        #expect(snapshot.entries.map(\.key.name) == ["quota.a", "quota.b"] && snapshot.position == FeedPosition(rawValue: 3))
    }

    @Test func theSequenceFollowsLiveChangesAndEndsWhenCancelledOrAtShutdown() async throws {
        let node = Self.node()
        node.decide(Put(keys: ["before"], value: 0))
        let seen = Recorder<UInt64>()
        let reader = Task {
            for try await change in node.changes(from: .oldestRetained) { seen.append(change.position.rawValue) }
            return "ended"
        }
        #expect(await seen.wait { $0 == [1] })
        for index in 1...20 { node.decide(Put(keys: ["live"], value: index)) }
        #expect(await seen.wait { $0 == Array(1...21) })
        // A reader from now on hears only what comes after, and ends when cancelled while it waits.
        let late = Recorder<UInt64>()
        let waiting = Task {
            for try await change in node.changes(from: .now) { late.append(change.position.rawValue) }
            return "cancelled"
        }
        try await Task.sleep(for: .milliseconds(20))
        node.decide(Put(keys: ["live"], value: 99))
        #expect(await late.wait { $0 == [22] })
        waiting.cancel()
        #expect(try await waiting.value == "cancelled")
        // Shutdown ends the first reader once it has read everything.
        await node.shutdown()
        #expect(try await reader.value == "ended")
        #expect(seen.all == Array(1...22))
    }

    @Test func anOvertakenAsyncReaderGetsTheErrorWhereItWouldHaveSkipped() async throws {
        let node = Fixture.node { $0.changeFeed = ChangeFeedConfiguration(maxRetainedChanges: 10, maxRetainedBytes: 64 * 1024 * 1024) }
        for index in 0..<5 { node.decide(Put(keys: ["k"], value: index)) }
        var iterator = node.changes(from: .after(.start)).makeAsyncIterator()
        #expect(try await iterator.next()?.position == FeedPosition(rawValue: 1))
        // The reader holds a page (1-5) already: those come; then 6-15 are gone from under it.
        for index in 0..<20 { node.decide(Put(keys: ["k"], value: index)) }
        for expected in 2...5 { #expect(try await iterator.next()?.position == FeedPosition(rawValue: UInt64(expected))) }
        await #expect(throws: ChangeFeedError.outOfRetention(requested: FeedPosition(rawValue: 5), oldest: FeedPosition(rawValue: 16))) {
            _ = try await iterator.next()
        }
    }
}
