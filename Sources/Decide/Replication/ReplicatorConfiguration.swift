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
        /// A file where the engine keeps the member list across restarts (written when it
        /// changes, by atomic rename). Give one to every durable node (e.g. in its data
        /// directory): a node that forgets a member that is down could collect a tombstone that
        /// member still needs. `ReplicatedNode` and syncnode set it for a data directory.
        public var membershipPath: String?
        /// With a value, a member unheard of for this long is removed from the cluster as by
        /// `Replicator.forget` (it stops holding back tombstone collection, and is refused if
        /// it returns). Nil (the default): members are removed only by an operator.
        public var deadMemberTimeoutMilliseconds: UInt64?
        /// The most members (this node not included) the engine keeps; gossip that would pass
        /// it closes the link that sent it. Removed members are kept too, up to the same number.
        public var maxMembers = 1_024
        /// Past `maxMembers` removal records, the most removals a node still remembers by a
        /// 64-bit hash of the member's id (oldest dropped first; about 24 bytes each in memory,
        /// 26 in the member file). A peer that gossips a remembered member as alive gets its
        /// removal back instead of bringing the member back in. 0 remembers none.
        public var maxForgottenMemberIDs = 65_536
        /// How often tombstone collection runs.
        public var tombstoneCollectionIntervalMilliseconds: UInt64 = 60_000
        /// The size a catch-up message (summary, key requests, entries) is cut at; a single
        /// decision larger than it travels alone. At most half of `maxFrameBytes`.
        public var catchUpBatchBytes = 1 << 20
        /// The most catch-up messages of one walk sent and not yet acknowledged by the peer:
        /// with `catchUpBatchBytes`, what a stream keeps in flight per link.
        public var catchUpWindowMessages = 4
        /// The largest frame this engine sends: the transport's `maxFrameBytes` (every peer's
        /// input limit). Catch-up batches are cut below it; a delta above it is not sent and
        /// the peers catch up instead. Must be at least the node's `maxDecisionBytes` + 64.
        public var maxFrameBytes = 16 * 1024 * 1024
        /// The most bytes of peers' deltas (all links together) waiting to be applied while the
        /// store is slow. A delta past it is dropped and its peer marked for a catch-up walk,
        /// which repairs it; pings, acks and gossip never wait behind the store. Catch-up
        /// messages are bounded per link by the stream window instead (two walks, each at most
        /// `catchUpWindowMessages` + 2 frames). At least `maxFrameBytes`.
        public var maxInboundDeltaBytes = 64 * 1024 * 1024
        /// Seed for jitter and walk ids (the simulator fixes it; production draws one).
        public var randomSeed: UInt64 = UInt64.random(in: 0...UInt64.max)
        /// Where the engine logs links, walks, membership changes and protocol violations.
        public var logger = Logger(label: "decide.replication")
        /// How often the engine hands its counts to swift-metrics (docs/operations.md,
        /// "Metrics"); nil turns publishing off. Nothing is published anywhere until the
        /// process bootstraps a metrics backend (`MetricsSystem.bootstrap`).
        public var metricsIntervalMilliseconds: UInt64? = 1_000

        /// The defaults above; `Replicator.init` checks them against the node's configuration.
        public init() {}
    }
}
