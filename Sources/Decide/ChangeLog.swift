import DecideCore

/// The keys of a node's newest table changes, in a ring of fixed capacity: what lets an
/// anti-entropy walk send only what changed since a sequence number instead of every bucket.
/// A value type so that a change is recorded in one mutation of the node's core.
struct ChangeLog {
    /// Counts every change of the table; `keys(after:)` answers relative to it.
    private(set) var sequence: UInt64 = 0
    private var ring: [StateKey] = []
    private let capacity: Int
    /// Where the next key goes once the ring is full (`sequence % capacity`, kept as it moves so
    /// a change costs no division).
    private var next = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Records that `key` changed (after a merge that changed it).
    mutating func record(_ key: StateKey) {
        sequence += 1
        if ring.count < capacity {
            ring.append(key)
            next = ring.count == capacity ? 0 : ring.count
        } else {
            ring[next] = key
            next = next + 1 == capacity ? 0 : next + 1
        }
    }

    /// Records that the key of every write of `writes` changed, in order.
    mutating func record(_ writes: [PendingWrite]) {
        // By index: `for write in writes` would copy each whole write (its value and typed value).
        for index in writes.indices { record(writes[index].key) }
    }

    /// The keys changed after sequence number `after` (each once), or nil when more changes
    /// than the ring holds happened since.
    func keys(after: UInt64) -> [StateKey]? {
        let count = sequence - min(after, sequence)
        guard count <= UInt64(ring.count) else { return nil }
        var keys: [StateKey] = []
        var seen = Set<StateKey>()
        var position = sequence
        while position > after {
            let key = ring[Int((position - 1) % UInt64(capacity))]
            if seen.insert(key).inserted { keys.append(key) }
            position -= 1
        }
        return keys
    }
}
