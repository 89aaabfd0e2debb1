/// One committed decision as it travels between nodes: the decision's version and its writes.
///
/// Guarantees: every write of the decision is here with the one version, so a replica applies
/// the whole decision or none of it.
public struct Delta: Hashable, Sendable {
    /// One write of a decision: the key, the new value bytes (`nil` deletes the key) and, for
    /// a value, its expiry instant and whether the writing node owns it
    /// (`Entry.expiresAtMilliseconds`, `Entry.ownedByWriter`, normalised the same way).
    public struct Write: Hashable, Sendable {
        /// The key written.
        public let key: StateKey
        /// The new encoded value; `nil` deletes the key. Builds an array for a short value
        /// (see `Entry.value`): code on a hot path reads `packedValue`.
        public var value: [UInt8]? { packedValue?.array }
        /// The new encoded value as the write holds it (nil: a delete).
        package let packedValue: PackedBytes?
        /// The hybrid-clock instant (physical milliseconds since the Unix epoch) from which the
        /// value reads as absent; `nil` for a value that never expires and for a delete.
        public let expiresAtMilliseconds: UInt64?
        /// Whether the value belongs to the writing node; always false for a delete.
        public let ownedByWriter: Bool
        /// A write of `value` (`nil` deletes) into `key`, normalised as `Entry.init` does: expiry
        /// and ownership are dropped for a delete, and the instant is kept within
        /// `1...HLCTimestamp.maxPhysicalMilliseconds`.
        public init(key: StateKey, value: [UInt8]?, expiresAtMilliseconds: UInt64? = nil, ownedByWriter: Bool = false) {
            self.init(key: key, packedValue: value.map(PackedBytes.init), expiresAtMilliseconds: expiresAtMilliseconds,
                      ownedByWriter: ownedByWriter)
        }

        /// `init(key:value:expiresAtMilliseconds:ownedByWriter:)` with the value as the codec
        /// and the table hold it.
        package init(key: StateKey, packedValue value: PackedBytes?, expiresAtMilliseconds: UInt64? = nil, ownedByWriter: Bool = false) {
            self.key = key
            self.packedValue = value
            self.expiresAtMilliseconds = value == nil ? nil
                : Entry.normalized(expiry: expiresAtMilliseconds)
            self.ownedByWriter = value != nil && ownedByWriter
        }

        /// The write that stores `entry` (its version aside) into `key`.
        public init(key: StateKey, entry: Entry) {
            self.init(key: key, packedValue: entry.packedValue, expiresAtMilliseconds: entry.expiresAtMilliseconds,
                      ownedByWriter: entry.ownedByWriter)
        }

        /// This write as the entry it stores under `version`.
        public func entry(at version: Version) -> Entry {
            Entry(version: version, packedValue: packedValue, expiresAtMilliseconds: expiresAtMilliseconds, ownedByWriter: ownedByWriter)
        }
    }

    /// The version of the decision, shared by every one of its writes.
    public let version: Version
    /// Every write of the decision.
    public let writes: [Write]

    /// The delta of a decision made at `version` that wrote `writes`.
    public init(version: Version, writes: [Write]) {
        self.version = version
        self.writes = writes
    }

    /// The writes as entries, each carrying the decision's version.
    public var entries: [KeyedEntry] {
        writes.map { KeyedEntry(key: $0.key, entry: $0.entry(at: version)) }
    }
}

/// A key with its entry: the unit of catch-up transfers and dumps.
public struct KeyedEntry: Hashable, Sendable {
    /// The key `entry` is stored under.
    public let key: StateKey
    /// The stored state of `key`.
    public let entry: Entry
    /// Pairs `key` with its `entry`.
    public init(key: StateKey, entry: Entry) {
        self.key = key
        self.entry = entry
    }
}

extension KeyedEntry {
    /// The most bytes this entry takes in a `WireCodec` entry batch (lengths as 5-byte varints).
    public var maxEncodedBytes: Int {
        WireCodec.maxEncodedEntryBytes(nameBytes: key.name.utf8.count, elementBytes: key.elementCount,
                                       nodeBytes: entry.version.node.utf8.count, valueBytes: entry.packedValue?.count ?? 0)
    }
}
