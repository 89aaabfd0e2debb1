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
/// Guarantees: every node in `acknowledgedBy` held the decision and every decision this node
/// committed before it (or a newer write of each of their keys) at its own durability level —
/// on disk under strict durability — when it said so: by the deltas of the link it answered
/// on, and by a clean catch-up for what was written before that link opened. A node that lost
/// a delta of its link (a queue dropped) counts only once a catch-up proves it holds it, and
/// one whose store stopped taking writes does not count. So the count is never more than the
/// replicas that hold it (docs/consistency.md, "Writes acknowledged by replicas").
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
