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
    private var waiting: [Waiting] = []
    /// Whether a pass of the queue is scheduled or running (it takes what `push` adds).
    private var draining = false

    /// Whether nothing waits and no pass runs: a message handled now keeps arrival order.
    var isIdle: Bool { !draining }

    /// Adds an admitted message; true when the caller must schedule a pass of the queue.
    mutating func push(_ message: Waiting) -> Bool {
        waiting.append(message)
        defer { draining = true }
        return !draining
    }

    /// Up to `maxMessages` waiting messages, oldest first; an empty answer ends the pass (the
    /// next `push` schedules another).
    mutating func take(maxMessages: Int) -> ArraySlice<Waiting> {
        guard !waiting.isEmpty else {
            draining = false
            return []
        }
        if waiting.count <= maxMessages {
            defer { waiting = [] }
            return waiting[...]
        }
        let taken = waiting[..<maxMessages]
        waiting.removeFirst(maxMessages)
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
