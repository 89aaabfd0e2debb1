/// When the expiring records of an `EntryTable` are next due: a min-heap of (instant, record
/// number), at most one item per record, in a `GrowingArray` (12 bytes an item).
///
/// The table keeps the slot of each record's item (`EntryTable.expirySlots`, 4 bytes a record),
/// so an item is found, moved or taken out without a search and without a map from keys to instants:
/// every operation that moves items tells its caller where each one landed (`placed`). Items
/// name records by number; when the table renumbers a record it renumbers its item
/// (`renumber(slot:to:)`).
///
/// This replaced a heap of (instant, `StateKey`) beside a `[StateKey: UInt64]` of each key's
/// live instant: at millions of expiring keys that dictionary's rehash held the node's lock
/// 0.4 s at 786,432 keys and 1.9 s at 3.1 M, and the heap's array copy 122 ms at 2.1 M
/// (docs/design/0007-growing-without-stalls.md, "The expiry schedule").
///
/// Guarantees: the first item is one with the earliest instant; `insert`, `reschedule` and
/// `remove` are O(log n) and call `placed(record, slot)` once for every item whose slot changed,
/// the one inserted or rescheduled included, and for no other; the schedule never holds more
/// items than were inserted and not removed.
struct ExpirySchedule: Sendable {
    /// One scheduled record: due at `instant` (hybrid-clock milliseconds). 12 bytes: the
    /// instant in two 4-byte halves, so the item needs no 8-byte alignment (16 bytes with a
    /// `UInt64`, 4 of them padding: 4 bytes a key that expires).
    struct Item: Sendable {
        private var instantLow: UInt32
        private var instantHigh: UInt32
        var record: UInt32

        init(instant: UInt64, record: UInt32) {
            instantLow = UInt32(truncatingIfNeeded: instant)
            instantHigh = UInt32(truncatingIfNeeded: instant >> 32)
            self.record = record
        }

        var instant: UInt64 {
            @inline(__always) get { UInt64(instantHigh) << 32 | UInt64(instantLow) }
            @inline(__always) set {
                instantLow = UInt32(truncatingIfNeeded: newValue)
                instantHigh = UInt32(truncatingIfNeeded: newValue >> 32)
            }
        }
    }

    private var heap = GrowingArray<Item>()

    /// Items scheduled.
    var count: Int { heap.count }

    /// The item with the earliest instant, if any.
    var first: Item? { heap.isEmpty ? nil : heap[0] }

    /// The item at `slot` (`0..<count`).
    subscript(slot: Int) -> Item { heap[slot] }

    /// Schedules `record`, which has no item, at `instant`.
    @inline(__always)
    mutating func insert(record: UInt32, atMilliseconds instant: UInt64, placed: (UInt32, Int) -> Void) {
        heap.append(Item(instant: instant, record: record))
        siftUp(heap.count - 1, placed: placed)
    }

    /// Moves the item at `slot` to `instant`, earlier or later.
    @inline(__always)
    mutating func reschedule(slot: Int, atMilliseconds instant: UInt64, placed: (UInt32, Int) -> Void) {
        let earlier = instant < heap[slot].instant
        heap[slot].instant = instant
        if earlier {
            siftUp(slot, placed: placed)
        } else {
            siftDown(slot, placed: placed)
        }
    }

    /// Takes out the item at `slot`; its record is the caller's to mark unscheduled.
    @inline(__always)
    mutating func remove(slot: Int, placed: (UInt32, Int) -> Void) {
        let last = heap.removeLast()
        guard slot < heap.count else { return }
        let instant = heap[slot].instant
        heap[slot] = last
        if last.instant < instant {
            siftUp(slot, placed: placed)
        } else {
            siftDown(slot, placed: placed)
        }
    }

    /// The item at `slot` now names `record`: the table moved the record it named there.
    @inline(__always)
    mutating func renumber(slot: Int, to record: UInt32) {
        heap[slot].record = record
    }

    /// Moves the item at `start` towards the root while it is earlier than its parent.
    private mutating func siftUp(_ start: Int, placed: (UInt32, Int) -> Void) {
        heap.withUnsafeMutableBufferPointer { items in
            let item = items[start]
            var child = start
            while child > 0 {
                let parent = (child - 1) / 2
                guard item.instant < items[parent].instant else { break }
                items[child] = items[parent]
                placed(items[child].record, child)
                child = parent
            }
            items[child] = item
            placed(item.record, child)
        }
    }

    /// Moves the item at `start` towards the leaves while a child is earlier.
    private mutating func siftDown(_ start: Int, placed: (UInt32, Int) -> Void) {
        heap.withUnsafeMutableBufferPointer { items in
            let item = items[start]
            let count = items.count
            var parent = start
            while true {
                let left = 2 * parent + 1
                guard left < count else { break }
                var earliest = left
                if left + 1 < count, items[left + 1].instant < items[left].instant { earliest = left + 1 }
                guard items[earliest].instant < item.instant else { break }
                items[parent] = items[earliest]
                placed(items[parent].record, parent)
                parent = earliest
            }
            items[parent] = item
            placed(item.record, parent)
        }
    }
}
