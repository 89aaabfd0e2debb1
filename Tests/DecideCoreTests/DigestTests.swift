import DecideCore
import Testing

@Suite struct DigestTests {
    @Test func oneDifferentKeyShowsInExactlyOneLeafAndItsAncestors() {
        forEachSeed(0..<40) { seed, gen in
            var left = EntryTable()
            var right = EntryTable()
            for index in 0..<200 {
                let key = StateKey(name: "k", element: Array("\(index)".utf8))
                let entry = gen.entry()
                left.merge(entry, for: key)
                right.merge(entry, for: key)
            }
            #expect(left.digest == right.digest, "seed \(seed)")
            let changed = StateKey(name: "k", element: Array("\(gen.int(0...199))".utf8))
            right.merge(Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_000, logical: 0), node: "z"), value: [7]), for: changed)
            let digest = left.digest
            #expect(digest.root != right.digest.root, "seed \(seed)")
            for level in 0...digest.depth {
                let differing = zip(digest.level(level), right.digest.level(level)).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
                let expectedIndex = digest.bucket(of: changed) >> (digest.fanoutBits * (digest.depth - level))
                #expect(differing == [expectedIndex], "seed \(seed) level \(level)")
            }
        }
    }

    @Test func innerNodesAreTheXorOfTheirChildren() {
        var gen = Generators(seed: 7)
        var table = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
        for _ in 0..<300 { table.merge(gen.entry(), for: gen.key()) }
        let digest = table.digest
        for level in 0..<digest.depth {
            for index in 0..<digest.width(ofLevel: level) {
                let fanout = 1 << digest.fanoutBits
                let children = (0..<fanout).map { digest.node(level: level + 1, index: index * fanout + $0) }
                #expect(digest.node(level: level, index: index) == children.reduce(0, ^))
            }
        }
    }

    @Test func collectingATombstoneTakesItOutOfTheDigest() {
        var table = EntryTable()
        let key = StateKey(name: "gone")
        let empty = table.digest
        let tombstone = Entry(version: Version(timestamp: HLCTimestamp(rawValue: 9), node: "a"), value: nil)
        table.merge(tombstone, for: key)
        #expect(table.digest != empty)
        let staleCollected = table.collectTombstone(for: key, version: Version(timestamp: HLCTimestamp(rawValue: 8), node: "a"))
        #expect(!staleCollected)
        let collected = table.collectTombstone(for: key, version: tombstone.version)
        #expect(collected)
        #expect(table.digest == empty)
        #expect(table.count == 0 && table.tombstoneCount == 0)
    }

    @Test func stableHashGivesOneValueForContiguousAndOtherBytes() {
        forEachSeed(0..<500) { seed, gen in
            let bytes = gen.bytes(maxCount: 40)
            var contiguous = StableHash()
            contiguous.combine(bytes: bytes)
            var piecewise = StableHash()
            piecewise.combine(bytes: bytes.lazy.map { $0 })
            #expect(contiguous.value == piecewise.value, "seed \(seed)")
        }
    }

    /// Every tail length (zero to seven bytes after the whole words) of buffers up to 72 bytes,
    /// with every byte distinct: the loads that gather the tail take each byte once, in place.
    @Test func stableHashOfEveryLengthMatchesTheByteByByteHash() {
        for length in 0...72 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            var contiguous = StableHash()
            bytes.withUnsafeBytes { contiguous.combine(buffer: $0) }
            var piecewise = StableHash()
            piecewise.combine(bytes: bytes.lazy.map { $0 })
            #expect(contiguous.value == piecewise.value, "\(length) bytes")
        }
    }

    @Test func stableHashIsFixedAcrossRuns() {
        // Digests are compared between processes: these values must never change.
        #expect(StateKey(name: "flags").stableHash == StateKey(name: "flags").stableHash)
        #expect(StateKey(name: "ab", element: Array("c".utf8)).stableHash != StateKey(name: "a", element: Array("bc".utf8)).stableHash)
        #expect(StateKey(name: "Flags.Maintenance").stableHash == 0xb2b2_9f71_d0a2_557b, "StableHash changed: \(String(StateKey(name: "Flags.Maintenance").stableHash, radix: 16))")
        // A value with whole words and a tail, as a 64-character string is stored.
        let entry = Entry(version: Version(timestamp: HLCTimestamp(rawValue: 42), node: "node-a"),
                          value: Array(("\"" + String(repeating: "v", count: 64) + "\"").utf8))
        let contribution = StateDigest.contribution(of: StateKey(name: "Flags.Maintenance"), entry)
        // Protocol version 3 (`DigestHash`); version 2's was 0x2670_8b2c_a5cd_8465.
        #expect(contribution == 0x8ad2_8389_8466_a645, "StateDigest.contribution changed: \(String(contribution, radix: 16))")
    }

    /// Every part of an entry moves its contribution: the timestamp by one, the node, the
    /// owned flag, the expiry (present, absent, one apart), a tombstone against an empty value,
    /// and one flipped bit or one appended zero byte of the value at every position of every
    /// length up to 80 bytes (either side of the 16 held in place, the 16-byte steps and the
    /// tail). No two of these entries of one key share a contribution.
    @Test func everyPartOfAnEntryMovesItsContribution() {
        let key = StateKey(name: "presence", element: Array("user-17".utf8))
        let stamp = HLCTimestamp(physicalMilliseconds: 1_800_000_000_000, logical: 3)
        let later = HLCTimestamp(rawValue: stamp.rawValue + 1)
        var seen: [UInt64: String] = [:]
        var collisions: [String] = []
        func add(_ entry: Entry, _ label: String) {
            let contribution = StateDigest.contribution(of: key, entry)
            if let other = seen.updateValue(label, forKey: contribution) { collisions.append("\(label) = \(other)") }
        }
        var random = SplitMix64(seed: 5)
        for length in 0...80 {
            let value = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let base = "\(length) bytes"
            add(Entry(version: Version(timestamp: stamp, node: "a"), value: value), base)
            add(Entry(version: Version(timestamp: later, node: "a"), value: value), base + ", next timestamp")
            add(Entry(version: Version(timestamp: stamp, node: "b"), value: value), base + ", node b")
            add(Entry(version: Version(timestamp: stamp, node: "a"), value: value, ownedByWriter: true), base + ", owned")
            add(Entry(version: Version(timestamp: stamp, node: "a"), value: value, expiresAtMilliseconds: 1_800_000_060_000), base + ", expiring")
            add(Entry(version: Version(timestamp: stamp, node: "a"), value: value, expiresAtMilliseconds: 1_800_000_060_001), base + ", expiring 1 ms later")
            add(Entry(version: Version(timestamp: stamp, node: "a"), value: value + [0]), base + " and a zero byte")
            for position in 0..<length {
                for bit in [0, 7] {
                    var changed = value
                    changed[position] ^= 1 << bit
                    add(Entry(version: Version(timestamp: stamp, node: "a"), value: changed), base + ", bit \(bit) of byte \(position) flipped")
                }
            }
        }
        add(Entry(version: Version(timestamp: stamp, node: "a"), value: nil), "tombstone")
        add(Entry(version: Version(timestamp: later, node: "a"), value: nil), "tombstone, next timestamp")
        #expect(collisions.isEmpty, "\(collisions.prefix(5))")
        #expect(seen.count == 81 * 7 + 2 * (0...80).reduce(0, +) + 2)
    }

    /// Entries as a busy cluster makes them: 1,000 keys, each written at 100 consecutive
    /// timestamps by one of three nodes with a counter value, the last a delete: 200,000 distinct
    /// entries, 200,000 distinct contributions (a repeat among 2^64 would come once in about
    /// 10^9 such runs).
    @Test func aBusyClustersEntriesHaveDistinctContributions() {
        var contributions = Set<UInt64>()
        contributions.reserveCapacity(200_000)
        let nodes = ["node-a", "node-b", "node-c"]
        for index in 0..<1_000 {
            let key = StateKey(name: "quota", element: Array("tenant-\(index)".utf8))
            for step in 0..<200 {
                let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_800_000_000_000 + UInt64(step / 2), logical: UInt16(step % 2)),
                                      node: nodes[(index + step) % 3])
                let entry = step == 199 ? Entry(version: version, value: nil) : Entry(version: version, value: Array("\(step * 10)".utf8))
                contributions.insert(StateDigest.contribution(of: key, entry))
            }
        }
        #expect(contributions.count == 200_000)
    }
}

