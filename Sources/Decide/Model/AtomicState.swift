/// One replicated property: a key whose value every node can read, and only Decisions change.
///
/// Guarantees: the key's identity on the wire is `name`, so renaming the Swift type keeps the
/// data as long as `name` is overridden with the old value. A key never written (or deleted)
/// reads as `defaultValue()`.
public protocol AtomicState: SendableMetatype {
    /// The value's type: stored and replicated as its JSON encoding.
    associatedtype Value: Codable & Sendable & Equatable
    /// The value of the key before any write, and after a delete.
    static func defaultValue() -> Value
    /// The stable wire name; defaults to the type's full name (`Module.Outer.Inner`).
    /// Override it for types declared inside functions, whose reflected name is not stable.
    static var name: String { get }
    /// How long each write of this key lives before it expires on every replica (nil, the
    /// default: forever). A write may say otherwise with `write(_:into:expiringAfter:)`.
    static var lifetime: Duration? { get }
    /// Whether each write belongs to the node that made it (default false): while that node is
    /// not a live member as a replica sees it, the key reads as absent there (presence; see
    /// docs/consistency.md, "Node-owned keys"). A write may say otherwise.
    static var ownedByWriter: Bool { get }
}

extension AtomicState {
    public static var name: String { String(reflecting: Self.self) }
    public static var lifetime: Duration? { nil }
    public static var ownedByWriter: Bool { false }
}

/// A family of replicated properties, one per element id: each element is its own key with
/// its own version, so writes to different elements never conflict.
///
/// Guarantees: element `id` is addressed on the wire by (`name`, JSON encoding of `id`); an
/// element never written (or deleted) reads as `defaultValue(at: id)`.
public protocol CollectionState: SendableMetatype {
    /// The element id's type: an element's key on the wire is the id's JSON encoding.
    associatedtype ID: Codable & Sendable & Hashable
    /// The value's type: stored and replicated as its JSON encoding.
    associatedtype Value: Codable & Sendable & Equatable
    /// The value of element `id` before any write, and after a delete.
    static func defaultValue(at id: ID) -> Value
    /// The stable wire name; defaults to the type's full name.
    static var name: String { get }
    /// How long each element write lives before it expires on every replica (nil, the
    /// default: forever), unless the write says otherwise.
    static var lifetime: Duration? { get }
    /// Whether each element write belongs to the node that made it (default false), unless
    /// the write says otherwise.
    static var ownedByWriter: Bool { get }
}

extension CollectionState {
    public static var name: String { String(reflecting: Self.self) }
    public static var lifetime: Duration? { nil }
    public static var ownedByWriter: Bool { false }
}
