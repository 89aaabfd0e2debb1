import Decide
import DecideCore

/// The decision behind `put` and `delete` (and a plain Redis SET): writes JSON bytes into an
/// untyped key, or a tombstone when `value` is nil; with `lifetimeMilliseconds`, the value
/// expires that long after the decision. One key per decision, so each is one delta.
struct RawWrite: Decision {
    let key: StateKey
    let value: PackedBytes?
    var lifetimeMilliseconds: UInt64? = nil
    /// The value belongs to this node (docs/consistency.md, "Node-owned keys").
    var owned = false
    /// A Redis SET: a plain key's write also replaces a counter, set or hash of its name, as
    /// Redis's SET does (`put` and `delete` write the one key only).
    var replacesOtherKinds = false

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        if replacesOtherKinds { KeyAccess.replaceOtherKinds(of: key, read: read, write: write) }
        if let value, lifetimeMilliseconds != nil || owned {
            write.raw(packed: value, into: key, expiry: lifetimeMilliseconds.map { .after(milliseconds: $0) } ?? .never, ownedByThisNode: owned)
        } else {
            write.raw(packed: value, into: key)
        }
        return .none
    }
}
