@testable import DecideCore
import Testing

/// `ReceivedDeltas` holds exactly what `decodeDelta` accepts and reads back what it decodes:
/// over random deltas (values on both sides of the in-place limit, deletes, expiring and owned
/// writes), random bytes, every truncation, and runs of deltas whose node ids and names repeat
/// (the ones it does not check for UTF-8 again).
@Suite struct ReceivedDeltasTests {
    let codec = WireCodec()

    /// The payload of a delta message: its type byte, then the delta.
    func frame(_ delta: Delta) -> [UInt8] { [1] + codec.encode(delta) }

    @Test func holdsWhatDecodesAndReadsItBackTheSame() throws {
        try forEachSeed(0..<500) { seed, gen in
            let held = ReceivedDeltas(codec: codec)
            var expected: [Delta] = []
            for source in 0..<UInt64(gen.int(1...6)) {
                let delta = gen.delta()
                try frame(delta).withUnsafeBytes { try held.append($0, from: 1, source: source) }
                expected.append(delta)
            }
            #expect(held.count == expected.count)
            var recent = RecentWireStrings()
            for (index, delta) in expected.enumerated() {
                #expect(held.delta(at: index, recent: &recent) == delta, "seed \(seed) delta \(index)")
                #expect(held.items[index].source == UInt64(index))
                #expect(held.items[index].timestamp == delta.version.timestamp)
                #expect(held.items[index].writeCount == delta.writes.count)
                let size = WireCodec.decisionHeaderBytes(nodeBytes: delta.version.node.utf8.count) + delta.writes.reduce(0) {
                    $0 + WireCodec.maxEncodedEntryBytes(nameBytes: $1.key.name.utf8.count, elementBytes: $1.key.elementCount,
                                                        nodeBytes: delta.version.node.utf8.count, valueBytes: $1.value?.count ?? 0)
                }
                #expect(held.items[index].decisionBytes == size, "seed \(seed)")
            }
            held.removeAll()
            #expect(held.isEmpty && held.byteCount == 0)
        }
    }

    /// Each write's key hash, worked out on arrival (a name's hash reused while the names
    /// repeat), is the key's `stableHash`: over random runs of deltas whose names have the same
    /// length and differ in their bytes ("flags", "quota", "lease"), repeat within a delta and
    /// across deltas, with refused frames (truncated after their first write was walked) and
    /// emptyings in between.
    @Test func keyHashesAreTheKeysStableHashes() throws {
        try forEachSeed(0..<500) { seed, gen in
            let held = ReceivedDeltas(codec: codec)
            var expected: [Delta] = []
            for step in 0..<gen.int(1...12) {
                switch gen.int(0...5) {
                case 0:
                    // Walked as far as its last write, then refused: nothing of it is kept.
                    let delta = Delta(version: gen.version(), writes: [
                        Delta.Write(key: gen.key(), value: [1]), Delta.Write(key: gen.key(), value: [2, 3])])
                    let bytes = frame(delta).dropLast()
                    let refused = Array(bytes).withUnsafeBytes { raw in
                        (try? held.append(raw, from: 1, source: 0)) == nil
                    }
                    #expect(refused, "seed \(seed) step \(step)")
                case 1:
                    held.removeAll()
                    expected.removeAll()
                default:
                    let delta = gen.delta()
                    try frame(delta).withUnsafeBytes { try held.append($0, from: 1, source: 0) }
                    expected.append(delta)
                }
            }
            #expect(held.count == expected.count, "seed \(seed)")
            for (index, delta) in expected.enumerated() {
                var hashes: [UInt64] = []
                held.read(index) { _ in } write: { _, _, _, keyHash in hashes.append(keyHash) }
                #expect(hashes == delta.writes.map(\.key.stableHash), "seed \(seed) delta \(index)")
                for (write, key) in delta.writes.map(\.key).enumerated() {
                    #expect(held.keyHash(ofWrite: write, ofDelta: index) == key.stableHash, "seed \(seed) delta \(index)")
                }
            }
        }
    }

    /// Emptied, it keeps the memory of a small batch for the next one and gives back that of a
    /// large one (here, deltas of many tiny writes, whose positions outweigh their bytes).
    @Test func memoryIsKeptOnlyForSmallBatches() throws {
        let held = ReceivedDeltas(codec: codec)
        let small = Delta(version: Version(timestamp: HLCTimestamp(rawValue: 1), node: "a"),
                          writes: [Delta.Write(key: StateKey(name: "k"), value: [1])])
        try frame(small).withUnsafeBytes { try held.append($0, from: 1, source: 0) }
        held.removeAll()
        #expect(held.isEmpty && held.heldBytes > 0, "a small batch's memory is kept")
        let tiny = Delta(version: Version(timestamp: HLCTimestamp(rawValue: 2), node: "a"),
                         writes: (0..<4_000).map { Delta.Write(key: StateKey(name: "", element: [UInt8(truncatingIfNeeded: $0)]), value: nil) })
        for _ in 0..<10 { try frame(tiny).withUnsafeBytes { try held.append($0, from: 1, source: 0) } }
        #expect(held.heldBytes > 1 << 20, "40,000 positions take more than 1 MiB")
        #expect(held.byteCount > 1 << 20, "and count in what the held deltas use")
        held.removeAll()
        #expect(held.isEmpty && held.heldBytes == 0, "a large batch's memory is given back")
    }

