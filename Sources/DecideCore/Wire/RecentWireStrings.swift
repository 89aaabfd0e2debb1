/// The strings a delta decoder met last on one stream: the sender's node id and the last
/// collection name, each with its `StableHash`. A peer's deltas carry the same ones again and
/// again, and a decoder given them (`WireCodec.decodeDelta(_:from:recent:)`) answers these same
/// strings when the bytes match, instead of building and validating new ones.
///
/// Guarantees: changes only what is decoded faster, never what: the bytes are compared in full.
package struct RecentWireStrings: Sendable {
    package var version: Version?
    package var name: (text: String, hash: StableHash)?
    package init() {}
}
