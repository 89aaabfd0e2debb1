import DecideCore
import Testing

/// Collection in slices (`EntryTable.collectAbsent`): a node sweeps its table a slice at a time,
/// letting go of its lock between slices, so the sweep must remove exactly what a whole scan
/// would, keep the table's index, buckets and digest whole, and never remove a record that
/// changed between slices into one that must stay.
@Suite struct CollectionSweepTests {
    private static func version(_ physical: UInt64, _ node: String) -> Version {
        Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: 0), node: node)
    }

    /// The kinds of record a sweep meets, and whether each is collected below `horizon` at
    /// `now` with node "gone" removed.
    private static let horizon = HLCTimestamp(physicalMilliseconds: 1_000, logical: 0)
    private static let now: UInt64 = 5_000
    private static func isRemoved(_ node: String) -> Bool { node == "gone" }

    /// A table of `count` records of every kind, keys atomic and in collections, in an order
    /// unrelated to their kind.
    private static func mixedTable(_ count: Int, seed: UInt64) -> EntryTable {
        var table = EntryTable()
        var random = SplitMix64(seed: seed)
        for index in 0..<count {
            let key = index % 3 == 0 ? StateKey(name: "k\(index)")
                                     : StateKey(name: "c\(index % 7)", element: Array("\(index)".utf8))
            let old = random.next() % 4 != 0
            let physical: UInt64 = old ? 1 + random.next() % 998 : 1_000 + random.next() % 1_000
            switch random.next() % 6 {
            case 0: table.merge(Entry(version: version(physical, "a"), value: nil), for: key)
            case 1: table.merge(Entry(version: version(physical, "a"), value: [1], expiresAtMilliseconds: 1 + random.next() % 9_000), for: key)
            case 2: table.merge(Entry(version: version(physical, "gone"), value: [2], ownedByWriter: true), for: key)
            case 3: table.merge(Entry(version: version(physical, "b"), value: [3], ownedByWriter: true), for: key)
            case 4: table.merge(Entry(version: version(physical, "gone"), value: [4]), for: key)
            default: table.merge(Entry(version: version(physical, "a"), value: [5]), for: key)
            }
        }
        // Expiries due by `now` are reported, as the node does before each sweep; then values
        // arrive that are due already but not reported yet (named "due…"): those must wait.
        _ = table.expire(dueAtMilliseconds: now)
        for index in 0..<count / 100 {
            table.merge(Entry(version: version(500, "a"), value: [6], expiresAtMilliseconds: 10), for: StateKey(name: "due\(index)"))
        }
        return table
    }

    /// What a whole scan collects: the rule `collect` applies to one key, on every key, except
    /// that a value due but not yet reported expired waits for its report.
    private static func expected(_ table: EntryTable) -> Set<StateKey> {
        Set(table.entries.filter {
            $0.entry.version.timestamp < horizon && $0.entry.isAbsentForGood(atMilliseconds: now, isRemovedOwner: isRemoved)
                && !$0.key.name.hasPrefix("due")
        }.map(\.key))
    }

    /// A table holding exactly `entries`, built fresh: its digest is what a swept table's must be.
    private static func rebuilt(_ entries: some Sequence<(key: StateKey, entry: Entry)>) -> EntryTable {
        var table = EntryTable()
        for item in entries { table.merge(item.entry, for: item.key) }
        return table
    }

    @Test(arguments: [1, 7, 1_000, 1_000_000])
    func aSlicedSweepRemovesExactlyWhatAWholeScanWould(budget: Int) {
        var table = Self.mixedTable(120_000, seed: UInt64(budget))
        let expected = Self.expected(table)
        let kept = table.entries.filter { !expected.contains($0.key) }.map { $0 }
        #expect(expected.count > 10_000 && kept.count > 10_000, "the mix holds both kinds")
        var cursor = EntryTable.SweepCursor.start
        var collected: [(key: StateKey, version: Version)] = []
        var slices = 0
        while !cursor.isFinished {
            collected += table.collectAbsent(below: Self.horizon, isRemovedOwner: Self.isRemoved,
                                             from: &cursor, budget: budget)
            slices += 1
        }
        #expect(slices >= 120_000 / budget)
        #expect(Set(collected.map(\.key)) == expected && collected.count == expected.count, "each once, no more, no less")
        #expect(table.count == kept.count)
        // Index, buckets and digest whole: every kept key found with its entry, and the digest of
        // a table built from the kept entries alone.
        #expect(kept.allSatisfy { table.entry(for: $0.key) == $0.entry })
        #expect(table.digest == Self.rebuilt(kept).digest)
        #expect(table.tombstoneCount == kept.filter(\.entry.isTombstone).count)
        // Nothing left to collect: a second sweep removes nothing.
        var again = EntryTable.SweepCursor.start
        while !again.isFinished {
            let more = table.collectAbsent(below: Self.horizon, isRemovedOwner: Self.isRemoved,
                                           from: &again, budget: budget)
            #expect(more.isEmpty)
        }
    }

    @Test func writesBetweenSlicesAreNeverCollectedWrongly() {
        var table = Self.mixedTable(60_000, seed: 99)
        var random = SplitMix64(seed: 5)
        var cursor = EntryTable.SweepCursor.start
        var collected = Set<StateKey>()
        var written: [StateKey: Entry] = [:]
        while !cursor.isFinished {
            for item in table.collectAbsent(below: Self.horizon, isRemovedOwner: Self.isRemoved,
                                            from: &cursor, budget: 500) {
                #expect(written[item.key] == nil || written[item.key]!.isAbsentForGood(atMilliseconds: Self.now, isRemovedOwner: Self.isRemoved)
                        && written[item.key]!.version.timestamp < Self.horizon,
                        "\(item.key) was written live between slices and then collected")
                collected.insert(item.key)
            }
            // Between slices, as other decisions would while the lock is free: new keys, and
            // existing keys overwritten with live values (newer versions win), some with old
            // tombstones that may be collected now or in the next sweep.
            for _ in 0..<50 {
                let index = Int(random.next() % 80_000)
                let key = index % 3 == 0 ? StateKey(name: "k\(index)") : StateKey(name: "c\(index % 7)", element: Array("\(index)".utf8))
                let entry = random.next() % 5 == 0 ? Entry(version: Self.version(999, "z"), value: nil)
                                                   : Entry(version: Self.version(3_000 + random.next() % 100, "z"), value: [9])
                if table.merge(entry, for: key).changed { written[key] = table.entry(for: key) }
            }
        }
        // Every live value written between slices is there with its value.
        for (key, entry) in written where !entry.isTombstone {
            #expect(table.entry(for: key)?.value == [9], "\(key) lost a live write")
        }
        // The table is whole, and whatever is left to collect was written during the sweep (a
        // record that came in between slices may wait for the next sweep); nothing of the
        // table the sweep began with was missed.
        #expect(table.digest == Self.rebuilt(Array(table.entries)).digest)
        #expect(Self.expected(table).allSatisfy { written[$0] != nil })
        #expect(!collected.isEmpty)
    }
}
