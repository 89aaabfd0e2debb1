/// One pending action of the scheduler.
struct ScheduledEvent {
    /// Virtual time it runs at.
    var timeMilliseconds: UInt64
    /// Tie-breaker: events of the same instant run in the order they were scheduled.
    var sequence: UInt64
    /// 0 for internal events that cannot be cancelled; otherwise the timer it belongs to.
    var timer: UInt64
    /// 0 for a one-shot event; otherwise the period it repeats with.
    var periodMilliseconds: UInt64
    var action: () -> Void

    func runsBefore(_ other: ScheduledEvent) -> Bool {
        (timeMilliseconds, sequence) < (other.timeMilliseconds, other.sequence)
    }
}

/// A binary min-heap of events ordered by (time, sequence). Since sequences are unique the
/// order is total, so the pop order never depends on how the heap happens to be laid out.
struct EventQueue {
    private var heap: [ScheduledEvent] = []

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }
    var first: ScheduledEvent? { heap.first }

    mutating func removeAll() { heap.removeAll() }

    mutating func push(_ event: ScheduledEvent) {
        heap.append(event)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].runsBefore(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> ScheduledEvent? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].runsBefore(heap[smallest]) { smallest = left }
            if right < heap.count && heap[right].runsBefore(heap[smallest]) { smallest = right }
            if smallest == parent { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
