/// The binary encoding of deltas and entry batches (docs/protocol.md, "Payloads").
///
/// Layout: `u8 format (= 1)`, `u8 kind` (1 delta, 2 entry batch), then the body, all integers
/// little-endian, lengths and counts as LEB128 varints.
/// - delta: `u64 timestamp`, `str node`, `varint n`, n × (`str name`, `bytes element`, value).
/// - entry batch: `varint n`, n × (`str name`, `bytes element`, `u64 timestamp`, `str node`,
///   value).
/// - value: `u8 flags`: 0 a tombstone; otherwise bit 0 (set), bit 1 the value expires, bit 2
///   the writing node owns it; then `bytes value`, and `u64 expiresAtMilliseconds`
///   (1 ... 2^48 - 1) when bit 1 is set. Any other flags byte is refused (`invalidFlag`); a
///   node older than expiring and owned keys refuses every flags byte but 0 and 1, so a
///   cluster is upgraded before it uses them.
///
/// Guarantees: `decode(encode(x)) == x`; any other input, including every truncation of a
/// valid encoding and any length over `Limits`, throws a `WireDecodeError`.
public struct WireCodec: Sendable {
    /// Upper bounds the decoder enforces before it allocates.
    public struct Limits: Hashable, Sendable {
        public var maxNodeIDBytes = 255
        public var maxNameBytes = 1024
        public var maxElementBytes = 64 * 1024
        public var maxValueBytes = 1024 * 1024
        public var maxEntriesPerMessage = 1 << 20
        public init() {}
    }

    public static let format: UInt8 = 1
    public static let deltaKind: UInt8 = 1
    public static let entryBatchKind: UInt8 = 2

    public let limits: Limits

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// The most bytes one entry takes in an entry batch, from the sizes of its parts: the
    /// parts themselves, the timestamp, presence flag and expiry, and four lengths as 5-byte
    /// varints.
    public static func maxEncodedEntryBytes(nameBytes: Int, elementBytes: Int, nodeBytes: Int, valueBytes: Int) -> Int {
        nameBytes + elementBytes + nodeBytes + valueBytes + 8 + 1 + 8 + 4 * 5
    }

    public func encode(_ delta: Delta) -> [UInt8] {
        var writer = WireWriter(reservingCapacity: Self.estimatedBytes(of: delta))
        encode(delta, into: &writer)
        return writer.bytes
    }

    /// Appends `delta`'s encoding to `writer` (a message that carries a delta writes it in
    /// place, with no intermediate array).
    public func encode(_ delta: Delta, into writer: inout WireWriter) {
        writer.writeUInt8(Self.format)
        writer.writeUInt8(Self.deltaKind)
        writer.writeUInt64(delta.version.timestamp.rawValue)
        writer.writeString(delta.version.node)
        writer.writeVarint(UInt64(delta.writes.count))
        for write in delta.writes {
            writeKey(write.key, into: &writer)
            writeValue(write.value, expiresAt: write.expiresAtMilliseconds, owned: write.ownedByWriter, into: &writer)
        }
    }

    /// About the bytes `delta` encodes to (a little more, so one allocation holds it).
    public static func estimatedBytes(of delta: Delta) -> Int {
        var bytes = 24 + delta.version.node.utf8.count
        for write in delta.writes {
            bytes += 20 + write.key.name.utf8.count + write.key.element.count + (write.value?.count ?? 0)
        }
        return bytes
    }

    /// Decodes the delta that starts at byte `position` of `bytes` and runs to their end (a
    /// frame's payload after its type byte is read in place, not copied out first).
    public func decodeDelta(_ bytes: [UInt8], from position: Int = 0) throws(WireDecodeError) -> Delta {
        var reader = WireReader(bytes, position: position)
        try readHeader(&reader, kind: Self.deltaKind)
        let version = try readVersion(&reader)
        let count = try reader.readCount("delta.count", limit: limits.maxEntriesPerMessage, minimumItemBytes: 3)
        var writes: [Delta.Write] = []
        writes.reserveCapacity(count)
        for _ in 0..<count {
            let key = try readKey(&reader)
            let value = try readValue(&reader)
            writes.append(Delta.Write(key: key, value: value.bytes, expiresAtMilliseconds: value.expiresAt, ownedByWriter: value.owned))
        }
        try reader.expectEnd()
        return Delta(version: version, writes: writes)
    }

