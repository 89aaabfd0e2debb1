@testable import Decide
import DecideCore
import Foundation
import Testing

/// The small tables the commit path uses instead of `Dictionary`, checked against one.
@Suite struct HotPathTableTests {
    final class Token {}

    /// Every identifier inserted is found with its key, none other is, across growth.
    @Test func typeTableAnswersLikeADictionary() {
        let tokens = (0..<300).map { _ in Token() }
        var table = TypeTable<StateKey>()
        var model: [ObjectIdentifier: StateKey] = [:]
        for (index, token) in tokens.enumerated() {
            let id = ObjectIdentifier(token)
            #expect(table.value(for: id) == nil)
            let key = StateKey(name: "type.\(index)")
            table.insert(key, for: id)
            model[id] = key
            if index % 37 == 0 {
                for other in tokens { #expect(table.value(for: ObjectIdentifier(other)) == model[ObjectIdentifier(other)]) }
            }
        }
        #expect(table.count == 300)
        for token in tokens { #expect(table.value(for: ObjectIdentifier(token)) == model[ObjectIdentifier(token)]) }
    }

    /// Writes in any order, with keys rewritten, past the linear-search size: one write per key
    /// in first-write order, the last value kept, and `decisionBytes` equal to `Node`'s count.
    /// One `PendingWrites` serves every decision, as on a node: the key index kept from a larger
    /// decision, or freed after a huge one (20,000 writes), must not answer for the next.
    @Test func pendingWritesKeepTheLastWriteOfEachKeyAndTheirExactSize() {
        var pending = PendingWrites(nodeID: "node")
        for seed in 0..<40 {
            var random = SplitMix64(seed: UInt64(seed))
            var order: [StateKey] = []
            var latest: [StateKey: [UInt8]?] = [:]
            let huge = seed % 10 == 9
            let distinctKeys = huge ? 30_000 : 1 + Int(random.next() % 60)
            for _ in 0..<(huge ? 20_000 : Int(random.next() % 120)) {
                let key = StateKey(name: "k", element: Array("\(random.next() % UInt64(distinctKeys))".utf8))
                let value: [UInt8]? = random.next() % 5 == 0 ? nil : [UInt8](repeating: 7, count: Int(random.next() % 40))
                let existing = pending.position(of: key)
                #expect((existing != nil) == (latest[key] != nil))
                let recorded = pending.set(key, value: value.map(PackedBytes.init), decoded: nil, maxKeys: .max)
                #expect(recorded)
                if latest[key] == nil { order.append(key) }
                latest[key] = .some(value)
            }
            #expect(pending.writes.map(\.key) == order)
            #expect(pending.writes.map { $0.value?.array } == order.map { latest[$0]! })
            let expected = Node.decisionBytes(nodeID: "node", writes: order.map { ($0, latest[$0]!.map(PackedBytes.init)) })
            #expect(pending.decisionBytes == expected)
            pending.removeAll()
            #expect(pending.isEmpty && pending.decisionBytes == Node.decisionBytes(nodeID: "node", writes: []))
        }
    }

    /// The writes' buffer owns what they hold: a typed value replaced in the decision, cleared
    /// with the writes, or still held when the writes themselves go is released then, once
    /// (the buffer is managed by hand, not by an array).
    @Test func pendingWritesReleaseTheirTypedValuesWhenReplacedClearedOrDropped() {
        final class Typed: Sendable {}
        weak var replaced: Typed?
        weak var cleared: Typed?
        weak var dropped: Typed?
        var pending: PendingWrites? = PendingWrites(nodeID: "n")
        do {
            let first = Typed(), second = Typed()
            replaced = first
            cleared = second
            _ = pending!.set(StateKey(name: "a"), value: PackedBytes([1]), decoded: first, maxKeys: .max)
            _ = pending!.set(StateKey(name: "a"), value: PackedBytes([2]), decoded: second, maxKeys: .max)
        }
        #expect(replaced == nil && cleared != nil)
        // Past the buffer's first capacity, so it grows (moving the writes) before the clear.
        for index in 0..<40 { _ = pending!.set(StateKey(name: "k\(index)"), value: nil, decoded: nil, maxKeys: .max) }
        #expect(cleared != nil && pending!.count == 41)
        pending!.removeAll()
        #expect(cleared == nil && pending!.isEmpty)
        do {
            let third = Typed()
            dropped = third
            _ = pending!.set(StateKey(name: "b"), value: PackedBytes([3]), decoded: third, maxKeys: .max)
        }
        #expect(dropped != nil)
        pending = nil
        #expect(dropped == nil)
    }

    /// A decision over the key limit records nothing for the new key; an expiring write makes the
    /// decision expire until the writes are cleared.
    @Test func pendingWritesRefuseANewKeyPastTheLimitAndTrackExpiry() {
        var pending = PendingWrites(nodeID: "n")
        var recorded: [Bool] = []
        recorded.append(pending.set(StateKey(name: "a"), value: PackedBytes([1]), decoded: nil, maxKeys: 2))
        recorded.append(pending.set(StateKey(name: "b"), value: PackedBytes([2]), decoded: nil,
                                    options: WriteOptions(expiry: .after(milliseconds: 5)), maxKeys: 2))
        #expect(pending.expires)
        recorded.append(pending.set(StateKey(name: "c"), value: PackedBytes([3]), decoded: nil, maxKeys: 2))
        recorded.append(pending.set(StateKey(name: "a"), value: PackedBytes([4]), decoded: nil, maxKeys: 2))
        #expect(recorded == [true, true, false, true])
        #expect(pending.writes.map { $0.value?.array } == [[4], [2]])
        pending.removeAll()
        #expect(!pending.expires && pending.isEmpty)
        let again = pending.set(StateKey(name: "c"), value: PackedBytes([3]), decoded: nil, maxKeys: 2)
        #expect(again && !pending.expires)
    }

    /// The change ring answers like the whole history it summarises, across many wraps: the
    /// hashes of the keys changed after any sequence number it still covers, newest first and
    /// each once; nil beyond.
    @Test func changeLogAnswersLikeTheWholeHistory() {
        for capacity in [1, 2, 3, 7, 64] {
            var random = SplitMix64(seed: UInt64(capacity))
            var log = ChangeLog(capacity: capacity)
            var history: [StateKey] = []
            for step in 0..<(capacity * 9 + 5) {
                let key = StateKey(name: "k\(random.next() % UInt64(capacity + 3))")
                if step % 2 == 0 {
                    log.record(key)
                } else {
                    [PendingWrite(key: key, value: nil, decoded: nil, options: .plain)].withUnsafeBufferPointer { log.record($0) }
                }
                history.append(key)
                #expect(log.sequence == UInt64(history.count))
                for after in 0...history.count {
                    let answer = log.hashes(after: UInt64(after))
                    guard history.count - after <= capacity else {
                        #expect(answer == nil)
                        continue
                    }
                    var expected: [UInt64] = []
                    for key in history[after...].reversed() where !expected.contains(key.stableHash) { expected.append(key.stableHash) }
                    #expect(answer == expected)
                }
            }
        }
    }

    /// A walk's "changed since" set, found again from the ring's hashes: the keys written after
    /// a sequence number, each once, with their current entries; not a key removed since; nil
    /// once more changes than the ring holds happened.
    @Test func aWalkFindsTheChangedKeysFromTheirHashes() {
        let node = Fixture.node { $0.recentChangeCapacity = 64 }
        let ids = (0..<10).map { "id\($0)" }
        for id in ids.prefix(5) { node.set(1, into: Fixture.Quota.self, at: id) }
        let start = node.walkStart.sequence
        for id in ids.suffix(5) { node.set(2, into: Fixture.Quota.self, at: id) }
        node.set(3, into: Fixture.Quota.self, at: "id9")
        let changed = node.walkEntries(keys: [], changedAfter: start) ?? []
        let expected = Set(ids.suffix(5).map { StateKey(name: Fixture.Quota.name, element: Array("\"\($0)\"".utf8)) })
        #expect(Set(changed.map(\.key)) == expected)
        #expect(changed.count == 5)
        #expect(changed.first { $0.key.element == Array("\"id9\"".utf8) }?.entry.value == Array("3".utf8))

        let beforeRemoval = node.walkStart.sequence
        node.set(4, into: Fixture.Quota.self, at: "gone")
        node.decide(RemoveQuota(id: "gone"))
        #expect(node.collectTombstones(olderThan: HLCTimestamp(physicalMilliseconds: HLCTimestamp.maxPhysicalMilliseconds, logical: 0)) == 1)
        #expect(node.walkEntries(keys: [], changedAfter: beforeRemoval)?.isEmpty == true)

        for round in 0..<64 { node.set(round, into: Fixture.Quota.self, at: "id0") }
        #expect(node.walkEntries(keys: [], changedAfter: start) == nil)
    }

    struct RemoveQuota: Decision {
        let id: String
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.delete(Fixture.Quota.self, at: id)
            return .none
        }
    }

    /// The vector- and word-at-a-time escape test answers like the byte test for every byte
    /// value at every position of buffers of 0 to 40 bytes (two sixteen-byte vectors, an
    /// eight-byte word and the tail, in every combination).
    @Test func escapeScanAnswersLikeTheByteTest() {
        var mismatches: [(length: Int, position: Int, value: Int)] = []
        for length in 0...40 {
            for position in 0..<max(length, 1) {
                for value in 0...255 {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    if length > 0 { bytes[position] = UInt8(value) }
                    let expected = bytes.contains { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }
                    if bytes.withUnsafeBytes({ ValueCoding.anyNeedsEscape($0) }) != expected {
                        mismatches.append((length, position, value))
                    }
                }
            }
        }
        let count = mismatches.count
        #expect(count == 0, "first mismatches: \(mismatches.prefix(5))")
    }

    /// Strings on both sides of the scratch-memory limit (written whole, or appended) quote to
    /// the same bytes: the string itself between quotes when nothing needs an escape, and JSON
    /// that decodes back when the last byte does.
    @Test func longStringsQuoteTheSameOnEitherSideOfTheScratchLimit() throws {
        let limit = ValueCoding.maxScratchQuotedBytes
        for length in [0, 1, 7, 8, 64, limit - 2, limit - 1, limit, limit + 1, limit + 2, 3 * limit + 5, 300_000] {
            let plain = String(repeating: "é", count: length / 2) + String(repeating: "x", count: length % 2)
            #expect(plain.utf8.count == length)
            #expect(try ValueCoding.encode(plain) == [UInt8(ascii: "\"")] + Array(plain.utf8) + [UInt8(ascii: "\"")],
                    "a plain string of \(length) bytes")
            let escaped = plain + "\n"
            #expect(try JSONDecoder().decode(String.self, from: Data(try ValueCoding.encode(escaped))) == escaped,
                    "\(length) bytes and a newline")
        }
    }

    /// Integers held in place eight digits at a time (`packedInteger`) are the digits the
    /// text path writes: every number below 200,000 and its negative, every width's edges
    /// (10^k - 1, 10^k, 10^k + 1, either sign, across the split at eight digits and the 15-digit
    /// limit), and 300,000 random numbers of every width from one digit to nineteen.
    @Test func integersHeldInPlaceAreTheirDigits() {
        var mismatches: [Int64] = []
        func check(_ number: Int64) {
            if ValueCoding.packedInteger(number) != ValueCoding.withIntegerText(number, { PackedBytes($0) }) {
                mismatches.append(number)
            }
        }
        for number in Int64(0)..<200_000 {
            check(number)
            check(-number)
        }
        var power: Int64 = 1
        for _ in 0..<18 {
            power *= 10
            for number in [power - 1, power, power + 1] {
                check(number)
                check(-number)
            }
        }
        check(Int64.max)
        check(Int64.min)
        var random = SplitMix64(seed: 23)
        for _ in 0..<300_000 {
            check(Int64(bitPattern: random.next()) >> Int64(random.next() % 64))
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10))")
        for digits in 0...7 {
            #expect(String(decoding: withUnsafeBytes(of: ValueCoding.eightDigits(UInt64(digits) * 11_111_111).littleEndian) { Array($0) }, as: UTF8.self)
                    == String(repeating: Character(String(digits)), count: 8))
        }
    }

    /// A value written in place (`encodePacked`) is exactly the JSON `encode` writes, held in
    /// the pending write without an array when it fits: integers of every width and sign at the
    /// edges of the in-place limit, flags, strings of 0 to 20 bytes with and without escapes;
    /// and it decodes back the same from either form.
    @Test func valuesWrittenInPlaceAreTheSameJSON() throws {
        func check<Value: Codable & Equatable>(_ value: Value) throws {
            let packed = try ValueCoding.encodePacked(value)
            let array = try ValueCoding.encode(value)
            #expect(packed.array == array, "\(value)")
            #expect((packed.heapObjectAddress == nil) == (array.count <= PackedBytes.inlineCapacity), "\(value)")
            #expect(try ValueCoding.decode(Value.self, from: packed) == value, "\(value)")
            #expect(try ValueCoding.decode(Value.self, from: array) == value, "\(value)")
        }
        var numbers: [Int64] = [0, 1, -1, 9, 10, -10, Int64.max, Int64.min, Int64(Int32.max), Int64(Int32.min)]
        var power: Int64 = 1
        for _ in 0..<18 {
            power *= 10
            numbers += [power - 1, power, -(power - 1), -power]
        }
        var randomNumbers = SplitMix64(seed: 22)
        for _ in 0..<2_000 {
            // Every width from one digit to nineteen, either sign.
            let number = Int64(bitPattern: randomNumbers.next()) >> Int64(randomNumbers.next() % 64)
            numbers.append(number)
            #expect(ValueCoding.packedInteger(number) == ValueCoding.withIntegerText(number) { PackedBytes($0) }, "\(number)")
        }
        for number in numbers {
            try check(Int(number))
            try check(number)
            if let narrow = Int32(exactly: number) { try check(narrow) }
        }
        try check(true)
        try check(false)
        var random = SplitMix64(seed: 21)
        let alphabet: [Character] = ["a", "Z", "0", " ", "\"", "\\", "\n", "\u{1}", "é", "😀"]
        for length in 0...20 {
            try check(String(repeating: "x", count: length))
            for _ in 0..<20 {
                try check(String((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }))
            }
        }
        try check([1, 2, 3])
        try check(["key": "value"])
    }

    /// Strings of random bytes, escapes and non-ASCII characters encode to JSON that decodes back
    /// to the same string; a string with nothing to escape is itself between quotes.
    @Test func stringValuesRoundTripThroughJSON() throws {
        var random = SplitMix64(seed: 14)
        let alphabet: [Character] = ["a", "Z", "0", " ", "\"", "\\", "\n", "\t", "\u{1}", "\u{1F}", "/", "é", "€", "😀", "\u{7F}"]
        for _ in 0..<500 {
            let text = String((0..<Int(random.next() % 40)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            let encoded = try ValueCoding.encode(text)
            #expect(try JSONDecoder().decode(String.self, from: Data(encoded)) == text)
            if !text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) {
                #expect(encoded == [UInt8(ascii: "\"")] + Array(text.utf8) + [UInt8(ascii: "\"")])
            }
        }
    }
}
