/// The `count` (0 to 7) bytes at `base` as a little-endian word, zero-padded, read in place and
/// never past `base + count`, with at most three loads instead of one a byte: two overlapping
/// four-byte loads for four to seven; the first, middle and last byte for one to three
/// (overlapping bytes are the same, so or-ing them in twice changes nothing). What `StableHash`
/// mixes for a buffer's last bytes and `PackedBytes` holds for short ones.
@inline(__always)
func littleEndianTail(_ base: UnsafeRawPointer, count: Int) -> UInt64 {
    assert(count >= 0 && count < 8, "littleEndianTail: \(count) bytes")
    if count >= 4 {
        let low = UInt64(UInt32(littleEndian: base.loadUnaligned(as: UInt32.self)))
        let high = UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: count &- 4, as: UInt32.self)))
        return low | high &<< UInt64(8 &* (count &- 4))
    }
    if count == 0 { return 0 }
    let middle = count &>> 1
    return UInt64(base.load(as: UInt8.self))
        | UInt64(base.load(fromByteOffset: middle, as: UInt8.self)) &<< UInt64(8 &* middle)
        | UInt64(base.load(fromByteOffset: count &- 1, as: UInt8.self)) &<< UInt64(8 &* (count &- 1))
}
