/// What a node knows about its peers at one moment: for `syncnode status` and for tests.
public struct ReplicationStatus: Hashable, Sendable {
    /// How this node is linked to a member now.
    public enum LinkState: String, Hashable, Sendable {
        /// A link is up and heartbeats arrive.
        case connected
        /// Known and alive as far as gossip says, but no link now (being redialled).
        case disconnected
        /// It announced it left (or gossip said so); it is not redialled. It still counts for
        /// tombstone collection until it returns or is removed.
        case left
        /// Removed from the cluster (`forget`, the dead-member timeout, or gossip of either):
        /// not counted, not dialled, refused if it returns.
        case removed
    }

    /// Whether this node is repairing what it may miss from a member (anti-entropy).
    public enum CatchUpState: String, Hashable, Sendable {
        /// Nothing known to be missing.
        case idle
        /// Deltas were dropped or a walk was abandoned: a walk starts when the link drains.
        case needed
        /// An anti-entropy walk with this peer is under way.
        case running
    }

    /// One member as this node sees it.
    public struct Member: Hashable, Sendable {
        /// Its node id.
        public let nodeID: String
        /// The address it advertises (`HOST:PORT`), as gossip carries it; "" when it does not listen.
        public let address: String
        /// How this node is linked to it now.
        public let link: LinkState
        /// Milliseconds since the last message from it; nil when never heard.
        public let lastHeardMillisecondsAgo: UInt64?
        /// Bytes waiting in the transport's queue to it.
        public let outboundBytesQueued: Int
        /// Whether a catch-up with it is needed or running.
        public let catchUp: CatchUpState
        /// Deltas not queued to it because its queue was full, since this node started
        /// (each is repaired by catch-up).
        public let droppedDeltas: Int
        /// Deltas from it dropped unapplied because this node's store was slow and
        /// `maxInboundDeltaBytes` of deltas already waited, since this node started (each is
        /// repaired by catch-up).
        public let droppedIncomingDeltas: Int
        /// Links to it this node closed because it broke a protocol rule (each logged with the
        /// rule), since this node started. Honest peers never do; a count here is a bug, a
        /// member with another version's limits, or a hostile member.
        public let protocolViolations: Int
        /// This node holds everything the member held when the member's hybrid clock read
        /// this (raw HLC; 0 for nothing proven yet): the latest clean anti-entropy walk with it.
        public let coveredClock: UInt64
        /// What the member last reported as its own coverage (raw HLC).
        public let reportedCoverage: UInt64
    }

    /// This node's id.
    public let nodeID: String
    /// This node's incarnation (`Replicator.Configuration.incarnation`): raised on every start.
    public let incarnation: UInt64
    /// Every member this node knows, but itself, sorted by node id.
    public let members: [Member]
    /// The coverage this node reports (raw HLC): it holds every entry any member counted had
    /// at or below it.
    public let coverage: UInt64
    /// Tombstones below this (raw HLC) are collected: every member reported covering it. Nil
    /// while any member has not reported, or counts other members than this node does.
    public let tombstoneBound: UInt64?
    /// Removals remembered by id hash only, past the `maxMembers` full removal records
    /// (`maxForgottenMemberIDs` at most): such a member is refused if it returns, and gossip
    /// that lists it brings its removal back.
    public let forgottenMemberIDs: Int
}
