/// The strings a delta decoder met last on one stream: the sender's node id and the last
/// collection name, each with its `StableHash`. A peer's deltas carry the same ones again and
/// again, and a decoder given them (`WireCodec.decodeDelta(_:from:recent:)`, `Node`'s apply of
/// `ReceivedDeltas`) answers these same strings when the bytes match, instead of building and
/// hashing new ones.
///
/// Guarantees: changes only what is decoded faster, never what: the bytes are compared in full.
package struct RecentWireStrings: Sendable {
    package private(set) var version: Version?
    package private(set) var name: (text: String, hash: StableHash)?
    /// The UTF-8 bytes of `version`'s node id and of `name`, in place when short: what the
    /// next delta's bytes are compared with, without going through `String.utf8`.
    private var nodeBytes = PackedBytes.inline(0, 0, count: 0)
    private var nameBytes = PackedBytes.inline(0, 0, count: 0)
    package init() {}

    /// Remembers `version` as the recent one; `sameNode`: its node id is the recent one's
    /// (its bytes were compared), so the bytes held for it stay.
    package mutating func remember(_ version: Version, sameNode: Bool) {
        if !sameNode || self.version == nil { nodeBytes = PackedBytes(utf8: version.node) }
        self.version = version
    }

    /// Remembers `name` (with its hash) as the recent one; `sameName` as for `remember(_:sameNode:)`.
    package mutating func remember(name text: String, hash: StableHash, sameName: Bool) {
        if !sameName || name == nil { nameBytes = PackedBytes(utf8: text) }
        name = (text, hash)
    }

    /// The version of `timestamp` by the node whose id is the UTF-8 bytes `node` (already
    /// checked to be UTF-8), reusing the recent node id when the bytes are its; remembered.
    package mutating func version(timestamp: HLCTimestamp, node: UnsafeRawBufferPointer) -> Version {
        let made: Version
        if let known = version, nodeBytes.equals(node) {
            made = Version(timestamp: timestamp, node: known.node, nodeHash: known.nodeHash)
        } else {
            made = Version(timestamp: timestamp, node: String(decoding: node, as: UTF8.self))
            nodeBytes = PackedBytes(node)
        }
        version = made
        return made
    }

    /// The name whose UTF-8 bytes are `utf8` (already checked to be UTF-8) and its hash
    /// (`StateKey.nameHash`), reusing the recent name when the bytes are its; remembered.
    package mutating func name(utf8: UnsafeRawBufferPointer) -> (text: String, hash: StableHash) {
        if let known = name, nameBytes.equals(utf8) { return known }
        let made = (text: String(decoding: utf8, as: UTF8.self), hash: StateKey.nameHash(utf8: utf8))
        name = made
        nameBytes = PackedBytes(utf8)
        return made
    }
}