    public func encode(_ entries: [KeyedEntry]) -> [UInt8] {
        var writer = WireWriter(reservingCapacity: 8 + entries.count * 64)
        writer.writeUInt8(Self.format)
        writer.writeUInt8(Self.entryBatchKind)
        writer.writeVarint(UInt64(entries.count))
        for item in entries {
            writeKey(item.key, into: &writer)
            writer.writeUInt64(item.entry.version.timestamp.rawValue)
            writer.writeString(item.entry.version.node)
            writeValue(item.entry.value, expiresAt: item.entry.expiresAtMilliseconds, owned: item.entry.ownedByWriter, into: &writer)
        }
        return writer.bytes
    }

    public func decodeEntries(_ bytes: [UInt8]) throws(WireDecodeError) -> [KeyedEntry] {
        var reader = WireReader(bytes)
        try readHeader(&reader, kind: Self.entryBatchKind)
        let count = try reader.readCount("entries.count", limit: limits.maxEntriesPerMessage, minimumItemBytes: 12)
        var entries: [KeyedEntry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let key = try readKey(&reader)
            let version = try readVersion(&reader)
            let value = try readValue(&reader)
            entries.append(KeyedEntry(key: key, entry: Entry(version: version, value: value.bytes, expiresAtMilliseconds: value.expiresAt,
                                                             ownedByWriter: value.owned)))
        }
        try reader.expectEnd()
        return entries
    }

    private func writeKey(_ key: StateKey, into writer: inout WireWriter) {
        writer.writeString(key.name)
        writer.writeBytes(key.element)
    }

    private static let presentFlag: UInt8 = 1
    private static let expiresFlag: UInt8 = 2
    private static let ownedFlag: UInt8 = 4

    private func writeValue(_ value: [UInt8]?, expiresAt: UInt64?, owned: Bool, into writer: inout WireWriter) {
        guard let value else {
            writer.writeUInt8(0)
            return
        }
        writer.writeUInt8(Self.presentFlag | (expiresAt == nil ? 0 : Self.expiresFlag) | (owned ? Self.ownedFlag : 0))
        writer.writeBytes(value)
        if let expiresAt { writer.writeUInt64(expiresAt) }
    }

    private func readHeader(_ reader: inout WireReader, kind: UInt8) throws(WireDecodeError) {
        let format = try reader.readUInt8("format")
        guard format == Self.format else { throw .unsupportedFormat(format) }
        let found = try reader.readUInt8("kind")
        guard found == kind else { throw .unexpectedKind(expected: kind, found: found) }
    }

    private func readVersion(_ reader: inout WireReader) throws(WireDecodeError) -> Version {
        let timestamp = HLCTimestamp(rawValue: try reader.readUInt64("version.timestamp"))
        let node = try reader.readString("version.node", limit: limits.maxNodeIDBytes)
        return Version(timestamp: timestamp, node: node)
    }

    private func readKey(_ reader: inout WireReader) throws(WireDecodeError) -> StateKey {
        let name = try reader.readString("key.name", limit: limits.maxNameBytes)
        let element = try reader.readBytes("key.element", limit: limits.maxElementBytes)
        return StateKey(name: name, element: element)
    }

    private func readValue(_ reader: inout WireReader) throws(WireDecodeError) -> (bytes: [UInt8]?, expiresAt: UInt64?, owned: Bool) {
        let flags = try reader.readUInt8("value.present")
        guard flags != 0 else { return (nil, nil, false) }
        guard flags & Self.presentFlag != 0, flags & ~(Self.presentFlag | Self.expiresFlag | Self.ownedFlag) == 0 else {
            throw .invalidFlag(field: "value.present", value: flags)
        }
        let bytes = try reader.readBytes("value.bytes", limit: limits.maxValueBytes)
        var expiresAt: UInt64?
        if flags & Self.expiresFlag != 0 {
            let instant = try reader.readUInt64("value.expiresAt")
            guard (1...HLCTimestamp.maxPhysicalMilliseconds).contains(instant) else {
                throw .outOfRange(field: "value.expiresAt", value: instant)
            }
            expiresAt = instant
        }
        return (bytes, expiresAt, flags & Self.ownedFlag != 0)
    }
}
