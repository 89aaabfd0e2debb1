/// The in-memory state of one node: the newest entry of every key, merged last-writer-wins,
/// with a `StateDigest` kept current on every write.
///
/// Guarantees: after any sequence of `merge` calls the table holds, for every key, the
/// `Entry.merged` of every entry offered for it (so two tables offered the same entries in any
/// order hold the same entries and the same digest); `digest` always describes exactly the
/// entries held.
public struct EntryTable: Sendable {
    /// One stored key: its entry and a decoded form of its value that the node layer may cache
    /// (cleared whenever the entry changes, so it never describes an older entry).
    public struct Slot: Sendable {
        public fileprivate(set) var entry: Entry
        public var decoded: (any Sendable)?
        /// `StateDigest.contribution(of:_:)` of this key and entry, computed once when it was merged.
        public fileprivate(set) var contribution: UInt64
    }

    /// What `merge` did with an offered entry.
    public enum MergeOutcome: Sendable {
        /// The key was absent; the entry is now stored.
        case inserted
        /// The entry beat the stored one, which it replaced.
        case replaced(previous: Entry)
        /// The stored entry won (or was equal); nothing changed.
        case kept
        public var changed: Bool {
            if case .kept = self { return false }
            return true
        }
    }

    private var slots: [StateKey: Slot] = [:]
    /// The keys of each digest leaf, so anti-entropy reads a differing leaf without a scan.
    private var bucketMembers: [[StateKey]]
    public private(set) var digest: StateDigest
    /// Number of stored keys whose entry is a tombstone.
    public private(set) var tombstoneCount = 0
    /// The highest version ever merged into this table (nil for none); removals do not lower it.
    public private(set) var highestVersion: Version?

    public init(digest: StateDigest = StateDigest()) {
        self.digest = digest
        self.bucketMembers = [[StateKey]](repeating: [], count: digest.width(ofLevel: digest.depth))
    }

    /// Stored keys, tombstones included.
    public var count: Int { slots.count }

    public func entry(for key: StateKey) -> Entry? { slots[key]?.entry }

    public func slot(for key: StateKey) -> Slot? { slots[key] }

    /// Stores a decoded value for `key`, only if the stored entry still has `version`.
    public mutating func cache(_ decoded: any Sendable, for key: StateKey, version: Version) {
        guard let index = slots.index(forKey: key), slots.values[index].entry.version == version else { return }
        slots.values[index].decoded = decoded
    }

    /// Offers `entry` for `key` under last-writer-wins; `decoded`, when given, is cached with
    /// it if it wins.
    @discardableResult
    public mutating func merge(_ entry: Entry, for key: StateKey, decoded: (any Sendable)? = nil) -> MergeOutcome {
        let outcome: MergeOutcome
        if let index = slots.index(forKey: key) {
            let previous = slots.values[index]
            guard !previous.entry.wins(over: entry) else { return .kept }
            let contribution = StateDigest.contribution(of: key, entry)
            slots.values[index] = Slot(entry: entry, decoded: decoded, contribution: contribution)
            if previous.entry.isTombstone { tombstoneCount -= 1 }
            digest.toggle(contribution: previous.contribution ^ contribution, of: key)
            outcome = .replaced(previous: previous.entry)
        } else {
            let contribution = StateDigest.contribution(of: key, entry)
            slots[key] = Slot(entry: entry, decoded: decoded, contribution: contribution)
            digest.toggle(contribution: contribution, of: key)
            bucketMembers[digest.bucket(of: key)].append(key)
            outcome = .inserted
        }
        if entry.isTombstone { tombstoneCount += 1 }
        if let highest = highestVersion {
            if highest.timestamp <= entry.version.timestamp && highest != entry.version && highest < entry.version {
                highestVersion = entry.version
            }
        } else {
            highestVersion = entry.version
        }
        return outcome
    }

    /// Removes the tombstone of `key` if it is still the one at `version` (tombstone
    /// collection); returns whether it was removed. Live entries are never removed here.
    @discardableResult
    public mutating func collectTombstone(for key: StateKey, version: Version) -> Bool {
        guard let slot = slots[key], slot.entry.isTombstone, slot.entry.version == version else { return false }
        remove(key, slot)
        return true
    }

    private mutating func remove(_ key: StateKey, _ slot: Slot) {
        slots[key] = nil
        if slot.entry.isTombstone { tombstoneCount -= 1 }
        digest.toggle(contribution: slot.contribution, of: key)
        let bucket = digest.bucket(of: key)
        if let index = bucketMembers[bucket].firstIndex(of: key) { bucketMembers[bucket].remove(at: index) }
    }

    /// Every stored (key, entry), in no particular order.
    public var entries: some Sequence<(key: StateKey, entry: Entry)> {
        slots.lazy.map { (key: $0.key, entry: $0.value.entry) }
    }

    /// Every stored (key, entry), sorted by key.
    public func sortedEntries() -> [(key: StateKey, entry: Entry)] {
        entries.sorted { $0.key < $1.key }
    }

    /// The keys in digest leaf `bucket`.
    public func keys(inBucket bucket: Int) -> [StateKey] { bucketMembers[bucket] }

    /// Every stored (key, slot) whose key falls in digest leaf `bucket`, without a scan.
    public func slots(inBucket bucket: Int) -> [(key: StateKey, slot: Slot)] {
        bucketMembers[bucket].compactMap { key in slots[key].map { (key: key, slot: $0) } }
    }

    /// Every stored (key, entry) whose key falls in digest leaf `bucket`, without a scan.
    public func entries(inBucket bucket: Int) -> [(key: StateKey, entry: Entry)] {
        bucketMembers[bucket].compactMap { key in slots[key].map { (key: key, entry: $0.entry) } }
    }
}
