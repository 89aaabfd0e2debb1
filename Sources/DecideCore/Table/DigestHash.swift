/// The hash an entry contributes to the digest (`StateDigest.contribution`), built for a short
/// chain of dependent instructions: every write computes one, under the node's lock.
///
/// `StableHash` mixes one word after another, each through two multiplications and three
/// shifts that wait on the one before: five words (key, timestamp, node, flags, a short value)
/// were a chain of about 75 cycles, and a 66-byte value nine more links. Here independent
/// terms are each one full-width multiplication of two words, folded to 64 bits
/// (`fold`), XORed, then spread once by the SplitMix finaliser; a value takes one
/// multiplication per 16 bytes. docs/design/0006-entry-table-layout.md, "The digest
/// contribution: independent terms".
///
/// The same on every node, process and run (protocol version 3 and later; version 2 used
/// `StableHash` and compared different numbers). Not cryptographic: two different entries of
/// one key give the same contribution with probability about 2^-64, and that is all the digest
/// needs. A product is zero when one factor is, so every factor is a word XORed with a constant:
/// for timestamps, expiry times and flags the constants have their top bit set, which those
/// words never reach, so those factors are never zero.
package enum DigestHash {
    static let keyConstant: UInt64 = 0x9E37_79B9_7F4A_7C15
    static let timestampConstant: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let nodeConstant: UInt64 = 0x1656_67B1_9E37_79F9
    static let valueConstant: UInt64 = 0xD6E8_FEB8_6659_FD93
    static let flagsConstant: UInt64 = 0xFF51_AFD7_ED55_8CCD
    static let expiryConstant: UInt64 = 0xC4CE_B9FE_1A85_EC53

    /// The 128-bit product of `a` and `b`, its halves XORed: every bit of either factor moves
    /// bits of the result, in one multiplication.
    @inline(__always)
    static func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let product = a.multipliedFullWidth(by: b)
        return product.high ^ product.low
    }

    /// `StateDigest.contribution`: the key's stable hash and the version's timestamp in one
    /// term, the writing node and the value in a second, the value's flags and expiry in a third.
    /// A tombstone has no third term and a value hash of zero; a value always has flag 1 set,
    /// so its third term is never zero.
    @inline(__always)
    static func entry(keyHash: UInt64, timestamp: UInt64, nodeHash: UInt64,
                      value: PackedBytes?, flags: UInt64, expiresAt: UInt64?) -> UInt64 {
        let version = fold(keyHash ^ keyConstant, timestamp ^ timestampConstant)
        guard let value else { return StableHash.mix(version ^ fold(nodeHash ^ nodeConstant, valueConstant)) }
        let meta = expiresAt.map { fold(flags ^ flagsConstant, $0 ^ expiryConstant) } ?? flags &* flagsConstant
        return StableHash.mix(version ^ fold(nodeHash ^ nodeConstant, Self.value(value) ^ valueConstant) ^ meta)
    }

    /// A value's bytes hashed: the same for the same bytes however they are held.
    @inline(__always)
    package static func value(_ packed: PackedBytes) -> UInt64 {
        switch packed {
        case let .inline(low, high, count): return short(low, high, count: UInt64(count))
        case .heap(let bytes): return bytes.withUnsafeBytes { value($0) }
        }
    }

    /// The same as `value(_:)` of `PackedBytes(bytes)`.
    package static func value(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let count = bytes.count
        guard count > PackedBytes.inlineCapacity, let base = bytes.baseAddress else {
            guard case let .inline(low, high, count) = PackedBytes(bytes) else { preconditionFailure("short bytes are held in place") }
            return short(low, high, count: UInt64(count))
        }
        // Sixteen bytes a step, each step's product feeding the next; the last 16 bytes are
        // loaded from the end (overlapping the last whole step when the count is not a
        // multiple of 16), so no byte is loaded one at a time. The count is in the seed.
        var hash = UInt64(count) &* keyConstant ^ nodeConstant
        var offset = 0
        while offset &+ 16 < count {
            hash = fold(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) ^ timestampConstant,
                        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset &+ 8, as: UInt64.self)) ^ hash)
            offset &+= 16
        }
        return fold(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: count &- 16, as: UInt64.self)) ^ expiryConstant,
                    UInt64(littleEndian: base.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)) ^ hash)
    }

    /// Up to 16 bytes as `PackedBytes` holds them (two zero-padded words): the count is a term
    /// of its own, so "ab" and "ab\0" differ although their words are equal.
    @inline(__always)
    private static func short(_ low: UInt64, _ high: UInt64, count: UInt64) -> UInt64 {
        fold(low ^ timestampConstant, high ^ flagsConstant) ^ count &* valueConstant
    }
}
