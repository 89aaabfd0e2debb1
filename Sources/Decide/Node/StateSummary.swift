/// Counts and the digest of a node's state at one moment.
public struct StateSummary: Hashable, Sendable {
    /// Stored keys: values, tombstones, expired and hidden owned values alike.
    public let entryCount: Int
    /// Stored tombstones (deleted keys not yet collected).
    public let tombstoneCount: Int
    /// Stored values that expired (reported by `Node.expireDue`) and await collection; they
    /// read as absent. `liveCount` keys hold a value.
    public let expiredCount: Int
    /// Stored values that will expire (or are past due and not yet reported).
    public let expiringCount: Int
    /// Stored owned values whose owner is not a live member here: they read as absent.
    public let hiddenOwnedCount: Int
    /// Keys that hold a value a reader sees (give or take values past due and not yet reported).
    public var liveCount: Int { entryCount - tombstoneCount - expiredCount - hiddenOwnedCount }
    /// The root of the digest tree: equal on two nodes iff their entries are equal.
    public let digest: UInt64
    /// The greatest version stored, nil for an empty state.
    public let highestVersion: Version?
    /// Decisions this node committed since it started.
    public let committedDecisions: UInt64
    /// Peers' deltas this node applied since it started.
    public let appliedRemoteDeltas: UInt64
}
