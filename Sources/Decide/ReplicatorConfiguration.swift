import Logging

extension Replicator {
    /// Every interval and bound of replication, with units in the names.
    public struct Configuration: Sendable {
        /// Addresses (`HOST:PORT`) to dial at start; the rest of the cluster is learnt by gossip.
        public var seeds: [String] = []
        /// The address peers should dial to reach this node (what it listens on), told to others
        /// by gossip. Empty for a node that does not listen.
        public var advertisedAddress: String = ""
        /// Raised on every start of this node (e.g. its start time in ms), so news of this run
        /// outranks news of an earlier one (such as "it left").
        public var incarnation: UInt64 = 0
        /// How often a ping goes to each connected peer.
        public var heartbeatIntervalMilliseconds: UInt64 = 500
        /// A peer heard nothing from for this long is declared unreachable: its link is closed
        /// and redialled with backoff.
        public var failureTimeoutMilliseconds: UInt64 = 3_000
        /// How often the member list goes to every peer.
        public var gossipIntervalMilliseconds: UInt64 = 1_000
        /// How often this node starts an anti-entropy walk with each peer (besides every
        /// (re)connect and every dropped queue).
        public var antiEntropyIntervalMilliseconds: UInt64 = 10_000
        /// A walk with no answer for this long is abandoned (the next one repairs what it would have).
        public var antiEntropyTimeoutMilliseconds: UInt64 = 5_000
        /// First redial delay after a failed dial or lost link; doubled per failure, with ±50 % jitter.
        public var reconnectBaseMilliseconds: UInt64 = 100
        /// The most a redial waits.
        public var reconnectMaxMilliseconds: UInt64 = 5_000
        /// Tombstones older than this are collected, and writes older than this are not
        /// inserted for keys this node does not hold (docs/consistency.md, "Tombstones").
        /// Every node of a cluster must use the same value.
        public var tombstoneHorizonMilliseconds: UInt64 = 7 * 24 * 3_600_000
        /// When this node last finished an anti-entropy walk, if it ran before (a durable node
        /// restarting passes what it stored); nil means "now". A node out of sync for longer
        /// than `tombstoneHorizonMilliseconds` drops its entries older than the horizon before
        /// it syncs again (docs/consistency.md, "Tombstones").
        public var lastSyncMilliseconds: UInt64?
        /// A file where the engine keeps `lastSyncMilliseconds` across restarts (written at
        /// most every `syncMarkerIntervalMilliseconds`, by atomic rename); read at start when
        /// `lastSyncMilliseconds` is nil. Give one to every durable node (e.g. in its data
        /// directory): without it a node restarted after more than the horizon offline cannot
        /// know it is stale.
        public var syncMarkerPath: String?
        public var syncMarkerIntervalMilliseconds: UInt64 = 10_000
        /// How often tombstone collection runs.
        public var tombstoneCollectionIntervalMilliseconds: UInt64 = 60_000
        /// The most catch-up entries held for one link while a walk's messages arrive (they are
        /// applied together); past it the walk's entries are dropped and a new walk is scheduled.
        public var maxBufferedCatchUpEntries = 1 << 22
        /// The most entries one catch-up message carries.
        public var maxEntriesPerMessage = 4_096
        /// The largest frame this engine sends: the transport's `maxFrameBytes` (every peer's
        /// input limit). Catch-up batches are cut below it; a delta above it is not sent and
        /// the peers catch up instead.
        public var maxFrameBytes = 16 * 1024 * 1024
        /// Seed for jitter and walk ids (the simulator fixes it; production draws one).
        public var randomSeed: UInt64 = UInt64.random(in: 0...UInt64.max)
        public var logger = Logger(label: "decide.replication")

        public init() {}
    }
}
