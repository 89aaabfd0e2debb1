@testable import DecideCore
import Testing

/// The entry table against a plain dictionary of merged entries: its open-addressing index,
/// moved records, interned node ids and per-leaf lists must never disagree with the model,
/// through growth, replacements and tombstone collection.
@Suite struct EntryTableTests {
    /// The group of member `member`: the set-dot tag, the length of its JSON and the JSON.
    static func group(member: Int) -> [UInt8] {
        let json = Array("\"m\(member)\"".utf8)
        return [0xFF, 0x73, 0x01, UInt8(json.count)] + json
    }

    /// A dot of `member`: its group, then a dot's incarnation, sequence and node.
    static func dot(member: Int, sequence: Int) -> [UInt8] {
        group(member: member) + [0, 0, 0, 0, 0, 0, 0, 1] + [UInt8(sequence & 0x7F)] + Array("n\(sequence)".utf8)
    }

    @Test func agreesWithADictionaryThroughGrowthReplacementAndCollection() {
        forEachSeed(0..<40) { seed, gen in
            var table = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            var model: [StateKey: Entry] = [:]
            let keyCount = gen.int(1...3_000)
            // Most keys share a few names; every fifth has a name of its own, which comes and
            // goes with it (collection frees the name, a later key reuses its number); every
            // third is atomic (its name kept in its record), some of them named like a
            // collection key, long and short (inline and heap strings).
            let keys = (0..<keyCount).map { index -> StateKey in
                if index % 3 == 1 {
                    return StateKey(name: index % 2 == 0 ? "k\(index % 7)" : "atomic state with a long name \(index)")
                }
                let name = index % 5 == 0 ? "own\(index)" : "k\(index % 7)"
                // Every fourth a set dot (`ElementGroup`) of one of a few members, every
                // seventeenth of those malformed (its length runs past its end: no group).
                if index % 4 == 3 {
                    return StateKey(name: name, element: index % 17 == 0 ? [0xFF, 0x73, 0x01, 0x7F, 0x22] : Self.dot(member: index % 13, sequence: index))
                }
                // Some of a counter's slots and base slots, and sorted set members: counted by
                // kind (`storedKinds`).
                if index % 19 == 2 { return StateKey(name: name, element: [0xFF, 0x63, 0x01] + Array("\(index)".utf8)) }
                if index % 23 == 2 { return StateKey(name: name, element: [0xFF, 0x62, 0x01] + Array("\(index)".utf8)) }
                if index % 29 == 2 { return StateKey(name: name, element: [0xFF, 0x7A, 0x01] + Array("\(index)".utf8)) }
                // Elements short (held in the record) and, every eleventh, long (on the heap).
                let element = index % 11 == 0 ? "a long element id of more than sixteen bytes \(index)" : "\(index)"
                return StateKey(name: name, element: Array(element.utf8))
            }
            for _ in 0..<(keyCount * 3) {
                let key = keys[gen.int(0...(keyCount - 1))]
                if gen.int(0...5) == 0, let stored = model[key], stored.isTombstone {
                    let collected = table.collectTombstone(for: key, version: stored.version)
                    #expect(collected, "seed \(seed)")
                    model[key] = nil
                    continue
                }
                // Reads of a member's group between merges count its listed tombstones from
                // then on (`GroupRecords`); later merges, collections and moves must agree.
                if gen.int(0...6) == 0 {
                    table.forEachElement(ofCollectionNamed: key.name, inGroupOf: Self.group(member: gen.int(0...12))) { _, _ in }
                }
                let entry = gen.entry()
                let changed = table.merge(entry, for: key).changed
                let merged = model[key].map { $0.merged(with: entry) } ?? entry
                #expect(changed == (model[key] != merged), "seed \(seed)")
                model[key] = merged
            }
            #expect(table.count == model.count, "seed \(seed)")
            #expect(table.nameCount == Set(model.keys.filter { !$0.element.isEmpty }.map(\.name)).count, "seed \(seed)")
            // Each collection lists exactly its elements, each once, with their entries, though
            // removals moved records and members around (the per-name lists and their slots).
            let collectionNames = Set(keys.filter { !$0.element.isEmpty }.map(\.name))
            for name in collectionNames {
                let listed = table.elements(ofCollectionNamed: name)
                let expected = model.filter { $0.key.name == name && !$0.key.element.isEmpty }
                #expect(listed.count == expected.count && table.elementCount(ofCollectionNamed: name) == expected.count,
                        "seed \(seed) name \(name)")
                #expect(Set(listed.map(\.key)) == Set(expected.keys), "seed \(seed) name \(name)")
                for item in listed { #expect(model[item.key] == item.entry, "seed \(seed) \(item.key)") }
                // Each member's dots holding a value are listed by group, and only they (its
                // tombstones are counted, not listed, however often a dot turned into one and
                // back); the group answers whether it stores any dot, and the count of groups is
                // the count of members with a dot stored.
                var members = Set<Int>()
                for member in 0..<13 {
                    let group = Self.group(member: member)
                    let grouped = table.elements(ofCollectionNamed: name, inGroupOf: group)
                    let storedDots = expected.filter { $0.key.element.starts(with: group) }
                    let liveDots = storedDots.filter { !$0.value.isTombstone }.map(\.key)
                    #expect(Set(grouped.map(\.key)) == Set(liveDots) && grouped.count == liveDots.count, "seed \(seed) name \(name) member \(member)")
                    for item in grouped { #expect(model[item.key] == item.entry, "seed \(seed) \(item.key)") }
                    let stored = table.forEachElement(ofCollectionNamed: name, inGroupOf: group) { _, _ in }
                    #expect(stored == !storedDots.isEmpty, "seed \(seed) name \(name) member \(member)")
                    if !storedDots.isEmpty { members.insert(member) }
                }
                #expect(table.groupCount(ofCollectionNamed: name) == members.count, "seed \(seed) name \(name)")
                let plain = expected.keys.filter { $0.element.first != 0xFF }.count
                #expect(table.plainElementCount(ofCollectionNamed: name) == plain, "seed \(seed) name \(name)")
                func stored(_ kind: UInt8) -> Int { expected.keys.filter { $0.element.starts(with: [0xFF, kind, 0x01]) }.count }
                let kinds = table.storedKinds(ofCollectionNamed: name)
                #expect(kinds.plain == plain && kinds.setMembers == members.count && kinds.counterSlots == stored(0x63)
                        && kinds.counterBases == stored(0x62) && kinds.scoredMembers == stored(0x7A), "seed \(seed) name \(name)")
            }
            let heldKeys = Set(table.entries.map { $0.key })
            #expect(heldKeys == Set(model.keys), "seed \(seed)")
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

    /// A growing index is rebuilt a few cells per insert, not whole in the insert that filled
    /// it (which held the node's lock 145 ms at 3.1 M keys): each insert after a growth moves
    /// at least `drainCellsPerInsert` cells of the old index and the move ends before the next growth. Meanwhile
    /// every key is found whichever index it is in: lookups, merges of stored keys, collection
    /// (which moves the last record into the hole), the atomic-name read and the hash lookup
    /// agree with a dictionary model, checked while cells are still to move.
    @Test func growsItsIndexAFewCellsAtATime() {
        forEachSeed(0..<8) { seed, gen in
            var table = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            var model: [StateKey: Entry] = [:]
            var inserted: [StateKey] = []
            var growths = 0
            var checkedMidway = 0
            let keyCount = 20_000 + gen.int(0...5_000)
            for number in 0..<keyCount {
                let key = number % 4 == 0 ? StateKey(name: "atomic \(seed) \(number)") : StateKey(name: "k\(number % 3)", element: Array("\(number)".utf8))
                let before = table.indexCellsToMove
                let entry = gen.entry()
                let outcome = table.merge(entry, for: key)
                #expect(outcome == .inserted, "seed \(seed)")
                model[key] = entry
                inserted.append(key)
                let after = table.indexCellsToMove
                if after > before {
                    // A growth: the old index had finished moving, and this insert moved some
                    // of the new old one already, or none if it left with the growth.
                    #expect(before == 0, "seed \(seed) key \(number): a growth while \(before) cells were still to move")
                    growths += 1
                } else if before > 0 {
                    #expect(after == 0 || before - after >= EntryTable.drainCellsPerInsert, "seed \(seed) key \(number): moved \(before - after) cells")
                }
                // Stored keys merged again, and some removed, while cells are to move.
                if after > 0, gen.int(0...3) == 0 {
                    let other = inserted[gen.int(0...(inserted.count - 1))]
                    let offered = gen.entry()
                    _ = table.merge(offered, for: other)
                    model[other] = model[other].map { $0.merged(with: offered) } ?? offered
                    if let stored = model[other], stored.isTombstone, gen.int(0...1) == 0 {
                        let collected = table.collectTombstone(for: other, version: stored.version)
                        #expect(collected, "seed \(seed)")
                        model[other] = nil
                    }
                }
                if after > 0, number % 97 == 0 {
                    checkedMidway += 1
                    #expect(table.count == model.count, "seed \(seed)")
                    for sample in inserted.suffix(300) + inserted.prefix(300) {
                        #expect(table.entry(for: sample) == model[sample], "seed \(seed) \(sample)")
                        #expect(table.keys(withStableHash: sample.stableHash).contains(sample) == (model[sample] != nil), "seed \(seed) \(sample)")
                        if sample.element.isEmpty, model[sample]?.expiresAtMilliseconds == nil {
                            let read = Array(sample.name.utf8).withUnsafeBytes { table.value(ofAtomicNamed: $0, atMilliseconds: 0) }
                            #expect(read.map { $0?.array } == model[sample].map { $0.value }, "seed \(seed) \(sample)")
                        }
                    }
                }
            }
            #expect(growths >= 10 && checkedMidway > 0, "seed \(seed): \(growths) growths, \(checkedMidway) checks midway")
            for key in inserted { #expect(table.entry(for: key) == model[key], "seed \(seed) \(key)") }
            var fresh = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
            for (key, entry) in model { fresh.merge(entry, for: key) }
            #expect(fresh.digest == table.digest, "seed \(seed)")
        }
    }

    /// An index of a mebibyte or more is a mapping, and hands the pages of its drained cells back
    /// to the system as it drains (`releaseDrainedPages`, every 16,384 cells): the cells not
    /// moved yet keep their keys. Grown past 131,072 cells, with every key found mid-drain.
    @Test func aMappedIndexHandsBackItsDrainedPagesAndKeepsTheRest() {
        let version = Version(timestamp: HLCTimestamp(rawValue: 1), node: "a")
        var table = EntryTable()
        var keys: [StateKey] = []
        func insert() {
            let key = StateKey(name: "k", element: Array("\(keys.count)".utf8))
            table.merge(Entry(version: version, value: [UInt8(truncatingIfNeeded: keys.count)]), for: key)
            keys.append(key)
        }
        // 131,072 cells (1 MiB) fill to three quarters at 98,304 keys; the next growth drains them.
        while !(keys.count > 98_304 && table.indexCellsToMove > 0) { insert() }
        let toMove = table.indexCellsToMove
        #expect(toMove >= 131_072 - EntryTable.drainCellsPerInsert * 2)
        var checks = 0
        while table.indexCellsToMove > 0 {
            insert()
            if keys.count % 256 == 0 {
                checks += 1
                for key in stride(from: keys.count % 7, to: keys.count, by: 7).map({ keys[$0] }) {
                    #expect(table.entry(for: key) != nil, "\(key) lost with \(table.indexCellsToMove) cells to move")
                }
            }
        }
        #expect(checks >= 10)
        for (number, key) in keys.enumerated() {
            #expect(table.entry(for: key)?.value == [UInt8(truncatingIfNeeded: number)], "\(key)")
        }
    }

    /// `Entry.takeValue`, which merges use to move a consumed entry's value into the table: it
    /// hands over the value, in place or on the heap, and leaves the entry a tombstone of the
    /// same version, expiry and ownership fields.
    @Test func takingAValueLeavesATombstoneOfTheSameVersion() {
        for bytes in [[UInt8](), [1, 2, 3], [UInt8](repeating: 9, count: 100)] {
            let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: 5, logical: 1), node: "a node id longer than fifteen bytes")
            var entry = Entry(version: version, value: bytes, expiresAtMilliseconds: 70, ownedByWriter: true)
            let taken = Entry.takeValue(from: &entry)
            #expect(taken.map { Array($0.array) } == bytes)
            #expect(entry.isTombstone)
            #expect(entry.version == version)
            #expect(entry.expiresAtMilliseconds == 70 && entry.ownedByWriter)
            #expect(Entry.takeValue(from: &entry) == nil, "taken twice")
        }
    }

    /// State names that come and go (a key per name, deleted and collected) do not accumulate:
    /// the table forgets a name with its last key, and a name reusing its number reads back right.
    @Test func namesThatComeAndGoAreForgotten() {
        var table = EntryTable()
        let kept = StateKey(name: "kept", element: [0])
        table.merge(Entry(version: Version(timestamp: HLCTimestamp(rawValue: 1), node: "a"), value: [1]), for: kept)
        var clock: UInt64 = 2
        for round in 0..<200 {
            let keys = (0..<25).map { StateKey(name: "session.\(round).\($0)", element: [UInt8(round % 256)]) }
            for key in keys {
                table.merge(Entry(version: Version(timestamp: HLCTimestamp(rawValue: clock), node: "a"), value: [2]), for: key)
                clock += 1
            }
            #expect(table.nameCount == 26)
            let held = Set(table.entries.map { $0.key })
            #expect(held == Set(keys + [kept]))
            for key in keys {
                let tombstone = Version(timestamp: HLCTimestamp(rawValue: clock), node: "a")
                table.merge(Entry(version: tombstone, value: nil), for: key)
                clock += 1
                let collected = table.collectTombstone(for: key, version: tombstone)
                #expect(collected)
            }
            #expect(table.nameCount == 1)
        }
        #expect(table.count == 1)
        let left = table.entries.map { $0.key }
        #expect(left == [kept])
        #expect(table.entry(for: kept)?.value == [1])
    }

    /// `keys(withStableHash:)` finds every stored key of a hash (the change log's way back from
    /// a hash to keys): each of 20,000 keys by its own hash, two keys forced onto one hash both,
    /// and nothing for a hash no key has or for a key removed since.
    @Test func keysAreFoundByTheirStableHash() throws {
        var table = EntryTable()
        let version = Version(timestamp: HLCTimestamp(rawValue: 1), node: "a")
        let keys = (0..<20_000).map { StateKey(name: "k", element: Array("\($0)".utf8)) } + [StateKey(name: "atomic")]
        for key in keys { table.merge(Entry(version: version, value: [1]), for: key) }
        for key in keys { #expect(table.keys(withStableHash: key.stableHash) == [key]) }
        // Two different keys that share one hash (built with the hash given, as a stored key
        // hands it back): both come back.
        let shared: UInt64 = 0xDEAD_BEEF_0000_0001
        let first = StateKey(name: "x", element: [1], stableHash: shared)
        let second = StateKey(name: "y", element: [], stableHash: shared)
        table.merge(Entry(version: version, value: [2]), for: first)
        table.merge(Entry(version: version, value: [3]), for: second)
        #expect(Set(table.keys(withStableHash: shared)) == [first, second])
        #expect(table.keys(withStableHash: 0x1234_5678).isEmpty)
        let tombstone = Version(timestamp: HLCTimestamp(rawValue: 2), node: "a")
        table.merge(Entry(version: tombstone, value: nil), for: first)
        let collected = table.collectTombstone(for: first, version: tombstone)
        #expect(collected)
        #expect(table.keys(withStableHash: shared) == [second])
        #expect(EntryTable().keys(withStableHash: shared).isEmpty)
    }

    /// `prefetch` names each key's index cell, the record of each stored key and the value of
    /// each stored live key whose value is not held in the record (for writing), and nothing else: over an empty table, a small one
    /// (nothing), one of tombstones, and one of 50,000 keys (values, tombstones, empty values, collected keys),
    /// for stored, absent and made-up hashes and every batch size. It changes no entry and not
    /// the digest, and merges after it land as without it.
    @Test func prefetchNamesTheCellsRecordsAndValuesAMergeWillTouch() throws {
        struct Hints {
            var reads = 0
            var writes = 0
        }
        func hints(_ table: EntryTable, _ hashes: [UInt64], readingValues: Bool = false) -> Hints {
            var counted = Hints()
            table.prefetch(count: hashes.count, readingValues: readingValues, hash: { hashes[$0] }) { _, forWriting in
                if forWriting { counted.writes += 1 } else { counted.reads += 1 }
            }
            return counted
        }
        #expect(hints(EntryTable(), [1, 2, 3]).reads == 0)

        let first = Version(timestamp: HLCTimestamp(rawValue: 1), node: "a")
        let later = Version(timestamp: HLCTimestamp(rawValue: 2), node: "b")
        let keys = (0..<50_000).map { StateKey(name: "k", element: Array("\($0)".utf8)) } + [StateKey(name: "atomic")]
        // A table small enough to stay in a cache gets no hints.
        var small = EntryTable()
        for key in keys.prefix(EntryTable.prefetchMinimumRecords - 1) { small.merge(Entry(version: first, value: [1]), for: key) }
        #expect(hints(small, keys.prefix(100).map(\.stableHash)).reads == 0)
        var tombstones = EntryTable()
        for key in keys.prefix(EntryTable.prefetchMinimumRecords) { tombstones.merge(Entry(version: first, value: nil), for: key) }
        let onTombstones = hints(tombstones, keys.prefix(1_000).map(\.stableHash))
        // A merge's hints for writing: each key's digest leaf (stored keys: no bucket head; no
        // value here).
        #expect(onTombstones.writes == 1_000)
        #expect(onTombstones.reads >= 1_000 + 1_000 * 3 / 4)

        var table = EntryTable()
        for (number, key) in keys.enumerated() {
            table.merge(Entry(version: first, value: number % 7 == 0 ? nil : number % 11 == 0 ? [] : Array(repeating: UInt8(number & 0xFF), count: number % 90)), for: key)
        }
        for key in keys.prefix(500) where table.entry(for: key)?.isTombstone == true {
            table.collectTombstone(for: key, version: first)
        }
        let before = keys.map { table.entry(for: $0) }
        let digest = table.digest

        // Every stored key: one cell and one record each, and one value per live key whose
        // value is too long to be held in the record: the record hinted is the first on the
        // key's probe sequence with the key's hash tag, its own (no two of these keys share a
        // tag near each other), wherever the key sits, even while the index drains after a
        // growth (this table is in the middle of one).
        #expect(table.indexCellsToMove > 0)
        let stored = keys.filter { table.entry(for: $0) != nil }
        let onHeap = stored.filter { (table.entry(for: $0)?.packedValue?.count ?? 0) > PackedBytes.inlineCapacity }
        #expect(onHeap.count > 20_000)
        let all = hints(table, stored.map(\.stableHash))
        #expect(all.reads == stored.count * 2)
        let valueWrites = all.writes - stored.count  // less each key's digest leaf
        #expect(valueWrites == onHeap.count)
        // A reader's hints leave out the digest's lines and add the line after each value's first.
        let reading = hints(table, stored.map(\.stableHash), readingValues: true)
        #expect(reading.writes == valueWrites)
        #expect(reading.reads == all.reads + valueWrites)
        // Absent keys: one cell each, and a record only where a key of the same tag sits on the
        // probe sequence (whose value is then hinted too); for writing, each key's digest leaf,
        // and the bucket head where the sequence ends first (an insert), which a reader's hints
        // leave out.
        let absent = (0..<1_000).map { StateKey(name: "absent", element: Array("\($0)".utf8)).stableHash }
        let onAbsent = hints(table, absent)
        #expect(onAbsent.reads < 1_000 * 2)
        #expect(onAbsent.reads >= 1_000)
        // Sequences that end before a record of the key's tag: an insert each.
        let inserts = 1_000 * 2 - onAbsent.reads
        #expect(inserts > 0)
        #expect(hints(table, absent, readingValues: true).writes == onAbsent.writes - 1_000 - inserts)
        #expect(hints(table, [0, .max, 1, 0xDEAD_BEEF]).reads >= 4)
        for size in [0, 1] { #expect(hints(table, Array(stored.prefix(size).map(\.stableHash))).reads == 0) }
        #expect(keys.map { table.entry(for: $0) } == before)
        #expect(table.digest == digest)

        // Merges right after a prefetch of their keys: the same table as merges without one.
        var hinted = table
        var plain = table
        let batch = Array(keys[1_000..<1_128])
        _ = hints(hinted, batch.map(\.stableHash))
        for key in batch {
            hinted.merge(Entry(version: later, value: [9]), for: key)
            plain.merge(Entry(version: later, value: [9]), for: key)
        }
        #expect(keys.map { hinted.entry(for: $0) } == keys.map { plain.entry(for: $0) })
        #expect(hinted.digest == plain.digest)
    }

    /// `hintHomeCell` names, for a key, the index cell `prefetch` names first for it (its home
    /// cell), the digest leaf a merge toggles, and the head of that leaf's record list an insert
    /// writes, once the index has `2 × prefetchMinimumRecords` cells; below that, nothing. It
    /// changes nothing.
    @Test func hintHomeCellNamesTheKeysFirstIndexCellOfALargeIndexOnly() {
        let version = Version(timestamp: HLCTimestamp(rawValue: 1), node: "a")
        let keys = (0..<(2 * EntryTable.prefetchMinimumRecords)).map { StateKey(name: "k", element: Array("\($0)".utf8)) }
        func named(_ table: EntryTable, _ hash: UInt64) -> [UnsafeRawPointer] {
            var addresses: [UnsafeRawPointer] = []
            table.hintHomeCell(of: hash) { addresses.append($0) }
            return addresses
        }
        func firstOfPrefetch(_ table: EntryTable, _ hash: UInt64) -> UnsafeRawPointer? {
            // Two copies of one hash: the first hint of the two is its index cell.
            var first: UnsafeRawPointer?
            table.prefetch(count: 2, hash: { _ in hash }) { address, _ in if first == nil { first = address } }
            return first
        }
        var table = EntryTable()
        for key in keys.prefix(EntryTable.prefetchMinimumRecords / 2) { table.merge(Entry(version: version, value: [1]), for: key) }
        #expect(named(table, keys[0].stableHash).isEmpty)
        for key in keys { table.merge(Entry(version: version, value: [1]), for: key) }
        let digest = table.digest
        for hash in keys.prefix(200).map(\.stableHash) + [0, .max, 0xDEAD_BEEF] {
            // The index cell, the digest leaf the merge will toggle, the bucket head.
            let addresses = named(table, hash)
            #expect(addresses.count == 3)
            #expect(addresses.first == firstOfPrefetch(table, hash))
            var leaf: UnsafeRawPointer?
            digest.hintLeaf(ofHash: hash) { leaf = $0 }
            #expect(addresses[1] == leaf)
        }
        #expect(table.digest == digest)
        #expect(keys.allSatisfy { table.entry(for: $0)?.packedValue == PackedBytes([1]) })

        // The third is the slot an insert of the key writes: it then names the new record.
        for number in 0..<50 {
            let key = StateKey(name: "new", element: Array("\(number)".utf8))
            func headNamed() -> UInt32 {
                var head: UInt32 = 0
                var seen = 0
                table.hintHomeCell(of: key.stableHash) { seen += 1; if seen == 3 { head = $0.load(as: UInt32.self) } }
                return head
            }
            let before = headNamed()
            table.merge(Entry(version: version, value: [2]), for: key)
            #expect(headNamed() == UInt32(table.count), "the slot names the newest record (its number + 1)")
            #expect(headNamed() != before)
        }
    }
}
