import Decide
import DecideTesting
import Foundation
import Testing

/// Expiring keys on one node: reads, observers, listeners, the node's own timer, the store and
/// collection (docs/consistency.md, "Expiring keys").
@Suite struct ExpiringKeyTests {
    struct Session: AtomicState {
        static func defaultValue() -> String { "" }
        static var lifetime: Duration? { .seconds(5) }
    }

    struct Lease: Decision {
        let holder: String
        let lifetime: Duration
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(holder, into: Fixture.Label.self, expiringAfter: lifetime)
            write(7, into: Fixture.Quota.self, at: holder, expiringAfter: lifetime)
            return .none
        }
    }

    struct OpenSession: Decision {
        let name: String
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(name, into: Session.self)
            return .none
        }
    }

    static let start: UInt64 = 1_700_000_000_000

    /// A node whose own expiry timer stays out of the way (the test calls `expireDue`).
    static func node(_ clock: TestClock) -> Node {
        Fixture.node(clock: clock) { $0.expiryCheckIntervalMilliseconds = 60_000 }
    }

    @Test func anExpiredValueReadsAsItsDefaultAndObserversHearItOnce() async {
        let clock = TestClock(startMilliseconds: Self.start)
        let node = Self.node(clock)
        let seen = Recorder<String>()
        let subscription = node.subscribe(Fixture.Label.self) { seen.append($0) }
        defer { subscription.cancel() }
        let origins = Recorder<CommittedDelta.Origin>()
        _ = node.addCommitListener { origins.append($0.origin) }

        let version = node.decide(Lease(holder: "worker-1", lifetime: .seconds(30))).version
        #expect(version != nil)
        let entry = node.entry(for: StateKey(name: Fixture.Label.name))
        #expect(entry?.expiresAtMilliseconds == Self.start + 30_000, "the lifetime counts from the decision's timestamp")
        #expect(node.read(Fixture.Label.self) == "worker-1")
        #expect(node.read(Fixture.Quota.self, at: "worker-1") == 7)

        clock.set(milliseconds: Self.start + 29_999)
        #expect(node.expireDue() == 0)
        #expect(node.read(Fixture.Label.self) == "worker-1")

        clock.set(milliseconds: Self.start + 30_000)
        // Reads see it gone at once, before any sweep.
        #expect(node.read(Fixture.Label.self) == "untitled")
        #expect(node.read(Fixture.Quota.self, at: "worker-1") == 100)
        #expect(node.read { $0.entry(StateKey(name: Fixture.Label.name)) } == nil)
        #expect(node.expireDue() == 2)
        #expect(node.expireDue() == 0)
        clock.set(milliseconds: Self.start + 90_000)
        #expect(node.expireDue() == 0, "each value expires once")
        #expect(await seen.wait { $0 == ["untitled", "worker-1", "untitled"] }, "\(seen.all)")
        #expect(origins.all == [.local, .expired, .expired])
        let summary = node.stateSummary
        #expect(summary.entryCount == 2 && summary.expiredCount == 2 && summary.tombstoneCount == 0)
    }

    struct Grant: Decision {
        let range: Range<Int>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in range { write(index, into: Fixture.Quota.self, at: "tenant-\(index)", expiringAfter: .seconds(1)) }
            return .none
        }
    }

    /// More keys due at one instant than one batch of `expireDue` takes: each is reported once,
    /// whichever call gets to it, and a collection (which reports what is due first) removes
    /// every one of them.
    @Test(arguments: [false, true])
    func fiftyThousandKeysDueAtOnceAreEachReportedOnceAndCollected(collectFirst: Bool) {
        let clock = TestClock(startMilliseconds: Self.start)
        let node = Self.node(clock)
        let keys = 50_000
        node.decide(Grant(range: 0..<keys))
        let expired = Recorder<String>()
        _ = node.addCommitListener { delta in
            guard delta.origin == .expired else { return }
            for write in delta.delta.writes { expired.append(write.key.description) }
        }
        clock.set(milliseconds: Self.start + 1_000)
        let horizon = HLCTimestamp(physicalMilliseconds: Self.start + 10_000, logical: 0)
        if collectFirst {
            #expect(node.collectTombstones(olderThan: horizon) == keys)
        } else {
            #expect(node.expireDue() == keys)
            #expect(node.expireDue() == 0)
            #expect(node.collectTombstones(olderThan: horizon) == keys)
        }
        #expect(expired.all.count == keys && Set(expired.all).count == keys, "each key reported once")
        #expect(node.stateSummary.entryCount == 0)
    }

    @Test func aRenewalIsAWriteAndTheOldInstantNoLongerCounts() {
        let clock = TestClock(startMilliseconds: Self.start)
        let node = Self.node(clock)
        node.decide(Lease(holder: "a", lifetime: .seconds(10)))
        clock.set(milliseconds: Self.start + 8_000)
        node.decide(Lease(holder: "a", lifetime: .seconds(10)))
        clock.set(milliseconds: Self.start + 12_000)
        #expect(node.expireDue() == 0)
        #expect(node.read(Fixture.Label.self) == "a")
        clock.set(milliseconds: Self.start + 18_000)
        #expect(node.expireDue() == 2)
        // A write without a lifetime makes the key permanent again.
        node.set("b", into: Fixture.Label.self)
        clock.set(milliseconds: Self.start + 10_000_000)
        #expect(node.read(Fixture.Label.self) == "b")
        #expect(node.entry(for: StateKey(name: Fixture.Label.name))?.expiresAtMilliseconds == nil)
    }

    @Test func aStateTypeCanGiveEveryWriteALifetime() {
        let clock = TestClock(startMilliseconds: Self.start)
        let node = Self.node(clock)
        node.decide(OpenSession(name: "s1"))
        #expect(node.entry(for: StateKey(name: Session.name))?.expiresAtMilliseconds == Self.start + 5_000)
        clock.set(milliseconds: Self.start + 5_000)
        #expect(node.read(Session.self) == "")
    }

    @Test(arguments: [Duration.zero, .seconds(-1)])
    func aLifetimeThatIsNotPositiveAbortsTheDecision(_ lifetime: Duration) {
        let node = Self.node(TestClock(startMilliseconds: Self.start))
        guard case .aborted(let reason) = node.decide(Lease(holder: "x", lifetime: lifetime)) else {
            Issue.record("expected an abort")
            return
        }
        #expect(reason.contains("must be positive"))
        #expect(node.stateSummary.entryCount == 0)
    }

    @Test func theNodesOwnTimerReportsExpiryWithoutReplication() async {
        let clock = TestClock(startMilliseconds: Self.start)
        let node = Fixture.node(clock: clock) { $0.expiryCheckIntervalMilliseconds = 5 }
        let seen = Recorder<String>()
        let subscription = node.subscribe(Fixture.Label.self) { seen.append($0) }
        defer { subscription.cancel() }
        node.decide(Lease(holder: "w", lifetime: .milliseconds(1)))
        clock.set(milliseconds: Self.start + 1)
        #expect(await seen.wait { $0 == ["untitled", "w", "untitled"] }, "\(seen.all)")
    }

    @Test func collectionRemovesExpiredValuesAndKeepsLiveOnes() {
        let clock = TestClock(startMilliseconds: Self.start)
        let node = Self.node(clock)
        node.decide(Lease(holder: "a", lifetime: .seconds(1)))
        node.set(3, into: Fixture.Counter.self)
        clock.set(milliseconds: Self.start + 1_000)
        let horizon = HLCTimestamp(physicalMilliseconds: Self.start + 10_000, logical: 0)
        #expect(node.collectTombstones(olderThan: horizon) == 2)
        #expect(node.stateSummary.entryCount == 1 && node.stateSummary.expiredCount == 0)
        #expect(node.read(Fixture.Counter.self) == 3)
        // An expired copy handed back by a peer that has not collected it is not stored again.
        let stale = Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: Self.start, logical: 0), node: "a"),
                          value: Array("\"a\"".utf8), expiresAtMilliseconds: Self.start + 1_000)
        #expect((try? node.apply(entries: [KeyedEntry(key: StateKey(name: Fixture.Label.name), entry: stale)])) == 0)
        #expect(node.stateSummary.entryCount == 1)
    }

    @Test func theStoreKeepsExpiryAcrossARestart() throws {
        let scratch = StorageTests.Scratch()
        defer { scratch.remove() }
        let clock = TestClock(startMilliseconds: Self.start)
        let node = try StorageTests.open(scratch, durability: .strict, clock: clock)
        node.decide(Lease(holder: "a", lifetime: .seconds(60)))
        node.set(1, into: Fixture.Counter.self)
        let before = node.entries()
        try node.close()

        let reopened = try StorageTests.open(scratch, durability: .strict, clock: clock) {
            $0.expiryCheckIntervalMilliseconds = 60_000
        }
        #expect(reopened.entries() == before)
        #expect(reopened.read(Fixture.Label.self) == "a")
        clock.set(milliseconds: Self.start + 60_000)
        #expect(reopened.read(Fixture.Label.self) == "untitled")
        #expect(reopened.expireDue() == 2)
        try reopened.close()
    }
}
