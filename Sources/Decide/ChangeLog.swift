import DecideCore

/// The keys of a node's newest table changes, in a ring of fixed capacity: what lets an
/// anti-entropy walk send only what changed since a sequence number instead of every bucket.
/// A value type so that a change is recorded in one mutation of the node's core.
struct ChangeLog {
    /// Counts every change of the table; `keys(after:)` answers relative to it.
    private(set) var sequence: UInt64 = 0
    private var ring: [StateKey] = []
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Records that `key` changed (after a merge that changed it).
    mutating func record(_ key: StateKey) {
        sequence += 1
        if ring.count < capacity {
            ring.append(key)
        } else {
            ring[Int((sequence - 1) % UInt64(capacity))] = key
        }
    }

    /// Records that every key of `keys` changed, in order.
    mutating func record(_ keys: [StateKey]) {
        for key in keys { record(key) }
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
