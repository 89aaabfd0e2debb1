import DecideCore

/// How a node hands its own commits to the replication engine without a `Delta` built for
/// each: the engine encodes its frame under the node's lock from the decision's pending writes,
/// read where they lie, and sends it once the commit is as durable as the node promises
/// (docs/design/0015-the-replicated-update.md, "The technique"). One per node
/// (`Node.setLocalCommitSender`), held strongly: the engine hands the node a
/// `ReplicatorHandle`, which does not own it.
protocol LocalCommitSender: AnyObject, Sendable {
    /// Under memory and batched durability: called under the node's lock for each local commit,
    /// after its commit listeners, to send `writes` committed at `version` (valid for the call)
    /// now, encoded in scratch memory.
    func sendCommit(version: Version, writes: borrowing PendingWrites)
    /// Under strict durability: called under the node's lock for each local commit, after its
    /// commit listeners: the frame to send for `writes` committed at `version` once the commit
    /// is on disk, or nil for none.
    func frame(version: Version, writes: borrowing PendingWrites) -> [UInt8]?
    /// Under strict durability: sends the frame of the commit at `timestamp` after its sync
    /// (outside the lock); never called when that sync failed.
    func send(_ frame: [UInt8], timestamp: HLCTimestamp)
}

