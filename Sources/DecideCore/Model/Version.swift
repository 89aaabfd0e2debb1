/// The version of a write: the hybrid timestamp of the decision that made it and the id of the
/// node that made it. All writes of one decision share one version.
///
/// Guarantees a total order: timestamps first, then node ids compared as UTF-8 bytes, so every
/// node, in every language, orders any two versions the same way.
public struct Version: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The hybrid timestamp of the decision that made the write.
    public let timestamp: HLCTimestamp
    /// The id of the node that made the write; it orders versions of equal `timestamp`.
    public let node: String
    /// `StableHash` of `node`, computed once (digests mix it in for every entry).
    public let nodeHash: UInt64

    /// The version of a write made at `timestamp` by `node`, with `nodeHash` computed.
    public init(timestamp: HLCTimestamp, node: String) {
        self.timestamp = timestamp
        self.node = node
        var hash = StableHash()
        hash.combine(bytes: node.utf8)
        self.nodeHash = hash.value
    }

    /// A version whose `nodeHash` is already known (the entry table keeps one per node id).
    @inlinable
    package init(timestamp: HLCTimestamp, node: String, nodeHash: UInt64) {
        self.timestamp = timestamp
        self.node = node
        self.nodeHash = nodeHash
    }

    public static func == (lhs: Version, rhs: Version) -> Bool {
        lhs.timestamp == rhs.timestamp && lhs.nodeHash == rhs.nodeHash && lhs.node == rhs.node
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(timestamp)
        hasher.combine(nodeHash)
    }

    public static func < (lhs: Version, rhs: Version) -> Bool {
        if lhs.timestamp != rhs.timestamp { return lhs.timestamp < rhs.timestamp }
        return lhs.node.utf8.lexicographicallyPrecedes(rhs.node.utf8)
    }

    public var description: String { "\(timestamp)@\(node)" }
}
