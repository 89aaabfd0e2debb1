/// An ordered list of ids that survives concurrent writers: each id is its own replicated
/// entry holding its position, so two nodes that append, insert, move or remove at the same
/// time never lose each other's work, and every replica orders the ids the same way
/// (docs/consistency.md, "Ordered indexes").
///
/// It stands where the seed keeps `MessagesIndex: AtomicState` of `[MessageID]` and writes
/// `write(message.id, into: MessagesIndex.self, .append)`: under last-writer-wins one of two
/// concurrent appends to a whole array would be lost; here both stay.
///
/// Guarantees:
/// - an id appears at most once; writing an id already there moves it;
/// - after every node has every write, all replicas list the same ids in the same order;
/// - concurrent appends on different nodes keep each node's run together (appended after the
///   elements both saw, ordered by the runs' first positions, not interleaved);
/// - a remove wins over a concurrent move or insert of the same id only when it is the later
///   write (last-writer-wins per id), as for any key;
/// - reading costs O(n log n) and each write O(n) in the index's size n, never in the store's.
///
/// On the wire and in syncnode the index is the collection `name`, element id the JSON id,
/// value the position as a JSON string (`Name[id]` reads as `"0000000100000000.…"`).
public protocol IndexState: SendableMetatype {
    /// The type of the ids the index orders: each is an element of the index on the wire.
    associatedtype ID: Codable & Sendable & Hashable
    /// The stable wire name; defaults to the type's full name.
    static var name: String { get }
}

extension IndexState {
    public static var name: String { String(reflecting: Self.self) }
}

/// Where a write puts an id in an `IndexState`.
public enum IndexPlacement<ID: Codable & Sendable & Hashable>: Sendable {
    /// After every other id.
    case append
    /// Before every other id.
    case prepend
    /// Right after `anchor` (the decision aborts when `anchor` is not in the index).
    case after(ID)
    /// Right before `anchor` (the decision aborts when `anchor` is not in the index).
    case before(ID)
}
