import Decide
import DecideCore

/// The decision behind `put` and `delete`: writes JSON bytes into an untyped key, or a
/// tombstone when `value` is nil. One key per decision, so each is one delta.
struct RawWrite: Decision {
    let key: StateKey
    let value: [UInt8]?

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        write.raw(value, into: key)
        return .none
    }
}
