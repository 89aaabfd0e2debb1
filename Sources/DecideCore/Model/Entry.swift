/// The stored state of one key: value bytes (or a tombstone), the version that wrote them and,
/// for an expiring write, the instant the value stops existing.
public struct Entry: Hashable, Sendable {
    /// The version of the write that stored this entry.
    public let version: Version
    /// The encoded value; `nil` is a tombstone (the key was deleted at `version`). A value of
    /// up to `PackedBytes.inlineCapacity` bytes is held in the entry, so this builds an array
    /// for it: code on a hot path reads `packedValue` instead.
    public var value: [UInt8]? { packedValue?.array }
    /// The encoded value as the entry holds it (nil: a tombstone).
    @usableFromInline package let packedValue: PackedBytes?
    /// The hybrid-clock instant (physical milliseconds since the Unix epoch, the scale of
    /// `HLCTimestamp.physicalMilliseconds`) from which the value reads as absent on every
    /// replica; nil for a value that never expires and for every tombstone
    /// (docs/consistency.md, "Expiring keys").
    public let expiresAtMilliseconds: UInt64?
    /// Whether the value belongs to the node that wrote it (`version.node`): while that node is
    /// not a live member as a replica sees it (failed, left, removed, or cut off), the key reads
    /// as absent there, and it returns with the node (docs/consistency.md, "Node-owned keys").
    /// Always false for a tombstone.
    public let ownedByWriter: Bool

    /// `expiresAtMilliseconds` and `ownedByWriter` are dropped for a tombstone, and the instant
    /// kept within `1...HLCTimestamp.maxPhysicalMilliseconds` (an instant outside it means the
    /// same thing as the nearest one inside), so equal meanings make equal entries.
    public init(version: Version, value: [UInt8]?, expiresAtMilliseconds: UInt64? = nil, ownedByWriter: Bool = false) {
        self.init(version: version, packedValue: value.map(PackedBytes.init), expiresAtMilliseconds: expiresAtMilliseconds,
                  ownedByWriter: ownedByWriter)
    }

    /// `init(version:value:expiresAtMilliseconds:ownedByWriter:)` with the value as the table
    /// and the codec hold it (nil: a tombstone), normalised the same way.
    @inlinable
    package init(version: Version, packedValue value: PackedBytes?, expiresAtMilliseconds: UInt64? = nil, ownedByWriter: Bool = false) {
        self.version = version
        self.packedValue = value
        if value == nil {
            self.expiresAtMilliseconds = nil
            self.ownedByWriter = false
        } else {
            self.expiresAtMilliseconds = Self.normalized(expiry: expiresAtMilliseconds)
            self.ownedByWriter = ownedByWriter
        }
    }

    /// An expiry instant as every entry and write keeps it: within
    /// `1...HLCTimestamp.maxPhysicalMilliseconds` (an instant outside means what the nearest one
    /// inside does).
    @inlinable
    package static func normalized(expiry: UInt64?) -> UInt64? {
        expiry.map { Swift.min(Swift.max($0, 1), HLCTimestamp.maxPhysicalMilliseconds) }
    }

    /// Whether the key was deleted at `version` (`value` is `nil`). An expired value is not a
    /// tombstone.
    public var isTombstone: Bool { packedValue == nil }

    /// Moves the value out of `entry`, an entry its holder is about to drop, and leaves nil in
    /// its place (the memory, not the `let`: `packedValue` is read-only to everyone else). A
    /// table storing the value of an entry it consumed takes it so, without the retain of a
    /// copy and the release of the dropped entry's (two atomics a write of a value too long to
    /// hold in place: docs/design/0008-in-place-access.md, "Records compared and values moved
    /// where they lie"). After it the entry reads as a tombstone; nothing else of it changes.
    package static func takeValue(from entry: inout Entry) -> PackedBytes? {
        withUnsafeMutablePointer(to: &entry) { pointer in
            let field = (UnsafeMutableRawPointer(pointer) + packedValueOffset).assumingMemoryBound(to: PackedBytes?.self)
            let value = field.move()
            field.initialize(to: nil)
            return value
        }
    }

    /// Computed, not a `static let`: the optimiser folds it to a constant, where a stored one
    /// was a `swift_once` call on every merge.
    private static var packedValueOffset: Int { MemoryLayout<Entry>.offset(of: \Entry.packedValue)! }

    /// Whether the value has expired at hybrid-clock instant `now` (physical milliseconds):
    /// the key then reads as absent, exactly like a tombstone.
    public func isExpired(atMilliseconds now: UInt64) -> Bool {
        guard let expiresAtMilliseconds else { return false }
        return now >= expiresAtMilliseconds
    }

    /// The value a reader sees at hybrid-clock instant `now`: nil for a tombstone or an
    /// expired value.
    public func value(atMilliseconds now: UInt64) -> [UInt8]? {
        isExpired(atMilliseconds: now) ? nil : value
    }

    /// Whether this entry reads as absent for good at hybrid-clock instant `now`: a tombstone, an
    /// expired value, or a value owned by a node `isRemovedOwner` names (removed from the
    /// cluster: it never returns). Such an entry is what collection removes once every member
    /// holds it (docs/consistency.md §6).
    public func isAbsentForGood(atMilliseconds now: UInt64, isRemovedOwner: (String) -> Bool) -> Bool {
        isTombstone || isExpired(atMilliseconds: now) || (ownedByWriter && isRemovedOwner(version.node))
    }

    /// Last-writer-wins: the entry that survives when `self` and `other` meet.
    ///
    /// Guarantees: commutative (`a.merged(b) == b.merged(a)`), associative and idempotent, so
    /// replicas that receive the same entries in any order, any number of times, agree.
    /// The higher version wins; two different entries with one version (which a correct node
    /// never produces) are ordered by their bytes (a tombstone below any value), then by their
    /// expiry (the later one, never-expiring highest), then owned above not owned, so the laws
    /// hold even then. Expiry and ownership play no part in which version wins: a newer write
    /// replaces an expiring or owned one, expired or hidden or not.
    public func merged(with other: Entry) -> Entry {
        wins(over: other) ? self : other
    }

    /// Whether `self` survives a merge with `other` (true when they are equal).
    public func wins(over other: Entry) -> Bool {
        if version != other.version { return other.version < version }
        switch (packedValue, other.packedValue) {
        case (nil, _): return other.packedValue == nil
        case (.some, nil): return true
        case let (.some(mine), .some(theirs)):
            if mine != theirs { return !mine.lexicographicallyPrecedes(theirs) }
            let expiry = expiresAtMilliseconds ?? .max, otherExpiry = other.expiresAtMilliseconds ?? .max
            if expiry != otherExpiry { return expiry > otherExpiry }
            return ownedByWriter || !other.ownedByWriter
        }
    }
}
