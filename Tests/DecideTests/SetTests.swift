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

    /// A dot of this incarnation and sequence already stored (another process of node id "a"
    /// that took the same incarnation) is never reused: the insert takes a new incarnation, so a
    /// remove that saw the other process's insert cannot take out this one.
    @Test func aDotOfThisIncarnationThatThisProcessDidNotWriteIsNeverReused() throws {
        let node = Fixture.node()
        let before = node.incarnation
        let taken = StateKey(name: Online.name, element: SetDot.element(member: Array("\"bob\"".utf8), incarnation: before, sequence: 1, node: "a"))
        let remote = Version(timestamp: HLCTimestamp(rawValue: before + 1), node: "a")
        _ = try node.apply(Delta(version: remote, writes: [Delta.Write(key: taken, value: Array("1".utf8))]))
        node.decide(Change(changes: [.insert("bob")]))
        #expect(node.incarnation > before, "a new incarnation")
        // The insert saw the other process's dot and deleted it, as every insert does with the
        // dots it sees; its own dot is of the new incarnation.
        #expect(node.read { $0.entry(taken) }?.packedValue == nil)
        let own = StateKey(name: Online.name, element: SetDot.element(member: Array("\"bob\"".utf8), incarnation: node.incarnation, sequence: 2, node: "a"))
        #expect(node.read { $0.entry(own) }?.packedValue != nil)
        #expect(node.read(Online.self) == ["bob"])
    }

    /// A new member past `maxSetMembers` aborts its decision with the reason; members already
    /// in the set can still be inserted again and removed.
    @Test func aMemberPastTheBoundAborts() {
        let node = Fixture.node { $0.maxSetMembers = 2 }
        #expect(node.decide(Change(changes: [.insert("ann"), .insert("bob")])).version != nil)
        let refused = node.decide(Change(changes: [.insert("cid")]))
        #expect(CounterTests.reason(refused)?.contains("maxSetMembers 2") == true, "\(refused)")
        #expect(node.decide(Change(changes: [.insert("ann"), .remove("bob")])).version != nil)
        #expect(node.read(Online.self) == ["ann"])
        // bob's tombstoned dot still counts until it is collected.
        #expect(CounterTests.reason(node.decide(Change(changes: [.insert("cid")]))) != nil)
        #expect(node.decide(Change(changes: [.insert("bob")])).version != nil)
    }

    /// A peer's dot ids that do not parse (a length past the end, a bare tag) are stored as
    /// elements of nothing: no member, no crash, and the set reads on.
    @Test func malformedDotsFromAPeerAreNoMembers() throws {
        let node = Fixture.node()
        node.decide(Change(changes: [.insert("ann")]))
        let version = Version(timestamp: HLCTimestamp(rawValue: 1), node: "z")
        for element: [UInt8] in [[0xFF, 0x73, 0x01], [0xFF, 0x73, 0x01, 0x7F, 0x22], [0xFF, 0x73, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]] {
            _ = try node.apply(Delta(version: version, writes: [Delta.Write(key: StateKey(name: Online.name, element: element), value: Array("1".utf8))]))
        }
        #expect(node.read(Online.self) == ["ann"])
        #expect(node.decide(Change(changes: [.removeAll])).version != nil)
        #expect(node.read(Online.self).isEmpty)
    }

    @Test func observersSeeTheElements() async {
        let node = Fixture.node()
        let seen = Recorder<Set<String>>()
        let task = Task {
            for await elements in node.observe(Online.self) {
                seen.append(elements)
                if elements == ["ann"] { break }
            }
        }
        _ = await seen.wait { $0.contains([]) }
        node.decide(Change(changes: [.insert("ann")]))
        #expect(await seen.wait { $0.last == ["ann"] })
        task.cancel()
    }

    /// At the size users have: 100,000 members in one set, inserted 1,000 a decision, then
    /// tested, removed and counted, with a counter of the same name changed by each decision. Every step
    /// reads one member's dots (or the counter's slots) by group, not the set: were any O(set),
    /// this would take hours instead of seconds.
    @Test func aSetOfAHundredThousandMembers() {
        struct Big: SetState { typealias Element = Int; static var name: String { "big" } }
        struct Count: CounterState { static var name: String { "big" } }
        struct Insert: Decision {
            let range: Range<Int>
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for member in range { write(.insert(member), into: Big.self) }
                write(.increment(by: Int64(range.count)), into: Count.self)
                return .none
            }
        }
        struct Remove: Decision {
            let members: [Int]
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for member in members { write(.remove(member), into: Big.self) }
                return .none
            }
        }
        let node = Fixture.node()
        for start in stride(from: 0, to: 100_000, by: 1_000) {
            #expect(node.decide(Insert(range: start..<start + 1_000)).version != nil)
        }
        #expect(node.read(Count.self) == 100_000)
        #expect(node.decide(Remove(members: Array(stride(from: 0, to: 100_000, by: 2)))).version != nil)
        let held = node.read(Big.self)
        #expect(held.count == 50_000 && held.contains(1) && !held.contains(0))
        #expect(node.setDots(named: Big.name, member: Array("99999".utf8)).count == 1)
    }
}
