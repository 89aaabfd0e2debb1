/// A 64-bit hash that is the same on every node, process and run (Swift's `Hasher` is seeded
/// per process, so it cannot be used for digests that are compared between nodes).
///
/// Not cryptographic: it spreads keys over digest buckets and makes accidental digest
/// collisions unlikely (2^-64 per comparison), nothing more.
package struct StableHash {
    private var state: UInt64

    package init(seed: UInt64 = 0x9E37_79B9_7F4A_7C15) { state = seed }

    /// Mixes the bytes in; the length is mixed too, so ("ab","c") and ("a","bc") differ.
    package mutating func combine<Bytes: Collection<UInt8>>(bytes: Bytes) {
        if let done: Void = bytes.withContiguousStorageIfAvailable({ combine(buffer: UnsafeRawBufferPointer($0)) }) {
            return done
        }
        var word: UInt64 = 0
        var shift: UInt64 = 0
        for byte in bytes {
            word |= UInt64(byte) << shift
            shift += 8
            if shift == 64 {
                combine(word)
                word = 0
                shift = 0
            }
        }
        combine(word ^ (UInt64(bytes.count) << 56))
    }

    /// The same result as `combine(bytes:)` over the same bytes, eight at a time; the last zero
    /// to seven are gathered with at most three loads (`littleEndianTail`).
    package mutating func combine(buffer: UnsafeRawBufferPointer) {
        let count = buffer.count
        guard let base = buffer.baseAddress, count > 0 else { return combine(0) }
        var offset = 0
        while offset &+ 8 <= count {
            combine(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            offset &+= 8
        }
        combine(littleEndianTail(base + offset, count: count &- offset) ^ (UInt64(count) &<< 56))
    }

    package mutating func combine(_ word: UInt64) {
        state = Self.mix(state ^ word &* 0xBF58_476D_1CE4_E5B9)
    }

    package var value: UInt64 { Self.mix(state) }

    /// The finaliser of SplitMix64: a bijection that spreads every input bit over the output.
    @inline(__always)
    package static func mix(_ input: UInt64) -> UInt64 {
        var z = input &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
