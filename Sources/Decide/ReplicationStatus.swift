/// What a node knows about its peers at one moment: for `syncnode status` and for tests.
public struct ReplicationStatus: Hashable, Sendable {
    public enum LinkState: String, Hashable, Sendable {
        /// A link is up and heartbeats arrive.
        case connected
        /// Known and alive as far as gossip says, but no link now (being redialled).
        case disconnected
        /// It announced it left (or gossip said so); it is not redialled.
        case left
    }

    public enum CatchUpState: String, Hashable, Sendable {
        /// Nothing known to be missing.
        case idle
        /// Deltas were dropped or a walk was abandoned: a walk starts when the link drains.
        case needed
        /// An anti-entropy walk with this peer is under way.
        case running
    }

    public struct Member: Hashable, Sendable {
        public let nodeID: String
        public let address: String
        public let link: LinkState
        /// Milliseconds since the last message from it; nil when never heard.
        public let lastHeardMillisecondsAgo: UInt64?
        /// Bytes waiting in the transport's queue to it.
        public let outboundBytesQueued: Int
        public let catchUp: CatchUpState
        /// Deltas not queued to it because its queue was full, since this node started
        /// (each is repaired by catch-up).
        public let droppedDeltas: Int
    }

    public let nodeID: String
    public let incarnation: UInt64
    /// Every member this node knows, but itself, sorted by node id.
    public let members: [Member]
}