    /// The largest value a peer may send (`maxValueBytes`, 1 MiB), held behind small deltas and
    /// before more of them, so the held bytes grow by copying what they hold, more than once: every
    /// delta reads back exactly, the large one's value byte for byte, and the memory counts it.
    @Test func theLargestLegalValueIsHeldAndReadBackExactly() throws {
        let held = ReceivedDeltas(codec: codec)
        var gen = Generators(seed: 41)
        let limit = codec.limits.maxValueBytes
        let large = (0..<limit).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        var expected: [Delta] = (0..<50).map { _ in gen.delta() }
        expected.append(Delta(version: Version(timestamp: HLCTimestamp(rawValue: 9), node: "big"),
                              writes: [Delta.Write(key: StateKey(name: "blob", element: [1]), value: large),
                                       Delta.Write(key: StateKey(name: "blob", element: [2]), value: Array(large.prefix(limit / 2 + 3)))]))
        expected += (0..<50).map { _ in gen.delta() }
        for (source, delta) in expected.enumerated() {
            try frame(delta).withUnsafeBytes { try held.append($0, from: 1, source: UInt64(source)) }
        }
        var recent = RecentWireStrings()
        for (index, delta) in expected.enumerated() {
            #expect(held.delta(at: index, recent: &recent) == delta, "delta \(index)")
        }
        #expect(held.byteCount > limit + limit / 2, "the two large values count in what the held deltas use")
        held.removeAll()
        #expect(held.isEmpty && held.heldBytes == 0, "and their memory is given back")
    }

    /// Whatever `decodeDelta` refuses, `append` refuses with the same error, holding nothing
    /// more; what it accepts is held and read back exactly. Garbage, truncations, and a node id
    /// or name that repeats a held one's bytes except for an invalid UTF-8 byte.
    @Test func refusesWhatDecodeRefusesWithTheSameError() throws {
        let held = ReceivedDeltas(codec: codec)
        let good = Delta(version: Version(timestamp: HLCTimestamp(rawValue: 7), node: "node-a"),
                         writes: [Delta.Write(key: StateKey(name: "flags", element: Array("\"x\"".utf8)), value: Array("true".utf8))])
        try frame(good).withUnsafeBytes { try held.append($0, from: 1, source: 9) }
        func check(_ bytes: [UInt8], _ note: String) {
            let before = held.count
            let decoded: Result<Delta, WireDecodeError> = Result { () throws(WireDecodeError) in try codec.decodeDelta(bytes) }
            let appended: Result<Void, WireDecodeError> = ([1] + bytes).withUnsafeBytes { raw in
                Result { () throws(WireDecodeError) in try held.append(raw, from: 1, source: 1) }
            }
            switch (decoded, appended) {
            case let (.failure(refused), .failure(error)):
                #expect(refused == error, "\(note)")
                #expect(held.count == before, "\(note): nothing held")
            case let (.success(delta), .success):
                var recent = RecentWireStrings()
                #expect(held.delta(at: held.count - 1, recent: &recent) == delta, "\(note)")
            default:
                Issue.record("\(note): decodeDelta \(decoded), append \(appended)")
            }
        }
        forEachSeed(0..<20_000) { seed, gen in
            var bytes = gen.bytes(maxCount: 64)
            if gen.bool(), bytes.count >= 2 { bytes[0] = WireCodec.format; bytes[1] = WireCodec.deltaKind }
            check(bytes, "seed \(seed)")
        }
        let encoded = codec.encode(good)
        for length in 0..<encoded.count { check(Array(encoded.prefix(length)), "truncated to \(length)") }
        check(encoded + [0], "a trailing byte")
        // The held delta's node id and name, each with a byte made invalid UTF-8.
        for bad in ["node-a", "flags"] {
            let text = String(repeating: "q", count: bad.utf8.count)
            var bytes = codec.encode(Delta(version: Version(timestamp: HLCTimestamp(rawValue: 8), node: bad == "node-a" ? text : "node-a"),
                                           writes: [Delta.Write(key: StateKey(name: bad == "flags" ? text : "flags"), value: [0x31])]))
            let at = bytes.firstIndex(of: UInt8(ascii: "q"))!
            bytes[at] = 0xFF
            check(bytes, "invalid UTF-8 in \(bad)")
        }
    }
}
