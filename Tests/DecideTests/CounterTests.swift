import DecideCore
import DecideTesting
import Foundation
import Testing
@testable import Decide

/// `CounterState` on one node: changes and reads in and across decisions, the observed reset,
/// the bounds that abort, a restart's new slot, and slots the node did not write.
@Suite struct CounterTests {
    struct Quota: CounterState {
        static var name: String { "quota" }
    }

    struct Change: Decision {
        let changes: [CounterChange]
        var seen: @Sendable (Int64) -> Void = { _ in }
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for change in changes {
                write(change, into: Quota.self)
                seen(read(Quota.self))
            }
            return .none
        }
    }

    /// The deltas `node` commits from now on.
    static func capture(_ node: Node) -> Recorder<Delta> {
        let captured = Recorder<Delta>()
        _ = node.addCommitListener { if $0.origin == .local { captured.append($0.delta) } }
        return captured
    }

    static func reason(_ commit: Commit) -> String? {
        if case .aborted(let reason) = commit { return reason }
        return nil
    }

    @Test func changesAddUpWithinAndAcrossDecisions() {
        let node = Fixture.node()
        #expect(node.read(Quota.self) == 0)
        let seen = Recorder<Int64>()
        #expect(node.decide(Change(changes: [.increment(by: 1), .increment(by: 1)], seen: { seen.append($0) })).version != nil)
        #expect(seen.all == [1, 2], "a decision reads its own changes")
        node.decide(Change(changes: [.decrement(by: 5), .increment(by: -1), .decrement(by: -10)]))
        #expect(node.read(Quota.self) == 6)
        // One slot, this process's: [increments, decrements] = [1+1+10, 5+1].
        let slots = node.counterSlots(Quota.self)
        #expect(slots.count == 1 && slots[0].node == "a" && slots[0].incarnation == node.incarnation)
        #expect(slots.first.map { [$0.increments, $0.decrements] } == [12, 6])
        // Zero changes nothing: no write.
        let before = node.entry(for: StateKey(name: "quota", element: CounterSlot.element(incarnation: node.incarnation, node: "a")))
        node.decide(Change(changes: [.increment(by: 0)]))
        #expect(node.entry(for: StateKey(name: "quota", element: CounterSlot.element(incarnation: node.incarnation, node: "a")))?.version == before?.version)
    }

    @Test func aResetCancelsWhatItSawAndKeepsWhatItDidNot() throws {
        let node = Fixture.node()
        node.decide(Change(changes: [.increment(by: 7)]))
        node.decide(Change(changes: [.reset]))
        #expect(node.read(Quota.self) == 0)
        node.decide(Change(changes: [.decrement(by: 4), .reset]))
        #expect(node.read(Quota.self) == 0)
        // Node b's increment, made before a's reset but not yet seen by a, survives it.
        let b = Fixture.node("b")
        let fromB = Self.capture(b)
        b.decide(Change(changes: [.increment(by: 3)]))
        node.decide(Change(changes: [.increment(by: 2), .reset]))
        for delta in fromB.all { _ = try node.apply(delta) }
        #expect(node.read(Quota.self) == 3)
    }

    @Test func aChangePastInt64OrTheSlotBoundAborts() throws {
        let node = Fixture.node { $0.maxCounterSlots = 2 }
        let fromA = Self.capture(node)
        #expect(node.decide(Change(changes: [.increment(by: .max)])).version != nil)
        let over = node.decide(Change(changes: [.increment(by: 1)]))
        #expect(Self.reason(over)?.contains("outside Int64") == true, "\(over)")
        #expect(node.read(Quota.self) == .max, "the aborted change wrote nothing")
        #expect(node.decide(Change(changes: [.decrement(by: .min)])).version == nil, "-Int64.min is an increment past the bound")
        #expect(node.decide(Change(changes: [.reset])).version != nil)
        // A slot's running sums stay below 2^63 each: after the reset (decrements Int64.max),
        // this process cannot subtract more.
        let spent = node.decide(Change(changes: [.decrement(by: 1)]))
        #expect(Self.reason(spent)?.contains("decrements would pass 2^63") == true, "\(spent)")
        // So one process reaches -Int64.max, not Int64.min.
        let low = Fixture.node("low")
        #expect(low.decide(Change(changes: [.decrement(by: .max)])).version != nil)
        #expect(low.read(Quota.self) == -.max)
        #expect(low.decide(Change(changes: [.decrement(by: 1)])).version == nil)
        // Two more processes' slots arrive: a third process of the counter is refused by a node
        // with no slot of its own yet.
        let other = Fixture.node("b") { $0.maxCounterSlots = 2 }
        let fromB = Self.capture(other)
        for delta in fromA.all { _ = try other.apply(delta) }
        let third = Fixture.node("c") { $0.maxCounterSlots = 2 }
        other.decide(Change(changes: [.increment(by: 1)]))
        for delta in fromA.all + fromB.all { _ = try third.apply(delta) }
        let refused = third.decide(Change(changes: [.increment(by: 1)]))
        #expect(Self.reason(refused)?.contains("maxCounterSlots 2") == true, "\(refused)")
    }

    @Test(arguments: [Durability.strict, .batched(intervalMilliseconds: 5)])
    func aRestartedNodeWritesANewSlotAndKeepsTheOldOne(durability: Durability) throws {
        let scratch = StorageTests.Scratch()
        defer { scratch.remove() }
        let clock = TestClock()
        var node: Node? = try StorageTests.open(scratch, durability: durability, clock: clock)
        node!.decide(Change(changes: [.increment(by: 10)]))
        let first = node!.incarnation
        try node!.close()
        node = nil
        clock.advance(by: .milliseconds(1))
        let reopened = try StorageTests.open(scratch, durability: durability, clock: clock)
        #expect(reopened.incarnation > first)
        #expect(reopened.read(Quota.self) == 10)
        reopened.decide(Change(changes: [.decrement(by: 3)]))
        #expect(reopened.read(Quota.self) == 7)
        #expect(reopened.counterSlots(Quota.self).map(\.incarnation).sorted() == [first, reopened.incarnation])
        try reopened.close()
    }

    @Test func aSlotOfThisIncarnationThatThisProcessDidNotWriteIsNeverBuiltOn() throws {
        let node = Fixture.node()
        // Another process of node id "a" that took the same incarnation wrote [5, 0].
        let shared = StateKey(name: "quota", element: CounterSlot.element(incarnation: node.incarnation, node: "a"))
        let remote = Version(timestamp: HLCTimestamp(rawValue: node.incarnation + 1), node: "a")
        _ = try node.apply(Delta(version: remote, writes: [Delta.Write(key: shared, value: Array("[5,0]".utf8))]))
        node.decide(Change(changes: [.increment(by: 1)]))
        #expect(node.read(Quota.self) == 6, "both processes' changes count")
        #expect(node.counterSlots(Quota.self).count == 2)
    }

    @Test func slotsThatAreNotPairsOfSumsCountForNothing() throws {
        let node = Fixture.node()
        node.decide(Change(changes: [.increment(by: 2)]))
        let version = Version(timestamp: HLCTimestamp(rawValue: 1), node: "z")
        for (index, text) in ["[1]", "[-1,0]", "[01,0]", "[9223372036854775808,0]", "\"x\"", "[1,2,3]", "[1,2] "].enumerated() {
            let key = StateKey(name: "quota", element: CounterSlot.element(incarnation: UInt64(index), node: "z"))
            _ = try node.apply(Delta(version: version, writes: [Delta.Write(key: key, value: Array(text.utf8))]))
        }
        #expect(node.read(Quota.self) == 2)
        #expect(CounterSlot.sums(PackedBytes(Array("[9223372036854775807,0]".utf8)))?.increments == UInt64(Int64.max))
    }

    @Test func observersSeeTheTotals() async {
        let node = Fixture.node()
        let totals = Recorder<Int64>()
        let task = Task {
            for await total in node.observe(Quota.self) {
                totals.append(total)
                if total == 5 { break }
            }
        }
        _ = await totals.wait { $0.contains(0) }
        node.decide(Change(changes: [.increment(by: 5)]))
        #expect(await totals.wait { $0.last == 5 })
        task.cancel()
    }
}
