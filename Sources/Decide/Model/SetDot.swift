import DecideCore

/// The layout of one insert of a `SetState` element (docs/replication.md, "Set dots"): an element
/// of the set's collection whose id is `FF 73 01`, the member's JSON length (varint) and bytes,
/// the inserting process's incarnation (8 bytes, big-endian), its sequence number (varint) and
/// its node id; whose value is `1`.
package enum SetDot {
    static let tag: [UInt8] = [0xFF, 0x73, 0x01]
    static let value = PackedBytes(Array("1".utf8))

    /// The element of insert `sequence` of `member` by process `incarnation` of `node`.
    static func element(member: [UInt8], incarnation: UInt64, sequence: UInt64, node: String) -> [UInt8] {
        var bytes = tag
        bytes.reserveCapacity(tag.count + 10 + member.count + 8 + 10 + node.utf8.count)
        appendVarint(UInt64(member.count), to: &bytes)
        bytes += member
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: incarnation >> UInt64(shift))) }
        appendVarint(sequence, to: &bytes)
        bytes += node.utf8
        return bytes
    }

    /// The member's JSON of dot `key`, or nil when `key` is no set dot.
    package static func member(of key: StateKey) -> [UInt8]? {
        guard key.elementCount > tag.count + 1 else { return nil }
        let bytes = key.element
        guard bytes[0] == 0xFF, bytes[1] == 0x73, bytes[2] == 0x01 else { return nil }
        var index = tag.count
        var length: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count, shift < 64 {
            let byte = bytes[index]
            index += 1
            length |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
        }
        guard length <= UInt64(bytes.count - index) else { return nil }
        return Array(bytes[index..<index + Int(length)])
    }

    /// Whether `key` is a set dot.
    package static func isDot(_ key: StateKey) -> Bool {
        key.elementCount > tag.count && key.packedElement.withUnsafeBytes { $0[0] == 0xFF && $0[1] == 0x73 && $0[2] == 0x01 }
    }

    private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }
}
