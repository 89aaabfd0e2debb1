extension SimulatedNetwork {
    /// What the network does wrong. The default value is a perfect network: no loss, no
    /// duplicates, FIFO per link, 1...20 ms delay, no partitions. Set `SimulatedNetwork.faults`
    /// at any time; every later send and delivery follows the new value.
    ///
    /// Loss, duplication and reordering act on whole frames of a link that stays up: they are
    /// harsher than TCP (which retransmits and orders), and are there to prove the replication
    /// engine survives message-level faults through anti-entropy.
    public struct Faults: Hashable, Sendable {
        /// Chance (0...1) that a sent frame is silently dropped. The sender still sees `.queued`.
        public var lossProbability: Double
        /// Chance (0...1) that a frame that was not lost is delivered twice.
        public var duplicateProbability: Double
        /// When false, frames of one link arrive in the order they were sent (each frame's
        /// delivery time is max(previous delivery time on that link, now + delay)). When true,
        /// each frame takes its own delay, so later frames may overtake earlier ones.
        public var reorder: Bool
        /// The one-way delay of a frame, a connect handshake or a close notice, drawn uniformly.
        public var delayMilliseconds: ClosedRange<UInt64>
        /// Unordered pairs of node ids that cannot talk. Only looked up, never iterated.
        private var partitionedPairs: Set<NodePair>

        /// A network with the given faults and no partitions.
        public init(lossProbability: Double = 0, duplicateProbability: Double = 0, reorder: Bool = false,
                    delayMilliseconds: ClosedRange<UInt64> = 1...20) {
            self.lossProbability = lossProbability
            self.duplicateProbability = duplicateProbability
            self.reorder = reorder
            self.delayMilliseconds = delayMilliseconds
            partitionedPairs = []
        }

        /// Cuts `a` off from `b` (both directions): frames between them are dropped when they
        /// would arrive, new connects between them time out, close notices wait for the heal.
        /// Existing links stay up: heartbeats must notice. A node is never cut off from itself.
        public mutating func partition(_ a: String, from b: String) {
            guard a != b else { return }
            partitionedPairs.insert(NodePair(a, b))
        }

        /// Cuts every node of each group off from every node of the other groups. Nodes in no
        /// group are not affected. Adds to the partitions already in place.
        public mutating func partition(groups: [[String]]) {
            for (index, group) in groups.enumerated() {
                for other in groups[(index + 1)...] {
                    for a in group { for b in other { partition(a, from: b) } }
                }
            }
        }

        /// Removes every partition.
        public mutating func heal() {
            partitionedPairs.removeAll()
        }

        /// True when `a` and `b` are cut off from each other.
        public func isPartitioned(_ a: String, _ b: String) -> Bool {
            a != b && partitionedPairs.contains(NodePair(a, b))
        }

        /// True when at least one pair is cut off.
        public var hasPartitions: Bool { !partitionedPairs.isEmpty }

        func validate() {
            precondition(lossProbability >= 0 && lossProbability <= 1, "lossProbability must be in 0...1")
            precondition(duplicateProbability >= 0 && duplicateProbability <= 1, "duplicateProbability must be in 0...1")
        }
    }

    /// Two node ids in canonical order, so (a, b) and (b, a) are one partition.
    struct NodePair: Hashable, Sendable {
        let low: String
        let high: String

        init(_ a: String, _ b: String) {
            if a < b { (low, high) = (a, b) } else { (low, high) = (b, a) }
        }
    }
}
