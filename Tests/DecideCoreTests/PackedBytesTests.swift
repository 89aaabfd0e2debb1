@testable import DecideCore
import Testing

/// `PackedBytes`: byte strings of every length around the in-place limit read back exactly,
/// and compare equal to exactly themselves.
@Suite struct PackedBytesTests {
    @Test func everyLengthReadsBackAndComparesExactly() {
        forEachSeed(0..<20) { seed, gen in
            for length in 0...40 {
                let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: gen.int(0...255)) }
                let packed = PackedBytes(bytes)
                #expect(packed.count == length, "seed \(seed) length \(length)")
                #expect(packed.array == bytes, "seed \(seed) length \(length)")
                #expect(packed.withUnsafeBytes { Array($0) } == bytes)
                #expect(packed.equals(bytes))
                #expect(bytes.withUnsafeBytes { PackedBytes($0) } == packed, "the two initialisers agree")
                // One byte more, one byte less, and the last byte changed are all different.
                #expect(!packed.equals(bytes + [0]), "seed \(seed) length \(length): a trailing zero byte")
                if length > 0 {
                    #expect(!packed.equals(Array(bytes.dropLast())))
                    var changed = bytes
                    changed[length - 1] ^= 0x01
                    #expect(!packed.equals(changed))
                    #expect(PackedBytes(changed) != packed)
                }
            }
        }
    }

    /// Bytes lent from inside a larger buffer, at every offset and length around the in-place
    /// limit, are held as exactly those bytes: the words are loaded in place without reading
    /// past either end.
    @Test func bytesLentAtAnyOffsetAreHeldExactly() {
        var random = SplitMix64(seed: 41)
        let buffer = (0..<64).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        buffer.withUnsafeBytes { whole in
            for offset in 0..<8 {
                for length in 0...20 {
                    let part = UnsafeRawBufferPointer(rebasing: whole[offset ..< offset + length])
                    let packed = PackedBytes(part)
                    #expect(packed.array == Array(part), "offset \(offset) length \(length)")
                    #expect(packed.equals(part) && packed == PackedBytes(Array(part)), "offset \(offset) length \(length)")
                }
            }
        }
    }

    /// A digest contribution hashes a value from its words when it is held in place: the same
    /// hash as its bytes give, at every length on either side of the limit.
    @Test func packedBytesHashAsTheirBytes() {
        var random = SplitMix64(seed: 43)
        for length in 0...80 {
            for _ in 0..<50 {
                let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                let fromBytes = bytes.withUnsafeBytes { DigestHash.value($0) }
                #expect(DigestHash.value(PackedBytes(bytes)) == fromBytes, "length \(length)")
            }
        }
    }

    /// Held in place or in an array, byte strings order as their bytes do (a prefix first), and
    /// only an array has an object a prefetch hint may name.
    @Test func orderIsTheBytesOrderOnEitherSideOfTheInlineLimit() {
        forEachSeed(0..<40) { seed, gen in
            for _ in 0..<200 {
                // A shared prefix often, so long and short strings meet at every length.
                let prefix = gen.bytes(maxCount: 18)
                let left = prefix + gen.bytes(maxCount: gen.int(0...1) == 0 ? 2 : 20)
                let right = prefix + gen.bytes(maxCount: gen.int(0...1) == 0 ? 2 : 20)
                #expect(PackedBytes(left).lexicographicallyPrecedes(PackedBytes(right)) == left.lexicographicallyPrecedes(right),
                        "seed \(seed): \(left) against \(right)")
            }
            let bytes = gen.bytes(maxCount: 40)
            #expect((PackedBytes(bytes).heapObjectAddress != nil) == (bytes.count > PackedBytes.inlineCapacity))
        }
    }

    @Test func stringsCompareByTheirUTF8() {
        for text in ["", "k", "key:000000012345", "exactly-sixteen!", "seventeen bytes!!", "naïve – ünïcödé keys", String(repeating: "x", count: 300)] {
            let packed = PackedBytes(Array(text.utf8))
            #expect(packed.equals(utf8: text))
            #expect(!packed.equals(utf8: text + " "))
            #expect(String(decoding: packed.array, as: UTF8.self) == text)
        }
    }
}
