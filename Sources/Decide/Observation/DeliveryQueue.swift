import Synchronization

/// Hands committed changes to observers outside the node's lock, in commit order, one
/// delivery at a time, keeping only the newest pending change per observer.
///
/// Guarantees: memory is bounded by the number of observers (a slow observer skips to the
/// newest value instead of queueing every change); an observer that makes a decision from
/// inside its callback does not deadlock (the thread already delivering picks up the new
/// changes); each observer sees its key's values in commit order.
final class DeliveryQueue: Sendable {
    struct Notice: Sendable {
        let observer: Observer
        let entry: Entry?
        let decoded: (any Sendable)?
    }

    private struct State: ~Copyable {
        var order: [UInt64] = []
        var latest: [UInt64: Notice] = [:]
        var draining = false
    }

    private let state = Mutex(State())
    /// Whether anything may be queued or being delivered: set under `state`'s lock by
    /// `enqueue`, cleared there when a drain finds nothing left. `drain` returns on a plain load
    /// of it when it is false, so a node nobody observes takes no lock after a decision (that
    /// lock and unlock were about a twentieth of a one-write decision's time:
    /// docs/design/0009-atomics-off-the-hot-paths.md, "The technique"). The thread that queued a
    /// notice sees its own store, so its drain never skips it.
    private let queued = Atomic<Bool>(false)

    /// Call with the node's lock held, so notices are queued in commit order.
    func enqueue(_ notice: Notice) {
        state.withLock { state in
            if state.latest.updateValue(notice, forKey: notice.observer.id) == nil {
                state.order.append(notice.observer.id)
            }
            queued.store(true, ordering: .releasing)
        }
    }

    /// Delivers everything queued, unless another thread is already doing so (then it will).
    /// Call without the node's lock. Only the load is inlined into a decision: a node nobody
    /// observes calls nothing here.
    @inline(__always)
    func drain() {
        if queued.load(ordering: .acquiring) { drainQueued() }
    }

    @inline(never)
    private func drainQueued() {
        let mine = state.withLock { state -> Bool in
            guard !state.draining, !state.order.isEmpty else { return false }
            state.draining = true
            return true
        }
        guard mine else { return }
        while true {
            let batch = state.withLock { state -> [Notice] in
                guard !state.order.isEmpty else {
                    state.draining = false
                    queued.store(false, ordering: .releasing)
                    return []
                }
                let batch = state.order.compactMap { state.latest[$0] }
                state.order.removeAll(keepingCapacity: true)
                state.latest.removeAll(keepingCapacity: true)
                return batch
            }
            if batch.isEmpty { return }
            for notice in batch where !notice.observer.isCancelled {
                notice.observer.deliver(entry: notice.entry, decoded: notice.decoded)
            }
        }
    }
}
