import DecideCore

/// The layout of one insert of a `SetState` element (docs/replication.md, "Set dots"): an element
/// of the set's collection whose id is `FF 73 01`, the member's JSON length (varint) and bytes,
/// the inserting process's incarnation (8 bytes, big-endian), its sequence number (varint) and
/// its node id; whose value is `1`.
package enum SetDot {
    static let tag: [UInt8] = [ElementGroup.setDotTag.0, ElementGroup.setDotTag.1, ElementGroup.setDotTag.2]
    static let value = PackedBytes(Array("1".utf8))

    /// The element of insert `sequence` of `member` by process `incarnation` of `node`.
    static func element(member: [UInt8], incarnation: UInt64, sequence: UInt64, node: String) -> [UInt8] {
        var bytes = tag
        bytes.reserveCapacity(tag.count + 10 + member.count + 8 + 10 + node.utf8.count)
        ElementGroup.appendVarint(UInt64(member.count), to: &bytes)
        bytes += member
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: incarnation >> UInt64(shift))) }
        ElementGroup.appendVarint(sequence, to: &bytes)
        bytes += node.utf8
        return bytes
    }

    /// The group every dot of `member` shares (`ElementGroup`): the tag and the length-prefixed
    /// member, with no dot after it.
    static func group(of member: [UInt8]) -> [UInt8] {
        ElementGroup.memberGroup(tag: tag, member: member)
    }

    /// The member's JSON of dot `key`, or nil when `key` is no set dot.
    package static func member(of key: StateKey) -> [UInt8]? {
        key.packedElement.withUnsafeBytes { ElementGroup.member($0) }
    }
}

/// A set member's JSON bytes as a dictionary key (a decision's own inserts,
/// `Transaction.insertedDots`), hashed in one pass: `[UInt8]`'s own `hash(into:)` feeds the
/// hasher one byte at a time, about 3 % of a run of pipelined SADDs.
struct MemberBytes: Hashable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
