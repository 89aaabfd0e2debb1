import Decide
import DecideCore
import Foundation
import Testing

/// Ordered indexes on one node: append, prepend, insert after and before, move, remove, what
/// aborts, and observation (docs/consistency.md, "Ordered indexes"). Concurrency across nodes is
/// in ReplicationTests.IndexTests.
@Suite struct IndexTests {
    struct Queue: IndexState {
        typealias ID = String
    }

    struct Place: Decision {
        let id: String
        let placement: IndexPlacement<String>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(id, into: Queue.self, placement)
            return .none
        }
    }

    struct Remove: Decision {
        let id: String
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.remove(id, from: Queue.self)
            return .none
        }
    }

    @Test func placementsPutIdsWhereAskedAndAnIdAppearsOnce() {
        let node = Fixture.node()
        #expect(node.read(Queue.self) == [])
        node.decide(Place(id: "b", placement: .append))
        node.decide(Place(id: "d", placement: .append))
        node.decide(Place(id: "a", placement: .prepend))
        node.decide(Place(id: "c", placement: .after("b")))
        node.decide(Place(id: "e", placement: .after("d")))
        node.decide(Place(id: "a2", placement: .before("b")))
        #expect(node.read(Queue.self) == ["a", "a2", "b", "c", "d", "e"])
        // Writing an id that is there moves it.
        node.decide(Place(id: "a", placement: .append))
        node.decide(Place(id: "e", placement: .before("a2")))
        #expect(node.read(Queue.self) == ["e", "a2", "b", "c", "d", "a"])
        node.decide(Remove(id: "c"))
        #expect(node.read(Queue.self) == ["e", "a2", "b", "d", "a"])
        // Removing what is not there writes nothing.
        #expect(node.decide(Remove(id: "c")) == .unchanged)
        #expect(node.decide(Remove(id: "never")) == .unchanged)
        // Each id is its own entry: the position is a JSON string a tool can read.
        let entry = node.entry(for: StateKey(name: Queue.name, element: Array("\"b\"".utf8)))
        #expect(entry?.value.map { String(decoding: $0, as: UTF8.self).hasPrefix("\"") } == true)
    }

    @Test func anAnchorNotInTheIndexAbortsTheDecision() {
        let node = Fixture.node()
        node.decide(Place(id: "a", placement: .append))
        let commit = node.decide(Place(id: "b", placement: .after("missing")))
        guard case .aborted(let reason) = commit else {
            Issue.record("expected an abort, got \(commit)")
            return
        }
        #expect(reason.contains("missing") && reason.contains("not in the index"))
        let selfAnchored = node.decide(Place(id: "a", placement: .before("a")))
        #expect(selfAnchored.version == nil && selfAnchored != .unchanged, "an id is not its own anchor: \(selfAnchored)")
        #expect(node.read(Queue.self) == ["a"])
    }

    /// Many writes inside one decision see each other.
    @Test func oneDecisionBuildsAWholeListInOrder() {
        struct Build: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for index in 0..<300 { write("\(index)", into: Queue.self, .append) }
                write("first", into: Queue.self, .prepend)
                write("middle", into: Queue.self, .after("149"))
                write.remove("0", from: Queue.self)
                return .none
            }
        }
        let node = Fixture.node()
        node.decide(Build())
        var expected = (1..<300).map { "\($0)" }
        expected.insert("middle", at: 149)
        #expect(node.read(Queue.self) == ["first"] + expected)
    }

    /// Repeated inserts at the front and after one element, past the point where positions grow
    /// a digit (about every 64 at one place): the order holds.
    @Test func hundredsOfInsertsAtOnePlaceKeepTheirOrder() {
        let node = Fixture.node()
        node.decide(Place(id: "anchor", placement: .append))
        node.decide(Place(id: "end", placement: .append))
        var expected = ["anchor", "end"]
        for index in 0..<400 {
            node.decide(Place(id: "after\(index)", placement: .after("anchor")))
            expected.insert("after\(index)", at: expected.firstIndex(of: "anchor")! + 1)
            node.decide(Place(id: "front\(index)", placement: .prepend))
            expected.insert("front\(index)", at: 0)
        }
        #expect(node.read(Queue.self) == expected)
    }

    @Test func observingAnIndexGivesTheListOnChange() async {
        let node = Fixture.node()
        var lists = node.observe(Queue.self).makeAsyncIterator()
        #expect(await lists.next() == [])
        node.decide(Place(id: "x", placement: .append))
        #expect(await lists.next() == ["x"])
        node.decide(Place(id: "x", placement: .append))   // moved to where it was: same list, skipped
        node.decide(Place(id: "y", placement: .prepend))
        #expect(await lists.next() == ["y", "x"])
    }
}
