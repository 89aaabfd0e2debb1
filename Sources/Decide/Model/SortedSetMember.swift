import DecideCore

/// The layout of one member of a `SortedSetState` (docs/replication.md, "Sorted set members"):
/// an element of the set's collection whose id is `FF 7A 01` and the member's JSON, whose value
/// is the score as a JSON number. It has no `ElementGroup`: one record per member, found by
/// its key (docs/design/0003-sorted-sets.md).
package enum SortedSetMember {
    static let tag: [UInt8] = [0xFF, ElementGroup.scoredMemberKind, 0x01]

    /// The element id of `member` (its JSON).
    package static func element(member: [UInt8]) -> [UInt8] {
        tag + member
    }

    /// The member's JSON of element `key`, or nil when `key` is no sorted set member.
    package static func member(of key: StateKey) -> [UInt8]? {
        key.packedElement.withUnsafeBytes { bytes in
            bytes.count > tag.count && bytes[0] == tag[0] && bytes[1] == tag[1] && bytes[2] == tag[2]
                ? Array(bytes[tag.count...]) : nil
        }
    }

    /// The stored value of `score`: its shortest round-trip decimal text, a JSON number; nil
    /// for an infinite or NaN score, which JSON cannot hold.
    package static func value(score: Double) -> PackedBytes? {
        guard score.isFinite else { return nil }
        // -0 is stored as 0: the two compare equal, and one spelling keeps replicas' bytes equal.
        return PackedBytes(Array((score == 0 ? 0 : score).description.utf8))
    }

    /// The score a stored value holds, or nil when it is no finite JSON number (a peer's
    /// malformed value is skipped, never trusted).
    package static func score(_ value: PackedBytes) -> Double? {
        value.withUnsafeBytes { bytes -> Double? in
            guard !bytes.isEmpty, bytes.count <= 64, bytes.allSatisfy({ Self.isNumberByte($0) }) else { return nil }
            guard let score = Double(String(decoding: bytes, as: UTF8.self)), score.isFinite else { return nil }
            return score
        }
    }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
    }

    /// Whether member `a` (score, JSON) comes before `b` in a read: by score, then by JSON bytes.
    package static func precedes(_ a: (member: [UInt8], score: Double), _ b: (member: [UInt8], score: Double)) -> Bool {
        a.score != b.score ? a.score < b.score : a.member.lexicographicallyPrecedes(b.member)
    }
}
