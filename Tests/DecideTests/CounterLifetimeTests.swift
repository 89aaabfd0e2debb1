import DecideCore
import DecideTesting
import Foundation
import Testing
@testable import Decide

/// A counter's lifetime as a whole (docs/design/0004-collection-lifetimes.md, "Counters"): the
/// node that gives it writes the marker and only the slots it may write without losing a
/// change; later changes take it; every other node gives its own slots the marker's instant when
/// the marker arrives (`Node.followLifetimes`), a restarted one too; and the rule for slots
/// written while the marker was away.
@Suite struct CounterLifetimeTests {
    struct Quota: CounterState {
        static var name: String { "quota" }
    }

    struct Change: Decision {
        let amount: Int64
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(.increment(by: amount), into: Quota.self)
            return .none
        }
    }

    struct GiveLifetime: Decision {
        let expiry: WriteExpiry
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.giveLifetime(expiry, toCounterNamed: Quota.name)
            return .none
        }
    }

    static func lifetimes(_ node: Node) -> [String: UInt64?] {
        Dictionary(uniqueKeysWithValues: node.counterSlots(Quota.self).map { ($0.node, $0.expiresAtMilliseconds) })
    }

    static func lifetime(_ node: Node) -> UInt64? {
        node.read { $0.lifetime(ofCollectionNamed: Quota.name) }
    }

    /// Two nodes on one clock whose commits are handed over by hand (`toA`, `toB`): what
    /// reached the other node, and when, is the test's to say.
    final class Pair {
        let clock = TestClock()
        let a: Node, b: Node
        private let fromA: Recorder<Delta>, fromB: Recorder<Delta>
        private var deliveredA = 0, deliveredB = 0

        init() {
            a = Fixture.node("a", clock: clock)
            b = Fixture.node("b", clock: clock)
            fromA = CounterTests.capture(a)
            fromB = CounterTests.capture(b)
        }

        /// a's commits since the last call, applied on b.
        func toB() throws { try Self.deliver(fromA, &deliveredA, to: b) }
        /// b's commits since the last call, applied on a.
        func toA() throws { try Self.deliver(fromB, &deliveredB, to: a) }
        /// a's last commit.
        var lastOfA: Delta? { fromA.all.last }

        static func deliver(_ deltas: Recorder<Delta>, _ delivered: inout Int, to node: Node) throws {
            let all = deltas.all
            for delta in all[delivered...] { _ = try node.apply(delta) }
            delivered = all.count
        }
    }

    @Test func laterChangesTakeTheLifetimeAndTheCounterExpiresWhole() {
        let clock = TestClock()
        let node = Fixture.node(clock: clock)
        node.decide(Change(amount: 4))
        let instant = clock.nowMilliseconds() + 1_000
        #expect(node.decide(GiveLifetime(expiry: .at(milliseconds: instant))).version != nil)
        #expect(Self.lifetime(node) == instant)
        node.decide(Change(amount: 3))
        #expect(node.read(Quota.self) == 7)
        #expect(Self.lifetimes(node) == ["a": instant])
        clock.advance(by: .milliseconds(1_000))
        #expect(node.read(Quota.self) == 0, "the slots expired with the marker")
        #expect(Self.lifetime(node) == nil)
        node.decide(Change(amount: 1))
        #expect(node.read(Quota.self) == 1, "a new count from 0")
        #expect(Self.lifetimes(node) == ["a": nil])
    }

    @Test func aPeerGivesItsOwnSlotsTheLifetimeAndNoOtherNodeWritesThem() throws {
        let pair = Pair()
        let (clock, a, b) = (pair.clock, pair.a, pair.b)
        a.decide(Change(amount: 5))
        b.decide(Change(amount: 7))
        try pair.toB()
        try pair.toA()
        #expect(a.read(Quota.self) == 12 && b.read(Quota.self) == 12)
        let instant = clock.nowMilliseconds() + 5_000
        a.decide(GiveLifetime(expiry: .at(milliseconds: instant)))
        // a wrote the marker and its own slot, never b's: b may be changing it this very moment.
        let given = try #require(pair.lastOfA)
        #expect(given.writes.count == 2)
        #expect(given.writes.allSatisfy { CollectionLifetime.isMarker($0.key) || CounterSlot.owner(of: $0.key)?.node == "a" })
        #expect(Self.lifetimes(a) == ["a": instant, "b": nil])
        // b, meanwhile, counts on, not having heard.
        b.decide(Change(amount: 1))
        try pair.toB()
        #expect(b.followLifetimes() == 1, "b gives its own slot the lifetime")
        #expect(b.followLifetimes() == 0, "once")
        #expect(Self.lifetimes(b) == ["a": instant, "b": instant])
        try pair.toA()
        #expect(a.followLifetimes() == 0, "a's own slot has it already")
        #expect(Self.lifetimes(a) == ["a": instant, "b": instant])
        #expect(a.read(Quota.self) == 13 && b.read(Quota.self) == 13, "no change lost")
        clock.advance(by: .milliseconds(5_000))
        #expect(a.read(Quota.self) == 0 && b.read(Quota.self) == 0)
    }

    /// A plain number taken over on b (a base slot, which never changes) that a had not
    /// received when it gave the lifetime: b writes the base slot with the instant when it
    /// follows, so the taken-over share goes with the rest.
    @Test func aBaseSlotTheGiverHadNotReceivedGoesWithTheLifetime() throws {
        struct TakeOver: Decision {
            let version: Version
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write.counterBase(named: Quota.name, from: version, value: 6)
                return .none
            }
        }
        let pair = Pair()
        let (clock, a, b) = (pair.clock, pair.a, pair.b)
        a.decide(Change(amount: 2))
        try pair.toB()
        let plain = Version(timestamp: HLCTimestamp(physicalMilliseconds: clock.nowMilliseconds() - 10, logical: 0), node: "c")
        #expect(b.decide(TakeOver(version: plain)).version != nil)
        #expect(b.read(Quota.self) == 8 && a.read(Quota.self) == 2)
        let instant = clock.nowMilliseconds() + 5_000
        a.decide(GiveLifetime(expiry: .at(milliseconds: instant)))
        try pair.toB()
        #expect(b.followLifetimes() == 1, "b gives the base slot the lifetime (b has no slot of its own)")
        try pair.toA()
        #expect(a.read(Quota.self) == 8 && b.read(Quota.self) == 8)
        clock.advance(by: .milliseconds(5_000))
        #expect(a.read(Quota.self) == 0 && b.read(Quota.self) == 0, "the taken-over share went with the lifetime")
    }

    @Test func persistTakesItOffASlotThatTookItMeanwhile() throws {
        let pair = Pair()
        let (clock, a, b) = (pair.clock, pair.a, pair.b)
        a.decide(Change(amount: 1))
        b.decide(Change(amount: 1))
        try pair.toA()
        let instant = clock.nowMilliseconds() + 5_000
        a.decide(GiveLifetime(expiry: .at(milliseconds: instant)))
        try pair.toB()
        b.followLifetimes()
        a.decide(GiveLifetime(expiry: .never))
        // b changes its slot before the PERSIST arrives: the change takes the old instant.
        b.decide(Change(amount: 1))
        #expect(Self.lifetimes(b)["b"] == .some(instant))
        try pair.toB()
        #expect(Self.lifetime(b) == nil)
        #expect(b.followLifetimes() == 1)
        #expect(Self.lifetimes(b) == ["a": nil, "b": nil])
        try pair.toA()
        clock.advance(by: .milliseconds(10_000))
        #expect(a.read(Quota.self) == 3 && b.read(Quota.self) == 3, "nothing expires")
    }

    /// What a node cut off for the whole lifetime did: a slot it wrote before the instant goes
    /// when the (expired) marker arrives; one it started after the instant is a new count.
    @Test func anExpiredMarkerTakesTheSlotsWrittenBeforeItsInstantOnly() throws {
        let clock = TestClock()
        let a = Fixture.node("a", clock: clock), b = Fixture.node("b", clock: clock), c = Fixture.node("c", clock: clock)
        let fromA = CounterTests.capture(a)
        a.decide(Change(amount: 2))
        b.decide(Change(amount: 3))   // before the instant, never told of the lifetime
        let instant = clock.nowMilliseconds() + 1_000
        a.decide(GiveLifetime(expiry: .at(milliseconds: instant)))
        clock.advance(by: .milliseconds(2_000))
        c.decide(Change(amount: 4))   // after the instant: a new count
        var deliveredB = 0, deliveredC = 0
        try Pair.deliver(fromA, &deliveredB, to: b)
        try Pair.deliver(fromA, &deliveredC, to: c)
        #expect(b.followLifetimes() == 1)
        #expect(b.read(Quota.self) == 0, "b's share was made while the lifetime ran")
        #expect(c.followLifetimes() == 0)
        #expect(c.read(Quota.self) == 4, "c's count started after the instant")
    }

    /// Many counters to follow at once (a removal asks for every counter with a lifetime):
    /// each call follows at most `Node.lifetimeFollowSliceNames` of them, the rest on the next
    /// calls, and every one is followed once.
    @Test func followsAreSlicedAndEachCounterIsFollowedOnce() throws {
        struct ChangeMany: Decision {
            let names: [String]
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for name in names { write.change(.increment(by: 1), counterNamed: name) }
                return .none
            }
        }
        struct GiveMany: Decision {
            let names: [String], instant: UInt64
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for name in names { write.giveLifetime(.at(milliseconds: instant), toCounterNamed: name) }
                return .none
            }
        }
        let pair = Pair()
        let (clock, a, b) = (pair.clock, pair.a, pair.b)
        let slice = Node.lifetimeFollowSliceNames
        let names = (0..<(2 * slice + slice / 2)).map { "quota-\($0)" }
        for part in stride(from: 0, to: names.count, by: 500) {
            #expect(b.decide(ChangeMany(names: Array(names[part..<min(part + 500, names.count)]))).version != nil)
        }
        try pair.toA()
        let instant = clock.nowMilliseconds() + 5_000
        for part in stride(from: 0, to: names.count, by: 500) {
            #expect(a.decide(GiveMany(names: Array(names[part..<min(part + 500, names.count)]), instant: instant)).version != nil)
        }
        try pair.toB()
        #expect(b.followLifetimes() == slice, "one slice: one own slot a counter")
        #expect(b.followLifetimes() == slice)
        #expect(b.followLifetimes() == slice / 2)
        #expect(b.followLifetimes() == 0, "each counter once")
        try pair.toA()
        clock.advance(by: .milliseconds(5_000))
        for (id, node) in [("a", a), ("b", b)] {
            let left = names.filter { name in node.read { $0.counterTotal(named: name) } != 0 }
            #expect(left.isEmpty, "every counter expired on \(id): \(left.prefix(3))")
        }
    }

    @Test func aNodeThatStoppedBeforeItFollowedFollowsWhenItStartsAgain() throws {
        let scratch = StorageTests.Scratch()
        defer { scratch.remove() }
        let clock = TestClock()
        let a = Fixture.node("a", clock: clock)
        let fromA = CounterTests.capture(a)
        a.decide(Change(amount: 1))
        var b: Node? = try StorageTests.open(scratch, id: "b", durability: .strict, clock: clock)
        b!.decide(Change(amount: 1))
        let instant = clock.nowMilliseconds() + 60_000
        a.decide(GiveLifetime(expiry: .at(milliseconds: instant)))
        var delivered = 0
        try Pair.deliver(fromA, &delivered, to: b!)
        try b!.close()   // stopped before its next tick's follow
        b = nil
        clock.advance(by: .milliseconds(1))
        let reopened = try StorageTests.open(scratch, id: "b", durability: .strict, clock: clock)
        let own = reopened.counterSlots(Quota.self).filter { $0.node == reopened.id }
        #expect(own.count == 1 && own[0].expiresAtMilliseconds == nil)
        #expect(reopened.followLifetimes() == 1)
        #expect(reopened.counterSlots(Quota.self).allSatisfy { $0.expiresAtMilliseconds == instant })
        try reopened.close()
    }
}
