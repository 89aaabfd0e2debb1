@testable import Decide
import DecideCore
import DecideTesting
import Testing

/// `Node.entriesReadInSlices` (syncnode's dump): on a node nobody writes to, exactly the one
/// snapshot `entries()` reads; while a writer runs, each key once, sorted.
@Suite struct SlicedEntriesTests {
    struct Item: CollectionState {
        static func defaultValue(at id: Int) -> Int { 0 }
        static var name: String { "sliced.item" }
    }

    struct Fill: Decision {
        let range: Range<Int>
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in range where index % 7 == 0 { write.delete(Item.self, at: index) }
            for index in range where index % 7 != 0 { write(value, into: Item.self, at: index) }
            return .none
        }
    }

    @Test func aQuietNodeReadsExactlyItsSnapshot() {
        let node = Fixture.node("a")
        node.decide(Fill(range: 0..<(Node.readSliceRecords * 3 + 17), value: 1))
        let sliced = node.entriesReadInSlices()
        #expect(sliced.count == Node.readSliceRecords * 3 + 17)
        #expect(sliced == node.entries())
    }

    @Test func whileAWriterRunsEachKeyAppearsOnceInOrder() async {
        let node = Fixture.node("a")
        let keys = Node.readSliceRecords * 4
        node.decide(Fill(range: 0..<keys, value: 1))
        // The writer rewrites runs of keys and collects the tombstones of every seventh key, so
        // records move under the reader (a removal moves the last record into its place). Whether
        // a moved record is read twice depends on timing; `aKeyReadTwiceKeepsItsNewestEntry`
        // checks what happens when it is.
        let writer = Task.detached {
            for round in 0..<200 {
                node.decide(Fill(range: (round * 97 % keys)..<min(keys, round * 97 % keys + 300), value: round))
                if round % 10 == 0 { node.collectTombstones(olderThan: HLCTimestamp(rawValue: .max)) }
            }
        }
        let storedThroughout = (0..<keys).filter { $0 % 7 != 0 }.count
        for _ in 0..<3 {
            let sliced = node.entriesReadInSlices()
            #expect(sliced.filter { $0.entry.value != nil }.count == storedThroughout, "each key with a value, once")
            #expect(zip(sliced, sliced.dropFirst()).allSatisfy { $0.key < $1.key }, "sorted, no key twice")
        }
        await writer.value
    }

    @Test func aKeyReadTwiceKeepsItsNewestEntry() {
        func item(_ name: String, _ physical: UInt64, _ byte: UInt8?) -> KeyedEntry {
            KeyedEntry(key: StateKey(name: name), entry: Entry(
                version: Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: 0), node: "a"),
                value: byte.map { [$0] }))
        }
        let read = [item("b", 5, 1), item("a", 3, 2), item("b", 9, nil), item("c", 1, 3), item("a", 2, 4), item("b", 7, 5)]
        let kept = Node.sortedKeepingNewest(read)
        #expect(kept.map(\.key.name) == ["a", "b", "c"])
        #expect(kept.map(\.entry.version.timestamp.physicalMilliseconds) == [3, 9, 1])
        #expect(kept[1].entry.isTombstone, "b's newest read was its delete")
        #expect(Node.sortedKeepingNewest([]).isEmpty)
    }
}
