extension SimulatedNetwork {
    /// What the network did so far, for assertions and benchmarks. Bytes are wire bytes (frame
    /// plus 4-byte length prefix). Every frame is accounted for:
    /// `framesSent + framesDuplicated == framesDelivered + framesDroppedByLoss +
    /// framesDroppedByPartition + framesDroppedByClosedLink + SimulatedNetwork.framesInFlight`.
    public struct Counters: Hashable, Sendable {
        /// Frames `send` answered `.queued` for (lost ones included).
        public internal(set) var framesSent: UInt64 = 0
        /// Wire bytes of `framesSent`.
        public internal(set) var bytesSent: UInt64 = 0
        /// Frames handed to a receiving delegate (duplicates counted each time).
        public internal(set) var framesDelivered: UInt64 = 0
        /// Wire bytes of `framesDelivered`.
        public internal(set) var bytesDelivered: UInt64 = 0
        /// Extra copies the duplicate fault made.
        public internal(set) var framesDuplicated: UInt64 = 0
        /// Frames the loss fault dropped.
        public internal(set) var framesDroppedByLoss: UInt64 = 0
        /// Frames (or copies) that arrived at a partition and were dropped.
        public internal(set) var framesDroppedByPartition: UInt64 = 0
        /// Frames (or copies) in flight when their link closed or a side crashed, and frames
        /// sent on a link the peer had already closed (a half-open link).
        public internal(set) var framesDroppedByClosedLink: UInt64 = 0
        /// Sends answered `.overLimit`.
        public internal(set) var sendsOverLimit: UInt64 = 0
        /// Handshakes that produced a link.
        public internal(set) var connectsSucceeded: UInt64 = 0
        /// Connects that ended in `didFailToConnect`.
        public internal(set) var connectsFailed: UInt64 = 0

        /// All zero.
        public init() {}
    }
}
