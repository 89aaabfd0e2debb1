import DecideCore
import Testing

/// The owned records a table lists per member (`ownedEntries`, no scan) stay exactly those a
/// scan would find, through inserts, replacements that change owner or ownership, expiry,
/// collection and the record moves that removal makes.
@Suite struct OwnedPositionTests {
    @Test(arguments: [1, 2, 3])
    func ownedEntriesMatchAScanThroughEveryKindOfChange(seed: UInt64) {
        var table = EntryTable()
        var random = SplitMix64(seed: seed)
        let nodes = ["a", "b", "c", "d"]
        var swept = Set<StateKey>()
        func scan(_ owners: Set<String>) -> Set<StateKey> {
            Set(table.entries.filter {
                $0.entry.ownedByWriter && !$0.entry.isTombstone && owners.contains($0.entry.version.node) && !swept.contains($0.key)
            }.map(\.key))
        }
        var clock: UInt64 = 1
        for step in 0..<60_000 {
            clock += 1
            let index = Int(random.next() % 5_000)
            let key = index % 2 == 0 ? StateKey(name: "k\(index)") : StateKey(name: "c\(index % 5)", element: Array("\(index)".utf8))
            let node = nodes[Int(random.next() % 4)]
            let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: clock, logical: 0), node: node)
            switch random.next() % 10 {
            case 0, 1:
                if table.merge(Entry(version: version, value: nil), for: key).changed { swept.remove(key) }
            case 2:
                if table.merge(Entry(version: version, value: [1], expiresAtMilliseconds: clock + random.next() % 50,
                                     ownedByWriter: true), for: key).changed { swept.remove(key) }
            case 3, 4, 5:
                if table.merge(Entry(version: version, value: [2], ownedByWriter: true), for: key).changed { swept.remove(key) }
            default:
                if table.merge(Entry(version: version, value: [3]), for: key).changed { swept.remove(key) }
            }
            for item in table.expire(dueAtMilliseconds: clock) { swept.insert(item.key) }
            if step % 997 == 0 {
                // Collect what is absent for good, with "d" removed: removals move records.
                var cursor = EntryTable.SweepCursor.start
                while !cursor.isFinished {
                    for item in table.collectAbsent(below: HLCTimestamp(physicalMilliseconds: max(clock, 100) - 100, logical: 0),
                                                    isRemovedOwner: { $0 == "d" },
                                                    from: &cursor, budget: 300) {
                        swept.remove(item.key)
                    }
                }
            }
            if step % 499 == 0 {
                for owners in [["a"], ["b", "c"], ["d"], nodes, ["x"]] {
                    let listed = table.ownedEntries(of: Set(owners))
                    #expect(Set(listed.map(\.key)) == scan(Set(owners)) && Set(listed.map(\.key)).count == listed.count,
                            "step \(step), owners \(owners)")
                    #expect(listed.allSatisfy { table.entry(for: $0.key) == $0.entry })
                }
            }
        }
    }
}
