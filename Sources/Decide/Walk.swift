import DecideCore

/// One anti-entropy walk on one link, as this side sees it (docs/replication.md, "Anti-entropy").
///
/// A walk compares digest trees top-down; at the leaves one side (the *summary sender*) sends
/// a per-key summary of the differing buckets, the other answers with the keys it wants and
/// streams the entries the sender lacks; the sender then streams the requested entries. Every
/// stream is flow-controlled (`streamAck` per message, at most `catchUpWindowMessages` unacked)
/// and applied batch by batch as it arrives.
struct Walk {
    enum Phase: Equatable {
        /// Digest levels are being compared.
        case comparing
        /// This side sent the summary; it waits for key requests, then streams what they name.
        case summarySender
        /// This side receives the summary; it requests keys and streams what the sender lacks.
        case summaryReceiver
    }

    /// What this side still has to send in this walk, produced frame by frame under credit.
    enum Outgoing {
        /// Summary of these leaf buckets (ascending), from `bucketIndex`, item `itemOffset`.
        case summary(buckets: [Int], bucketIndex: Int, itemOffset: Int)
        /// These entries, sorted by version, from `cursor`.
        case entries([KeyedEntry], cursor: Int)
    }

    let round: UInt64
    /// This side started the walk.
    let mine: Bool
    let startedAt: UInt64
    /// This node's change sequence and hybrid clock when it joined the walk.
    let startSequence: UInt64
    let startClock: UInt64
    /// The peer's hybrid clock when it joined the walk, once a message of it said.
    var peerClock: UInt64?
    var lastActivity: UInt64
    var phase = Phase.comparing
    /// False once anything the peer sent in this walk was not applied here (refused, dropped):
    /// the walk then proves nothing about coverage.
    var clean = true
    var receivedEntries = 0
    var changedKeys = 0

    // The summary receiver's side.
    /// The bucket whose summary items are still arriving, and those items by key hash.
    var openBucket: Int?
    var openItems: [UInt64: ReplicationMessage.SummaryItem] = [:]
    /// Buckets below this were finished: a summary that goes back is a protocol violation.
    var nextBucket = 0
    /// Keys of this node to send after the summary ends.
    var pushKeys: [StateKey] = []
    var summaryEnded = false

    // The summary sender's side.
    var requestedKeys = Set<StateKey>()
    var requestsEnded = false

    // Sequence numbers: the last this side sent, and the next it expects from the peer.
    var sentSeq: UInt64 = 0
    var expectedSeq: UInt64 = 1

    // Streams.
    var outgoing: Outgoing?
    /// Sequence numbers of stream messages sent and not yet acknowledged.
    var unackedSeqs: [UInt64] = []
    var unacked: Int { unackedSeqs.count }
    /// A thread is producing this walk's frames (the others leave it to that one).
    var pumping = false
    /// This side's stream ended and every message of it was acknowledged.
    var outgoingDone = false
    /// The peer's entry stream ended (its `last` batch arrived and was applied).
    var incomingDone = false

    init(round: UInt64, mine: Bool, now: UInt64, startSequence: UInt64, startClock: UInt64) {
        self.round = round
        self.mine = mine
        self.startedAt = now
        self.lastActivity = now
        self.startSequence = startSequence
        self.startClock = startClock
    }

    /// Both streams are over: the walk ended here.
    var streamsDone: Bool { incomingDone && outgoingDone }
}
