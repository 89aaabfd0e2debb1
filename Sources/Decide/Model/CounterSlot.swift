import DecideCore

/// The layout of one node process's slot of a `CounterState` (docs/replication.md, "Counter
/// slots"): an element of the counter's collection whose id is `FF 63 01`, the process's
/// incarnation (8 bytes, big-endian) and its node id; and whose value is the JSON array
/// `[increments, decrements]` of that process's running sums, both below 2^63. A base slot
/// (`FF 62 01`, the version timestamp and node of a plain value a front end turned into a
/// counter) holds that value the same way; it is written once, alike by every converting node.
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

    /// `tag`, `number` (8 bytes, big-endian), `node`.
    private static func element(_ tag: [UInt8], _ number: UInt64, node: String) -> [UInt8] {
        var bytes = tag
        bytes.reserveCapacity(tag.count + 8 + node.utf8.count)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: number >> UInt64(shift))) }
        bytes.append(contentsOf: node.utf8)
        return bytes
    }

    /// The kind byte of `key`'s element ("c" a process's slot, "b" a base slot), nil when it is
    /// neither laid out as a slot.
    private static func kind(of key: StateKey) -> UInt8? {
        guard key.elementCount > tag.count + 8 else { return nil }
        return key.packedElement.withUnsafeBytes { $0[0] == 0xFF && $0[2] == 0x01 ? $0[1] : nil }
    }

    /// Whether `key` counts in its counter's total: a process's slot or a base slot.
    package static func counts(_ key: StateKey) -> Bool {
        let kind = kind(of: key)
        return kind == tag[1] || kind == baseTag[1]
    }

    /// Whether `key` is a process's counter slot (its element starts with the tag).
    package static func isSlot(_ key: StateKey) -> Bool {
        kind(of: key) == tag[1]
    }

    /// Whether `key` is a process's slot of the node whose id is `node` (UTF-8), whatever the
    /// incarnation: compared in place, no string made.
    package static func isSlot(_ key: StateKey, ofNode node: [UInt8]) -> Bool {
        guard key.elementCount == tag.count + 8 + node.count, isSlot(key) else { return false }
        return key.packedElement.withUnsafeBytes { $0[(tag.count + 8)...].elementsEqual(node) }
    }

    /// The node id and incarnation of slot `key` (nil when it is not a slot).
    package static func owner(of key: StateKey) -> (node: String, incarnation: UInt64)? {
        guard isSlot(key) else { return nil }
        let bytes = key.element
        var incarnation: UInt64 = 0
        for index in tag.count..<tag.count + 8 { incarnation = incarnation << 8 | UInt64(bytes[index]) }
        return (String(decoding: bytes[(tag.count + 8)...], as: UTF8.self), incarnation)
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
