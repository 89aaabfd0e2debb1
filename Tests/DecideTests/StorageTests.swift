@testable import Decide
import DecideTesting
import Foundation
import Synchronization
import Testing

/// Durable nodes: close and reopen, crashes at each durability level, replay, refusals.
@Suite struct StorageTests {
    /// A fresh directory under the system's temporary directory, removed by `remove()`.
    struct Scratch {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("decide-storage-\(UUID().uuidString)").path
        var store: String { path + "/decide.sqlite" }
        func remove() { try? FileManager.default.removeItem(atPath: path) }
    }

    struct Forget: Decision {
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.delete(Fixture.Mirror.self)
            write.delete(Fixture.Quota.self, at: "gone")
            return .none
        }
    }

    struct SetQuota: Decision {
        let id: String
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(value, into: Fixture.Quota.self, at: id)
            return .none
        }
    }

    /// A node with its store in `scratch`; with `faults`, its disk stalls or crashes on command.
    /// On two threads: a decision setting the counter to `counter`, and a peer's delta to
    /// "from.b"; each records "decide" or "apply" once its call returned.
    static func decideAndApplyOnThreads(_ node: Node, counter: Int) -> Recorder<String> {
        let returned = Recorder<String>()
        Thread {
            node.set(counter, into: Fixture.Counter.self)
            returned.append("decide")
        }.start()
        Thread {
            let remote = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 9), node: "b")
            _ = try? node.apply(Delta(version: remote, writes: [Delta.Write(key: StateKey(name: "from.b"), value: [49])]))
            returned.append("apply")
        }.start()
        return returned
    }

    static func open(
        _ scratch: Scratch, id: String = "a", durability: Durability, clock: TestClock = TestClock(),
        faults: StoreFaults? = nil, configure: (inout Node.Configuration) -> Void = { _ in }
    ) throws(NodeConfigurationError) -> Node {
        var configuration = Node.Configuration(id: id)
        configuration.clock = clock
        configuration.dataDirectory = scratch.path
        configuration.durability = durability
        configuration.storeFileWrapper = faults?.wrap
        configure(&configuration)
        return try Node(configuration: configuration)
    }

    static let durableLevels: [Durability] = [.batched(intervalMilliseconds: 5), .batched(intervalMilliseconds: 60_000), .strict]

    @Test(arguments: durableLevels)
    func closeAndReopenRestoresEveryEntryTombstoneAndVersion(durability: Durability) throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let clock = TestClock(startMilliseconds: 1_700_000_000_000)
        let node = try Self.open(scratch, durability: durability, clock: clock)
        node.decide(Fixture.SetPair(value: 7))
        node.set("release", into: Fixture.Label.self)
        node.set(Fixture.Profile(name: "ada", score: 2.5), into: Fixture.Profiles.self)
        for index in 0..<50 { node.decide(SetQuota(id: "q\(index)", value: index)) }
        node.decide(SetQuota(id: "gone", value: 1))
        node.decide(Forget())
        // A remote delta and a catch-up batch, from a node whose clock is ahead.
        let remote = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_500, logical: 3), node: "b")
        try node.apply(Delta(version: remote, writes: [
            Delta.Write(key: StateKey(name: "remote.key"), value: Array("\"b\"".utf8)),
            Delta.Write(key: StateKey(name: "remote.deleted", element: [0, 1, 2]), value: nil),
        ]))
        let caughtUp = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_900, logical: 0), node: "c")
        try node.apply(entries: [KeyedEntry(key: StateKey(name: "caught.up"), entry: Entry(version: caughtUp, value: []))])
        let before = node.entries()
        let summary = node.stateSummary
        #expect(summary.tombstoneCount == 3)
        try node.close()
        // Decisions after close are refused, not silently kept in memory only.
        if case .aborted = node.set(99, into: Fixture.Counter.self) {} else { Issue.record("a decision after close committed") }

        // The clock went backwards while the node was down, by less than the skew bound:
        // versions must still grow.
        clock.set(milliseconds: 1_700_000_000_900 - 30_000)
        let reopened = try Self.open(scratch, durability: durability, clock: clock)
        #expect(reopened.entries() == before)
        #expect(reopened.stateSummary.digest == summary.digest)
        #expect(reopened.stateSummary.tombstoneCount == 3)
        #expect(reopened.read(Fixture.Counter.self) == 7)
        #expect(reopened.read(Fixture.Profiles.self) == Fixture.Profile(name: "ada", score: 2.5))
        #expect(reopened.read(Fixture.Quota.self, at: "q49") == 49)
        #expect(reopened.read(Fixture.Quota.self, at: "gone") == 100)
        let next = try #require(reopened.set(8, into: Fixture.Counter.self).version)
        #expect(before.allSatisfy { $0.entry.version < next })
        // Stepped back by more than the bound: every version it could take is one its peers
        // would refuse, so it takes none and says why.
        clock.set(milliseconds: 1_600_000_000_000)
        guard case .aborted(let reason) = reopened.set(9, into: Fixture.Counter.self) else {
            Issue.record("a node whose clock ran a day ahead of real time committed")
            return
        }
        #expect(reason.contains("ahead of its physical clock"))
        clock.set(milliseconds: 1_700_000_001_000)
        #expect(reopened.set(10, into: Fixture.Counter.self).version != nil, "writes resume once real time catches up")
        try reopened.close()
    }

    /// Keys written again and again within one group commit, so the writer re-reads them from
    /// the table (and more of them than it re-reads, so the rest are merged as they come),
    /// with a peer's writes between, a key deleted, collected and written again, and one
    /// deleted and collected for good: what reopens is exactly what the node held.
    @Test(arguments: durableLevels)
    func keysWrittenAgainInOneGroupReopenAsTheNodeLeftThem(durability: Durability) throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let clock = TestClock(startMilliseconds: 1_700_000_000_000)
        let node = try Self.open(scratch, durability: durability, clock: clock)
        for round in 0..<5 {
            for index in 0..<(GroupCommit.maxRereadRows + 20) {
                node.decide(SetQuota(id: "hot\(index)", value: round * 1_000 + index))
            }
            for value in 0..<50 { node.set(round * 100 + value, into: Fixture.Counter.self) }
            let remote = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: UInt16(round + 1)), node: "b")
            try node.apply(Delta(version: remote, writes: [Delta.Write(key: StateKey(name: "from.b"), value: Array("\(round)".utf8))]))
            node.set(round, into: Fixture.Mirror.self)
        }
        // Deleted, its tombstone collected (a removal in the same group), then written again.
        node.decide(SetQuota(id: "gone", value: 1))
        node.decide(SetQuota(id: "gone", value: 2))
        clock.set(milliseconds: 1_700_000_001_000)
        node.decide(Forget())
        #expect(node.collectTombstones(olderThan: HLCTimestamp(physicalMilliseconds: 1_800_000_000_000, logical: 0)) == 2)
        node.set(7, into: Fixture.Mirror.self)
        node.set(8, into: Fixture.Mirror.self)
        let before = node.entries()
        #expect(node.read(Fixture.Quota.self, at: "gone") == 100, "collected for good")
        try node.close()

        let reopened = try Self.open(scratch, durability: durability, clock: clock)
        #expect(reopened.entries() == before)
        #expect(reopened.read(Fixture.Mirror.self) == 8)
        #expect(reopened.read(Fixture.Counter.self) == 449)
        #expect(reopened.read(Fixture.Quota.self, at: "hot0") == 4_000)
        #expect(reopened.read(Fixture.Quota.self, at: "hot\(GroupCommit.maxRereadRows + 19)") == 4_000 + GroupCommit.maxRereadRows + 19)
        #expect(reopened.read(Fixture.Quota.self, at: "gone") == 100)
        #expect(reopened.entry(for: StateKey(name: "from.b"))?.value == Array("4".utf8))
        try reopened.close()
    }

    /// The re-read at a size a service reaches: 100,000 keys, each written twice in a row (so
    /// each group's marks run out and later rows merge as they come) over three passes, a
    /// counter written between them, with groups every 5 ms: what reopens is what the node held.
    @Test func manyKeysWrittenTwiceInARowReopenAsTheNodeLeftThem() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5))
        let keys = 100_000
        for pass in 0..<3 {
            for index in 0..<keys {
                // A different order each pass, every key once: 7919 is prime to the key count.
                let id = "k\((index &* 7919 &+ pass) % keys)"
                node.decide(SetQuota(id: id, value: pass * 10))
                node.decide(SetQuota(id: id, value: pass * 10 + 1))
                if index % 1_000 == 0 { node.set(pass * keys + index, into: Fixture.Counter.self) }
            }
        }
        let before = node.entries()
        #expect(before.count == keys + 1)
        try node.close()

        let reopened = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5))
        // Counted and the first named, not printed whole: a failure lists 100,001 entries otherwise.
        let after = reopened.entries()
        let differing = zip(before, after).filter { $0 != $1 }
        #expect(after.count == before.count)
        #expect(differing.isEmpty, "\(differing.count) entries differ after reopening, the first: \(String(describing: differing.first))")
        #expect(reopened.read(Fixture.Quota.self, at: "k0") == 21)
        #expect(reopened.read(Fixture.Counter.self) == 2 * keys + 99_000)
        try reopened.close()
    }

    @Test func strictLosesNothingAcknowledgedInACrash() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let disk = StoreFaults()
        let node = try Self.open(scratch, durability: .strict, faults: disk)
        // Concurrent deciders share group commits.
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for index in 0..<100 {
                        let commit = node.decide(SetQuota(id: "w\(writer)-\(index)", value: index))
                        #expect(commit.version != nil)
                    }
                }
            }
        }
        let remote = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 9), node: "b")
        try node.apply(Delta(version: remote, writes: [Delta.Write(key: StateKey(name: "from.b"), value: [49])]))
        let acknowledged = node.entries()
        disk.crash()

        let reopened = try Self.open(scratch, durability: .strict)
        #expect(reopened.entries() == acknowledged)
        #expect(reopened.entries().count == 401)
        try reopened.close()
    }

    @Test func strictDecideAndApplyWaitForTheDiskAndBatchedDoNot() async throws {
        for durability in [Durability.strict, .batched(intervalMilliseconds: 5)] {
            let scratch = Scratch()
            defer { scratch.remove() }
            let disk = StoreFaults()
            let node = try Self.open(scratch, durability: durability, faults: disk)
            disk.stall()
            let returned = Self.decideAndApplyOnThreads(node, counter: 1)
            // Both commits are in memory at once; with strict durability neither call returns
            // before the disk has it.
            #expect(await Recorder<Int>().wait { _ in node.entries().count == 2 })
            if durability == .strict {
                try await Task.sleep(for: .milliseconds(300))
                #expect(returned.all.isEmpty, "strict decide or apply returned before its commit was on disk")
                disk.resume()
                #expect(await returned.wait { Set($0) == ["decide", "apply"] })
            } else {
                #expect(await returned.wait { Set($0) == ["decide", "apply"] })
                disk.resume()
            }
            try node.close()
        }
    }

    @Test func batchedLosesOnlyWhatIsNotYetFlushed() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        // An interval longer than the test: only `flush` writes.
        let disk = StoreFaults()
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 60_000), faults: disk)
        node.set(1, into: Fixture.Counter.self)
        try node.flush()
        let flushed = node.entries()
        node.set("late", into: Fixture.Label.self)
        node.set(2, into: Fixture.Counter.self)
        disk.crash()

        let reopened = try Self.open(scratch, durability: .batched(intervalMilliseconds: 60_000))
        #expect(reopened.entries() == flushed)
        try reopened.close()
    }

    @Test func batchedWritesWithinItsIntervalWithoutAFlush() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let disk = StoreFaults()
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5), faults: disk)
        for index in 0..<200 { node.decide(SetQuota(id: "k\(index)", value: index)) }
        let committed = node.entries()
        // Far more than one interval: every commit has been group-committed by now.
        try await Task.sleep(for: .milliseconds(500))
        disk.crash()

        let reopened = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5))
        #expect(reopened.entries() == committed)
        try reopened.close()
    }

    @Test func aFullWriteQueueMakesDecideWaitNotGrow() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 60_000)) {
            $0.maxQueuedStorageCommits = 1
        }
        let start = Date()
        for index in 0..<50 { node.decide(SetQuota(id: "k\(index)", value: index)) }
        // Each decide waited for the writer to take the full queue, not for the 60 s interval.
        #expect(Date().timeIntervalSince(start) < 20)
        let committed = node.entries()
        try node.close()
        let reopened = try Self.open(scratch, durability: .strict)
        #expect(reopened.entries() == committed)
        try reopened.close()
    }

    /// Commits queue under the node's lock, and a full queue is waited for outside it: with the
    /// disk stalled under one commit and room for two more, a fourth decision and a peer's delta
    /// both wait while reads, which need the lock, go through; once the disk resumes, both
    /// commit and reach the disk.
    @Test func commitsWaitingForRoomHoldNoLock() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let disk = StoreFaults()
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 1), faults: disk) {
            $0.maxQueuedStorageCommits = 2
        }
        disk.stall()
        node.set(1, into: Fixture.Counter.self)
        disk.waitUntilAWriteIsHeld()                 // the writer took it and stalls writing it
        node.set(2, into: Fixture.Counter.self)
        node.set(3, into: Fixture.Counter.self)     // queued with 2: the queue is full
        let returned = Self.decideAndApplyOnThreads(node, counter: 4)
        // The negative half cannot be proven by waiting; 200 ms is far longer than a commit takes.
        try await Task.sleep(for: .milliseconds(200))
        #expect(returned.all.isEmpty, "a commit was admitted into a full queue")
        // The lock is free while they wait.
        #expect(node.read(Fixture.Counter.self) == 3)
        #expect(node.entries().count == 1)
        disk.resume()
        #expect(await returned.wait { Set($0) == ["decide", "apply"] }, "a waiting commit never went through")
        try node.flush()
        try node.close()
        let reopened = try Self.open(scratch, durability: .strict)
        #expect(reopened.read(Fixture.Counter.self) == 4)
        #expect(reopened.entry(for: StateKey(name: "from.b"))?.value == [49])
        try reopened.close()
    }

    @Test func collectedTombstonesLeaveTheStoreAndTheClockStaysPastThem() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let clock = TestClock(startMilliseconds: 1_700_000_000_000)
        let node = try Self.open(scratch, durability: .strict, clock: clock)
        node.set(5, into: Fixture.Mirror.self)
        node.set(1, into: Fixture.Counter.self)
        clock.set(milliseconds: 1_700_000_001_000)
        let deleted = try #require(node.decide(Forget()).version)
        #expect(node.collectTombstones(olderThan: HLCTimestamp(physicalMilliseconds: 1_800_000_000_000, logical: 0)) == 2)
        try node.close()

        clock.set(milliseconds: 1_700_000_000_000)
        let reopened = try Self.open(scratch, durability: .strict, clock: clock)
        #expect(reopened.entry(for: StateKey(name: Fixture.Mirror.name)) == nil)
        #expect(reopened.stateSummary.tombstoneCount == 0)
        #expect(reopened.entries().count == 1)
        // The collected tombstone was the highest version; the stored clock remembers it.
        let next = try #require(reopened.set(2, into: Fixture.Counter.self).version)
        #expect(deleted < next)
        try reopened.close()
    }

    /// Random upserts and removals, written one commit per transaction, all in one group
    /// commit, and twice over: every store ends equal to applying them in order.
    @Test func replayIsIdempotentAndGroupCommitEqualsOneByOne() throws {
        for seed in UInt64(0)..<20 {
            var random = SplitMix64(seed: seed)
            let keys = (0..<4).map { StateKey(name: "k", element: [UInt8($0)]) }
            var batches: [StorageBatch] = []
            var model: [StateKey: Entry] = [:]
            for _ in 0..<30 {
                let key = keys[Int.random(in: 0..<keys.count, using: &random)]
                let version = Version(
                    timestamp: HLCTimestamp(physicalMilliseconds: UInt64.random(in: 1...6, using: &random), logical: 0),
                    node: ["a", "b", "ab"][Int.random(in: 0...2, using: &random)])
                if Int.random(in: 0..<5, using: &random) == 0 {
                    batches.append(StorageBatch(changes: [.remove(key, upTo: version)], clock: version.timestamp))
                    if let held = model[key], held.version <= version { model[key] = nil }
                } else {
                    let value: [UInt8]? = Bool.random(using: &random) ? nil : [UInt8.random(in: 0...2, using: &random)]
                    let entry = Entry(version: version, value: value)
                    batches.append(StorageBatch(changes: [.upsert(key, entry)], clock: version.timestamp))
                    model[key] = model[key].map { $0.merged(with: entry) } ?? entry
                }
            }
            let expected = model.map { KeyedEntry(key: $0.key, entry: $0.value) }.sorted { $0.key < $1.key }
            for grouping in ["one by one", "one group", "replayed"] {
                let scratch = Scratch()
                defer { scratch.remove() }
                let storage = try SQLiteStore(
                    directory: scratch.path, nodeID: "a", durability: .strict, maxQueuedCommits: 64, logger: .init(label: "test"))
                _ = try storage.load { _, _ in }
                // The store's commit calls are made under the node's lock in a node; here, a lock of the test's.
                let exclusion = TestExclusion()
                storage.start(exclusion: exclusion.exclusion)
                let groups: [[StorageBatch]]
                switch grouping {
                case "one by one": groups = batches.map { [$0] }
                case "one group": groups = [batches]
                default:
                    let upserts = batches.filter { if case .upsert = $0.changes[0] { true } else { false } }
                    groups = [batches, upserts.reversed(), upserts]
                }
                for group in groups {
                    // One batch is written in one transaction, coalesced to one change per key.
                    let combined = StorageBatch(changes: group.flatMap(\.changes), clock: group.map(\.clock).max() ?? .zero)
                    #expect(storage.admit() == nil)
                    let ticket = exclusion.holding { storage.append(combined) }
                    storage.wakeWriterIfAsked()
                    if let error = storage.waitUntilDurable(ticket) { throw error }
                }
                try storage.close()
                let reopened = try SQLiteStore(
                    directory: scratch.path, nodeID: "a", durability: .strict, maxQueuedCommits: 64, logger: .init(label: "test"))
                var loaded: [KeyedEntry] = []
                _ = try reopened.load { loaded.append(KeyedEntry(key: $0, entry: $1)) }
                try reopened.close()
                if grouping == "replayed" {
                    // Replaying every upsert (twice, in two orders) ends where merging them does.
                    var replayedModel = model
                    for batch in batches.reversed() {
                        if case let .upsert(key, entry) = batch.changes[0] {
                            replayedModel[key] = replayedModel[key].map { $0.merged(with: entry) } ?? entry
                        }
                    }
                    let replayed = replayedModel.map { KeyedEntry(key: $0.key, entry: $0.value) }.sorted { $0.key < $1.key }
                    #expect(loaded.sorted { $0.key < $1.key } == replayed, "seed \(seed), \(grouping)")
                } else {
                    #expect(loaded.sorted { $0.key < $1.key } == expected, "seed \(seed), \(grouping)")
                }
            }
        }
    }

    @Test func aStoreOfAnotherNodeIsRefused() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        try Self.open(scratch, id: "a", durability: .strict).close()
        #expect(throws: NodeConfigurationError.storage(.nodeIDMismatch(path: scratch.store, stored: "a", configured: "b"))) {
            try Self.open(scratch, id: "b", durability: .strict)
        }
    }

    @Test func aStoreInUseIsRefused() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let first = try Self.open(scratch, durability: .strict)
        first.set(1, into: Fixture.Counter.self)
        #expect(throws: NodeConfigurationError.storage(.inUse(path: scratch.store))) {
            try Self.open(scratch, durability: .strict)
        }
        try first.close()
        try Self.open(scratch, durability: .strict).close()
    }

    @Test func aFileOfGarbageIsRefusedNamedAndLeftAlone() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
        var random = SplitMix64(seed: 6)
        let garbage = Data((0..<8192).map { _ in UInt8.random(in: 0...255, using: &random) })
        try garbage.write(to: URL(fileURLWithPath: scratch.store))
        let error = try Self.expectStorageError { try Self.open(scratch, durability: .strict) }
        guard case .corrupt(let path, _) = error else { Issue.record("expected corrupt, got \(error)"); return }
        #expect(path == scratch.store)
        #expect("\(NodeConfigurationError.storage(error))".contains(scratch.store))
        #expect(try Data(contentsOf: URL(fileURLWithPath: scratch.store)) == garbage)
    }

    @Test func aTruncatedStoreIsRefused() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let node = try Self.open(scratch, durability: .batched(intervalMilliseconds: 5))
        let padding = String(repeating: "x", count: 200)
        struct Wide: CollectionState { static func defaultValue(at id: Int) -> String { "" } }
        struct WriteWide: Decision {
            let id: Int
            let text: String
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(text, into: Wide.self, at: id)
                return .none
            }
        }
        for index in 0..<3_000 { node.decide(WriteWide(id: index, text: padding)) }
        try node.close()
        let size = try #require(FileManager.default.attributesOfItem(atPath: scratch.store)[.size] as? Int)
        #expect(size > 100_000)
        let handle = try #require(FileHandle(forWritingAtPath: scratch.store))
        try handle.truncate(atOffset: UInt64(size / 2))
        try handle.close()
        let error = try Self.expectStorageError { try Self.open(scratch, durability: .strict) }
        guard case .corrupt(let path, _) = error else { Issue.record("expected corrupt, got \(error)"); return }
        #expect(path == scratch.store)
    }

    @Test func durabilityMustFitTheDataDirectory() {
        #expect(throws: NodeConfigurationError.self) {
            var configuration = Node.Configuration(id: "a")
            configuration.durability = .strict
            return try Node(configuration: configuration)
        }
        let scratch = Scratch()
        defer { scratch.remove() }
        for durability in [Durability.memory, .batched(intervalMilliseconds: 0), .batched(intervalMilliseconds: 60_001)] {
            #expect(throws: NodeConfigurationError.self) { try Self.open(scratch, durability: durability) }
        }
    }

    @Test func aDataDirectoryThatIsAFileIsUnreadable() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: scratch.path))
        let error = try Self.expectStorageError { try Self.open(scratch, durability: .strict) }
        guard case .unreadable(let path, _) = error else { Issue.record("expected unreadable, got \(error)"); return }
        #expect(path == scratch.path)
    }

    static func expectStorageError(_ body: () throws -> Node) throws -> StorageError {
        do {
            let node = try body()
            try node.close()
        } catch NodeConfigurationError.storage(let error) {
            return error
        } catch {
            Issue.record("expected a storage error, got \(error)")
            throw error
        }
        Issue.record("the store was opened")
        throw StorageError.closed(path: "")
    }
}

/// One commit's changes and the node's clock when it committed: how these tests hand a store
/// whole commits (the node hands it changes by index, `NodeStore.append(changeCount:clock:change:)`).
struct StorageBatch: Sendable {
    var changes: [StoreChange]
    var clock: HLCTimestamp
}

extension NodeStore {
    /// Queues `batch` as one commit (consuming one admission) and returns its ticket.
    func append(_ batch: StorageBatch) -> UInt64 {
        append(changeCount: batch.changes.count, clock: batch.clock) { batch.changes[$0] }
    }
}

/// A lock of the test's own as a store's exclusion, where a node would give its lock. It has
/// no table, so it hands over no stored entries: the tests that use it queue commits with
/// `append`, which never leaves a row to be re-read (`appendUpserts` would).
final class TestExclusion: Sendable {
    private let lock = Mutex(())

    var exclusion: StoreExclusion { { body in self.lock.withLock { _ in body { _ in nil } } } }

    func holding<Result: Sendable>(_ body: () -> Result) -> Result { lock.withLock { _ in body() } }
}
