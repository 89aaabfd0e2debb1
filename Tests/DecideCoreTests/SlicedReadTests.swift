import DecideCore
import Testing

/// Reading a table in slices (`EntryTable.appendEntries(from:budget:into:)`) while it changes between
/// slices: what syncnode's dump relies on.
@Suite struct SlicedReadTests {
    @Test func everyKeyStoredThroughoutIsReadWhateverMovesBetweenSlices() {
        var table = EntryTable()
        let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: 10, logical: 0), node: "a")
        for index in 0..<20_000 {
            table.merge(Entry(version: version, value: index % 4 == 0 ? nil : [UInt8(index & 0xFF)]), for: StateKey(name: "k\(index)"))
        }
        // Keys 0, 4, 8... are tombstones, collected between slices (each removal moves the last
        // record); new keys arrive too. The others are never touched.
        let untouched = Set((0..<20_000).filter { $0 % 4 != 0 }.map { StateKey(name: "k\($0)") })
        var random = SplitMix64(seed: 11)
        var cursor = EntryTable.SweepCursor.start
        var slices: [KeyedEntry] = []
        var fresh = 0
        while !cursor.isFinished {
            table.appendEntries(from: &cursor, budget: 100, into: &slices)
            for _ in 0..<20 {
                let index = Int(random.next() % 5_000) * 4
                table.collect(StateKey(name: "k\(index)"), version: version)
            }
            table.merge(Entry(version: version, value: [1]), for: StateKey(name: "new\(fresh)"))
            fresh += 1
        }
        let read = slices.map(\.key)
        let readSet = Set(read)
        #expect(untouched.isSubset(of: readSet), "\(untouched.subtracting(readSet).count) keys stored throughout were never read")
        #expect(read.count >= untouched.count)
    }
}
