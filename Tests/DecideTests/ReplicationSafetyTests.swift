@testable import Decide
import DecideCore
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
        let sender = RecordingSender(heard)
        _ = node.addCommitListener { _ in heard.append("commit") }
        node.setLocalCommitSender(sender)
        disk.stall()
        Thread { node.set(1, into: Fixture.Counter.self) }.start()
        #expect(await heard.wait { $0.contains("frame") })
        try await Task.sleep(for: .milliseconds(200))
        #expect(heard.all == ["commit", "frame"], "a strict decision reached replication before its fsync")
        disk.resume()
        #expect(await heard.wait { $0 == ["commit", "frame", "sent"] })
        try node.close()
        withExtendedLifetime(sender) {}
    }

    /// A `LocalCommitSender` that says when it encodes a frame and when it is told to send it.
    final class RecordingSender: LocalCommitSender {
        let heard: Recorder<String>
        init(_ heard: Recorder<String>) { self.heard = heard }
        func sendCommit(version: Version, writes: borrowing PendingWrites) { heard.append("sent at commit") }
        func frame(version: Version, writes: borrowing PendingWrites) -> [UInt8]? {
            heard.append("frame")
            return [1]
        }
        func send(_ frame: [UInt8], timestamp: HLCTimestamp) { heard.append("sent") }
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

/// The delta message encoded from a decision's pending writes (`PendingWrites.withDeltaMessage`
/// and `deltaMessage`, what the replication engine sends, sized by `decisionBytes` without a
/// sizing pass) is byte
/// for byte the message of the `Delta` the commit listeners get, over random decisions of
/// atomic and collection writes, deletes, expiring and owned values, names and ids of every
/// length around the in-place limit, and values up to 64 KiB.
@Suite struct LocalCommitFrameTests {
    struct RandomWrites: Decision {
        let writes: [(key: StateKey, value: [UInt8]?, lifetime: Duration?, owned: Bool)]
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for item in writes {
                if let value = item.value {
                    write.raw(value, into: item.key, expiringAfter: item.lifetime, ownedByThisNode: item.owned)
                } else {
                    write.raw(nil, into: item.key)
                }
            }
            return .none
        }
    }

    /// Encodes each commit's message as the replication engine does, and keeps it.
    final class MessageRecorder: LocalCommitSender {
        let messages = Recorder<[UInt8]>()
        let codec: WireCodec
        init(codec: WireCodec) { self.codec = codec }
        func sendCommit(version: Version, writes: borrowing PendingWrites) {
            var lent: [UInt8] = []
            writes.withDeltaMessage(version: version, codec: codec) { lent = [UInt8]($0) }
            #expect(lent == writes.deltaMessage(version: version, codec: codec), "the lent message and the array differ")
            messages.append(lent)
        }
        func frame(version: Version, writes: borrowing PendingWrites) -> [UInt8]? { nil }
        func send(_ frame: [UInt8], timestamp: HLCTimestamp) { Issue.record("a frame sent after the disk without a store") }
    }

    @Test func theMessageFromPendingWritesIsTheDeltaMessage() throws {
        let node = Fixture.node("writer-ü")
        let recorder = MessageRecorder(codec: WireCodec(limits: node.configuration.limits))
        let deltas = Recorder<Delta>()
        _ = node.addCommitListener { deltas.append($0.delta) }
        node.setLocalCommitSender(recorder)
        var random = SplitMix64(seed: 31)
        func pick(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        for _ in 0..<300 {
            let writes = (0..<(1 + pick(6))).map { _ in
                let name = String(repeating: "n", count: 1 + pick(40))
                let key = pick(2) == 0 ? StateKey(name: name) : StateKey(name: name, element: Array(String(repeating: "e", count: pick(40)).utf8))
                let length = [0, 1, 14, 15, 16, 17, 18, 200, 65_536][pick(9)]
                return (key: key, value: pick(5) == 0 ? nil : [UInt8](repeating: UInt8(ascii: "7"), count: length),
                        lifetime: pick(3) == 0 ? Duration.milliseconds(1 + pick(100_000)) : nil, owned: pick(3) == 0)
            }
            node.decide(RandomWrites(writes: writes))
        }
        let codec = ReplicationCodec(wire: WireCodec(limits: node.configuration.limits))
        #expect(recorder.messages.all.count == 300)
        #expect(recorder.messages.all == deltas.all.map { codec.encode(.delta($0)) })
        withExtendedLifetime(recorder) {}
    }
}
