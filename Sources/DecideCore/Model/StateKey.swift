/// The address of one replicated property: a state's wire name and, for a collection, the
/// encoded element id (empty for an atomic state).
///
/// Guarantees: `stableHash` is the same on every node for the same key, and is what places the
/// key in a `StateDigest` bucket; keys order by name, then element bytes (the order of dumps).
public struct StateKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The state's wire name.
    public let name: String
    /// The encoded element id of a collection element; empty for an atomic state.
    public let element: [UInt8]
    /// `StableHash` of (name, element), computed once.
    public let stableHash: UInt64

    /// The key of `element` in state `name` (empty by default: an atomic state's key), with
    /// `stableHash` computed.
    public init(name: String, element: [UInt8] = []) {
        self.init(name: name, nameHash: Self.nameHash(name), element: element)
    }

    /// The same key as `init(name:element:)`, with the name's part of the hash already taken
    /// (`nameHash` is `StableHash()` after `combine(bytes: name.utf8)`): a collection's name is
    /// hashed once, not once per element written.
    package init(name: String, nameHash: StableHash, element: [UInt8]) {
        self.name = name
        self.element = element
        var hash = nameHash
        hash.combine(bytes: element)
        self.stableHash = hash.value
    }

    /// A key whose `stableHash` is already known (a table that stored it hands it back).
    package init(name: String, element: [UInt8], stableHash: UInt64) {
        self.name = name
        self.element = element
        self.stableHash = stableHash
    }

    /// `StableHash` after the name: what `init(name:nameHash:element:)` takes.
    package static func nameHash(_ name: String) -> StableHash {
        var hash = StableHash()
        hash.combine(bytes: name.utf8)
        return hash
    }

    public static func == (lhs: StateKey, rhs: StateKey) -> Bool {
        lhs.stableHash == rhs.stableHash && lhs.name == rhs.name && lhs.element == rhs.element
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(stableHash) }

    public static func < (lhs: StateKey, rhs: StateKey) -> Bool {
        if lhs.name != rhs.name { return lhs.name.utf8.lexicographicallyPrecedes(rhs.name.utf8) }
        return lhs.element.lexicographicallyPrecedes(rhs.element)
    }

    /// `name` for an atomic state, `name[element]` with the element as text when it is UTF-8.
    public var description: String {
        if element.isEmpty { return name }
        if let text = String(validating: element, as: UTF8.self) { return "\(name)[\(text)]" }
        return "\(name)[0x\(element.map { String($0, radix: 16) }.joined())]"
    }
}
