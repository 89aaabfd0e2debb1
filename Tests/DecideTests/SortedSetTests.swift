import DecideCore
import DecideTesting
import Testing
@testable import Decide

/// `SortedSetState` on one node and between two: adds, re-scores and removes in and across
/// decisions, reads in score order with ties by JSON, last-writer-wins per member across nodes,
/// scores that JSON cannot hold refused, the member bound, malformed peer values skipped, and a
/// sorted set sharing its name with a set, a counter and a collection without mixing.
@Suite struct SortedSetTests {
    struct Board: SortedSetState {
        typealias Member = String
        static var name: String { "board" }
    }

    struct Change: Decision {
        let changes: [SortedSetChange<String>]
        var seen: @Sendable ([ScoredMember<String>]) -> Void = { _ in }
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for change in changes {
                write(change, into: Board.self)
                seen(read(Board.self))
            }
            return .none
        }
    }

    static func scored(_ pairs: [(String, Double)]) -> [ScoredMember<String>] {
        pairs.map { ScoredMember($0.0, score: $0.1) }
    }

    @Test func addsRescoresAndRemovesWithinAndAcrossDecisions() {
        let node = Fixture.node()
        #expect(node.read(Board.self).isEmpty)
        let seen = Recorder<[ScoredMember<String>]>()
        node.decide(Change(changes: [.add("ann", score: 3), .add("bob", score: 1), .add("ann", score: 0.5), .remove("bob")],
                           seen: { seen.append($0) }))
        #expect(seen.all == [Self.scored([("ann", 3)]), Self.scored([("bob", 1), ("ann", 3)]),
                             Self.scored([("ann", 0.5), ("bob", 1)]), Self.scored([("ann", 0.5)])])
        node.decide(Change(changes: [.add("cid", score: -2), .add("dee", score: 0.5)]))
        // Ties by the member's JSON: "ann" before "dee".
        #expect(node.read(Board.self) == Self.scored([("cid", -2), ("ann", 0.5), ("dee", 0.5)]))
        #expect(node.read(Board.self, scoreOf: "cid") == -2 && node.read(Board.self, scoreOf: "bob") == nil)
        node.decide(Change(changes: [.remove("nobody"), .removeAll]))
        #expect(node.read(Board.self).isEmpty)
    }

    /// Last-writer-wins per member: concurrent scores of two members both stay; concurrent
    /// changes of one member end, on both nodes, with the later version's.
    @Test func eachMemberIsReplacedLastWriterWinsOnItsOwn() throws {
        let clockA = TestClock(), clockB = TestClock()
        let a = Fixture.node("a", clock: clockA), b = Fixture.node("b", clock: clockB)
        let fromA = CounterTests.capture(a), fromB = CounterTests.capture(b)
        a.decide(Change(changes: [.add("ann", score: 1), .add("bob", score: 1)]))
        for delta in fromA.all { _ = try b.apply(delta) }
        let shared = fromA.all.count
        // At once: a re-scores ann and removes bob; b, later on its clock, scores ann and cid.
        a.decide(Change(changes: [.add("ann", score: 10), .remove("bob")]))
        clockB.advance(by: .milliseconds(5))
        b.decide(Change(changes: [.add("ann", score: 20), .add("cid", score: 5)]))
        for delta in fromA.all.dropFirst(shared) { _ = try b.apply(delta) }
        for delta in fromB.all { _ = try a.apply(delta) }
        #expect(a.read(Board.self) == Self.scored([("cid", 5), ("ann", 20)]), "b's later score of ann wins; a's removal of bob stands")
        #expect(b.read(Board.self) == a.read(Board.self))
    }

    @Test func scoresJSONCannotHoldAbortTheDecision() {
        let node = Fixture.node()
        for score in [Double.infinity, -.infinity, .nan] {
            let refused = node.decide(Change(changes: [.add("ann", score: score)]))
            #expect(CounterTests.reason(refused)?.contains("not a finite number") == true, "\(refused)")
        }
        #expect(node.read(Board.self).isEmpty)
        // -0 is stored as 0: one spelling on every replica.
        node.decide(Change(changes: [.add("ann", score: -0.0), .add("bob", score: 1e300), .add("cid", score: 5e-324)]))
        #expect(node.read(Board.self) == Self.scored([("ann", 0), ("cid", 5e-324), ("bob", 1e300)]))
        #expect(node.read { $0.entry(StateKey(name: Board.name, element: SortedSetMember.element(member: Array("\"ann\"".utf8)))) }?.packedValue
            == PackedBytes(Array("0.0".utf8)))
    }

    @Test func aMemberPastTheBoundAborts() {
        let node = Fixture.node { $0.maxSetMembers = 2 }
        #expect(node.decide(Change(changes: [.add("ann", score: 1), .add("bob", score: 2)])).version != nil)
        let refused = node.decide(Change(changes: [.add("cid", score: 3)]))
        #expect(CounterTests.reason(refused)?.contains("maxSetMembers 2") == true, "\(refused)")
        // Members already in it are re-scored and removed; a removed one counts until collected.
        #expect(node.decide(Change(changes: [.add("ann", score: 9), .remove("bob")])).version != nil)
        #expect(CounterTests.reason(node.decide(Change(changes: [.add("cid", score: 3)]))) != nil)
        #expect(node.decide(Change(changes: [.add("bob", score: 4)])).version != nil)
        #expect(node.read(Board.self) == Self.scored([("bob", 4), ("ann", 9)]))
    }

    /// A peer's values that are no finite JSON number, and bare tags, are no members: skipped,
    /// never a crash.
    @Test func malformedMembersFromAPeerAreSkipped() throws {
        let node = Fixture.node()
        node.decide(Change(changes: [.add("ann", score: 1)]))
        let version = Version(timestamp: HLCTimestamp(rawValue: 1), node: "z")
        let bad: [([UInt8], String)] = [
            (SortedSetMember.element(member: Array("\"x\"".utf8)), "\"text\""),
            (SortedSetMember.element(member: Array("\"y\"".utf8)), "1e999"),
            (SortedSetMember.element(member: Array("\"w\"".utf8)), "nan"),
            ([0xFF, 0x7A, 0x01], "1"),
        ]
        for (element, value) in bad {
            _ = try node.apply(Delta(version: version, writes: [Delta.Write(key: StateKey(name: Board.name, element: element), value: Array(value.utf8))]))
        }
        #expect(node.read(Board.self) == Self.scored([("ann", 1)]))
        #expect(node.read(Board.self, scoreOf: "y") == nil)
        #expect(node.decide(Change(changes: [.removeAll])).version != nil)
        #expect(node.read(Board.self).isEmpty)
    }

    /// A sorted set, a set, a counter and a collection of one name keep out of each other's way.
    @Test func aSortedSetSharesANameWithoutMixing() {
        struct Shared: CollectionState { static var name: String { "board" }; static func defaultValue(at id: String) -> Int { 0 } }
        struct Count: CounterState { static var name: String { "board" } }
        struct Online: SetState { typealias Element = String; static var name: String { "board" } }
        struct Write: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(.add("ann", score: 2), into: Board.self)
                write(.insert("bob"), into: Online.self)
                write(.increment(by: 2), into: Count.self)
                write(7, into: Shared.self, at: "x")
                return .none
            }
        }
        let node = Fixture.node()
        node.decide(Write())
        #expect(node.read(Board.self) == Self.scored([("ann", 2)]))
        #expect(node.read(Online.self) == ["bob"] && node.read(Count.self) == 2)
        #expect(node.elements(Shared.self).ids == ["x"])
        node.decide(Change(changes: [.removeAll]))
        #expect(node.read(Online.self) == ["bob"] && node.read(Count.self) == 2 && node.elements(Shared.self).ids == ["x"])
    }

    @Test func testStateShowsSortedSetsByMemberAndScore() async {
        let store = TestNode()
        store.decide(Change(changes: [.add("ann", score: 2), .add("bob", score: 1)])) { $0[Board.self] = Self.scored([("bob", 1), ("ann", 2)]) }
        store.decide(Change(changes: [.remove("ann")])) { $0[Board.self] = Self.scored([("bob", 1)]) }
        #expect(store.state.sortedSets == [Board.name: ["\"bob\"": 1]] && store.state.values.isEmpty)
        await store.finish()
    }

    @Test func observersSeeTheMembersInOrder() async {
        let node = Fixture.node()
        let seen = Recorder<[ScoredMember<String>]>()
        let task = Task {
            for await members in node.observe(Board.self) {
                seen.append(members)
                if members.count == 2 { break }
            }
        }
        _ = await seen.wait { $0.contains([]) }
        node.decide(Change(changes: [.add("ann", score: 2), .add("bob", score: 1)]))
        #expect(await seen.wait { $0.last == Self.scored([("bob", 1), ("ann", 2)]) })
        task.cancel()
    }

    /// At the size users have: 200,000 members added 2,000 a decision, re-scored, half removed,
    /// then read whole. Each add and remove finds its member by key and the "is it a sorted set"
    /// test is a count: were either O(set), this would take hours instead of seconds.
    @Test func aSortedSetOfTwoHundredThousandMembers() {
        struct Big: SortedSetState { typealias Member = Int; static var name: String { "big" } }
        struct Add: Decision {
            let range: Range<Int>
            let offset: Double
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for member in range { write(.add(member, score: Double(-member) + offset), into: Big.self) }
                return .none
            }
        }
        struct Remove: Decision {
            let members: StrideTo<Int>
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for member in members { write(.remove(member), into: Big.self) }
                return .none
            }
        }
        let node = Fixture.node()
        for start in stride(from: 0, to: 200_000, by: 2_000) {
            #expect(node.decide(Add(range: start..<start + 2_000, offset: 0)).version != nil)
        }
        #expect(node.decide(Add(range: 0..<2_000, offset: 0.5)).version != nil)
        for start in stride(from: 0, to: 200_000, by: 20_000) {
            #expect(node.decide(Remove(members: stride(from: start, to: start + 20_000, by: 2))).version != nil)
        }
        let held = node.read(Big.self)
        #expect(held.count == 100_000)
        #expect(held.first == ScoredMember(199_999, score: -199_999) && held.last == ScoredMember(1, score: -0.5))
        #expect(zip(held, held.dropFirst()).allSatisfy { $0.score <= $1.score })
        #expect(node.read(Big.self, scoreOf: 1_001) == -1_000.5 && node.read(Big.self, scoreOf: 1_000) == nil)
    }
}
