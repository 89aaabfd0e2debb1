/// The strings a delta decoder met last on one stream: the sender's node id and the last
/// collection name, each with its `StableHash`. A peer's deltas carry the same ones again and
/// again, and a decoder given them (`WireCodec.decodeDelta(_:from:recent:)`, `Node`'s apply of
/// `ReceivedDeltas`) answers these same strings when the bytes match, instead of building and
/// hashing new ones.
///
/// Guarantees: changes only what is decoded faster, never what: the bytes are compared in full.
package struct RecentWireStrings: Sendable {
    package var version: Version?
    package var name: (text: String, hash: StableHash)?
    package init() {}

    /// The version of `timestamp` by the node whose id is the UTF-8 bytes `node` (already
    /// checked to be UTF-8), reusing the recent node id when the bytes are its; remembered.
    package mutating func version(timestamp: HLCTimestamp, node: UnsafeRawBufferPointer) -> Version {
        let made = if let known = version, Self.same(known.node, node) {
            Version(timestamp: timestamp, node: known.node, nodeHash: known.nodeHash)
        } else {
            Version(timestamp: timestamp, node: String(decoding: node, as: UTF8.self))
        }
        version = made
        return made
    }

    /// The name whose UTF-8 bytes are `utf8` (already checked to be UTF-8) and its hash
    /// (`StateKey.nameHash`), reusing the recent name when the bytes are its; remembered.
    package mutating func name(utf8: UnsafeRawBufferPointer) -> (text: String, hash: StableHash) {
        if let known = name, Self.same(known.text, utf8) { return known }
        let made = (text: String(decoding: utf8, as: UTF8.self), hash: StateKey.nameHash(utf8: utf8))
        name = made
        return made
    }

    /// Whether `text` is exactly the bytes `utf8`.
    private static func same(_ text: String, _ utf8: UnsafeRawBufferPointer) -> Bool {
        guard text.utf8.count == utf8.count else { return false }
        guard !utf8.isEmpty else { return true }
        return text.utf8.withContiguousStorageIfAvailable { sameBytes(UnsafeRawBufferPointer($0), utf8) } ?? text.utf8.elementsEqual(utf8)
    }
}
