/// A set that many nodes change at once without losing an add: `write(.insert(user), into:
/// Online.self)` on one node and `write(.remove(user), into: Online.self)` on another at the same
/// moment leave `user` in the set (add wins; docs/consistency.md, "Sets").
///
/// Guarantees:
/// - an insert is removed only by a remove that had seen it: a remove takes out the inserts of
///   the element this node holds when it runs, and an insert made concurrently elsewhere, which
///   it had not seen, stays (an observed-remove set, as Redis Active-Active's and Riak's sets);
/// - once every node has every change, all read the same elements;
/// - removed elements are reclaimed like any delete (their tombstones are collected once every
///   member holds them).
///
/// How: each insert is an element of the collection `name` of its own (a *dot*: the element's
/// JSON, the inserting process and a sequence number), and a remove deletes the dots it sees;
/// an element is in the set while one of its dots is live (docs/design/0002-sets.md). Reading
/// costs O(dots), about one per element.
public protocol SetState: SendableMetatype {
    /// The type of the set's elements, stored as their JSON.
    associatedtype Element: Codable & Sendable & Hashable
    /// The stable wire name; defaults to the type's full name.
    static var name: String { get }
}

extension SetState {
    public static var name: String { String(reflecting: Self.self) }
}

/// A change to a `SetState`.
public enum SetChange<Element: Codable & Sendable & Hashable>: Sendable {
    /// Puts `element` in the set (again, if it is there: a remove elsewhere that had not seen
    /// this insert then leaves it in).
    case insert(Element)
    /// Takes `element` out, as far as this node has seen it put in.
    case remove(Element)
    /// Takes every element this node sees out.
    case removeAll
}
