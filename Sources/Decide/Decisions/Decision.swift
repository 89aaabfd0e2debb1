/// The only way state changes. A decision reads a consistent view of the node's state through
/// `read`, writes through `write`, and returns the `Effect` to run after it commits.
///
/// Guarantees (given by the node that runs it):
/// - decisions of one node run one at a time, never concurrently;
/// - `read` sees the state as of the decision's start plus the decision's own writes;
/// - all writes commit together with one version, or (when a value cannot be encoded) none do;
///   observers on this node and on every replica see all of them or none;
/// - `execute` must not do I/O or block: return an effect for that. The reader and writer are
///   valid only during `execute`.
public protocol Decision: Sendable {
    /// Reads through `read`, writes through `write` (both valid only during this call), and
    /// returns the effect to run once the writes commit (`.none` for nothing). No I/O, no
    /// blocking.
    func execute(read: StorageReader, write: StorageWriter) -> Effect
}
