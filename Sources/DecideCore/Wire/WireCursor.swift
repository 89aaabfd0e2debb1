/// Writes what `WireWriter` writes, the same bytes, into memory already sized for them: the
/// encoder of the delta path, where a frame's size is known before its first byte (an array's
/// append checked the capacity, the uniqueness and the retain count of its storage for every
/// field, which cost more than the bytes themselves).
///
/// Guarantees: never writes past the end it was given; a write that would traps, because the
/// size it was given was computed by this package from the same values (`WireCodec.encodedBytes`),
/// never from a peer's input.
package struct WireCursor {
    private var next: UnsafeMutableRawPointer
    private let end: UnsafeMutableRawPointer

    package init(_ buffer: UnsafeMutableRawBufferPointer) {
        next = buffer.baseAddress!
        end = next + buffer.count
    }

    /// The bytes not yet written.
    package var remaining: Int { end - next }

    package mutating func writeUInt8(_ value: UInt8) {
        precondition(next < end, "WireCursor: the size computed for a frame was too small")
        next.storeBytes(of: value, as: UInt8.self)
        next += 1
    }

    package mutating func writeUInt64(_ value: UInt64) {
        precondition(end - next >= 8, "WireCursor: the size computed for a frame was too small")
        next.storeBytes(of: value.littleEndian, toByteOffset: 0, as: UInt64.self)
        next += 8
    }

    /// Unsigned LEB128, as `WireWriter.writeVarint`. A value below 128 (most lengths, counts
    /// and flags) is one byte, written inline; a longer one by `writeLongVarint`.
    @inline(__always)
    package mutating func writeVarint(_ value: UInt64) {
        if value < 0x80, next < end {
            next.storeBytes(of: UInt8(truncatingIfNeeded: value), as: UInt8.self)
            next += 1
            return
        }
        writeLongVarint(value)
    }

    @inline(never)
    private mutating func writeLongVarint(_ value: UInt64) {
        precondition(end - next >= Self.varintBytes(value), "WireCursor: the size computed for a frame was too small")
        var rest = value
        while rest >= 0x80 {
            next.storeBytes(of: UInt8(truncatingIfNeeded: rest) | 0x80, as: UInt8.self)
            next += 1
            rest >>= 7
        }
        next.storeBytes(of: UInt8(rest), as: UInt8.self)
        next += 1
    }

    /// A varint length, then the bytes, as `WireWriter.writeBytes`.
    package mutating func writeBytes(_ bytes: UnsafeRawBufferPointer) {
        writeVarint(UInt64(bytes.count))
        precondition(end - next >= bytes.count, "WireCursor: the size computed for a frame was too small")
        if let base = bytes.baseAddress, bytes.count > 0 { next.copyMemory(from: base, byteCount: bytes.count) }
        next += bytes.count
    }

    /// A varint length, then the string's UTF-8 bytes, as `WireWriter.writeString`.
    package mutating func writeString(_ text: String) {
        // A native string's bytes are lent where they lie; `withUTF8` would want a mutable
        // copy first (a retain and release a name, two a delta).
        if let done: Void = text.utf8.withContiguousStorageIfAvailable({ writeBytes(UnsafeRawBufferPointer($0)) }) { return done }
        var text = text
        text.withUTF8 { writeBytes(UnsafeRawBufferPointer($0)) }
    }

    /// How many bytes `writeVarint(value)` writes.
    @inline(__always)
    package static func varintBytes(_ value: UInt64) -> Int {
        // One byte per started group of seven bits; zero takes one byte.
        (64 - (value | 1).leadingZeroBitCount + 6) / 7
    }
}
