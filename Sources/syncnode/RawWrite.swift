import Decide
import DecideCore

/// The decision behind `put` and `delete` (and a plain Redis SET): writes JSON bytes into an
/// untyped key, or a tombstone when `value` is nil; with `lifetimeMilliseconds`, the value
/// expires that long after the decision. One key per decision, so each is one delta.
struct RawWrite: Decision {
    let key: StateKey
    let value: [UInt8]?
    var lifetimeMilliseconds: UInt64? = nil

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        if let value, let lifetimeMilliseconds {
            write.raw(value, into: key, expiringAfter: .milliseconds(lifetimeMilliseconds))
        } else {
            write.raw(value, into: key)
        }
        return .none
    }
}
