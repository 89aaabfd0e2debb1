@testable import DecideCore
import Testing

/// `StateKey` holds short element ids in place: every way of making a key (from an array, from
/// lent bytes, from a table's stored bytes and hash) gives the same key, hash and order as the
/// element's bytes say, on both sides of the in-place limit.
@Suite struct StateKeyTests {
    /// Element ids of every length from empty to well past the in-place limit.
    static let elements: [[UInt8]] = (0...(PackedBytes.inlineCapacity * 2 + 3)).map { count in
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ count) }
    }

    @Test func everyWayOfMakingAKeyAgrees() {
        for element in Self.elements {
            let fromArray = StateKey(name: "items", element: element)
            let nameHash = StateKey.nameHash("items")
            let fromBytes = element.withUnsafeBytes { StateKey(name: "items", nameHash: nameHash, elementBytes: $0) }
            let stored = StateKey(name: "items", packedElement: PackedBytes(element), stableHash: fromArray.stableHash)
            // The hash is the one every node computes: the name's bytes, then the element's.
            var reference = StableHash()
            reference.combine(bytes: Array("items".utf8))
            reference.combine(bytes: element)
            #expect(fromArray.stableHash == reference.value, "length \(element.count)")
            #expect(fromBytes == fromArray && stored == fromArray, "length \(element.count)")
            #expect(fromBytes.stableHash == fromArray.stableHash)
            #expect(fromArray.element == element && fromBytes.element == element)
            #expect(fromArray.elementCount == element.count)
            #expect(fromArray.withElementBytes { Array($0) } == element)
            #expect(Set([fromArray, fromBytes, stored]).count == 1)
        }
    }

    @Test func keysOrderByNameThenElementBytesAcrossTheInPlaceLimit() {
        var keys = Self.elements.map { StateKey(name: "items", element: $0) }
        keys += Self.elements.map { StateKey(name: "a", element: $0.reversed()) }
        for left in keys {
            for right in keys {
                let expected = left.name != right.name
                    ? left.name.utf8.lexicographicallyPrecedes(right.name.utf8)
                    : left.element.lexicographicallyPrecedes(right.element)
                #expect((left < right) == expected, "\(left) < \(right)")
                #expect((left == right) == (left.name == right.name && left.element == right.element))
            }
        }
    }

    @Test func keysDifferingInOneByteDiffer() {
        for element in Self.elements where !element.isEmpty {
            let key = StateKey(name: "items", element: element)
            for position in element.indices {
                var changed = element
                changed[position] ^= 0x40
                let other = StateKey(name: "items", element: changed)
                #expect(other != key)
                #expect(other.stableHash != key.stableHash)
            }
        }
    }
}
