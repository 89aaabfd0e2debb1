/// What the codec's two writers have in common, so a key and a value are encoded by one piece
/// of code whichever writes them: `WireWriter`, which grows its array (entry batches and the
/// other messages), and `WireCursor`, which fills memory already sized (deltas).
package protocol WireSink {
    mutating func writeUInt8(_ value: UInt8)
    mutating func writeUInt64(_ value: UInt64)
    /// A varint length, then the bytes.
    mutating func writeBytes(_ bytes: UnsafeRawBufferPointer)
    /// A varint length, then the UTF-8 bytes.
    mutating func writeString(_ text: String)
}

extension WireCursor: WireSink {}

extension WireWriter: WireSink {
    /// A varint length, then the bytes (`writeBytes(_:)` for a raw buffer).
    package mutating func writeBytes(_ bytes: UnsafeRawBufferPointer) {
        writeVarint(UInt64(bytes.count))
        writeRaw(bytes)
    }
}
