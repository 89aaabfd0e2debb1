/// What one member believes about another, in the order SWIM ranks news of the same
/// incarnation: `alive` < `suspect` < `dead` / `left` (docs/design/0019-swim-membership.md).
package enum SWIMStatus: UInt8, Hashable, Sendable, CustomStringConvertible {
    /// Answering probes, directly or through others.
    case alive = 0
    /// Missed a probe and the indirect probes; declared dead unless it refutes in time.
    case suspect = 1
    /// Its suspicion ran out without a refutation.
    case dead = 2
    /// Said it was going, before it went.
    case left = 3

    package var description: String {
        switch self {
        case .alive: "alive"
        case .suspect: "suspect"
        case .dead: "dead"
        case .left: "left"
        }
    }

    /// Dead or left: no longer probed, no longer a member anyone waits for.
    package var isGone: Bool { self == .dead || self == .left }
}

/// One piece of membership news: `member`, reachable at `address`, is `status` at
/// `incarnation`. Only the member itself raises its incarnation (to refute a suspicion), so
/// news of a higher incarnation always outranks news of a lower one.
package struct SWIMUpdate: Hashable, Sendable {
    package var member: String
    package var address: String
    package var incarnation: UInt64
    package var status: SWIMStatus
    /// Who suspects the member (for `suspect` only; empty otherwise): Lifeguard counts the
    /// distinct suspecters to shorten the suspicion.
    package var origin: String

    package init(member: String, address: String, incarnation: UInt64, status: SWIMStatus, origin: String = "") {
        self.member = member
        self.address = address
        self.incarnation = incarnation
        self.status = status
        self.origin = status == .suspect ? origin : ""
    }
}

/// The part of a SWIM message that differs by type.
package enum SWIMMessage: Hashable, Sendable {
    /// "Are you there?" `target` is the id the sender believes is at the address (empty when
    /// it dials a seed address it knows no id for); a member answers a ping meant for another
    /// id with nothing, so a reused address does not vouch for a dead member.
    case ping(sequence: UInt64, target: String)
    /// "Ping `target` at `targetAddress` for me and tell me": the indirect probe.
    case pingRequest(sequence: UInt64, target: String, targetAddress: String)
    /// The answer to a ping, or a relayed answer to a ping request, with the request's sequence.
    case ack(sequence: UInt64)
    /// A relay's "I asked, and the target did not answer me in time": Lifeguard's sign that the
    /// relay, not the requester, is healthy.
    case nack(sequence: UInt64)
    /// Push-pull: "send me the members whose ids sort after `after`".
    case syncRequest(after: String)
    /// One page of the sender's member list, ids ascending after `after`; `complete` when it is
    /// the last page.
    case syncReply(after: String, members: [SWIMUpdate], complete: Bool)
}

/// A SWIM message as it travels: its sender (who is alive at `incarnation` by the mere fact
/// of sending), the message, and the membership news it carries on the side.
package struct SWIMEnvelope: Hashable, Sendable {
    package var from: String
    package var fromAddress: String
    package var fromIncarnation: UInt64
    package var message: SWIMMessage
    /// News piggybacked on the message (the gossip), freshest-first as the sender chose it.
    package var updates: [SWIMUpdate]

    package init(from: String, fromAddress: String, fromIncarnation: UInt64, message: SWIMMessage, updates: [SWIMUpdate] = []) {
        self.from = from
        self.fromAddress = fromAddress
        self.fromIncarnation = fromIncarnation
        self.message = message
        self.updates = updates
    }
}
