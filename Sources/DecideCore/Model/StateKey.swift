/// The address of one replicated property: a state's wire name and, for a collection, the
/// encoded element id (empty for an atomic state).
///
/// Guarantees: `stableHash` is the same on every node for the same key, and is what places the
/// key in a `StateDigest` bucket; keys order by name, then element bytes (the order of dumps).
public struct StateKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The state's wire name.
    public let name: String
    /// The element id's bytes up to `PackedBytes.inlineCapacity` (an integer id, a short
    /// string id), in place as two little-endian words, zero past `elementCount`: making,
    /// copying and dropping such a key allocates nothing and counts no reference
    /// (docs/design/0006-entry-table-layout.md, "Values and short ids held in place"). Plain
    /// fields, not an enum: a copy is a copy, with no outlined value-witness call.
    private let elementLow: UInt64, elementHigh: UInt64
    /// A longer element id's bytes; nil when they are held in place.
    private let elementSpill: [UInt8]?
    /// How many bytes the element id has (0 for an atomic state).
    package let elementCount: Int
    /// `StableHash` of (name, element), computed once.
    public let stableHash: UInt64

    /// The encoded element id of a collection element; empty for an atomic state. A short id is
    /// held in place, so this allocates an array for it: code on a hot path reads
    /// `withElementBytes` or `elementCount` instead.
    public var element: [UInt8] { packedElement.array }

    /// The element id as the entry table holds it (the key keeps the enum's parts as fields).
    package var packedElement: PackedBytes {
        if let elementSpill { return .heap(elementSpill) }
        return .inline(elementLow, elementHigh, count: UInt8(truncatingIfNeeded: elementCount))
    }

    /// Lends the element id's bytes for the call.
    package func withElementBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try packedElement.withUnsafeBytes(body)
    }

    /// The key of `element` in state `name` (empty by default: an atomic state's key), with
    /// `stableHash` computed.
    public init(name: String, element: [UInt8] = []) {
        self.init(name: name, nameHash: Self.nameHash(name), element: element)
    }

    /// The same key as `init(name:element:)`, with the name's part of the hash already taken
    /// (`nameHash` is `StableHash()` after `combine(bytes: name.utf8)`): a collection's name is
    /// hashed once, not once per element written. A long id's array is shared, not copied.
    package init(name: String, nameHash: StableHash, element: [UInt8]) {
        var hash = nameHash
        element.withUnsafeBytes { hash.combine(buffer: $0) }
        self.init(name: name, packedElement: PackedBytes(element), stableHash: hash.value)
    }

    /// `init(name:nameHash:element:)` with the element's bytes lent (a decoder's input, a
    /// number's digits in scratch memory): a short id is copied into the key, nothing allocated.
    package init(name: String, nameHash: StableHash, elementBytes: UnsafeRawBufferPointer) {
        var hash = nameHash
        hash.combine(buffer: elementBytes)
        self.init(name: name, packedElement: PackedBytes(elementBytes), stableHash: hash.value)
    }

    /// A key whose `stableHash` is already known (a table that stored it hands it back).
    package init(name: String, packedElement: PackedBytes, stableHash: UInt64) {
        self.name = name
        switch packedElement {
        case let .inline(low, high, count):
            (elementLow, elementHigh, elementSpill, elementCount) = (low, high, nil, Int(count))
        case .heap(let bytes):
            (elementLow, elementHigh, elementSpill, elementCount) = (0, 0, bytes, bytes.count)
        }
        self.stableHash = stableHash
    }

    /// A key whose `stableHash` is already known, from its element as an array.
    package init(name: String, element: [UInt8], stableHash: UInt64) {
        self.init(name: name, packedElement: PackedBytes(element), stableHash: stableHash)
    }

    /// `StableHash` after the name: what `init(name:nameHash:element:)` takes.
    package static func nameHash(_ name: String) -> StableHash {
        var hash = StableHash()
        hash.combine(bytes: name.utf8)
        return hash
    }

    /// `nameHash(_:)` of the name whose UTF-8 bytes are `utf8`.
    package static func nameHash(utf8: UnsafeRawBufferPointer) -> StableHash {
        var hash = StableHash()
        hash.combine(buffer: utf8)
        return hash
    }

    public static func == (lhs: StateKey, rhs: StateKey) -> Bool {
        lhs.stableHash == rhs.stableHash && lhs.elementCount == rhs.elementCount && lhs.elementLow == rhs.elementLow
            && lhs.elementHigh == rhs.elementHigh && lhs.elementSpill == rhs.elementSpill && lhs.name == rhs.name
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(stableHash) }

    public static func < (lhs: StateKey, rhs: StateKey) -> Bool {
        if lhs.name != rhs.name { return lhs.name.utf8.lexicographicallyPrecedes(rhs.name.utf8) }
        return lhs.withElementBytes { left in rhs.withElementBytes { right in left.lexicographicallyPrecedes(right) } }
    }

    /// `name` for an atomic state, `name[element]` with the element as text when it is UTF-8.
    public var description: String {
        if elementCount == 0 { return name }
        let element = self.element
        if let text = String(validating: element, as: UTF8.self) { return "\(name)[\(text)]" }
        return "\(name)[0x\(element.map { String($0, radix: 16) }.joined())]"
    }
}
