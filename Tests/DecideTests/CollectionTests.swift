import Decide
import DecideTesting
import DecideCore
import Foundation
import Testing

/// Whole collections on one node: listing inside a decision and from the node, deleting one
/// element or all, and observing every element at once (docs/architecture.md, "Collections").
@Suite struct CollectionTests {
    struct Messages: CollectionState {
        static func defaultValue(at id: Int) -> String { "" }
    }
    struct Other: CollectionState {
        static func defaultValue(at id: Int) -> String { "" }
    }

    struct Post: Decision {
        let id: Int
        let text: String
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(text, into: Messages.self, at: id)
            return .none
        }
    }

    struct Delete: Decision {
        let id: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.delete(Messages.self, at: id)
            return .none
        }
    }

    /// Writes, deletes and lists inside one decision: the listing sees the decision's own writes.
    struct EditAndList: Decision {
        let seen: Recorder<[Int]>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("new", into: Messages.self, at: 100)
            write.delete(Messages.self, at: 1)
            write("changed", into: Messages.self, at: 2)
            let snapshot = read.elements(Messages.self)
            seen.append(snapshot.ids)
            seen.append([snapshot[2] == "changed" ? 1 : 0, snapshot[1] == "" ? 1 : 0, snapshot.count])
            return .none
        }
    }

    struct ClearAll: Decision {
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.deleteAll(Messages.self)
            return .none
        }
    }

    /// An `Int` id's key is its decimal digits (what `NAME[ID]` names from syncnode), whether it
    /// fits in the key (up to 16 bytes) or not, and the value reads back through that key.
    @Test func integerIdsAreKeyedByTheirDigits() {
        let node = Fixture.node()
        for id in [0, 7, -1, 42, 1_000_000, 9_999_999_999_999_999, -999_999_999_999_999, Int.max, Int.min] {
            node.decide(Post(id: id, text: "post \(id)"))
            let key = StateKey(name: Messages.name, element: Array(String(id).utf8))
            #expect(node.entry(for: key)?.value == Array("\"post \(id)\"".utf8), "id \(id)")
            #expect(node.read(Messages.self, at: id) == "post \(id)")
        }
        #expect(node.elements(Messages.self).ids == [Int.min, -999_999_999_999_999, -1, 0, 7, 42, 1_000_000, 9_999_999_999_999_999, Int.max].sorted { Array(String($0).utf8).lexicographicallyPrecedes(Array(String($1).utf8)) })
        // Ids of every width and sign: the key built from the number in place is the key of its
        // digits, hash and all (the table finds the entry by both).
        let other = Fixture.node()
        var random = SplitMix64(seed: 57)
        for _ in 0..<500 {
            let id = Int(bitPattern: UInt(truncatingIfNeeded: random.next())) >> Int(random.next() % 64)
            other.decide(Post(id: id, text: "p"))
            #expect(other.entry(for: StateKey(name: Messages.name, element: Array(String(id).utf8)))?.value == Array("\"p\"".utf8), "id \(id)")
        }
    }

    @Test func listsPresentElementsInIdOrderWithTheDecisionsOwnWrites() {
        let node = Fixture.node()
        #expect(node.elements(Messages.self).isEmpty)
        for id in [3, 1, 2, 10] { node.decide(Post(id: id, text: "m\(id)")) }
        node.decide(Post(id: 7, text: "other"))
        node.decide(Delete(id: 7))
        node.decide(OtherPost())
        let snapshot = node.elements(Messages.self)
        // By the JSON encoding of the id: "1" < "10" < "2" < "3".
        #expect(snapshot.ids == [1, 10, 2, 3])
        #expect(snapshot.values == ["m1", "m10", "m2", "m3"])
        #expect(snapshot[10] == "m10" && snapshot[7] == "" && snapshot.value(at: 7) == nil && !snapshot.contains(7))
        #expect(snapshot.map(\.id) == [1, 10, 2, 3])

        let seen = Recorder<[Int]>()
        node.decide(EditAndList(seen: seen))
        #expect(seen.all[0] == [10, 100, 2, 3])
        #expect(seen.all[1] == [1, 1, 4])
        #expect(node.elements(Messages.self).ids == [10, 100, 2, 3])

        node.decide(ClearAll())
        #expect(node.elements(Messages.self).isEmpty)
        #expect(node.elements(Other.self).ids == [1], "deleteAll touches only its own collection")
        // Each deleted element is a tombstone, replicated like any delete.
        #expect(node.entry(for: StateKey(name: Messages.name, element: Array("3".utf8)))?.isTombstone == true)
    }

    struct OtherPost: Decision {
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("elsewhere", into: Other.self, at: 1)
            return .none
        }
    }

    @Test func expiredElementsAndUndecodableOnesAreHandledAsSingleReadsAre() {
        let clock = TestClock(startMilliseconds: 1_700_000_000_000)
        let node = Fixture.node(clock: clock) { $0.expiryCheckIntervalMilliseconds = 60_000 }
        struct Expiring: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write("short", into: Messages.self, at: 1, expiringAfter: .seconds(1))
                write("long", into: Messages.self, at: 2)
                write.raw(Array("{\"not\":\"a string\"}".utf8), into: StateKey(name: Messages.name, element: Array("3".utf8)))
                write.raw(Array("\"bad id\"".utf8), into: StateKey(name: Messages.name, element: Array("\"x\"".utf8)))
                return .none
            }
        }
        node.decide(Expiring())
        #expect(node.elements(Messages.self).ids == [1, 2, 3])
        #expect(node.elements(Messages.self)[3] == "", "an undecodable value lists as its default")
        clock.set(milliseconds: 1_700_000_001_000)
        #expect(node.elements(Messages.self).ids == [2, 3])
    }

    @Test func observingACollectionGivesSnapshotsOnRealChangeOnly() async {
        let node = Fixture.node()
        var snapshots = node.observe(Messages.self).makeAsyncIterator()
        #expect(await snapshots.next()?.isEmpty == true)
        node.decide(Post(id: 1, text: "a"))
        #expect(await snapshots.next()?.values == ["a"])
        node.decide(Post(id: 1, text: "a"))   // a new version, the same value: no snapshot
        node.decide(OtherPost())              // another collection: no snapshot
        node.set(5, into: Fixture.Counter.self)
        node.decide(Post(id: 2, text: "b"))
        #expect(await snapshots.next()?.ids == [1, 2])
        node.decide(Delete(id: 1))
        #expect(await snapshots.next()?.ids == [2])
        // Many writes while the reader is away: it skips to the newest state.
        for id in 10..<1_010 { node.decide(Post(id: id, text: "\(id)")) }
        #expect(await snapshots.next()?.count == 1_001)
    }

    @Test func callbacksAndReplicatedChangesReachCollectionObservers() async throws {
        let origin = Fixture.node("a")
        let replica = Fixture.node("b")
        let deltas = Recorder<Delta>()
        _ = origin.addCommitListener { deltas.append($0.delta) }
        let seen = Recorder<[Int]>()
        let subscription = replica.subscribe(Messages.self) { seen.append($0.ids) }
        defer { subscription.cancel() }
        #expect(seen.all == [[]])
        origin.decide(Post(id: 4, text: "remote"))
        try replica.apply(deltas.all[0])
        #expect(await seen.wait { $0.last == [4] })
        origin.decide(Post(id: 4, text: "remote"))  // equal snapshot: no call
        try replica.apply(deltas.all[1])
        origin.decide(Delete(id: 4))
        try replica.apply(deltas.all[2])
        #expect(await seen.wait { $0.last == [] })
        #expect(seen.all == [[], [4], []])
    }

    @Test func observationEndsAtShutdown() async {
        let node = Fixture.node()
        var snapshots = node.observe(Messages.self).makeAsyncIterator()
        #expect(await snapshots.next() != nil)
        await node.shutdown()
        #expect(await snapshots.next() == nil)
    }

    /// Listing one collection does not walk the store: with 200,000 other keys and a 50-element
    /// collection, a listing touches the 50 (the table's per-name list, checked in
    /// EntryTableTests); here the answer is checked at that size.
    @Test func aSmallCollectionBesideALargeStore() {
        let node = Fixture.node()
        struct Fill: Decision {
            let start: Int
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for id in start..<(start + 1_000) { write(id, into: Fixture.Quota.self, at: "q\(id)") }
                return .none
            }
        }
        for batch in 0..<200 { node.decide(Fill(start: batch * 1_000)) }
        for id in 0..<50 { node.decide(Post(id: id, text: "\(id)")) }
        #expect(node.stateSummary.entryCount == 200_050)
        #expect(node.elements(Messages.self).count == 50)
        #expect(node.elements(Fixture.Quota.self).count == 200_000)
    }
}
