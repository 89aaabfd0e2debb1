/// Appends little-endian integers, LEB128 varints and length-prefixed byte strings to a buffer.
package struct WireWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(reservingCapacity capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func writeUInt8(_ value: UInt8) { bytes.append(value) }

    public mutating func writeUInt16(_ value: UInt16) { writeLittleEndian(UInt64(value), byteCount: 2) }

    public mutating func writeUInt32(_ value: UInt32) { writeLittleEndian(UInt64(value), byteCount: 4) }

    public mutating func writeUInt64(_ value: UInt64) { writeLittleEndian(value, byteCount: 8) }

    /// Unsigned LEB128: 7 bits a byte, low bits first, high bit set on every byte but the last.
    public mutating func writeVarint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// A varint length, then the bytes.
    public mutating func writeBytes<Bytes: Collection<UInt8>>(_ value: Bytes) {
        writeVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A varint length, then the UTF-8 bytes (copied in one piece from the string's storage).
    public mutating func writeString(_ value: String) {
        var value = value
        value.withUTF8 { writeBytes($0) }
    }

    /// The bytes as they are, with no length.
    public mutating func writeRaw<Bytes: Sequence<UInt8>>(_ value: Bytes) { bytes.append(contentsOf: value) }

    /// The low `byteCount` bytes of `value`, copied in one piece (a byte-by-byte copy of a
    /// slice cost more than the rest of a delta's header).
    private mutating func writeLittleEndian(_ value: UInt64, byteCount: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            raw.withMemoryRebound(to: UInt8.self) { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0[0..<byteCount])) }
        }
    }
}