@Suite struct BucketIndexTests {
    @Test func entriesInABucketAreExactlyTheKeysThatHashThere() {
        var gen = Generators(seed: 11)
        var table = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 2))
        var keys: [StateKey] = []
        for index in 0..<400 {
            let key = StateKey(name: "k", element: Array("\(index)".utf8))
            keys.append(key)
            table.merge(gen.entry(), for: key)
            table.merge(gen.entry(), for: key)
        }
        // Collect a few tombstones: they must leave the index too.
        for key in keys.prefix(100) {
            if let entry = table.entry(for: key), entry.isTombstone { table.collectTombstone(for: key, version: entry.version) }
        }
        for bucket in 0..<table.digest.width(ofLevel: table.digest.depth) {
            let indexed = Set(table.entries(inBucket: bucket).map(\.key))
            let scanned = Set(table.entries.filter { table.digest.bucket(of: $0.key) == bucket }.map(\.key))
            #expect(indexed == scanned, "bucket \(bucket)")
        }
    }

    /// `hintLeaf` names the leaf node a key's toggle changes: after one toggle into an empty
    /// digest, the word at the named address is that contribution, for several shapes.
    @Test func hintLeafNamesTheLeafAToggleChanges() {
        for (fanoutBits, depth) in [(4, 4), (2, 3), (1, 1), (3, 0)] {
            for index in 0..<200 {
                let key = StateKey(name: "leaf", element: Array("\(index)".utf8))
                var digest = StateDigest(fanoutBits: fanoutBits, depth: depth)
                digest.toggle(contribution: 0x5EED_0000 | UInt64(index), of: key)
                var named: UInt64?
                digest.hintLeaf(ofHash: key.stableHash) { named = $0.load(as: UInt64.self) }
                #expect(named == 0x5EED_0000 | UInt64(index), "shape \(fanoutBits)×\(depth), key \(index)")
                #expect(digest.node(level: depth, index: digest.bucket(of: key)) == named)
            }
        }
    }
}
