import Foundation
import Logging

extension Node {
    /// How a node is set up. Every bound and interval is here, with units in its name.
    public struct Configuration: Sendable {
        /// This node's id: non-empty, at most 255 UTF-8 bytes, unique in the cluster. It breaks
        /// version ties, so two nodes must never share one.
        public var id: String
        /// A remote timestamp more than this far ahead of local physical time is refused.
        /// At most one day: a larger bound would let one bad clock win every key for that long.
        /// While this node's own hybrid clock is more than this far ahead of its physical clock
        /// (its wall clock jumped forward and back), its decisions are aborted rather than
        /// stamped with a time its peers would refuse (docs/consistency.md, "Clocks").
        public var maxClockSkewMilliseconds: UInt64 = 60_000
        /// Effect operations running at once (default: the number of cores).
        public var effectConcurrency: Int = ProcessInfo.processInfo.activeProcessorCount
        /// Effect operations waiting for a worker before new ones are refused (and reported
        /// to `mapError` as `EffectPoolSaturated`).
        public var maxQueuedEffects: Int = 10_000
        /// How often a node without a replication engine looks for values whose expiry instant
        /// passed, to tell observers they are gone (reads see them absent at once either way).
        /// With a replication engine, its tick does this instead. 1 to 60,000.
        public var expiryCheckIntervalMilliseconds: UInt64 = 100
        /// The physical time the hybrid logical clock follows.
        public var clock: any PhysicalClock = SystemClock()
        /// The dependencies effects use; `Node.environment` can swap it later.
        public var environment = EffectEnvironment()
        /// Turns an error no `Effect.mapError` handled into a follow-up effect (default: none;
        /// the error is logged either way).
        public var mapError: @Sendable (any Error) -> Effect = { _ in .none }
        /// The largest names, element ids, values and decisions this node commits: the same
        /// bounds its peers' decoders enforce, so whatever commits here can replicate. A
        /// decision over them is aborted (`Commit.aborted`).
        public var limits = WireLimits()
        /// The most bytes one decision's writes may take on the wire (names, element ids,
        /// values, versions). A larger decision is aborted at commit (`Commit.aborted`, nothing
        /// written): every decision must fit one replication frame, so that every replica
        /// applies it whole. Must be at most the replication engine's `maxFrameBytes` less
        /// 64 bytes (16 MiB by default).
        public var maxDecisionBytes = 8 * 1024 * 1024
        /// The most slots one `CounterState` may have: each node process that changes it adds
        /// one (a restart is a new process). A change that would add one more aborts its
        /// decision with the reason.
        public var maxCounterSlots = 4096
        /// The most members one `SetState` or `SortedSetState` may store: an insert (or add)
        /// of a member not in it, into a set that holds this many, aborts its decision with the
        /// reason. A removed member counts until its tombstones are collected (once every member
        /// holds them). Each member costs about 150 bytes of table.
        public var maxSetMembers = 1_000_000
        /// The digest tree's shape: children per inner node as a power of two, and levels below
        /// the root. Every node of a cluster must use the same shape (anti-entropy refuses to
        /// compare different ones). The default, 16 × 4 levels, has 65,536 leaves (546 KiB),
        /// so a walk stays small up to millions of keys; small test clusters use less.
        public var digestFanoutBits = 4
        /// Levels below the digest's root (see `digestFanoutBits`).
        public var digestDepth = 4
        /// How many recent changes the node remembers so an anti-entropy walk can send
        /// whole decisions (docs/replication.md, "Atomic catch-up"); a walk during which more
        /// changes happen is restarted. Each costs 8 bytes, reserved when the node starts
        /// (the memory is touched as changes fill it).
        public var recentChangeCapacity = 65_536
        /// How many decoded values the node keeps for typed reads and observers (each beside
        /// the entry's bytes, so reading a key again does not decode it again), rounded down to
        /// a power of two. A new value takes the place of one read less lately; 0 decodes on
        /// every read. The entries themselves are always kept.
        public var maxCachedDecodedValues = 65_536
        /// The node's change feed (`Node.changes(from:filter:)`): nil (the default) keeps none,
        /// and commits pay nothing for it; `ChangeFeedConfiguration()` retains the newest
        /// million changes or 64 MiB of them. Retaining costs a one-write decision an encoding
        /// and a copy (docs/design/0020-the-change-feed.md, "Measured").
        public var changeFeed: ChangeFeedConfiguration?
        /// How often the node's lock gives the longest-waiting thread a turn (docs/architecture.md,
        /// "The node's lock"). Between turns, running threads take the lock ahead of sleeping
        /// ones, which keeps many deciding threads fast: with fifty threads on two processors,
        /// 481–666 k decisions/s, as fast as one thread (docs/design/0005-node-lock.md,
        /// "Measured"). Once the first sleeper has waited this long since the queue last moved,
        /// the next unlock wakes it and the lock is handed to it ahead of every thread but the one
        /// applying a peer's deltas, which is served at the next unlock whatever this says. A
        /// thread queued behind others waits about one bound for each of them. Smaller serves
        /// sleepers (a read behind a chore) sooner and hands over more often; 0 gives a turn at
        /// every unlock with a sleeper.
        public var lockHandoffMicroseconds = 100
        /// Where the node says what happened.
        public var logger = Logger(label: "decide.node")
        /// The directory of this node's store (created when absent; the file inside is
        /// `decide.sqlite`), or nil to keep nothing across restarts. A directory belongs to one
        /// node id forever; a store that is corrupt, in use or another node's stops `init`.
        public var dataDirectory: String?
        /// What `decide` waits for, and what a crash may lose (docs/consistency.md,
        /// "Durability"). `.memory` exactly when `dataDirectory` is nil.
        public var durability: Durability = .memory
        /// Commits waiting for the store's writer thread before `decide` and `apply` wait
        /// (back-pressure); each commit is one decision, delta or catch-up batch.
        public var maxQueuedStorageCommits = 65_536
        /// Puts another `StoreFile` in front of the store's file when a `dataDirectory` is
        /// opened (nil: the file itself). The package's tests compose a fault-injecting file
        /// here (`StoreFaults`, DecideTesting); nothing in production sets it.
        package var storeFileWrapper: (@Sendable (any StoreFile) -> any StoreFile)?

