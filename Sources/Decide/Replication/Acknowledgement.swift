/// How many replicas must hold a decision before `Replicator.decide(_:acknowledgedBy:timeout:)`
/// returns (docs/consistency.md, "Writes acknowledged by replicas").
public enum AcknowledgementTarget: Hashable, Sendable {
    /// This many other nodes (0 returns at once).
    case peers(Int)
    /// Every member alive in this node's view when the decision commits, this node aside.
    case allMembers
}

/// What became of a decision made with `Replicator.decide(_:acknowledgedBy:timeout:)`.
///
/// Guarantees: every node in `acknowledgedBy` applied the decision's delta (or a newer one of
/// this node's) at its own durability level before it said so — on disk under strict
/// durability — and said so on the link the delta travelled; a node that lost a delta of
/// this link (a queue dropped), or was not linked when it was sent, is not counted, however
/// it later got the decision. So the count is never more than the replicas that hold it.
public struct Acknowledged: Hashable, Sendable {
    /// The decision's own outcome on this node.
    public let commit: Commit
    /// The nodes that acknowledged it, by id, sorted.
    public let acknowledgedBy: [String]
    /// How many were asked for (resolved from the target when the decision committed).
    public let required: Int

    /// Whether at least `required` nodes acknowledged it in time.
    public var isComplete: Bool { acknowledgedBy.count >= required }
}

/// One caller waiting for peers to acknowledge a timestamp of this node's.
struct AcknowledgementWaiter {
    let timestamp: UInt64
    let required: Int
    /// Clock milliseconds after which it returns with what it has.
    let deadline: UInt64
    let commit: Commit
    let complete: @Sendable (Acknowledged) -> Void
}
