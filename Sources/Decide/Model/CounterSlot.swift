import DecideCore
import Synchronization

/// Whether a node's table has ever held a counter slot, readable without the node's lock: a
/// front end skips its counter checks (a plain SET resetting a counter of the same name) until
/// one exists. Never goes back to false.
package final class CounterPresence: Sendable {
    private let flag = Atomic<Bool>(false)
    package var exists: Bool { flag.load(ordering: .relaxed) }
    /// Marks that `key` was merged, when it counts in a counter.
    @inline(__always)
    func note(_ key: StateKey) {
        if !exists, CounterSlot.counts(key) { flag.store(true, ordering: .relaxed) }
    }
    func noteWritten() { if !exists { flag.store(true, ordering: .relaxed) } }
}

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
        var bytes = tag
        bytes.reserveCapacity(tag.count + 8 + node.utf8.count)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: incarnation >> UInt64(shift))) }
        bytes.append(contentsOf: node.utf8)
        return bytes
    }

    /// The element's first three bytes of a base slot: 0xFF, "b", layout 1.
    static let baseTag: [UInt8] = [0xFF, 0x62, 0x01]

    /// The element of the base slot that took over the number a plain key held at version
    /// (`timestamp`, `node`): written alike by every node that converts it, so it counts once.
    static func baseElement(timestamp: UInt64, node: String) -> [UInt8] {
        var bytes = baseTag
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: timestamp >> UInt64(shift))) }
        bytes.append(contentsOf: node.utf8)
        return bytes
    }

    /// Whether `key` counts in its counter's total: a process's slot or a base slot.
    package static func counts(_ key: StateKey) -> Bool {
        key.elementCount > tag.count + 8
            && key.packedElement.withUnsafeBytes { $0[0] == 0xFF && ($0[1] == 0x63 || $0[1] == 0x62) && $0[2] == 0x01 }
    }

    /// Whether `key` is a counter slot (its element starts with the tag).
    package static func isSlot(_ key: StateKey) -> Bool {
        key.elementCount > tag.count + 8
            && key.packedElement.withUnsafeBytes { $0[0] == 0xFF && $0[1] == 0x63 && $0[2] == 0x01 }
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
            var index = 0
            func number() -> UInt64? {
                let start = index
                var result: UInt64 = 0
                while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                    let (times, overflow) = result.multipliedReportingOverflow(by: 10)
                    let (sum, carry) = times.addingReportingOverflow(UInt64(bytes[index] - 0x30))
                    guard !overflow, !carry else { return nil }
                    result = sum
                    index += 1
                }
                guard index > start, index - start == 1 || bytes[start] != 0x30, result <= UInt64(Int64.max) else { return nil }
                return result
            }
            guard bytes.count >= 5, bytes[0] == UInt8(ascii: "[") else { return nil }
            index = 1
            guard let increments = number(), index < bytes.count, bytes[index] == UInt8(ascii: ",") else { return nil }
            index += 1
            guard let decrements = number(), index == bytes.count - 1, bytes[index] == UInt8(ascii: "]") else { return nil }
            return (increments, decrements)
        }
    }
}
