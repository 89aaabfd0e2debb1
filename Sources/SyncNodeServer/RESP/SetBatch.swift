import Decide
import DecideCore

/// Consecutive plain SETs (no option) that one client pipelined into one read, waiting to be
/// committed together as one decision (`BatchedSets`): one lock, one clock tick, one delta and one
/// replication frame for the run instead of one each (docs/operations.md, "Pipelined SETs").
///
/// Guarantees: the writes keep their order (a later SET of a key replaces an earlier one, as
/// running them one by one would); a batch holds at most `maxWrites` writes, and is committed
/// as soon as its keys and values reach `maxBytes`, so one decision (or delta frame) of a batch
/// is at most `maxBytes` plus the one SET that filled it (itself within `maxValueBytes`).
struct SetBatch {
    static let maxWrites = 128
    static let maxBytes = 64 * 1024

    private(set) var writes: [(key: StateKey, value: PackedBytes)] = []
    private var bytes = 0

    var isEmpty: Bool { writes.isEmpty }

    /// Whether the batch must be committed before another write joins it.
    var isFull: Bool { writes.count >= Self.maxWrites || bytes >= Self.maxBytes }

    mutating func append(key: StateKey, value: PackedBytes) {
        bytes += key.name.utf8.count + key.elementCount + value.count
        writes.append((key, value))
    }

    mutating func removeAll() {
        writes.removeAll(keepingCapacity: true)
        bytes = 0
    }
}

/// The decision of a `SetBatch`: every write, in order.
struct BatchedSets: Decision {
    let writes: [(key: StateKey, value: PackedBytes)]

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        for (key, value) in writes {
            // A SET over a counter, set or hash replaces it, as Redis's does (O(1) to see there is none).
            KeyAccess.replaceOtherKinds(of: key, read: read, write: write)
            write.raw(packed: value, into: key)
        }
        return .none
    }
}
