import DecideCore

/// The lifetime of a collection-shaped state as a whole: a set's, a hash's, a sorted set's or a
/// counter's, as Redis gives EXPIRE to a key of any kind (docs/design/0004-collection-lifetimes.md).
///
/// The lifetime is a marker element of the collection, id `FF 6C 01 00` (no JSON starts with
/// 0xFF, and no kind reads it), value `1`, expiring at the instant; the collection's elements are
/// written to expire at that same instant, so that on every node they and the marker go
/// together by the expiry every entry already has. A counter's slots follow the marker: each
/// node writes its own slots with the marker's instant (`Transaction.followLifetime`), never
/// another node's live slot, so no change to the counter is lost to a lifetime.
package enum CollectionLifetime {
    /// The marker's element id.
    package static let element: [UInt8] = [0xFF, ElementGroup.lifetimeMarkerKind, 0x01, 0x00]
    /// The marker's value.
    package static let value = PackedBytes(Array("1".utf8))

    /// The marker key of the collection named `name`.
    package static func marker(ofCollectionNamed name: String) -> StateKey {
        StateKey(name: name, element: element)
    }

    /// Whether stored key `key` is a lifetime marker (listings skip it).
    package static func isMarker(_ key: StateKey) -> Bool {
        key.elementCount == element.count && key.packedElement.withUnsafeBytes { $0.elementsEqual(element) }
    }
}
