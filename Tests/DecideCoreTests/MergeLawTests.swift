import DecideCore
import Testing

@Suite struct MergeLawTests {
    @Test func mergeIsCommutativeAssociativeAndIdempotent() {
        forEachSeed(0..<5_000) { seed, gen in
            let a = gen.entry(), b = gen.entry(), c = gen.entry()
            #expect(a.merged(with: b) == b.merged(with: a), "commutativity, seed \(seed)")
            #expect(a.merged(with: b).merged(with: c) == a.merged(with: b.merged(with: c)), "associativity, seed \(seed)")
            #expect(a.merged(with: a) == a, "idempotence, seed \(seed)")
            #expect(a.merged(with: b).merged(with: b) == a.merged(with: b), "idempotence, seed \(seed)")
        }
    }

    @Test func higherVersionWinsAndTiesBreakByNodeBytes() {
        let base = HLCTimestamp(physicalMilliseconds: 10, logical: 0)
        let older = Entry(version: Version(timestamp: base, node: "z"), value: [1])
        let newer = Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: 10, logical: 1), node: "a"), value: nil)
        #expect(older.merged(with: newer) == newer)
        let fromA = Entry(version: Version(timestamp: base, node: "a"), value: [9])
        let fromB = Entry(version: Version(timestamp: base, node: "b"), value: [1])
        #expect(fromA.merged(with: fromB) == fromB)
    }

    @Test func tablesFedTheSameEntriesInAnyOrderAgree() {
        forEachSeed(0..<500) { seed, gen in
            let offers = (0..<gen.int(1...40)).map { _ in (key: gen.key(), entry: gen.entry()) }
            var first = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            var second = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            for offer in offers { first.merge(offer.entry, for: offer.key) }
            // Another order, with duplicates: idempotence and commutativity at table level.
            for offer in gen.shuffled(offers + offers.prefix(gen.int(0...offers.count))) {
                second.merge(offer.entry, for: offer.key)
            }
            let firstEntries = first.sortedEntries().map { KeyedEntry(key: $0.key, entry: $0.entry) }
            let secondEntries = second.sortedEntries().map { KeyedEntry(key: $0.key, entry: $0.entry) }
            #expect(firstEntries == secondEntries, "seed \(seed)")
            #expect(first.digest == second.digest, "seed \(seed)")
            #expect(first.tombstoneCount == second.tombstoneCount, "seed \(seed)")
            #expect(first.highestVersion == second.highestVersion, "seed \(seed)")
            // Each key holds the merge of everything offered for it.
            for (key, entry) in first.entries {
                let expected = offers.filter { $0.key == key }.map(\.entry).reduce(nil as Entry?) { $0?.merged(with: $1) ?? $1 }
                #expect(entry == expected, "seed \(seed) key \(key)")
            }
        }
    }

    /// A local commit merges its writes from their parts (`merge(version:value:...)`), a peer's
    /// entries whole: both must leave the same table, outcome by outcome, whatever the parts
    /// (a tombstone offered with an expiry or ownership, an instant outside the clock's range,
    /// ties of timestamps between nodes and within one).
    @Test func mergingPartsEqualsMergingTheEntryTheyMake() {
        forEachSeed(0..<1_000) { seed, gen in
            var whole = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            var parts = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            let keys = (0..<gen.int(1...6)).map { _ in gen.key() }
            for _ in 0..<gen.int(1...60) {
                let key = keys[gen.int(0...keys.count - 1)]
                let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: UInt64(gen.int(1...4)), logical: UInt16(gen.int(0...2))),
                                      node: gen.node())
                let value: [UInt8]? = gen.int(0...3) == 0 ? nil : gen.bytes(maxCount: 40)
                let expiry: UInt64? = [nil, 0, 5, HLCTimestamp.maxPhysicalMilliseconds + 9][gen.int(0...3)]
                let owned = gen.bool()
                let entry = Entry(version: version, value: value, expiresAtMilliseconds: expiry, ownedByWriter: owned)
                let expected = whole.merge(entry, for: key)
                let outcome = parts.merge(version: version, value: value.map(PackedBytes.init), expiresAtMilliseconds: expiry,
                                          ownedByWriter: owned, for: key)
                #expect("\(outcome)" == "\(expected)", "seed \(seed)")
            }
            #expect(parts.sortedEntries().map { KeyedEntry(key: $0.key, entry: $0.entry) }
                == whole.sortedEntries().map { KeyedEntry(key: $0.key, entry: $0.entry) }, "seed \(seed)")
            #expect(parts.digest == whole.digest, "seed \(seed)")
            #expect(parts.highestVersion == whole.highestVersion, "seed \(seed)")
            #expect(parts.tombstoneCount == whole.tombstoneCount && parts.expiringCount == whole.expiringCount, "seed \(seed)")
            #expect(parts.owners == whole.owners, "seed \(seed)")
            #expect(parts.nextExpiryMilliseconds == whole.nextExpiryMilliseconds, "seed \(seed)")
        }
    }

    @Test func mergeReportsWhatChanged() {
        var table = EntryTable()
        let key = StateKey(name: "k")
        let v1 = Entry(version: Version(timestamp: HLCTimestamp(rawValue: 1), node: "a"), value: [1])
        let v2 = Entry(version: Version(timestamp: HLCTimestamp(rawValue: 2), node: "a"), value: nil)
        guard case .inserted = table.merge(v1, for: key) else { Issue.record("expected insert"); return }
        #expect(table.entry(for: key) == v1)
        guard case .replaced = table.merge(v2, for: key) else { Issue.record("expected replace"); return }
        guard case .kept = table.merge(v1, for: key) else { Issue.record("older entry must not win"); return }
        #expect(table.tombstoneCount == 1)
        #expect(table.entry(for: key) == v2)
    }
}
