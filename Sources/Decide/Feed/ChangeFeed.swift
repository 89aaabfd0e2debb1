import Synchronization

/// A node's changes from a position on, as an AsyncSequence: every retained change after the
/// start, in the node's order, then each new one as the node takes it (`Node.changes(from:filter:)`).
///
/// Guarantees: each change comes once, in position order, with the writes `filter` accepts (a
/// decision's writes together); none is skipped: a reader the retention overtook gets
/// `ChangeFeedError.outOfRetention` at the place it would have missed changes, never a later
/// change. Memory is bounded whatever the reader's pace: it holds at most one page of
/// `pageChanges` changes of its own; what it has not read yet is the node's retention, shared
/// by every reader. The sequence ends when the node shuts down (after the retained changes) or
/// the reading task is cancelled.
public struct ChangeFeed: AsyncSequence, Sendable {
    public typealias Element = FeedChange
    public typealias Failure = ChangeFeedError

    let node: Node
    let start: FeedStart
    let filter: ChangeFilter

    /// Changes a reader copies out of the retention at a time.
    static let pageChanges = 256

    public func makeAsyncIterator() -> Iterator {
        Iterator(node: node, start: start, filter: filter)
    }

    /// Reads a `ChangeFeed`; not to be shared between tasks.
    public struct Iterator: AsyncIteratorProtocol {
        /// A change, with only the writes the filter accepts.
        public typealias Element = FeedChange
        public typealias Failure = ChangeFeedError

        private let node: Node
        private let filter: ChangeFilter
        private var start: FeedStart?
        private var feed: ChangeFeedID?
        /// Where the next page starts: the last change taken from the retention.
        private var cursor = FeedPosition.start
        private var page: [FeedChange] = []
        private var pageIndex = 0

        init(node: Node, start: FeedStart, filter: ChangeFilter) {
            self.node = node
            self.start = start
            self.filter = filter
        }

        public mutating func next() async throws(ChangeFeedError) -> FeedChange? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(ChangeFeedError) -> FeedChange? {
            if let start {
                self.start = nil
                guard let bounds = node.changeFeedBounds else { throw .disabled }
                feed = bounds.feed
                switch start {
                case .now:
                    cursor = bounds.newest
                case .oldestRetained:
                    cursor = FeedPosition(rawValue: bounds.oldest.rawValue - 1)
                case .after(let position, let asked):
                    if let asked, asked != bounds.feed { throw .otherFeed(requested: asked, current: bounds.feed) }
                    cursor = position
                }
            }
            while true {
                if pageIndex < page.count {
                    pageIndex += 1
                    return page[pageIndex - 1]
                }
                page.removeAll(keepingCapacity: true)
                pageIndex = 0
                if Task.isCancelled { return nil }
                let read = try node.readChanges(after: cursor, feed: feed, maxChanges: ChangeFeed.pageChanges, filter: filter)
                if read.end != cursor {
                    cursor = read.end
                    page = read.changes
                    continue
                }
                if node.changeFeedFinished { return nil }
                await Self.wait(node, after: cursor)
            }
        }

        /// Returns once a change after `position` was taken, the log finished, or the task was
        /// cancelled.
        private static func wait(_ node: Node, after position: FeedPosition) async {
            let wait = FeedWait()
            guard let token = node.waitForChange(after: position, { wait.fire() }) else { return }
            await withTaskCancellationHandler {
                await withCheckedContinuation { wait.install($0) }
            } onCancel: {
                node.cancelChangeWait(token)
                wait.fire()
            }
        }
    }
}

/// One reader's wait for the next change: fired once, by the log's wake-up or by the reader's
/// cancellation, whichever comes first, and before or after the continuation is installed.
private final class FeedWait: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, Never>?
        var fired = false
    }
    private let state = Mutex(State())

    func fire() {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.fired else { return nil }
            state.fired = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }

    func install(_ continuation: CheckedContinuation<Void, Never>) {
        let firedAlready = state.withLock { state -> Bool in
            if state.fired { return true }
            state.continuation = continuation
            return false
        }
        if firedAlready { continuation.resume() }
    }
}
