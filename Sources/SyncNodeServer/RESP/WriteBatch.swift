import Decide
import DecideCore

/// One write of a `WriteBatch`: a SET without options (its key and stored value, the cheapest
/// to carry), or a counter, set, hash or sorted set change made ready (`PreparedWrite`: INCR,
/// INCRBY, DECR, DECRBY, SADD, SREM, HSET, HDEL, ZADD, ZREM).
enum BatchedWrite {
    case plainSet(key: StateKey, value: PackedBytes)
    case prepared(PreparedWrite)
}

/// Consecutive writes that clients pipelined, waiting to be committed together as one decision
/// (`BatchedWrites`): one lock, one clock tick, one delta and one replication frame for the
/// run instead of one each (docs/operations.md, "Pipelined writes").
///
/// Guarantees: the writes keep their order, and each sees the ones before it (a later SET of a
/// key replaces an earlier one, a second INCR answers one more, as running them one by one
/// would); a batch holds at most `maxArguments` arguments, and is committed as soon as its
/// arguments reach `maxBytes`, so one decision (or delta frame) of a batch is at most
/// `maxBytes` plus the one write that filled it (itself within the request bounds).
struct WriteBatch {
    static let maxArguments = 256
    static let maxBytes = 64 * 1024

    private(set) var writes: [BatchedWrite] = []
    /// What each write counts against the bounds: its arguments (its name left out) and bytes.
    private(set) var weights: [(arguments: Int, bytes: Int)] = []
    private var arguments = 0
    private var bytes = 0

    var isEmpty: Bool { writes.isEmpty }

    /// Whether the batch must be committed before another write joins it.
    var isFull: Bool { arguments >= Self.maxArguments || bytes >= Self.maxBytes }

    mutating func append(_ write: BatchedWrite, weight: (arguments: Int, bytes: Int)) {
        arguments += weight.arguments
        bytes += weight.bytes
        writes.append(write)
        weights.append(weight)
    }

    mutating func removeAll() {
        writes.removeAll(keepingCapacity: true)
        weights.removeAll(keepingCapacity: true)
        arguments = 0
        bytes = 0
    }
}

/// The decision of a `WriteBatch`: every write, in order. A batch of SETs alone writes each
/// value straight through; one holding another write reads through a tracking `KeyAccess`, as a
/// MULTI block does, so each write sees the ones before it.
struct BatchedWrites: Decision {
    let writes: [BatchedWrite]

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        let tracking = writes.contains { if case .prepared = $0 { true } else { false } }
        guard tracking else {
            for case .plainSet(let key, let value) in writes {
                // A SET over a counter, set or hash replaces it, as Redis's does (O(1) to see there is none).
                KeyAccess.replaceOtherKinds(of: key, read: read, write: write)
                write.raw(packed: value, into: key)
            }
            return .none
        }
        var access = KeyAccess(read: read, write: write, tracking: true)
        for batched in writes {
            switch batched {
            case .plainSet(let key, let value): access.set(value, into: key)
            case .prepared(let prepared): prepared.apply(&access)
            }
        }
        return .none
    }
}
