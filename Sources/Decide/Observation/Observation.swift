/// The values of one key over time: the current value first, then each change (local or
/// replicated), skipping values equal to the one before.
///
/// Guarantees: never buffers more than the newest unread value (a slow reader skips to the
/// newest); ends when the node shuts down or the iterating task is cancelled. Registration happens when the sequence is made, so
/// no change between `observe` and the first `next()` is lost (the newest is kept).
public struct Observation<Value: Sendable & Equatable>: AsyncSequence, Sendable {
    let stream: AsyncStream<Value>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Value>.Iterator
        var last: Value?

        public mutating func next() async -> Value? {
            while let value = await base.next() {
                if let last, last == value { continue }
                last = value
                return value
            }
            return nil
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), last: nil)
    }
}

/// A callback registration; the callback stops when this is cancelled or deallocated.
public final class Subscription: Sendable {
    private let cancellation: @Sendable () -> Void

    init(cancellation: @escaping @Sendable () -> Void) {
        self.cancellation = cancellation
    }

    /// Stops the callback. A delivery already running finishes; none starts after this returns
    /// on the delivering thread's next turn. Idempotent.
    public func cancel() { cancellation() }

    deinit { cancellation() }
}
