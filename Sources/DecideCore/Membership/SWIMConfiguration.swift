#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every interval and bound of SWIM failure detection and membership gossip, units in the
/// names. The defaults are memberlist's LAN profile, which fleets of thousands run
/// (docs/design/0019-swim-membership.md has the reasons and the simulator's figures).
package struct SWIMConfiguration: Hashable, Sendable {
    /// How often this member probes one other (times its local health, 1 to `maxLocalHealth`).
    package var probeIntervalMilliseconds: UInt64 = 1_000
    /// How long a direct ping waits for its ack before indirect probes go out (times the
    /// local health). Less than the probe interval.
    package var probeTimeoutMilliseconds: UInt64 = 500
    /// How many others are asked to probe a member that missed its direct ping.
    package var indirectProbes = 3
    /// An update is piggybacked on up to `retransmitMultiplier × ⌈log10(n + 1)⌉` messages:
    /// enough to reach every member with high probability in O(log n) probe rounds.
    package var retransmitMultiplier = 4
    /// The shortest suspicion lasts `suspicionMultiplier × max(1, log10(n))` probe intervals,
    /// and Lifeguard waits for `suspicionMultiplier − 2` independent suspecters to reach it.
    package var suspicionMultiplier = 4
    /// A suspicion nobody else confirms lasts this many times the shortest.
    package var suspicionMaxMultiplier = 6
    /// Lifeguard's local health multiplier tops out here: a member that misses acks (its own
    /// thread or link is slow) probes and times out up to this many times slower, rather than
    /// suspecting healthy members.
    package var maxLocalHealth = 8
    /// The most bytes of one message (what fits one UDP datagram on every path).
    package var maxMessageBytes = 1_400
    /// How often this member pulls a random other's whole member list (push-pull), in pages
    /// of `maxMessageBytes`, per page the list takes: the news a member missed, and the list a
    /// joiner needs (a joiner pulls at once). At 1,000 members a list is about 30 pages, so a
    /// member pulls one every 15 minutes: its cost a second stays flat as the fleet grows.
    package var syncIntervalMilliseconds: UInt64 = 30_000
    /// How often a random dead member is pinged, so two sides of a healed partition find each
    /// other again (the pinged one refutes its death with a new incarnation).
    package var reconnectIntervalMilliseconds: UInt64 = 30_000
    /// How long a dead or left member is remembered (and its death told to who asks) before
    /// it is forgotten: membership stays bounded over any number of short-lived members.
    package var deadRetentionMilliseconds: UInt64 = 6 * 3_600_000
    /// The most members this one keeps: news of a new member beyond it is ignored (and
    /// counted), never an unbounded table.
    package var maxMembers = 10_000
    /// The most ping requests this member relays at once; more are dropped.
    package var maxRelays = 64

    package init() {}

    /// How many messages an update rides on in a group of `members` members.
    package func retransmitLimit(members: Int) -> Int {
        var digits = 1, scale = 10
        while scale <= members { digits += 1; scale *= 10 }   // ⌈log10(members + 1)⌉ for members ≥ 1
        return retransmitMultiplier * digits
    }

    /// The shortest and the longest suspicion in a group of `members` members (Lifeguard).
    package func suspicionBoundsMilliseconds(members: Int) -> (minimum: UInt64, maximum: UInt64) {
        let scale = max(1.0, log10(Double(max(members, 1))))
        let minimum = UInt64(Double(suspicionMultiplier) * scale * Double(probeIntervalMilliseconds))
        return (minimum, minimum * UInt64(max(1, suspicionMaxMultiplier)))
    }

    /// The suspicion's length once `confirmations` independent suspecters are heard out of
    /// the `expected` it waits for: from the longest down to the shortest, logarithmically
    /// (`max − (max − min) × log(c + 1) / log(k + 1)`), so the first confirmations count most.
    package static func suspicionTimeoutMilliseconds(minimum: UInt64, maximum: UInt64, confirmations: Int, expected: Int) -> UInt64 {
        guard expected > 0, confirmations > 0 else { return expected > 0 ? maximum : minimum }
        let fraction = log(Double(confirmations + 1)) / log(Double(expected + 1))
        let timeout = Double(maximum) - Double(maximum - minimum) * fraction
        return max(minimum, UInt64(max(0, timeout)))
    }
}
