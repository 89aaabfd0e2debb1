/// Snapshots of a whole collection (or index) over time: the current one first, then a new one
/// after changes to any of its elements (local, replicated or catch-up), skipping snapshots equal
/// to the one before.
///
/// Guarantees: a write costs the node O(1) for each observer however large the collection (it
/// only marks the observer changed); the snapshot is built when the iterating task asks for the
/// next one, so a slow reader skips to the newest state and never makes the node buffer more
/// than one pending mark. Registration happens when the sequence is made, so no change between
/// `observe` and the first `next()` is lost. Ends when the node shuts down or the iterating task
/// is cancelled.
public struct CollectionObservation<Snapshot: Sendable & Equatable>: AsyncSequence, Sendable {
    let signals: AsyncStream<Void>
    /// The current snapshot; nil once the node is gone.
    let snapshot: @Sendable () -> Snapshot?

    public struct AsyncIterator: AsyncIteratorProtocol {
        var signals: AsyncStream<Void>.Iterator
        let snapshot: @Sendable () -> Snapshot?
        var last: Snapshot?

        public mutating func next() async -> Snapshot? {
            while await signals.next() != nil {
                guard let current = snapshot() else { return nil }
                if let last, last == current { continue }
                last = current
                return current
            }
            return nil
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(signals: signals.makeAsyncIterator(), snapshot: snapshot, last: nil)
    }
}

/// An observer of every element of one state name: any change marks it, and `changed` runs on
/// the delivering thread, outside the node's lock.
final class CollectionObserver: Observer, @unchecked Sendable {
    private let changed: @Sendable () -> Void

    init(id: UInt64, name: String, onFinish: (@Sendable () -> Void)?, changed: @escaping @Sendable () -> Void) {
        self.changed = changed
        super.init(id: id, key: StateKey(name: name), onFinish: onFinish)
    }

    override func deliver(entry: Entry?, decoded: (any Sendable)?) { changed() }
}
