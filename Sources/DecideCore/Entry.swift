/// The stored state of one key: value bytes (or a tombstone) and the version that wrote them.
public struct Entry: Hashable, Sendable {
    public let version: Version
    /// The encoded value; `nil` is a tombstone (the key was deleted at `version`).
    public let value: [UInt8]?

    public init(version: Version, value: [UInt8]?) {
        self.version = version
        self.value = value
    }

    public var isTombstone: Bool { value == nil }

    /// Last-writer-wins: the entry that survives when `self` and `other` meet.
    ///
    /// Guarantees: commutative (`a.merged(b) == b.merged(a)`), associative and idempotent, so
    /// replicas that receive the same entries in any order, any number of times, agree.
    /// The higher version wins; two different entries with one version (which a correct node
    /// never produces) are ordered by their bytes (a tombstone below any value), so the laws
    /// hold even then.
    public func merged(with other: Entry) -> Entry {
        wins(over: other) ? self : other
    }

    /// Whether `self` survives a merge with `other` (true when they are equal).
    public func wins(over other: Entry) -> Bool {
        if version != other.version { return other.version < version }
        switch (value, other.value) {
        case (nil, _): return other.value == nil
        case (.some, nil): return true
        case let (.some(mine), .some(theirs)):
            return !mine.lexicographicallyPrecedes(theirs)
        }
    }
}
