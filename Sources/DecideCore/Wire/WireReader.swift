/// Reads what `WireWriter` writes, checking every length against the input and the limits.
///
/// Guarantees: never reads past the end of the input; never allocates more than a limit allows
/// or than the remaining input could fill; every failure is a `WireDecodeError`.
package struct WireReader {
    private let bytes: UnsafeRawBufferPointer
    public private(set) var position: Int

    /// Reads `bytes` in place, from `position`; they must stay valid while the reader is used
    /// (`withWireBytes` lends an array's).
    public init(_ bytes: UnsafeRawBufferPointer, position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    /// The input not read yet, in place.
    package var rest: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[position...]) }

    public var remaining: Int { bytes.count - position }

    @inline(__always)
    public mutating func readUInt8(_ field: String) throws(WireDecodeError) -> UInt8 {
        try need(1, field)
        defer { position += 1 }
        return bytes.load(fromByteOffset: position, as: UInt8.self)
    }

    public mutating func readUInt16(_ field: String) throws(WireDecodeError) -> UInt16 {
        UInt16(truncatingIfNeeded: try readLittleEndian(byteCount: 2, field))
    }

    public mutating func readUInt32(_ field: String) throws(WireDecodeError) -> UInt32 {
        UInt32(truncatingIfNeeded: try readLittleEndian(byteCount: 4, field))
    }

    public mutating func readUInt64(_ field: String) throws(WireDecodeError) -> UInt64 {
        try readLittleEndian(byteCount: 8, field)
    }

    /// A varint. Lengths, counts and flags on the wire are almost always below 128, one byte:
    /// that case is read inline, anything else (longer, malformed, truncated) by
    /// `readLongVarint` from the same position, so every input reads or fails as before.
    @inline(__always)
    public mutating func readVarint(_ field: String) throws(WireDecodeError) -> UInt64 {
        if position < bytes.count {
            let byte = bytes.load(fromByteOffset: position, as: UInt8.self)
            if byte < 0x80 {
                position &+= 1
                return UInt64(byte)
            }
        }
        return try readLongVarint(field)
    }

    @inline(never)
    private mutating func readLongVarint(_ field: String) throws(WireDecodeError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try readUInt8(field)
            if shift == 63 && byte > 1 { throw .malformedVarint(field: field) }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                // Minimal encodings only (no trailing zero groups), so every value has one encoding.
                if byte == 0 && shift > 0 { throw .malformedVarint(field: field) }
                return result
            }
            shift += 7
            if shift > 63 { throw .malformedVarint(field: field) }
        }
    }

    /// A count of items that will each take at least `minimumItemBytes` of the remaining input.
    public mutating func readCount(_ field: String, limit: Int, minimumItemBytes: Int) throws(WireDecodeError) -> Int {
        let count = try readVarint(field)
        guard count <= UInt64(limit) else { throw .tooLarge(field: field, length: count, limit: limit) }
        let needed = Int(count) * max(minimumItemBytes, 1)
        guard needed <= remaining else { throw .truncated(field: field, needed: needed - remaining) }
        return Int(count)
    }

    /// A length-prefixed byte string where it lies in the input, valid as long as the input is
    /// (a caller that keeps it copies it: `PackedBytes(_:)` copies a long one into an array).
    @inline(__always)
    package mutating func readBytesInPlace(_ field: String, limit: Int) throws(WireDecodeError) -> UnsafeRawBufferPointer {
        let length = try readVarint(field)
        guard length <= UInt64(limit) else { throw .tooLarge(field: field, length: length, limit: limit) }
        try need(Int(length), field)
        defer { position += Int(length) }
        guard length > 0, let base = bytes.baseAddress else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base + position, count: Int(length))
    }

    public mutating func readString(_ field: String, limit: Int) throws(WireDecodeError) -> String {
        try readString(field, limit: limit, reusing: nil).text
    }

    /// `readString`, answering `known` itself when the bytes are exactly its UTF-8 (`reused`): a
    /// string a peer sends again and again (its node id, a collection's name) is then neither
    /// validated nor built again.
    package mutating func readString(_ field: String, limit: Int, reusing known: String?) throws(WireDecodeError) -> (text: String, reused: Bool) {
        let length = try readVarint(field)
        guard length <= UInt64(limit) else { throw .tooLarge(field: field, length: length, limit: limit) }
        try need(Int(length), field)
        let start = position
        position += Int(length)
        // Straight from the input, without an intermediate array. Decoding repairs invalid UTF-8,
        // so a string that does not read back as its bytes was not valid UTF-8.
        let raw = UnsafeRawBufferPointer(start: bytes.baseAddress.map { $0 + start }, count: Int(length))
        if var known, known.utf8.count == raw.count, known.withUTF8({ sameBytes(UnsafeRawBufferPointer($0), raw) }) {
            return (known, true)
        }
        let text = String(decoding: raw, as: UTF8.self)
        if raw.allSatisfy({ $0 < 0x80 }) || text.utf8.elementsEqual(raw) { return (text, false) }
        throw .invalidUTF8(field: field)
    }

    /// A string's bytes where they lie in the input, checked to be UTF-8 unless they are exactly
    /// `known` (bytes checked before: a peer's node id, a name it sends again and again).
    package mutating func readUTF8InPlace(_ field: String, limit: Int, known: UnsafeRawBufferPointer?) throws(WireDecodeError) -> UnsafeRawBufferPointer {
        try readUTF8InPlace(field, limit: limit, matching: known).bytes
    }

    /// `readUTF8InPlace(_:limit:known:)`, saying whether the bytes were exactly `known`.
    package mutating func readUTF8InPlace(_ field: String, limit: Int, matching known: UnsafeRawBufferPointer?)
        throws(WireDecodeError) -> (bytes: UnsafeRawBufferPointer, sameAsKnown: Bool) {
        let raw = try readBytesInPlace(field, limit: limit)
        if let known, known.count == raw.count, raw.isEmpty || sameBytes(known, raw) { return (raw, true) }
        guard isUTF8(raw) else { throw .invalidUTF8(field: field) }
        return (raw, false)
    }

    /// Whether `raw` is valid UTF-8: ASCII eight bytes at a time, anything else by decoding it
    /// (decoding repairs invalid UTF-8, so bytes that do not read back were not valid).
    private func isUTF8(_ raw: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset + 8 <= raw.count {
            guard raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 else {
                return String(decoding: raw, as: UTF8.self).utf8.elementsEqual(raw)
            }
            offset += 8
        }
        while offset < raw.count {
            guard raw[offset] < 0x80 else { return String(decoding: raw, as: UTF8.self).utf8.elementsEqual(raw) }
            offset += 1
        }
        return true
    }

    /// Throws unless the whole input has been read.
    public func expectEnd() throws(WireDecodeError) {
        if remaining != 0 { throw .trailingBytes(count: remaining) }
    }

    @inline(__always)
    private mutating func need(_ count: Int, _ field: String) throws(WireDecodeError) {
        if count > remaining { try truncated(count, field) }
    }

    /// The error of `need`, out of line: building it is never the hot path.
    @inline(never)
    private func truncated(_ count: Int, _ field: String) throws(WireDecodeError) {
        throw .truncated(field: field, needed: count - remaining)
    }

    private mutating func readLittleEndian(byteCount: Int, _ field: String) throws(WireDecodeError) -> UInt64 {
        try need(byteCount, field)
        defer { position += byteCount }
        if byteCount == 8 {
            return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
        }
        var value: UInt64 = 0
        for index in 0..<byteCount {
            value |= UInt64(bytes.load(fromByteOffset: position + index, as: UInt8.self)) << UInt64(8 * index)
        }
        return value
    }
}

/// Runs `body` over the storage of `bytes` (a `WireReader` reads it in place) and passes on its
/// typed error, which `Array.withUnsafeBytes` would widen to `any Error`.
package func withWireBytes<Result>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(WireDecodeError) -> Result)
    throws(WireDecodeError) -> Result {
    let outcome: Swift.Result<Result, WireDecodeError> = bytes.withUnsafeBytes { raw in
        do throws(WireDecodeError) { return .success(try body(raw)) } catch { return .failure(error) }
    }
    return try outcome.get()
}
