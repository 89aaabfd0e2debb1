import DecideCore

/// The stable hashes of the keys of a node's newest table changes, in a ring of fixed
/// capacity: what lets an anti-entropy walk send only what changed since a sequence number
/// instead of every bucket. A value type so that a change is recorded in one mutation of the
/// node's core.
///
/// Hashes, not keys: recording a change then costs no reference count, and overwriting the
/// oldest slot releases nothing (a ring of keys released a cold key on every change, one cache
/// miss a write; docs/design/0013-catch-up-streaming.md, "The change log keeps hashes"). The
/// keys are found again in the table when a walk asks (`NodeCore.keysChanged`); a key that
/// shares a hash with a changed key is sent too, which a walk's receiver merges like any other
/// entry.
struct ChangeLog {
    /// Counts every change of the table; `hashes(after:)` answers relative to it.
    private(set) var sequence: UInt64 = 0
    /// The ring's slots, allocated whole at the start and touched as they fill. A fixed buffer,
    /// not an array: appending to and overwriting an array checked its uniqueness and its
    /// bounds on every change, a third of what recording one cost
    /// (docs/design/0013-catch-up-streaming.md, "The change log keeps hashes"). Shared by a copy
    /// of the log, which only `NodeCore` holds (one per node, never copied).
    private let ring: Ring
    private let capacity: Int
    /// Where the next hash goes (`sequence % capacity`, kept as it moves so a change costs no
    /// division).
    private var next = 0

    init(capacity: Int) {
        precondition(capacity >= 1, "a change log holds at least one change")
        self.capacity = capacity
        ring = Ring(capacity: capacity)
    }

    /// Records that `key` changed (after a merge that changed it).
    mutating func record(_ key: StateKey) {
        record(hash: key.stableHash)
    }

    @inline(__always)
    private mutating func record(hash: UInt64) {
        sequence &+= 1
        ring.slots[next] = hash
        next = next &+ 1 == capacity ? 0 : next &+ 1
    }

    /// Records that the key of every write of `writes` changed, in order.
    mutating func record(_ writes: UnsafeBufferPointer<PendingWrite>) {
        // By index: `for write in writes` would copy each whole write (its value and typed value).
        for index in writes.indices { record(hash: writes[index].key.stableHash) }
    }

    /// The stable hashes of the keys changed after sequence number `after` (each once, newest
    /// first), or nil when more changes than the ring holds happened since.
    func hashes(after: UInt64) -> [UInt64]? {
        let count = sequence - min(after, sequence)
        guard count <= UInt64(capacity) else { return nil }
        var hashes: [UInt64] = []
        var seen = Set<UInt64>()
        var position = sequence
        while position > after {
            let hash = ring.slots[Int((position - 1) % UInt64(capacity))]
            if seen.insert(hash).inserted { hashes.append(hash) }
            position -= 1
        }
        return hashes
    }
}

extension ChangeLog {
    /// The ring's memory: `capacity` slots, freed with the log.
    fileprivate final class Ring {
        let slots: UnsafeMutablePointer<UInt64>

        init(capacity: Int) {
            slots = .allocate(capacity: capacity)
        }

        deinit { slots.deallocate() }
    }
}
