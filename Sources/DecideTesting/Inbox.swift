import Decide
import Synchronization

/// The decisions a `TestNode`'s node has run and the test has not taken yet, in the order the
/// node tapped them, and at most one task waiting for the next.
///
/// Guarantees: a record pushed while a task waits goes to that task, else it is queued; a wait
/// that times out takes nothing, so the record that arrives after it stays for the next take.
final class Inbox: Sendable {
    private struct State: ~Copyable {
        var records: [TappedDecision] = []
        var waiter: (id: UInt64, continuation: CheckedContinuation<TappedDecision?, Never>)?
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    func push(_ record: TappedDecision) {
        let waiter = state.withLock { state -> CheckedContinuation<TappedDecision?, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter.continuation
            }
            state.records.append(record)
            return nil
        }
        waiter?.resume(returning: record)
    }

    /// The oldest record not taken, if any.
    func pop() -> TappedDecision? {
        state.withLock { state in state.records.isEmpty ? nil : state.records.removeFirst() }
    }

    /// The oldest record not taken, waiting up to `timeout` for one; nil when none came.
    func next(timeout: Duration) async -> TappedDecision? {
        if let record = pop() { return record }
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let deadline = Task { [weak self] in
            try? await Task.sleep(for: timeout)  // a deadline, not a wait for the work
            self?.expire(id)
        }
        defer { deadline.cancel() }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> TappedDecision? in
                if !state.records.isEmpty { return state.records.removeFirst() }
                state.waiter = (id, continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Ends wait `id` with nothing, if it is still waiting.
    private func expire(_ id: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<TappedDecision?, Never>? in
            guard let waiter = state.waiter, waiter.id == id else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: nil)
    }

    /// Resumes a continuation once, whichever caller comes first.
    final class Once: Sendable {
        private let continuation: Mutex<CheckedContinuation<Bool, Never>?>
        init(_ continuation: CheckedContinuation<Bool, Never>) { self.continuation = Mutex(continuation) }
        func resume(_ value: Bool) {
            continuation.withLock { current -> CheckedContinuation<Bool, Never>? in
                defer { current = nil }
                return current
            }?.resume(returning: value)
        }
    }
}
