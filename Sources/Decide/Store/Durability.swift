/// How much of a node's state survives the process, and what `decide` waits for.
/// docs/consistency.md, "Durability", says what each level may lose on a crash.
public enum Durability: Hashable, Sendable, CustomStringConvertible {
    /// Nothing is written anywhere: a restarted node starts empty and catches up from peers.
    /// `decide` never waits on a disk. Requires `Configuration.dataDirectory == nil`.
    case memory
    /// Commits are written to the store by a background thread in group commits, one every
    /// `intervalMilliseconds` (1...60,000), each synced to disk. `decide` does not wait for the
    /// disk (unless the write queue is full); a crash loses at most the commits of the last
    /// interval plus the one being synced. Requires a `Configuration.dataDirectory`.
    case batched(intervalMilliseconds: Int = 5)
    /// `decide` (and `apply`) return only once their writes are synced to disk; concurrent
    /// callers share one sync (group commit). A crash loses nothing that `decide` reported
    /// `.committed`. Requires a `Configuration.dataDirectory`.
    case strict

    /// `memory`, `batched(5ms)`, `strict`.
    public var description: String {
        switch self {
        case .memory: return "memory"
        case .batched(let interval): return "batched(\(interval)ms)"
        case .strict: return "strict"
        }
    }
}
