@testable import Decide
import DecideCore
import Foundation
import Synchronization
import Testing

/// The store's write queue: commits coalesced as they are appended, and admission bounded in
/// commits with or without the lock.
@Suite struct GroupCommitTests {
    /// What a store holds after `change`, applied on its own (the reference for coalescing).
    static func apply(_ change: StoreChange, to store: inout [StateKey: Entry]) {
        switch change {
        case let .upsert(key, entry):
            store[key] = store[key].map { $0.merged(with: entry) } ?? entry
        case let .remove(key, upTo: version):
            if let held = store[key], held.version <= version { store[key] = nil }
        }
    }

    /// What a store holds after one group's coalesced changes, as `SQLiteDatabase.write` applies
    /// them: per key, the removal first, then the upsert.
    static func apply(_ group: GroupCommit, to store: inout [StateKey: Entry]) {
        for (key, change) in group.changes {
            if let version = change.removeUpTo { apply(.remove(key, upTo: version), to: &store) }
            if let entry = change.upsert { apply(.upsert(key, entry), to: &store) }
        }
    }

    /// Random commits over few keys or many (past the linear search, so the cells are built
    /// and rebuilt as they fill), with runs of one key (the path that compares one row) broken
    /// by other keys and removals, some commits handed over as lent upserts without re-reads
    /// (`addTableUpserts`, `rereading: false`, as a queue without a node's exclusion hands them):
    /// from any starting store, the group ends where applying every change in order does.
    @Test func coalescingEqualsApplyingInOrder() {
        for seed in UInt64(0)..<300 {
            var random = SplitMix64(seed: seed)
            // Names longer than 15 bytes, held out of place as most keys' are.
            let keyCount = seed % 2 == 0 ? 5 : 200
            let keys = (0..<keyCount).map { StateKey(name: "group.commit.key.\($0 % 3)", element: [UInt8($0 % 256), UInt8($0 / 256)]) }
            func version() -> Version {
                Version(
                    timestamp: HLCTimestamp(physicalMilliseconds: UInt64.random(in: 1...8, using: &random), logical: 0),
                    node: ["a", "b"][Int.random(in: 0...1, using: &random)])
            }
            var initial: [StateKey: Entry] = [:]
            for key in keys where Bool.random(using: &random) {
                initial[key] = Entry(version: version(), value: [UInt8.random(in: 0...3, using: &random)])
            }
            var expected = initial
            var group = GroupCommit()
            var key = keys[0]
            var highestClock = HLCTimestamp.zero
            for _ in 0..<Int.random(in: 1...(keyCount == 5 ? 40 : 600), using: &random) {
                var changes: [StoreChange] = []
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    // Mostly the same key as before, as a counter written in a loop would be.
                    if Int.random(in: 0..<4, using: &random) == 0 { key = keys[Int.random(in: 0..<keys.count, using: &random)] }
                    if Int.random(in: 0..<6, using: &random) == 0 {
                        changes.append(.remove(key, upTo: version()))
                    } else {
                        let value: [UInt8]? = Int.random(in: 0..<5, using: &random) == 0 ? nil : [UInt8.random(in: 0...3, using: &random)]
                        changes.append(.upsert(key, Entry(version: version(), value: value)))
                    }
                }
                for change in changes { Self.apply(change, to: &expected) }
                let clock = HLCTimestamp(physicalMilliseconds: UInt64.random(in: 1...100, using: &random), logical: 0)
                highestClock = max(highestClock, clock)
                let upserts = changes.compactMap { change -> (StateKey, Entry)? in
                    if case let .upsert(key, entry) = change { return (key, entry) } else { return nil }
                }
                if upserts.count == changes.count && Bool.random(using: &random) {
                    group.addTableUpserts(clock: clock, rereading: false) { offer in
                        for (key, entry) in upserts { offer(key) { entry } }
                    }
                } else {
                    group.add(changeCount: changes.count, clock: clock) { changes[$0] }
                }
            }
            var coalesced = initial
            Self.apply(group, to: &coalesced)
            #expect(coalesced == expected, "seed \(seed)")
            #expect(Set(group.changes.map(\.key)).count == group.changes.count, "seed \(seed): a key has two rows")
            #expect(group.clock == highestClock, "seed \(seed)")
        }
    }

    /// Local commits handed over with the node's table behind them (`addTableUpserts`): a key
    /// the group holds already is marked, and re-read from the table when the writer takes the
    /// group. Mixed with peers' upserts (any version) and collections (a removal of what the
    /// table holds), over few keys or more than `maxRereadRows`: from any starting store the
    /// group ends where applying every change in order does, and the table is what the node's
    /// would be (local versions newer than every version seen, as the clock makes them).
    @Test func rereadingFromTheTableEqualsApplyingInOrder() {
        for seed in UInt64(0)..<300 {
            var random = SplitMix64(seed: seed)
            let keyCount = seed % 2 == 0 ? 5 : 200
            let keys = (0..<keyCount).map { StateKey(name: "group.reread.key.\($0 % 3)", element: [UInt8($0 % 256), UInt8($0 / 256)]) }
            var tick: UInt64 = 10
            func peerVersion() -> Version {
                Version(timestamp: HLCTimestamp(physicalMilliseconds: UInt64.random(in: 1...(tick + 5), using: &random), logical: 0),
                        node: ["b", "c"][Int.random(in: 0...1, using: &random)])
            }
            var table: [StateKey: Entry] = [:]
            for key in keys where Bool.random(using: &random) {
                table[key] = Entry(version: peerVersion(), value: [UInt8.random(in: 0...3, using: &random)])
            }
            let initial = table
            var expected = initial
            var group = GroupCommit()
            var key = keys[0]
            for _ in 0..<Int.random(in: 1...(keyCount == 5 ? 40 : 800), using: &random) {
                if Int.random(in: 0..<4, using: &random) == 0 { key = keys[Int.random(in: 0..<keys.count, using: &random)] }
                switch Int.random(in: 0..<10, using: &random) {
                case 0:
                    // A collection: the removal of exactly what the table holds.
                    guard let held = table[key] else { continue }
                    table[key] = nil
                    Self.apply(.remove(key, upTo: held.version), to: &expected)
                    group.add(changeCount: 1, clock: HLCTimestamp(physicalMilliseconds: tick, logical: 0)) { _ in .remove(key, upTo: held.version) }
                case 1:
                    // A peer's upsert, merged into the table when it wins there.
                    let entry = Entry(version: peerVersion(), value: [UInt8.random(in: 0...3, using: &random)])
                    table[key] = table[key].map { $0.merged(with: entry) } ?? entry
                    tick = max(tick, entry.version.timestamp.physicalMilliseconds) + 1
                    Self.apply(.upsert(key, entry), to: &expected)
                    group.add(changeCount: 1, clock: HLCTimestamp(physicalMilliseconds: tick, logical: 0)) { _ in .upsert(key, entry) }
                default:
                    // A local decision of one or two keys: newer than anything seen.
                    tick += 1
                    let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: tick, logical: 0), node: "a")
                    let written = Int.random(in: 0..<3, using: &random) == 0 ? [key, keys[Int.random(in: 0..<keys.count, using: &random)]] : [key]
                    var upserts: [(StateKey, Entry)] = []
                    for written in Set(written) {
                        let value: [UInt8]? = Int.random(in: 0..<5, using: &random) == 0 ? nil : [UInt8.random(in: 0...3, using: &random)]
                        upserts.append((written, Entry(version: version, value: value)))
                    }
                    for (key, entry) in upserts {
                        table[key] = entry
                        Self.apply(.upsert(key, entry), to: &expected)
                    }
                    group.addTableUpserts(clock: version.timestamp, rereading: true) { offer in
                        for (key, entry) in upserts { offer(key) { entry } }
                    }
                }
                #expect(group.rereadRowCount <= GroupCommit.maxRereadRows, "seed \(seed)")
            }
            group.reread { table[copy $0] }
            #expect(!group.needsReread)
            var coalesced = initial
            Self.apply(group, to: &coalesced)
            #expect(coalesced == expected, "seed \(seed)")
            #expect(Set(group.changes.map(\.key)).count == group.changes.count, "seed \(seed): a key has two rows")
        }
    }

    /// A key written again and again is handed over once: later writes build no entry until
    /// the marks run out (`maxRereadRows`), and without `rereading` every write builds one.
    @Test func aHotKeyBuildsOneEntryAndMarksAreBounded() {
        let limit = GroupCommit.maxRereadRows
        var built = 0
        func commit(_ group: inout GroupCommit, _ key: StateKey, _ time: UInt64, rereading: Bool = true) {
            let entry = Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: time, logical: 0), node: "a"), value: [UInt8(time % 256)])
            group.addTableUpserts(clock: entry.version.timestamp, rereading: rereading) { offer in
                offer(key) { built += 1; return entry }
            }
        }
        var hot = GroupCommit()
        let counter = StateKey(name: "group.reread.counter")
        for time in UInt64(1)...1_000 { commit(&hot, counter, time) }
        #expect(built == 1)
        #expect(hot.rereadRowCount == 1)
        #expect(hot.commits == 1_000)

        built = 0
        var many = GroupCommit()
        let keys = (0..<(limit + 36)).map { StateKey(name: "group.reread.many", element: Array("\($0)".utf8)) }
        for (index, key) in keys.enumerated() {
            commit(&many, key, UInt64(2 * index + 1))
            commit(&many, key, UInt64(2 * index + 2))
        }
        #expect(many.rereadRowCount == limit)
        #expect(built == keys.count + 36, "each key's first write, and the second writes past the marks")

        built = 0
        var plain = GroupCommit()
        for time in UInt64(1)...100 { commit(&plain, counter, time, rereading: false) }
        #expect(built == 100)
        #expect(!plain.needsReread)
        #expect(plain.changes.first?.change.upsert?.version.timestamp.physicalMilliseconds == 100)
    }

    /// A full queue makes `admit` wait until a slot is given back, whichever way it comes back;
    /// a stopped queue refuses admission at once.
    @Test func admissionIsBoundedInCommitsAndWokenBySpace() async throws {
        let queue = StoreWriteQueue(capacityCommits: 2, eager: false)
        #expect(queue.admit() == nil)
        #expect(queue.admit() == nil)
        let admitted = Recorder<Void>()
        Thread {
            if queue.admit() == nil { admitted.append(()) }
        }.start()
        // The negative half cannot be proven by waiting; 200 ms is far longer than admission takes.
        try await Task.sleep(for: .milliseconds(200))
        #expect(admitted.all.isEmpty, "a third commit was admitted into a queue of two")
        queue.cancelAdmission()
        #expect(await admitted.wait { $0.count == 1 }, "cancelling a slot did not wake the waiting admitter")

        // Full again (the appended one and the woken admitter's): the writer taking frees both.
        _ = queue.append(changeCount: 1, clock: .zero) { _ in .upsert(StateKey(name: "x"), Entry(version: Version(timestamp: .zero, node: "a"), value: [1])) }
        Thread {
            if queue.admit() == nil { admitted.append(()) }
        }.start()
        try await Task.sleep(for: .milliseconds(200))
        #expect(admitted.all.count == 1)
        let taken = try #require(queue.take(dueAt: .distantPast))
        #expect(taken.group.commits == 1)
        #expect(await admitted.wait { $0.count == 2 }, "the writer taking the queue did not wake the admitter")

        queue.stop(with: .closed(path: "test"))
        #expect(queue.admit() == .closed(path: "test"))
    }

    /// Many committers, a small queue, a writer taking as fast as it can: never more commits
    /// admitted at once than the capacity, and every appended commit reaches the writer once.
    @Test func concurrentCommittersNeverExceedTheCapacityAndLoseNothing() async throws {
        let capacity = 3
        let queue = StoreWriteQueue(capacityCommits: capacity, eager: true)
        queue.writerStarted()
        let threads = 4
        let perThread = 2_000
        // Raised after `admit` returns and lowered before the slot can be given back (before
        // `append` or `cancelAdmission`): never above the queue's own count, so above the
        // capacity only if the queue admitted too many.
        let holding = Atomic<Int>(0)
        let highest = Atomic<Int>(0)
        let taken = Atomic<Int>(0)
        let newest = Mutex<[StateKey: Entry]>([:])
        let writer = Thread {
            var lastTicket: UInt64 = 0
            while let (group, ticket) = queue.take(dueAt: .distantPast) {
                taken.add(group.commits, ordering: .relaxed)
                precondition(ticket >= lastTicket, "tickets went backwards")
                lastTicket = ticket
                newest.withLock { held in
                    for (key, change) in group.changes {
                        if let entry = change.upsert { held[key] = held[key].map { $0.merged(with: entry) } ?? entry }
                    }
                }
                queue.markDurable(ticket)
            }
            queue.writerExited()
        }
        writer.start()
        let appended = Atomic<Int>(0)
        let finished = DispatchGroup()
        for thread in 0..<threads {
            finished.enter()
            Thread {
                let key = StateKey(name: "t\(thread)")
                for index in 0..<perThread {
                    precondition(queue.admit() == nil)
                    _ = highest.max(holding.add(1, ordering: .relaxed).newValue, ordering: .relaxed)
                    holding.subtract(1, ordering: .relaxed)
                    if index % 5 == 0 {
                        queue.cancelAdmission()
                    } else {
                        let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: UInt64(index + 1), logical: 0), node: "a")
                        _ = queue.append(changeCount: 1, clock: version.timestamp) { _ in .upsert(key, Entry(version: version, value: [1])) }
                        appended.add(1, ordering: .relaxed)
                    }
                }
                finished.leave()
            }.start()
        }
        finished.wait()
        #expect(queue.flush() == nil)
        #expect(highest.load(ordering: .relaxed) <= capacity, "commits admitted at once into a queue of \(capacity): \(highest.load(ordering: .relaxed))")
        #expect(taken.load(ordering: .relaxed) == appended.load(ordering: .relaxed))
        #expect(appended.load(ordering: .relaxed) == threads * perThread * 4 / 5)
        // Each thread's last upsert (index perThread - 1) is what the writer ended with.
        let last = Version(timestamp: HLCTimestamp(physicalMilliseconds: UInt64(perThread), logical: 0), node: "a")
        #expect(newest.withLock { $0 }.values.allSatisfy { $0.version == last })
        #expect(newest.withLock { $0.count } == threads)
        queue.stop(with: .closed(path: "test"))
    }
}

/// The commit calls as a test makes them, without a node: each takes the exclusion (the queue's
/// own lock until `start(exclusion:)`), then wakes whom the call asks for, as the node does after
/// its lock.
extension StoreWriteQueue {
    func cancelAdmission() {
        holdingExclusion { cancelAdmissionHoldingExclusion() }
        wakeWriterIfAsked()
    }

    func append(changeCount: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) -> UInt64 {
        let ticket = holdingExclusion { appendHoldingExclusion(changeCount: changeCount, clock: clock, change: change) }
        wakeWriterIfAsked()
        return ticket
    }
}
