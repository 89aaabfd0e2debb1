import DecideCore

/// What waits on a replicator's inbound queue, in bytes: peers' deltas (all links together)
/// and walk messages per link. Keeps both bounded while the store is slower than the peers.
struct InboundLoad: Sendable {
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
