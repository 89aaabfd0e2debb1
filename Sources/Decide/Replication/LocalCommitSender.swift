import DecideCore

/// How a node hands its own commits to the replication engine without a `Delta` built for
/// each: the engine encodes its frame under the node's lock from the decision's pending writes,
/// read where they lie, and sends it once the commit is as durable as the node promises
/// (docs/benchmarks.md, "Local commits encoded from the pending writes"). One per node
/// (`Node.setLocalCommitSender`), held weakly.
protocol LocalCommitSender: AnyObject, Sendable {
    /// Called under the node's lock for each local commit, after its commit listeners: the
    /// frame to send for `writes` committed at `version` (valid for the call), or nil for none.
    func frame(version: Version, writes: borrowing PendingWrites) -> [UInt8]?
    /// Sends the frame of the commit at `timestamp`: at once (under the lock) under memory and
    /// batched durability, after the commit's sync (outside it) under strict, never when that
    /// sync failed.
    func send(_ frame: [UInt8], timestamp: HLCTimestamp)
}

extension Replicator: LocalCommitSender {}
