/// Whether two buffers of the same length hold the same bytes, compared eight at a time (the
/// byte-by-byte `elementsEqual` costs several times more on keys and node ids).
@inline(__always)
func sameBytes(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Bool {
    precondition(left.count == right.count, "sameBytes: buffers of different lengths")
    var offset = 0
    while offset + 8 <= left.count {
        guard left.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                == right.loadUnaligned(fromByteOffset: offset, as: UInt64.self) else { return false }
        offset += 8
    }
    while offset < left.count {
        guard left[offset] == right[offset] else { return false }
        offset += 1
    }
    return true
}
