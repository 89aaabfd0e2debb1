/// Why a node's store could not be opened, read or written. Every case names the file (or
/// directory) it is about, so an operator knows what to look at; a store is never silently
/// replaced.
public enum StorageError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file is not a Decide store, or is damaged (not SQLite, truncated, failed its
    /// integrity check, or holds values a Decide store never holds). Start-up stops; move the
    /// file aside to start empty and catch up from peers.
    case corrupt(path: String, reason: String)
    /// The file or its directory could not be created, opened or read (permissions, a missing
    /// mount, an I/O error).
    case unreadable(path: String, reason: String)
    /// Another node (in this process or another) has the store open.
    case inUse(path: String)
    /// The store was created by node `stored`; a node id is forever tied to its data.
    case nodeIDMismatch(path: String, stored: String, configured: String)
    /// A write or sync failed after start-up (disk full, I/O error). The store stops taking
    /// writes; see docs/consistency.md, "Durability".
    case writeFailed(path: String, reason: String)
    /// The store was closed (`Node.close()`); nothing more is written to it.
    case closed(path: String)

    /// The file or directory the error is about.
    public var path: String {
        switch self {
        case .corrupt(let path, _), .unreadable(let path, _), .inUse(let path),
             .nodeIDMismatch(let path, _, _), .writeFailed(let path, _), .closed(let path):
            return path
        }
    }

    public var description: String {
        switch self {
        case let .corrupt(path, reason):
            return "store \(path) is corrupt or not a Decide store (\(reason)); it was left untouched"
        case let .unreadable(path, reason):
            return "store \(path) cannot be opened or read: \(reason)"
        case let .inUse(path):
            return "store \(path) is in use by another node"
        case let .nodeIDMismatch(path, stored, configured):
            return "store \(path) belongs to node \"\(stored)\", not \"\(configured)\""
        case let .writeFailed(path, reason):
            return "writing store \(path) failed: \(reason); it takes no more writes"
        case let .closed(path):
            return "store \(path) is closed"
        }
    }
}
