import Decide
import DecideTesting
import Foundation
import Testing

/// What the node promises the replication engine: decisions that fit one frame, catch-up that
/// refuses only the decisions it must, strict decisions handed on only once on disk.
@Suite struct ReplicationSafetyTests {
    struct Big: Decision {
        let count: Int
        let bytes: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in 0..<count {
                write.raw(Array(repeating: 0x61, count: bytes), into: StateKey(name: "big", element: Array("\(index)".utf8)))
            }
            return .none
        }
    }

    @Test func aDecisionLargerThanOneFrameIsRefusedWholeAtCommit() {
        let node = Fixture.node()
        // Twenty values of 1 MB: each within maxValueBytes, together over maxDecisionBytes (8 MiB).
        guard case .aborted(let reason) = node.decide(Big(count: 20, bytes: 1_000_000)) else {
            Issue.record("a 20 MB decision committed")
            return
        }
        #expect(reason.contains("maxDecisionBytes"))
        #expect(node.stateSummary.entryCount == 0, "part of a refused decision was written")
        #expect(node.decide(Big(count: 5, bytes: 1_000_000)).version != nil, "a 5 MB decision is within the bound")
    }

    @Test func theDecisionBoundIsValidated() {
        var configuration = Node.Configuration(id: "a")
        configuration.maxDecisionBytes = 10
        #expect(throws: NodeConfigurationError.self) { try Node(configuration: configuration) }
        configuration = Node.Configuration(id: "a")
        configuration.maxClockSkewMilliseconds = UInt64.max
        #expect(throws: NodeConfigurationError.self) { try Node(configuration: configuration) }
    }

    @Test func aCatchUpBatchRefusesOnlyTheDecisionsWhoseClocksAreTooFarAhead() throws {
        let clock = TestClock()
        let node = Fixture.node(clock: clock)
        let now = HLCTimestamp(physicalMilliseconds: clock.nowMilliseconds(), logical: 0)
        let ahead = HLCTimestamp(physicalMilliseconds: clock.nowMilliseconds() + 86_400_000, logical: 0)
        let good = Version(timestamp: now, node: "b")
        let bad = Version(timestamp: ahead, node: "c")
        let batch = [
            KeyedEntry(key: StateKey(name: "x1"), entry: Entry(version: good, value: [1])),
            KeyedEntry(key: StateKey(name: "x2"), entry: Entry(version: good, value: [2])),
            KeyedEntry(key: StateKey(name: "y1"), entry: Entry(version: bad, value: [3])),
            KeyedEntry(key: StateKey(name: "y2"), entry: Entry(version: bad, value: [4])),
        ]
        #expect(try node.apply(entries: batch) == 2)
        #expect(node.entry(for: StateKey(name: "x2"))?.value == [2])
        #expect(node.entry(for: StateKey(name: "y1")) == nil, "an entry of the refused decision was applied")
        #expect(node.entry(for: StateKey(name: "y2")) == nil)
        // A batch of nothing but refused decisions still says why.
        #expect(throws: ClockError.self) { try node.apply(entries: Array(batch.suffix(2))) }
    }

    @Test func strictDurabilityHandsADecisionToReplicationOnlyOnceItIsOnDisk() async throws {
        let scratch = StorageTests.Scratch()
        defer { scratch.remove() }
        let disk = StoreFaults()
        let node = try StorageTests.open(scratch, durability: .strict, faults: disk)
        let heard = Recorder<String>()
        _ = node.addCommitListener { _ in heard.append("commit") }
        _ = node.addDurableCommitListener { _ in heard.append("durable") }
        disk.stall()
        Thread { node.set(1, into: Fixture.Counter.self) }.start()
        #expect(await heard.wait { $0.contains("commit") })
        try await Task.sleep(for: .milliseconds(200))
        #expect(!heard.all.contains("durable"), "a strict decision reached replication before its fsync")
        disk.resume()
        #expect(await heard.wait { $0.contains("durable") })
        try node.close()
    }

    @Test func strictDurabilityKeepsADecisionOutOfCatchUpUntilItIsOnDisk() async throws {
        let scratch = StorageTests.Scratch()
        defer { scratch.remove() }
        let disk = StoreFaults()
        let node = try StorageTests.open(scratch, durability: .strict, faults: disk)
        let key = StateKey(name: Fixture.Counter.name)
        let bucket = node.digest.bucket(of: key)
        let committed = Recorder<Version>()
        _ = node.addCommitListener { committed.append($0.delta.version) }
        disk.stall()
        Thread { node.set(1, into: Fixture.Counter.self) }.start()
        #expect(await committed.wait { !$0.isEmpty })
        let version = committed.all[0]
        // In memory, not on disk: a walk must neither offer, push nor stream it, and the coverage
        // a walk proves must stay below it.
        #expect(node.entry(for: key) != nil)
        #expect(node.walkEntries(keys: [key], changedAfter: 0)?.isEmpty == true, "a walk streams a decision not on disk")
        #expect(node.summaryChunk(of: [bucket], from: 0, itemOffset: 0, maxItems: 100).groups.allSatisfy { $0.items.isEmpty },
                "a walk summary offers a decision not on disk")
        #expect(node.compare(buckets: [(bucket: bucket, items: [:])]).allSatisfy { $0.push.isEmpty },
                "a walk pushes a decision not on disk")
        #expect(node.walkStart.clock < version.timestamp.rawValue, "a walk would prove coverage of a decision not on disk")
        disk.resume()
        try node.flush()
        for _ in 0..<200 where node.walkEntries(keys: [key], changedAfter: 0)?.isEmpty != false {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(node.walkEntries(keys: [key], changedAfter: 0)?.map(\.entry.version) == [version])
        #expect(node.walkStart.clock >= version.timestamp.rawValue)
        try node.close()
    }

    @Test func aWalkStartKeepsPaceWithRealTime() {
        let clock = TestClock()
        let node = Fixture.node(clock: clock)
        let first = node.walkStart.clock
        clock.set(milliseconds: clock.nowMilliseconds() + 5_000)
        let second = node.walkStart.clock
        #expect(HLCTimestamp(rawValue: second).physicalMilliseconds == clock.nowMilliseconds())
        #expect(second > first)
        #expect(node.set(1, into: Fixture.Counter.self).version!.timestamp.rawValue > second,
                "a local version must be above every reported walk start")
    }
}
