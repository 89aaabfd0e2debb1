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

    // The summary sender's side: the keys asked for, in order, each once.
    var requestedKeys: [StateKey] = []
    var requestedSet = Set<StateKey>()
    /// This side's entry stream has started (after the summary, or after the last request).
    var entryStreamStarted = false

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

    /// Marks this side's stream done once its entries went out (the summary sender sends the
    /// summary first, then, once requests ended, the requested entries), nothing is left to
    /// produce, nobody is producing, and the peer acknowledged every message.
    mutating func noteOutgoingDone() {
        if entryStreamStarted && outgoing == nil && unacked == 0 && !pumping { outgoingDone = true }
    }

    /// A rule of the walk protocol the peer broke.
    struct RuleBroken: Error, CustomStringConvertible {
        let description: String
    }

    /// Takes in one summary message: checks its turn and bucket order, adds its items to the
    /// open bucket, and returns the buckets it finished (to compare with this node's entries).
    mutating func stageSummary(
        _ groups: [ReplicationMessage.SummaryGroup], last: Bool, leafWidth: Int, peerClock clock: UInt64,
        now: UInt64, maxItems: Int
    ) -> Result<[(bucket: Int, items: [UInt64: ReplicationMessage.SummaryItem])], RuleBroken> {
        guard phase == .comparing || (phase == .summaryReceiver && !summaryEnded) else {
            return .failure(RuleBroken(description: "summary out of turn"))
        }
        phase = .summaryReceiver
        if peerClock == nil { peerClock = clock }
        lastActivity = now
        var closed: [(bucket: Int, items: [UInt64: ReplicationMessage.SummaryItem])] = []
        for group in groups {
            let bucket = Int(group.bucket)
            guard bucket < leafWidth else { return .failure(RuleBroken(description: "summary bucket \(bucket) outside the tree")) }
            if let open = openBucket, open != bucket {
                guard bucket > open else { return .failure(RuleBroken(description: "summary buckets out of order")) }
                closed.append(closeOpenBucket())
            }
            guard bucket >= nextBucket else { return .failure(RuleBroken(description: "summary buckets out of order")) }
            openBucket = bucket
            openItems.reserveCapacity(openItems.count + group.items.count)
            for item in group.items { openItems[item.keyHash] = item }
            guard openItems.count <= maxItems else {
                return .failure(RuleBroken(description: "summary of one bucket over \(maxItems) keys"))
            }
        }
        if last {
            if openBucket != nil { closed.append(closeOpenBucket()) }
            summaryEnded = true
        }
        return .success(closed)
    }

    private mutating func closeOpenBucket() -> (bucket: Int, items: [UInt64: ReplicationMessage.SummaryItem]) {
        let bucket = openBucket!
        defer {
            openBucket = nil
            openItems = [:]
            nextBucket = bucket + 1
        }
        return (bucket, openItems)
    }
}
