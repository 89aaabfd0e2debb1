import Synchronization

/// The committed deltas of a node as an AsyncSequence, with a bounded buffer.
///
/// Guarantees: deltas arrive in commit order; at most `maxBuffered` wait unread, after which
/// further deltas are dropped and reported as one `.gap(dropped:)` at the place they were lost
/// (a consumer that sees a gap must re-read state, e.g. by anti-entropy); the sequence ends when
/// the node shuts down or the consumer stops iterating.
public struct DeltaStream: AsyncSequence, Sendable {
    /// One element of the stream.
    public enum Event: Sendable {
        /// A delta committed or applied here, in commit order.
        case delta(CommittedDelta)
        /// `dropped` deltas were committed here but not buffered.
        case gap(dropped: Int)
    }

    final class Channel: Sendable {
        private struct State: ~Copyable {
            var buffer: [Event] = []
            var head = 0
            var waiter: CheckedContinuation<Event?, Never>?
            var finished = false
        }

        let maxBuffered: Int
        private let state = Mutex(State())
        let onFinish: Mutex<(@Sendable () -> Void)?> = Mutex(nil)

        init(maxBuffered: Int) {
            precondition(maxBuffered >= 1, "a delta stream buffers at least one delta")
            self.maxBuffered = maxBuffered
        }

        func push(_ delta: CommittedDelta) {
            let waiter = state.withLock { state -> CheckedContinuation<Event?, Never>? in
                guard !state.finished else { return nil }
                if let waiter = state.waiter {
                    state.waiter = nil
                    return waiter
                }
                let queued = state.buffer.count - state.head
                if queued < maxBuffered {
                    state.buffer.append(.delta(delta))
                } else if case .gap(let dropped)? = state.buffer.last {
                    state.buffer[state.buffer.count - 1] = .gap(dropped: dropped + 1)
                } else {
                    state.buffer.append(.gap(dropped: 1))
                }
                return nil
            }
            waiter?.resume(returning: .delta(delta))
        }

        func finish() {
            let waiter = state.withLock { state -> CheckedContinuation<Event?, Never>? in
                state.finished = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
            let hook = onFinish.withLock { hook -> (@Sendable () -> Void)? in
                defer { hook = nil }
                return hook
            }
            hook?()
        }

        func next() async -> Event? {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Event?, Never>) in
                    let ready = state.withLock { state -> (Bool, Event?) in
                        if state.head < state.buffer.count {
                            let event = state.buffer[state.head]
                            state.head += 1
                            if state.head == state.buffer.count {
                                state.buffer.removeAll(keepingCapacity: true)
                                state.head = 0
                            }
                            return (true, event)
                        }
                        if state.finished { return (true, nil) }
                        state.waiter = continuation
                        return (false, nil)
                    }
                    if ready.0 { continuation.resume(returning: ready.1) }
                }
            } onCancel: {
                self.finish()
            }
        }
    }

    let channel: Channel

    /// Ends the stream (and unregisters it from the node) when the consumer drops its iterator,
    /// e.g. by breaking out of its loop.
    final class Lifetime: Sendable {
        let channel: Channel
        init(channel: Channel) { self.channel = channel }
        deinit { channel.finish() }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let lifetime: Lifetime
        public mutating func next() async -> Event? { await lifetime.channel.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(lifetime: Lifetime(channel: channel)) }
}
