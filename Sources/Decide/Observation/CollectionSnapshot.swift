/// The elements of one collection at one moment: every element that holds a value, with its
/// id, in a fixed order.
///
/// Guarantees:
/// - it is a value: later writes never change it;
/// - it lists exactly the elements that read as present (not deleted, not expired, not of an
///   owner that is gone) in the read it came from, each once;
/// - elements are ordered by the JSON encoding of their id, byte by byte (the order of dumps and
///   of SCAN), so every replica holding the same elements lists them in the same order. For an
///   order you choose, keep the ids in an `IndexState`;
/// - `self[id]` is the element's value, or `C.defaultValue(at: id)` when it holds none, as a
///   single read would give it. An element whose stored value does not decode as `C.Value` is
///   listed with its default value (and the node logs it); one whose id does not decode as
///   `C.ID` is left out (and logged).
public struct CollectionSnapshot<C: CollectionState>: RandomAccessCollection, Sendable, Equatable {
    /// The ids of the elements, in the snapshot's order.
    public let ids: [C.ID]
    /// The values, parallel to `ids`.
    public let values: [C.Value]
    private let positions: [C.ID: Int]

    init(ids: [C.ID], values: [C.Value]) {
        self.ids = ids
        self.values = values
        var positions: [C.ID: Int] = [:]
        positions.reserveCapacity(ids.count)
        for (position, id) in ids.enumerated() { positions[id] = position }
        self.positions = positions
    }

    /// A collection with no element.
    public static var empty: CollectionSnapshot<C> { CollectionSnapshot(ids: [], values: []) }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ids.count }

    /// The element at `position` in the snapshot's order.
    public subscript(position: Int) -> (id: C.ID, value: C.Value) {
        (ids[position], values[position])
    }

    /// The value of element `id`, or its default when the snapshot has no such element.
    public subscript(id: C.ID) -> C.Value {
        positions[id].map { values[$0] } ?? C.defaultValue(at: id)
    }

    /// The value of element `id`, or nil when the snapshot has no such element.
    public func value(at id: C.ID) -> C.Value? {
        positions[id].map { values[$0] }
    }

    /// Whether element `id` holds a value in this snapshot.
    public func contains(_ id: C.ID) -> Bool { positions[id] != nil }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.ids == rhs.ids && lhs.values == rhs.values
    }
}