        /// A configuration for node `id` (1 to 255 UTF-8 bytes, unique in its cluster), with
        /// every other setting at its default.
        public init(id: String) {
            self.id = id
        }
    }
}

extension Node.Configuration {
    /// Throws the first setting out of its range, or two that do not fit together, with the
    /// error `Node.init` reports: the id's length, every bound, and durability against
    /// `dataDirectory`. Checked before anything is opened or started.
    func validate() throws(NodeConfigurationError) {
        let idBytes = id.utf8.count
        guard idBytes >= 1 && idBytes <= 255 else { throw .invalidNodeID(id) }
        guard effectConcurrency >= 1 else { throw .invalidBound("effectConcurrency must be at least 1") }
        guard maxQueuedEffects >= 0 else { throw .invalidBound("maxQueuedEffects must not be negative") }
        guard digestFanoutBits >= 1, digestDepth >= 0,
              digestFanoutBits * digestDepth <= 24 else {
            throw .invalidBound("digestFanoutBits × digestDepth must be at most 24")
        }
        guard recentChangeCapacity >= 1 else { throw .invalidBound("recentChangeCapacity must be at least 1") }
        guard (1...86_400_000).contains(maxClockSkewMilliseconds) else {
            throw .invalidBound("maxClockSkewMilliseconds must be 1 to 86,400,000 (one day)")
        }
        guard (1...60_000).contains(expiryCheckIntervalMilliseconds) else {
            throw .invalidBound("expiryCheckIntervalMilliseconds must be 1 to 60,000")
        }
        guard maxDecisionBytes >= 1024 else { throw .invalidBound("maxDecisionBytes must be at least 1,024") }
        if let problem = changeFeed?.problem { throw .invalidBound(problem) }
        guard maxQueuedStorageCommits >= 1 else { throw .invalidBound("maxQueuedStorageCommits must be at least 1") }
        switch (durability, dataDirectory) {
        case (.memory, nil), (.strict, .some):
            break
        case (.batched(let interval), .some):
            guard (1...60_000).contains(interval) else {
                throw .invalidDurability("the batch interval must be 1 to 60,000 ms, not \(interval)")
            }
        case (.memory, .some):
            throw .invalidDurability("durability .memory keeps nothing: choose .batched or .strict for a data directory")
        case (_, nil):
            throw .invalidDurability("durability \(durability) needs a dataDirectory")
        }
    }
}

/// Why a node could not be created.
public enum NodeConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The id is empty or over 255 UTF-8 bytes.
    case invalidNodeID(String)
    /// A setting is out of its range, or two settings do not fit together; the text says which.
    case invalidBound(String)
    /// `durability` does not fit `dataDirectory` (a durable level without a directory, or
    /// `.memory` with one), or its interval is out of range.
    case invalidDurability(String)
    /// The store in `dataDirectory` could not be opened or loaded.
    case storage(StorageError)

    public var description: String {
        switch self {
        case .invalidNodeID(let id): return "invalid node id \"\(id)\": it must be 1 to 255 UTF-8 bytes"
        case .invalidBound(let text): return "invalid configuration: \(text)"
        case .invalidDurability(let text): return "invalid durability: \(text)"
        case .storage(let error): return error.description
        }
    }
}

/// The error an effect gets when the node's task pool backlog is full; it goes through
/// `mapError` like any thrown error.
public struct EffectPoolSaturated: Error, CustomStringConvertible {
    /// The backlog bound that was reached (`Node.Configuration.maxQueuedEffects`).
    public let maxQueuedEffects: Int
    public var description: String {
        "effect refused: \(maxQueuedEffects) effects already wait for the task pool"
    }
}
