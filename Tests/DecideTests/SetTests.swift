import DecideCore
import DecideTesting
import Testing
@testable import Decide

/// `SetState` on one node and between two: inserts and removes in and across decisions, add
/// wins over a remove that had not seen the insert, a remove takes out what it saw, a re-insert
/// after a remove stays, and a set shares its name with nothing else.
@Suite struct SetTests {
    struct Online: SetState {
        typealias Element = String
        static var name: String { "online" }
    }

    struct Change: Decision {
        let changes: [SetChange<String>]
        var seen: @Sendable (Set<String>) -> Void = { _ in }
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for change in changes {
                write(change, into: Online.self)
                seen(read(Online.self))
            }
            return .none
        }
    }

    @Test func insertsAndRemovesWithinAndAcrossDecisions() {
        let node = Fixture.node()
        #expect(node.read(Online.self).isEmpty)
        let seen = Recorder<Set<String>>()
        node.decide(Change(changes: [.insert("ann"), .insert("bob"), .insert("ann"), .remove("bob")], seen: { seen.append($0) }))
        #expect(seen.all == [["ann"], ["ann", "bob"], ["ann", "bob"], ["ann"]])
        #expect(node.read(Online.self) == ["ann"])
        node.decide(Change(changes: [.insert("cid"), .insert("dee")]))
        node.decide(Change(changes: [.remove("nobody"), .removeAll]))
        #expect(node.read(Online.self).isEmpty)
    }

    /// The rule: an insert on b that a's concurrent remove had not seen stays; a's remove takes
    /// out the insert it had seen; a re-insert after a remove stays.
    @Test func anInsertWinsOverARemoveThatHadNotSeenIt() throws {
        let a = Fixture.node("a"), b = Fixture.node("b")
        let fromA = CounterTests.capture(a), fromB = CounterTests.capture(b)
        a.decide(Change(changes: [.insert("ann"), .insert("bob")]))
        for delta in fromA.all { _ = try b.apply(delta) }
        let shared = fromA.all.count
        // At once: a removes ann and bob; b inserts ann again (and adds cid).
        a.decide(Change(changes: [.remove("ann"), .remove("bob")]))
        b.decide(Change(changes: [.insert("ann"), .insert("cid")]))
        for delta in fromA.all.dropFirst(shared) { _ = try b.apply(delta) }
        for delta in fromB.all { _ = try a.apply(delta) }
        #expect(a.read(Online.self) == ["ann", "cid"], "b's insert of ann, unseen by a's remove, stays; bob, seen, goes")
        #expect(b.read(Online.self) == a.read(Online.self))
        // Once a has seen b's insert, its remove takes it out everywhere.
        let before = fromA.all.count
        a.decide(Change(changes: [.remove("ann")]))
        for delta in fromA.all.dropFirst(before) { _ = try b.apply(delta) }
        #expect(a.read(Online.self) == ["cid"] && b.read(Online.self) == ["cid"])
    }

    @Test func testStateShowsSetsByTheirElements() async {
        let store = TestNode()
        store.decide(Change(changes: [.insert("ann"), .insert("bob")])) { $0[Online.self] = ["ann", "bob"] }
        store.decide(Change(changes: [.remove("ann")])) { $0[Online.self] = ["bob"] }
        #expect(store.state.sets == [Online.name: ["\"bob\""]] && store.state.values.isEmpty)
        await store.finish()
    }

    /// A collection, a counter and a set of one name keep out of each other's way.
    @Test func aSetACounterAndACollectionShareANameWithoutMixing() {
        struct Shared: CollectionState { static var name: String { "online" }; static func defaultValue(at id: String) -> Int { 0 } }
        struct Count: CounterState { static var name: String { "online" } }
        struct Write: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(.insert("ann"), into: Online.self)
                write(.increment(by: 2), into: Count.self)
                write(7, into: Shared.self, at: "x")
                return .none
            }
        }
        let node = Fixture.node()
        node.decide(Write())
        #expect(node.read(Online.self) == ["ann"] && node.read(Count.self) == 2)
        #expect(node.elements(Shared.self).ids == ["x"])
    }
}
