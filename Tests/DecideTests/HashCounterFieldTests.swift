import DecideCore
import DecideTesting
import Foundation
import Testing
@testable import Decide

/// A hash's counter fields (syncnode's HINCRBY) on one node and between two: the slot layout
/// (docs/replication.md, "Counter fields of a hash"), that each field counts apart from the
/// others and from a counter of the hash's name, merges, the observed reset, the bounds, the
/// lifetime, and a restart that must still find the fields.
@Suite struct HashCounterFieldTests {
    static let hash = "limits"
    static let ann = Array("\"ann\"".utf8), bob = Array("\"bob\"".utf8)

    struct Change: Decision {
        let field: [UInt8]
        let change: CounterChange
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.change(change, counterField: field, ofHashNamed: HashCounterFieldTests.hash)
            return .none
        }
    }

    struct Quota: CounterState {
        static var name: String { HashCounterFieldTests.hash }
    }

    struct Plain: Decision {
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(.increment(by: 100), into: Quota.self)
            write.raw(Array("\"x\"".utf8), into: StateKey(name: HashCounterFieldTests.hash, element: Array("\"name\"".utf8)))
            return .none
        }
    }

    static func total(_ node: Node, _ field: [UInt8]) -> Int64 {
        node.read { $0.counterTotal(ofField: field, ofHashNamed: hash) }
    }

    static func capture(_ node: Node) -> Recorder<Delta> {
        let captured = Recorder<Delta>()
        _ = node.addCommitListener { if $0.origin == .local { captured.append($0.delta) } }
        return captured
    }

    @Test func aFieldSlotIsLaidOutAsDocumented() throws {
        let node = Fixture.node()
        let written = Self.capture(node)
        #expect(node.decide(Change(field: Self.ann, change: .increment(by: 3))).version != nil)
        let key = try #require(written.all.first?.writes.first?.key)
        // FF 68 01 | varint length | field JSON | incarnation (8 bytes, big-endian) | node id
        var incarnation: [UInt8] = []
        for shift in stride(from: 56, through: 0, by: -8) { incarnation.append(UInt8(truncatingIfNeeded: node.incarnation >> UInt64(shift))) }
        #expect(key.element == [0xFF, 0x68, 0x01, UInt8(Self.ann.count)] + Self.ann + incarnation + Array("a".utf8))
        #expect(CounterSlot.field(of: key) == Self.ann)
        #expect(CounterSlot.isSlot(key) && CounterSlot.isSlot(key, ofNode: Array("a".utf8)) && !CounterSlot.isSlot(key, ofNode: Array("b".utf8)))
        #expect(CounterSlot.owner(of: key)?.node == "a" && CounterSlot.owner(of: key)?.incarnation == node.incarnation)
        #expect(CompoundPresence.isCompound(key), "not a plain field: HGET of the field's own key finds nothing there")
        #expect(written.all.first?.writes.first?.value == Array("[3,0]".utf8))
    }

    @Test func eachFieldCountsApartFromTheOthersAndFromACounterOfTheHashsName() {
        let node = Fixture.node()
        node.decide(Change(field: Self.ann, change: .increment(by: 5)))
        node.decide(Change(field: Self.bob, change: .decrement(by: 2)))
        node.decide(Plain())
        #expect(Self.total(node, Self.ann) == 5 && Self.total(node, Self.bob) == -2)
        #expect(node.read(Quota.self) == 100, "a counter of the hash's name does not sum the fields")
        let fields = node.read { $0.counterFields(ofHashNamed: Self.hash) }.sorted { $0.field.lexicographicallyPrecedes($1.field) }
        #expect(fields.map(\.field) == [Self.ann, Self.bob] && fields.map(\.total) == [5, -2])
        // The hash's fields as a front end reads them: the plain field and both counters.
        let read = node.read { $0.fields(ofHashNamed: Self.hash) }.map { "\($0.field)=\(String(decoding: $0.value.array, as: UTF8.self))" }.sorted()
        #expect(read == ["limits[\"ann\"]=5", "limits[\"bob\"]=-2", "limits[\"name\"]=\"x\""])
        #expect(node.read { $0.plainFields(ofHashNamed: Self.hash) }.count == 1)
    }

    @Test func testStateShowsEachCounterFieldAsACounterOfItsOwn() async {
        let store = TestNode()
        store.decide(Change(field: Self.ann, change: .increment(by: 5))) { $0.counters["limits[\"ann\"]"] = 5 }
        store.decide(Plain()) { state in
            state[Quota.self] = 100
            state.values["limits[\"name\"]"] = "\"x\""
        }
        await store.finish()
    }

    @Test func changesOnTwoNodesAllCountAndAResetKeepsWhatItDidNotSee() throws {
        let a = Fixture.node("a"), b = Fixture.node("b")
        let fromA = Self.capture(a), fromB = Self.capture(b)
        a.decide(Change(field: Self.ann, change: .increment(by: 4)))
        b.decide(Change(field: Self.ann, change: .increment(by: 6)))
        for delta in fromB.all { _ = try a.apply(delta) }
        #expect(Self.total(a, Self.ann) == 10)
        // b increments again before hearing a's reset: that increment survives it.
        b.decide(Change(field: Self.ann, change: .increment(by: 1)))
        a.decide(Change(field: Self.ann, change: .reset))
        #expect(Self.total(a, Self.ann) == 0)
        for delta in fromA.all { _ = try b.apply(delta) }
        for delta in fromB.all { _ = try a.apply(delta) }
        #expect(Self.total(a, Self.ann) == 1 && Self.total(b, Self.ann) == 1)
    }

    @Test func aChangePastInt64OrTheSlotBoundAbortsNamingTheField() throws {
        let node = Fixture.node { $0.maxCounterSlots = 1 }
        #expect(node.decide(Change(field: Self.ann, change: .increment(by: .max))).version != nil)
        guard case .aborted(let reason) = node.decide(Change(field: Self.ann, change: .increment(by: 1))) else {
            Issue.record("a change past Int64 committed")
            return
        }
        #expect(reason.hasPrefix("counter field \"ann\" of hash limits: ") && reason.contains("outside Int64"), "\(reason)")
        // maxCounterSlots bounds each field's slots: another node's slot of bob fills it.
        let other = Fixture.node("b")
        let fromB = Self.capture(other)
        other.decide(Change(field: Self.bob, change: .increment(by: 1)))
        for delta in fromB.all { _ = try node.apply(delta) }
        guard case .aborted(let full) = node.decide(Change(field: Self.bob, change: .increment(by: 1))) else {
            Issue.record("a slot past maxCounterSlots committed")
            return
        }
        #expect(full.contains("maxCounterSlots 1"), "\(full)")
    }

    @Test func aLifetimeGivenToTheFieldsEndsThemAndAPeerFollowsForItsOwnSlots() throws {
        let clock = TestClock()
        let a = Fixture.node("a", clock: clock), b = Fixture.node("b", clock: clock)
        let fromA = Self.capture(a), fromB = Self.capture(b)
        a.decide(Change(field: Self.ann, change: .increment(by: 2)))
        b.decide(Change(field: Self.ann, change: .increment(by: 3)))
        for delta in fromB.all { _ = try a.apply(delta) }
        let instant = a.read { $0.nowMilliseconds } + 1_000
        struct Give: Decision {
            let instant: UInt64
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                let expiry = WriteExpiry.at(milliseconds: instant)
                write.raw(packed: CollectionLifetime.value, into: CollectionLifetime.marker(ofCollectionNamed: HashCounterFieldTests.hash),
                          expiry: expiry, ownedByThisNode: false)
                write.giveLifetime(expiry, toCounterFieldsOfHashNamed: HashCounterFieldTests.hash)
                return .none
            }
        }
        let before = fromA.all.count
        #expect(a.decide(Give(instant: instant)).version != nil)
        for delta in fromA.all[before...] { _ = try b.apply(delta) }
        #expect(b.followLifetimes() == 1, "b gives its own slot of the field the marker's instant")
        for delta in fromB.all.dropFirst() { _ = try a.apply(delta) }
        #expect(Self.total(a, Self.ann) == 5 && Self.total(b, Self.ann) == 5)
        clock.advance(by: .milliseconds(1_001))
        #expect(Self.total(a, Self.ann) == 0 && Self.total(b, Self.ann) == 0, "both nodes' slots expired with the hash")
    }

    @Test func aRestartedNodeStillFindsItsCounterFields() throws {
        let scratch = StorageTests.Scratch()
        defer { scratch.remove() }
        let clock = TestClock()
        var node: Node? = try StorageTests.open(scratch, durability: .strict, clock: clock)
        node!.decide(Change(field: Self.ann, change: .increment(by: 9)))
        try node!.close()
        node = nil
        clock.advance(by: .milliseconds(1))
        let reopened = try StorageTests.open(scratch, durability: .strict, clock: clock)
        #expect(Self.total(reopened, Self.ann) == 9)
        #expect(reopened.read { $0.hasFields(ofHashNamed: Self.hash) })
        reopened.decide(Change(field: Self.ann, change: .increment(by: 1)))
        #expect(Self.total(reopened, Self.ann) == 10)
        try reopened.close()
    }
}
