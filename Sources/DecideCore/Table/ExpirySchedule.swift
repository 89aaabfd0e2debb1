/// When each expiring key of an `EntryTable` is next due: a min-heap of (instant, key) with at
/// most one live item per key, so its memory follows the keys that expire, not the writes that
/// renewed them.
///
/// Guarantees: `popDue(atMilliseconds:)` returns every key added with an instant at or before
/// the given one (once, earliest first) unless a later `add` of it was earlier still; an item
/// made stale by an earlier instant is skipped, and the heap is rebuilt whenever stale items
/// outnumber live ones, so it holds at most about twice the scheduled keys.
struct ExpirySchedule: Sendable {
    private struct Item: Sendable {
        let instant: UInt64
        let key: StateKey
    }

    private var heap: [Item] = []
    /// The instant each key's live item is due.
    private var due: [StateKey: UInt64] = [:]

    /// Keys scheduled.
    var count: Int { due.count }

    /// The earliest instant scheduled, if any (it may belong to a stale item: then a `popDue`
    /// at it returns nothing and moves on).
    var nextInstant: UInt64? { heap.first?.instant }

    /// Schedules `key` at `instant`, unless it is due at or before it already (the check then
    /// finds its entry's own, later instant and schedules that).
    mutating func add(_ key: StateKey, atMilliseconds instant: UInt64) {
        if let scheduled = due[key], scheduled <= instant { return }
        due[key] = instant
        push(Item(instant: instant, key: key))
        if heap.count > 2 * due.count + 64 { rebuild() }
    }

    /// Removes and returns the keys due at or before `now`, earliest first; at most `limit` items
    /// are taken off the schedule (stale ones included), so a caller bounds the work of one call.
    mutating func popDue(atMilliseconds now: UInt64, limit: Int = .max) -> [StateKey] {
        var keys: [StateKey] = []
        var popped = 0
        while popped < limit, let first = heap.first, first.instant <= now {
            popped += 1
            let item = pop()
            guard due[item.key] == item.instant else { continue }
            due[item.key] = nil
            keys.append(item.key)
        }
        return keys
    }

    private mutating func rebuild() {
        heap = due.map { Item(instant: $0.value, key: $0.key) }
        guard heap.count > 1 else { return }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private mutating func push(_ item: Item) {
        heap.append(item)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].instant < heap[parent].instant else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() -> Item {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
        return top
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, heap[left + 1].instant < heap[left].instant { smallest = left + 1 }
            guard heap[smallest].instant < heap[parent].instant else { return }
            heap.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
