/// A count that many nodes change at once without losing a change: increments and decrements
/// made concurrently on different nodes all count (a PN-counter; docs/consistency.md,
/// "Counters").
///
/// `write(.increment(by: 3), into: Quota.self)` in a decision adds 3; `read(Quota.self)` is
/// the total every change this node holds adds up to. Under last-writer-wins, two nodes that
/// each take one unit of an `AtomicState` quota at the same moment lose one of the two; here
/// both count.
///
/// Guarantees:
/// - every increment and decrement committed on any node counts exactly once in the total, on
///   every node that holds it; once every node has every change, all read the same total;
/// - a node's contribution stays in the total when the node leaves, is removed or restarts
///   (with or without its data directory): nothing is ever subtracted but by a decrement or a
///   reset;
/// - the total is exact within `Int64`: a change that would take the total this node reads
///   outside it aborts its decision (concurrent changes elsewhere can still pass it together;
///   the total then saturates at the bound); one process moves a counter by at most 2^63 − 1
///   each way.
///
/// How: each node process keeps its own slot, its running sums of increments and of
/// decrements, as one element of the collection `name`; only that process writes it, so the
/// newest version of a slot is its largest sums, and last-writer-wins per element, as for any
/// key, keeps them (docs/design/0001-counters.md). The total is the sum over the slots. A
/// counter has at most `Node.Configuration.maxCounterSlots` slots: one per node process that
/// changed it.
public protocol CounterState: SendableMetatype {
    /// The stable wire name; defaults to the type's full name.
    static var name: String { get }
}

extension CounterState {
    public static var name: String { String(reflecting: Self.self) }
}

/// A change to a `CounterState`.
public enum CounterChange: Sendable, Hashable {
    /// Adds `amount` (a negative amount subtracts).
    case increment(by: Int64)
    /// Subtracts `amount` (a negative amount adds).
    case decrement(by: Int64)
    /// Brings the total this decision reads to zero, by subtracting it (or adding it back when
    /// negative) in this node's slot: a change made concurrently elsewhere, which this node had
    /// not seen, still counts after the reset (an observed reset).
    case reset
}
