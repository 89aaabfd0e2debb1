import DecideCore

/// The stable hashes of the keys of a node's newest table changes, in a ring of fixed
/// capacity: what lets an anti-entropy walk send only what changed since a sequence number
/// instead of every bucket. A value type so that a change is recorded in one mutation of the
/// node's core.
///
/// Hashes, not keys: recording a change then costs no reference count, and overwriting the
/// oldest slot releases nothing (a ring of keys released a cold key on every change, one cache
/// miss a write; docs/benchmarks.md). The keys are found again in the table when a walk asks
/// (`NodeCore.keysChanged`); a key that shares a hash with a changed key is sent too, which a
/// walk's receiver merges like any other entry.
struct ChangeLog {
    /// Counts every change of the table; `hashes(after:)` answers relative to it.
    private(set) var sequence: UInt64 = 0
    private var ring: [UInt64] = []
    private let capacity: Int
    /// Where the next hash goes once the ring is full (`sequence % capacity`, kept as it moves
    /// so a change costs no division).
    private var next = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Records that `key` changed (after a merge that changed it).
    mutating func record(_ key: StateKey) {
        record(hash: key.stableHash)
    }

    private mutating func record(hash: UInt64) {
        sequence += 1
        if ring.count < capacity {
            ring.append(hash)
            next = ring.count == capacity ? 0 : ring.count
        } else {
            ring[next] = hash
            next = next + 1 == capacity ? 0 : next + 1
        }
    }

    /// Records that the key of every write of `writes` changed, in order.
    mutating func record(_ writes: [PendingWrite]) {
        // By index: `for write in writes` would copy each whole write (its value and typed value).
        for index in writes.indices { record(hash: writes[index].key.stableHash) }
    }

    /// The stable hashes of the keys changed after sequence number `after` (each once, newest
    /// first), or nil when more changes than the ring holds happened since.
    func hashes(after: UInt64) -> [UInt64]? {
        let count = sequence - min(after, sequence)
        guard count <= UInt64(ring.count) else { return nil }
        var hashes: [UInt64] = []
        var seen = Set<UInt64>()
        var position = sequence
        while position > after {
            let hash = ring[Int((position - 1) % UInt64(capacity))]
            if seen.insert(hash).inserted { hashes.append(hash) }
            position -= 1
        }
        return hashes
    }
}
