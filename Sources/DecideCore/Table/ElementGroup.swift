/// The group an element id belongs to, for elements laid out as groups: a set's dots
/// (docs/replication.md, "Set dots"), whose ids are `FF 73 01`, a varint length L and L bytes
/// of the member, then the dot itself. The group is those first bytes: every dot of one member
/// shares them, so `EntryTable` lists a member's dots without a scan of the set
/// (docs/design/0002-sets.md).
///
/// Any other id, and a dot id whose length runs past its end, has no group: a peer's malformed
/// id is stored as an element like any other, never trusted.
package enum ElementGroup {
    /// The first three bytes of a grouped id.
    package static let setDotTag: (UInt8, UInt8, UInt8) = (0xFF, 0x73, 0x01)

    /// Whether element id `bytes` is of a kind laid out on a collection (a counter's slot, a
    /// set's dot): `FF kind 01` and more, which no JSON text starts with (0xFF is never UTF-8).
    @inline(__always)
    package static func isCompound(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count > 3 && bytes[0] == 0xFF && bytes[2] == 0x01
    }

    /// The length of `bytes`'s group prefix (tag, varint, member), or nil when `bytes` is no
    /// grouped id. The varint is at most 5 bytes (a length under 2^35) and must fit.
    @inline(__always)
    package static func prefixLength(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count > 3, bytes[0] == setDotTag.0, bytes[1] == setDotTag.1, bytes[2] == setDotTag.2 else { return nil }
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

    /// The member bytes of grouped id `bytes` (its prefix after the tag and varint), or nil.
    package static func member(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let end = prefixLength(bytes) else { return nil }
        var start = 3
        while bytes[start] & 0x80 != 0 { start += 1 }
        return Array(bytes[(start + 1)..<end])
    }
}
