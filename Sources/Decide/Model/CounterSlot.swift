import DecideCore

/// The layout of one node process's slot of a `CounterState` (docs/replication.md, "Counter
/// slots"): an element of the counter's collection whose id is `FF 63 01`, the process's
/// incarnation (8 bytes, big-endian) and its node id; and whose value is the JSON array
/// `[increments, decrements]` of that process's running sums, both below 2^63. A base slot
/// (`FF 62 01`, the version timestamp and node of a plain value a front end turned into a
/// counter) holds that value the same way; it is written once, alike by every converting node.
///
/// A hash's counter field (HINCRBY) is a counter of its own inside the hash's collection, laid
/// out as set dots are: a slot's id is `FF 68 01`, the field's JSON length (varint) and bytes,
/// then the incarnation and node id as above; a base slot's `FF 66 01`, the field, then the
/// version timestamp and node of the plain field value HINCRBY took over. Each field's slots are
/// one group (`ElementGroup`), so a field's total reads its slots only.
///
/// 0xFF never appears in UTF-8, so no JSON id (a `CollectionState`'s, a syncnode `NAME[ID]`)
/// is ever a slot's element.
package enum CounterSlot {
    /// The element's first three bytes: 0xFF, "c", layout 1.
    static let tag: [UInt8] = [0xFF, 0x63, 0x01]

    /// The element of the slot of `node`'s process `incarnation`.
    static func element(incarnation: UInt64, node: String) -> [UInt8] {
        element(tag, incarnation, node: node)
    }

    /// The element's first three bytes of a base slot: 0xFF, "b", layout 1.
    static let baseTag: [UInt8] = [0xFF, 0x62, 0x01]

    /// The element of the base slot that took over the number a plain key held at version
    /// (`timestamp`, `node`): written alike by every node that converts it, so it counts once.
    static func baseElement(timestamp: UInt64, node: String) -> [UInt8] {
        element(baseTag, timestamp, node: node)
    }

    /// The first three bytes of a hash counter field's slot (0xFF, "h", layout 1) and base slot
    /// (0xFF, "f", layout 1).
    static let fieldTag: [UInt8] = [0xFF, ElementGroup.fieldSlotKind, 0x01]
    static let fieldBaseTag: [UInt8] = [0xFF, ElementGroup.fieldBaseKind, 0x01]

    /// The group of counter field `field` (its JSON id) of a hash: its slots' (`base` false) or
    /// its base slots' shared first bytes.
    static func group(ofField field: [UInt8], base: Bool) -> [UInt8] {
        ElementGroup.memberGroup(tag: base ? fieldBaseTag : fieldTag, member: field)
    }

    /// `group` (a tag, or a field's group), `number` (8 bytes, big-endian), `node`: the id of a
    /// slot (`number` its incarnation) or base slot (`number` the taken-over version's time).
    static func element(_ group: [UInt8], _ number: UInt64, node: String) -> [UInt8] {
        var bytes = group
        bytes.reserveCapacity(group.count + 8 + node.utf8.count)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: number >> UInt64(shift))) }
        bytes.append(contentsOf: node.utf8)
        return bytes
    }

    /// The kind byte of `key`'s element ("c" a process's slot, "b" a base slot, "h" and "f" a
    /// counter field's) and the length of its group, nil when it is not laid out as a slot.
    private static func layout(of key: StateKey) -> (kind: UInt8, group: Int)? {
        guard key.elementCount > tag.count + 8 else { return nil }
        return key.packedElement.withUnsafeBytes { bytes -> (UInt8, Int)? in
            guard bytes[0] == 0xFF, bytes[2] == 0x01 else { return nil }
            switch bytes[1] {
            case tag[1], baseTag[1]: return (bytes[1], tag.count)
            case ElementGroup.fieldSlotKind, ElementGroup.fieldBaseKind:
                guard let group = ElementGroup.prefixLength(bytes), bytes.count > group + 8 else { return nil }
                return (bytes[1], group)
            default: return nil
            }
        }
    }

    /// Whether `key` counts in its counter's total: a process's slot or a base slot, of a
    /// counter or of a hash's counter field.
    package static func counts(_ key: StateKey) -> Bool {
        layout(of: key) != nil
    }

    /// Whether `key` is a process's slot (of a counter, or of a hash's counter field).
    package static func isSlot(_ key: StateKey) -> Bool {
        guard let kind = layout(of: key)?.kind else { return false }
        return kind == tag[1] || kind == ElementGroup.fieldSlotKind
    }

    /// Whether `key` is a process's slot (of a counter or counter field) of the node whose id
    /// is `node` (UTF-8), whatever the incarnation: compared in place, no string made.
    package static func isSlot(_ key: StateKey, ofNode node: [UInt8]) -> Bool {
        guard let layout = layout(of: key), layout.kind == tag[1] || layout.kind == ElementGroup.fieldSlotKind,
              key.elementCount == layout.group + 8 + node.count else { return false }
        return key.packedElement.withUnsafeBytes { $0[(layout.group + 8)...].elementsEqual(node) }
    }

    /// The node id and incarnation of slot `key` (nil when it is not a slot).
    package static func owner(of key: StateKey) -> (node: String, incarnation: UInt64)? {
        guard let layout = layout(of: key), layout.kind == tag[1] || layout.kind == ElementGroup.fieldSlotKind else { return nil }
        let bytes = key.element
        var incarnation: UInt64 = 0
        for index in layout.group..<layout.group + 8 { incarnation = incarnation << 8 | UInt64(bytes[index]) }
        return (String(decoding: bytes[(layout.group + 8)...], as: UTF8.self), incarnation)
    }

    /// The field (its JSON id) of a hash counter field's slot or base slot `key`, nil for any
    /// other key.
    package static func field(of key: StateKey) -> [UInt8]? {
        guard let kind = layout(of: key)?.kind, kind == ElementGroup.fieldSlotKind || kind == ElementGroup.fieldBaseKind else { return nil }
        return key.packedElement.withUnsafeBytes { ElementGroup.groupedMember($0) }
    }

    /// `[increments,decrements]` as the slot's value.
    static func value(increments: UInt64, decrements: UInt64) -> PackedBytes {
        PackedBytes(Array("[\(increments),\(decrements)]".utf8))
    }

    /// The sums a slot's value holds, or nil when it is not `[P,N]` with P and N whole numbers
    /// below 2^63 (a tool's or a broken peer's write: the slot then counts for nothing).
    package static func sums(_ value: PackedBytes) -> (increments: UInt64, decrements: UInt64)? {
        value.withUnsafeBytes { bytes -> (UInt64, UInt64)? in
            guard bytes.count >= 5, bytes[0] == UInt8(ascii: "["), bytes[bytes.count - 1] == UInt8(ascii: "]"),
                  let comma = bytes.firstIndex(of: UInt8(ascii: ",")) else { return nil }
            // Each a whole number as JSON writes it (`ValueCoding.decodeInteger`), not negative.
            func sum(_ range: Range<Int>) -> UInt64? {
                guard !range.isEmpty, bytes[range.lowerBound] != UInt8(ascii: "-"),
                      let number = ValueCoding.decodeInteger(UnsafeRawBufferPointer(rebasing: bytes[range])) else { return nil }
                return UInt64(number)
            }
            guard let increments = sum(1..<comma), let decrements = sum(comma + 1..<bytes.count - 1) else { return nil }
            return (increments, decrements)
        }
    }
}
