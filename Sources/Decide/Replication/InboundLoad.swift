import DecideCore

/// What waits on a replicator's inbound queue: the messages themselves, in arrival order, and
/// their bytes, peers' deltas (all links together) and walk messages per link. Keeps both
/// bounded while the store is slower than the peers, and lets one pass of the queue take every
/// message waiting (so a burst of deltas is applied under one hold of the node's lock).
struct InboundLoad: Sendable {
    /// A message admitted to the queue, with what its admission counted.
    struct Waiting: Sendable {
        let message: ReplicationMessage
        let bytes: Int
        let isDelta: Bool
        let connection: ConnectionID
        let peerID: String
    }

    /// The answer of `admit`.
    enum Admission: Equatable {
        /// Counted; queue it.
        case queued
        /// A delta over the shared bound: drop it and repair by a walk. `first` is true when it
        /// is the first drop since the queue was last below the bound (for the log).
        case deltaDropped(first: Bool)
        /// A walk message over the link's bound: an honest peer never sends that far ahead.
        case overWindow
    }

    private(set) var deltaBytes = 0
    private(set) var walkBytes: [ConnectionID: Int] = [:]
    private var dropping = false
    /// The waiting messages in arrival order, in runs of at most `batchMessages`: `take` hands
    /// out the oldest run whole, so a backlog of any length drains without a message being
    /// copied or moved (a single array drained from its front moved every message behind the
    /// taken ones, each time: quadratic once peers outpaced the store).
    private var runs: [[Waiting]] = []
    /// Runs before this one were taken (their slots are empty).
    private var head = 0
    /// Whether a pass of the queue is scheduled or running (it takes what `push` adds).
    private var draining = false
    /// The most messages `take` hands out at once.
    let batchMessages: Int

    /// A queue handing out at most `batchMessages` messages at a time.
    init(batchMessages: Int) {
        precondition(batchMessages > 0, "batchMessages must be positive")
        self.batchMessages = batchMessages
    }

    /// Whether nothing waits and no pass runs: a message handled now keeps arrival order.
    var isIdle: Bool { !draining }

    /// Adds an admitted message; true when the caller must schedule a pass of the queue.
    mutating func push(_ message: Waiting) -> Bool {
        if head < runs.count, runs[runs.count - 1].count < batchMessages {
            runs[runs.count - 1].append(message)
        } else {
            var run: [Waiting] = []
            run.reserveCapacity(batchMessages)
            run.append(message)
            runs.append(run)
        }
        defer { draining = true }
        return !draining
    }

    /// The oldest waiting messages, at most `batchMessages` of them; an empty answer ends the
    /// pass (the next `push` schedules another).
    mutating func take() -> [Waiting] {
        guard head < runs.count else {
            runs.removeAll(keepingCapacity: true)
            head = 0
            draining = false
            return []
        }
        let taken = runs[head]
        runs[head] = []
        head += 1
        if head == runs.count {
            runs.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, 2 * head >= runs.count {
            // The taken runs' empty slots go; what is left moves once per as many taken.
            runs.removeFirst(head)
            head = 0
        }
        return taken
    }

    /// Counts `bytes` of a message if its bound allows.
    mutating func admit(_ bytes: Int, delta: Bool, on connection: ConnectionID, deltaBound: Int, walkBound: Int) -> Admission {
        if delta {
            guard deltaBytes + bytes <= deltaBound else {
                defer { dropping = true }
                return .deltaDropped(first: !dropping)
            }
            deltaBytes += bytes
            return .queued
        }
        let waiting = walkBytes[connection, default: 0]
        guard waiting + bytes <= walkBound else { return .overWindow }
        walkBytes[connection] = waiting + bytes
        return .queued
    }

    /// Uncounts a message `admit` queued, once it was handled.
    mutating func release(_ bytes: Int, delta: Bool, on connection: ConnectionID) {
        if delta {
            deltaBytes -= bytes
            if deltaBytes == 0 { dropping = false }
            return
        }
        let left = walkBytes[connection, default: bytes] - bytes
        walkBytes[connection] = left > 0 ? left : nil
    }
}
