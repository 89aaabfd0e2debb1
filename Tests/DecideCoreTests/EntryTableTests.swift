import DecideCore
import Testing

/// The entry table against a plain dictionary of merged entries: its open-addressing index,
/// moved records, interned node ids and per-leaf lists must never disagree with the model,
/// through growth, replacements and tombstone collection.
@Suite struct EntryTableTests {
    @Test func agreesWithADictionaryThroughGrowthReplacementAndCollection() {
        forEachSeed(0..<40) { seed, gen in
            var table = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            var model: [StateKey: Entry] = [:]
            let keyCount = gen.int(1...3_000)
            let keys = (0..<keyCount).map { StateKey(name: "k\($0 % 7)", element: Array("\($0)".utf8)) }
            for _ in 0..<(keyCount * 3) {
                let key = keys[gen.int(0...(keyCount - 1))]
                if gen.int(0...5) == 0, let stored = model[key], stored.isTombstone {
                    let collected = table.collectTombstone(for: key, version: stored.version)
                    #expect(collected, "seed \(seed)")
                    model[key] = nil
                    continue
                }
                let entry = gen.entry()
                let changed = table.merge(entry, for: key).changed
                let merged = model[key].map { $0.merged(with: entry) } ?? entry
                #expect(changed == (model[key] != merged), "seed \(seed)")
                model[key] = merged
            }
            #expect(table.count == model.count, "seed \(seed)")
            #expect(table.tombstoneCount == model.values.filter(\.isTombstone).count, "seed \(seed)")
            for key in keys { #expect(table.entry(for: key) == model[key], "seed \(seed) key \(key)") }
            // A live entry is never collected, nor a tombstone of another version.
            if let (key, live) = model.first(where: { !$0.value.isTombstone }) {
                let collected = table.collectTombstone(for: key, version: live.version)
                #expect(!collected)
            }
            // The digest describes exactly what is held: a table built afresh from the model agrees.
            var fresh = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            for (key, entry) in model { fresh.merge(entry, for: key) }
            #expect(fresh.digest == table.digest, "seed \(seed)")
            for bucket in 0..<table.digest.width(ofLevel: table.digest.depth) {
                let listed = table.entries(inBucket: bucket)
                #expect(Set(listed.map(\.key)).count == listed.count, "seed \(seed) bucket \(bucket) lists a key twice")
                #expect(Set(listed.map(\.key)) == Set(fresh.entries(inBucket: bucket).map(\.key)), "seed \(seed) bucket \(bucket)")
            }
        }
    }
}
