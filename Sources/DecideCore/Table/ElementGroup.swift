/// The group an element id belongs to, for elements laid out as groups, so that `EntryTable`
/// lists a group's elements without a scan of their collection:
/// - a set's dots (docs/replication.md, "Set dots"), whose ids are `FF 73 01`, a varint length L
///   and L bytes of the member, then the dot itself: the group is those first bytes, shared by
///   every dot of one member (docs/design/0002-sets.md);
/// - a counter's slots (`FF 63 01 …`) and its base slots (`FF 62 01 …`): the group is the three
///   tag bytes, so a counter's total reads its slots only, whatever else shares its name;
/// - a hash's counter field's slots (`FF 68 01`) and base slots (`FF 66 01`), laid out as set dots
///   are, the field's JSON in place of the member: the group is one field's slots of one kind
///   (docs/design/0001-counters.md, "Counter fields of a hash").
///
/// A sorted set's member (`FF 7A 01` and the member, docs/replication.md, "Sorted set members")
/// is compound but has no group: it is one record, found by its key, and a range reads the
/// collection (a group of a whole sorted set would make each removal O(members)).
///
/// Any other id, and a dot id whose length runs past its end, has no group: a peer's malformed
/// id is stored as an element like any other, never trusted.
package enum ElementGroup {
    /// The first three bytes of a set dot's id.
    package static let setDotTag: (UInt8, UInt8, UInt8) = (0xFF, 0x73, 0x01)
    /// The second byte of a counter slot's id (`FF 63 01`) and of a base slot's (`FF 62 01`).
    package static let counterSlotKind: UInt8 = 0x63
    package static let counterBaseKind: UInt8 = 0x62
    /// The second byte of a hash counter field's slot's id (`FF 68 01`) and of its base slot's
    /// (`FF 66 01`).
    package static let fieldSlotKind: UInt8 = 0x68
    package static let fieldBaseKind: UInt8 = 0x66
    /// The second byte of a sorted set member's id (`FF 7A 01`).
    package static let scoredMemberKind: UInt8 = 0x7A
    /// The second byte of a lifetime marker's id (`FF 6C 01 00`: a whole set's, hash's, sorted
    /// set's or counter's lifetime, docs/design/0004-collection-lifetimes.md). No group.
    package static let lifetimeMarkerKind: UInt8 = 0x6C

    /// Whether element id `bytes` is of a kind laid out on a collection (a counter's slot, a
    /// set's dot): `FF kind 01` and more, which no JSON text starts with (0xFF is never UTF-8).
    @inline(__always)
    package static func isCompound(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count > 3 && bytes[0] == 0xFF && bytes[2] == 0x01
    }

    /// The length of `bytes`'s group prefix (a set dot's tag, varint and member; a counter slot's
    /// tag), or nil when `bytes` is no grouped id. The varint is at most 5 bytes (a length under
    /// 2^35) and must fit.
    @inline(__always)
    package static func prefixLength(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= 3, bytes[0] == 0xFF, bytes[2] == 0x01 else { return nil }
        if bytes[1] == counterSlotKind || bytes[1] == counterBaseKind { return 3 }
        guard bytes.count > 3, isMemberGrouped(bytes[1]) else { return nil }
        var index = 3
        var length = 0
        var shift = 0
        while true {
            guard index < bytes.count, shift < 35 else { return nil }
            let byte = bytes[index]
            index += 1
            length |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
        }
        guard length <= bytes.count - index else { return nil }
        return index + length
    }

    /// Whether ids of kind `kind` are grouped by a varint-prefixed member after the tag: a set's
    /// dots, a hash counter field's slots and base slots.
    @inline(__always)
    package static func isMemberGrouped(_ kind: UInt8) -> Bool {
        kind == setDotTag.1 || kind == fieldSlotKind || kind == fieldBaseKind
    }

    /// The group prefix of `member` under `tag` (the three bytes of a member-grouped kind,
    /// `isMemberGrouped`): the tag, the member's length as an unsigned LEB128 varint, the
    /// member. `prefixLength` and `groupedMember` read it back.
    package static func memberGroup(tag: [UInt8], member: [UInt8]) -> [UInt8] {
        var bytes = tag
        bytes.reserveCapacity(tag.count + 5 + member.count)
        appendVarint(UInt64(member.count), to: &bytes)
        return bytes + member
    }

    /// Appends `value` to `bytes` as an unsigned LEB128 varint, in its shortest form.
    package static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// The member bytes of set dot id `bytes` (its prefix after the tag and varint), or nil when
    /// it is no set dot.
    package static func member(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard bytes.count > 3, bytes[1] == setDotTag.1 else { return nil }
        return groupedMember(bytes)
    }

    /// The member bytes (a set dot's member, a counter field's field) of a member-grouped id
    /// (`isMemberGrouped`), nil for any other id.
    package static func groupedMember(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard bytes.count > 3, let end = prefixLength(bytes), isMemberGrouped(bytes[1]) else { return nil }
        var start = 3
        while bytes[start] & 0x80 != 0 { start += 1 }
        return Array(bytes[(start + 1)..<end])
    }
}
