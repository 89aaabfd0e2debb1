/// The largest parts of a replicated write that a node accepts: what every peer's decoder
/// refuses above before it allocates, and what a node refuses to commit
/// (`Node.Configuration.limits`), so that whatever commits on one node replicates to the others.
///
/// Guarantees: a message with any part over these limits is refused whole, with a typed error
/// and a closed link; nothing of it is allocated or applied. Raise them on every node of a
/// cluster together: a peer refuses what is over its own limits.
public struct WireLimits: Hashable, Sendable {
    /// The longest node id, in UTF-8 bytes.
    public var maxNodeIDBytes = 255
    /// The longest state name, in UTF-8 bytes.
    public var maxNameBytes = 1024
    /// The longest encoded element id of a collection.
    public var maxElementBytes = 64 * 1024
    /// The longest encoded value.
    public var maxValueBytes = 1024 * 1024
    /// The most writes in one delta, or entries in one catch-up batch.
    public var maxEntriesPerMessage = 1 << 20

    /// The defaults above.
    public init() {}
}
