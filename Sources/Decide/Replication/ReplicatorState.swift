import Synchronization
@_spi(Engine) import DecideCore
import Logging

/// What the replication engine decided to do after an event; performed outside its lock.
struct ReplicatorActions {
    struct LogLine {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }

    var dial: [String] = []
    var close: [(ConnectionID, String)] = []
    /// Send a `refusal` with the reason, then close.
    var refuse: [(ConnectionID, String)] = []
    /// Send `leave` (this node is leaving the cluster), then close: a link that came up after
    /// `Replicator.leave` told the others.
    var tellLeaving: [ConnectionID] = []
    var ping: [(ConnectionID, UInt64)] = []
    var gossipTo: [ConnectionID] = []
    var startWalk: [(ConnectionID, UInt64)] = []
    /// Collect tombstones with a timestamp below this (raw HLC): every member covers it.
    var collectTombstonesBelow: UInt64?
    /// The member list changed in a way worth keeping across restarts.
    var membershipChanged = false
    var logs: [LogLine] = []

    mutating func log(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata = [:]) {
        logs.append(LogLine(level: level, message: message, metadata: metadata))
    }

    /// Closes a link whose peer broke a protocol rule, naming the rule.
    mutating func violation(_ connection: ConnectionID, peer: String, rule: String) {
        log(.warning, "closing link: peer broke a protocol rule", ["peer": "\(peer)", "rule": "\(rule)"])
        close.append((connection, "protocol rule broken: \(rule)"))
    }
}

/// The engine's bookkeeping: links, members, dials, walks, coverage and timers. Pure: no I/O,
/// no locks, no clock; every method takes `now` and returns what to do. `Replicator` owns it
/// behind a lock. Every count a peer can raise here is bounded (members, walks, rounds,
/// requested keys by this node's own key count).
struct ReplicatorState {
    struct Link {
        let connection: ConnectionID
        let nodeID: String
        let address: String
        let outbound: Bool
        let connectedAt: UInt64
        var lastHeard: UInt64
        var lastPing: UInt64
        /// Something was lost (a dropped queue, an abandoned walk): walk as soon as the link drains.
        var needsWalk = false
        var nextWalkAt: UInt64
        var overflowing = false
        /// This side is closing it (duplicate, leave, timeout, violation): its disconnect is expected.
        var closing = false
        /// At most two live walks: the one this side started and the one the peer started.
        var walks: [UInt64: Walk] = [:]
        /// Walks that ended here, newest last (at most 32); late messages of them are ignored.
        var finishedRounds: [UInt64] = []
        /// The nonce of the newest ping (sent at `lastPing`) while unanswered, and the peer's
        /// clock offset measured from its answer (peer minus this node, ms).
        var unansweredPing: UInt64?
        var clockOffsetMilliseconds: Int64?
    }

    /// Acknowledged writes: what each link carried, and what its peer says it holds (kept
    /// beside `Link`, a plain value, so the per-delta counting touches no reference counts).
    ///
    /// A peer holds this node's decisions up to `t` when it said it holds everything this node
    /// held at `t` (`peerCovered`, proven by its clean catch-up), or when it holds every decision
    /// from before the link opened (`peerCovered >= ownBeforeOpen`) and acknowledged the link's
    /// deltas through `t`: every decision after `ownBeforeOpen` is queued on the link
    /// (docs/consistency.md, "Writes acknowledged by replicas").
    struct DeltaCounts {
        /// Sending side: the timestamps (raw) of the first delta queued on the link and of the
        /// first one dropped from it (queue full), and how many were queued. Only the deltas
        /// between the first two are known to reach the peer in order, so only they can count
        /// as acknowledged.
        var firstQueued: UInt64?
        var firstDropped: UInt64?
        var queued: UInt64 = 0
        /// This node's newest decision (raw) when the link opened: every later one is queued
        /// on it. Nil until read (the link then counts by coverage only).
        var ownBeforeOpen: UInt64?
        /// What the peer last said it applied (`applied`), raw.
        var peerApplied: UInt64 = 0
        /// The peer holds everything this node held when its clock read this (raw): what it
        /// last said in `applied`.
        var peerCovered: UInt64 = 0
        /// Receiving side: deltas the link brought that were applied here (a dropped or
        /// refused one is not counted, so the peer's count and this one never match again).
        var applied: UInt64 = 0

        /// A delta of timestamp `timestamp` (raw) is being queued on the link.
        mutating func noteQueued(_ timestamp: UInt64) {
            if firstQueued == nil { firstQueued = timestamp }
            queued &+= 1
        }

        /// Whether the peer holds this node's decisions up to `timestamp` (raw): each of them,
        /// or a newer write of its keys.
        func acknowledges(_ timestamp: UInt64) -> Bool {
            if peerCovered >= timestamp { return true }
            guard let before = ownBeforeOpen, peerCovered >= before else { return false }
            guard let first = firstQueued, first <= timestamp, peerApplied >= timestamp else { return false }
            if let dropped = firstDropped, timestamp >= dropped { return false }
            return true
        }
    }

    /// By link (its connection number): what it carried, for acknowledged writes. Entries go
    /// with their link. Touched for every link on every broadcast: a `NumberMap`, not a
    /// `Dictionary`.
    var deltaCounts = NumberMap<DeltaCounts>()

    /// The ids of the peers on open links that hold this node's decisions up to `timestamp`
    /// (all of them for 0: nothing to hold), sorted.
    func acknowledging(_ timestamp: UInt64) -> [String] {
        peers.filter { connection, link in
            !link.closing && (timestamp == 0 || deltaCounts[connection.rawValue]?.acknowledges(timestamp) == true)
        }.values.map(\.nodeID).sorted()
    }

    /// Records this node's newest decision when link `connection` opened (read after the link
    /// was added, under the node's lock). Nothing for a link that is gone.
    mutating func noteOwnBeforeOpen(_ timestamp: UInt64, on connection: ConnectionID) {
        guard peers[connection] != nil else { return }
        deltaCounts[connection.rawValue, default: .init()].ownBeforeOpen = timestamp
    }

    /// What the peer on `connection` says it holds (an `applied` answer). Nothing for a link
    /// that is gone.
    mutating func peerHolds(appliedUpTo timestamp: UInt64, covered: UInt64, on connection: ConnectionID) {
        guard peers[connection] != nil else { return }
        var counts = deltaCounts[connection.rawValue] ?? .init()
        counts.peerApplied = max(counts.peerApplied, timestamp)
        counts.peerCovered = max(counts.peerCovered, covered)
        deltaCounts[connection.rawValue] = counts
    }

    /// This node's proven coverage of the peer on `connection` (raw clock of the peer's; 0 when
    /// unknown): it holds everything the peer held when its clock read this.
    func coverage(ofPeerOn connection: ConnectionID) -> UInt64 {
        guard let link = peers[connection] else { return 0 }
        return members[link.nodeID]?.covered ?? 0
    }

    struct Member {
        enum Status { case alive, left }
        let nodeID: String
        var address: String
        var status: Status
        var removed = false
        var incarnation: UInt64
        var heartbeat: UInt64 = 0
        /// What the member last reported (gossip): its coverage and the hash of its member set.
        var coverage: UInt64 = 0
        var membersHash: UInt64 = 0
        /// This node's own knowledge: it holds everything the member held when the member's
        /// hybrid clock read this (raw), proven by a clean walk.
        var covered: UInt64 = 0
        var connection: ConnectionID?
        var lastHeard: UInt64?
        /// When this node learnt of it, heard from it, or removed it (for the dead-member timeout).
        var lastSeen: UInt64
        /// Deltas not queued to it because its link's queue was full, over all its links.
        var droppedDeltas = 0
        /// Deltas from it dropped unapplied because this node's store was slow and
        /// `maxInboundDeltaBytes` of deltas already waited (each repaired by catch-up).
        var droppedIncomingDeltas = 0
        /// Links to it closed because it broke a protocol rule, since this node started.
        var protocolViolations = 0
    }

    struct Dial {
        var inFlight = false
        var failures = 0
        var nextAt: UInt64 = 0
    }

    /// What the engine did since it started, counted as it happens (pure integers), for metrics
    /// (`ReplicationMetrics` publishes the differences on the tick).
    struct Totals: Equatable, Sendable {
        /// Deltas handed to a link's queue (one per peer per local commit).
        var deltasQueued: UInt64 = 0
        /// Deltas not queued because a link's queue was full (catch-up repairs them).
        var deltasDropped: UInt64 = 0
        /// Deltas from peers applied here.
        var deltasApplied: UInt64 = 0
        /// Deltas from peers dropped unapplied because the store was slow.
        var incomingDeltasDropped: UInt64 = 0
        var walksFinished: UInt64 = 0
        var walksAbandoned: UInt64 = 0
        /// Entries received in walks, and the bytes of the walk messages received.
        var walkEntriesReceived: UInt64 = 0
        var walkBytesReceived: UInt64 = 0
        var linksUp: UInt64 = 0
        var linksDown: UInt64 = 0
        var protocolViolations: UInt64 = 0
    }
    var totals = Totals()

    let selfID: String
    let configuration: Replicator.Configuration
    var random: SplitMix64
    var incarnation: UInt64
    /// Raised whenever this node's own record changes within an incarnation.
    var heartbeat: UInt64 = 1
    /// The coverage this node reports (only raised once the store holds what it covers).
    var advertisedCoverage: UInt64 = 0
    /// What gossip tells others to dial for this node.
    var advertisedAddress: String
    var leaving = false
    /// Another member told this node it was removed from the cluster: it links with nobody.
    var removedFromCluster = false
    var peers: [ConnectionID: Link] = [:] {
        // Kept beside the dictionary so a broadcast (every decision) neither allocates nor
        // sorts. A simple didSet (no oldValue) keeps in-place mutation of `peers` in place.
        didSet {
            if peers.count != linkOrder.count {
                linkOrder = peers.keys.sorted { $0.rawValue < $1.rawValue }
                linkCount.value.store(linkOrder.count, ordering: .releasing)
            }
        }
    }
    /// `linkOrder.count`, readable without the state's lock (`Replicator.sendCommit` asks it
    /// on every local commit: a lock and an unlock less a decision).
    let linkCount = LinkCount()
    /// The connections of `peers`, sorted by id: the order deltas are sent in, which must not
    /// depend on hashing (the simulator replays seeds).
    private(set) var linkOrder: [ConnectionID] = []
    var members: [String: Member] = [:]
    /// Removals whose full records `members` no longer holds (past `maxMembers` of them).
    var forgotten: ForgottenMembers
    var dials: [String: Dial] = [:]
    /// Addresses that turned out to reach this node itself, or a node reached by another link.
    var addressOwners: [String: String] = [:]
    /// Links that were sent a `refusal`: closed once their queue drained (so the refusal is
    /// written, not discarded with the queue) or at the deadline.
    var pendingCloses: [ConnectionID: UInt64] = [:]
    var lastGossip: UInt64 = 0
    var lastTombstoneCollection: UInt64 = 0
    /// The owner view last handed to the node (`ownerViewIfChanged`).
    var reportedOwners: (present: Set<String>, removed: Set<String>, forgottenGeneration: Int)?
    /// The highest collection bound reached (raw HLC; 0 for none).
    var highestCollectionBound: UInt64 = 0
    var nextNonce: UInt64 = 0
    /// Forged news about this node already logged (once per incarnation claimed).
    var loggedForgedIncarnation: UInt64 = 0

    init(selfID: String, configuration: Replicator.Configuration, random: SplitMix64, now: UInt64,
         remembered: [ReplicationMessage.MemberRecord] = [], forgotten: [UInt64] = []) {
        self.selfID = selfID
        self.forgotten = ForgottenMembers(capacity: configuration.maxForgottenMemberIDs,
                                          oldestFirst: forgotten.suffix(configuration.maxForgottenMemberIDs))
        self.configuration = configuration
        self.random = random
        self.incarnation = configuration.incarnation
        self.advertisedAddress = configuration.advertisedAddress
        for record in remembered.prefix(configuration.maxMembers * 2) {
            if record.nodeID == selfID {
                if record.status == .removed { removedFromCluster = true }
                continue
            }
            var member = Member(nodeID: record.nodeID, address: record.address,
                                status: record.status == .left ? .left : .alive,
                                incarnation: record.incarnation, lastSeen: now)
            member.removed = record.status == .removed
            members[record.nodeID] = member
        }
    }

    // MARK: timers

    mutating func tick(now: UInt64, queuedBytes: [ConnectionID: Int]) -> ReplicatorActions {
        var actions = ReplicatorActions()
        for (connection, deadline) in pendingCloses.sorted(by: { $0.key.rawValue < $1.key.rawValue })
        where (queuedBytes[connection] ?? 0) == 0 || now >= deadline {
            pendingCloses[connection] = nil
            actions.close.append((connection, "refused"))
        }
        guard !leaving, !removedFromCluster else { return actions }
        for connection in linkOrder {
            guard var link = peers[connection], !link.closing else { continue }
            let silent = elapsed(since: link.lastHeard, now: now)
            if silent > configuration.failureTimeoutMilliseconds {
                link.closing = true
                peers[connection] = link
                actions.close.append((connection, "no message for \(silent) ms"))
                actions.log(.warning, "peer unreachable", ["peer": "\(link.nodeID)", "silentMs": "\(silent)"])
                continue
            }
            if elapsed(since: link.lastPing, now: now) >= configuration.heartbeatIntervalMilliseconds {
                ping(&link, now: now, into: &actions)
            }
            for round in link.walks.keys.sorted() {
                guard let walk = link.walks[round], elapsed(since: walk.lastActivity, now: now) > configuration.antiEntropyTimeoutMilliseconds else { continue }
                link.walks[round] = nil
                remember(round, in: &link)
                totals.walksAbandoned &+= 1
                if walk.mine {
                    link.needsWalk = true
                    actions.log(.warning, "catch-up abandoned: no answer", [
                        "peer": "\(link.nodeID)", "ms": "\(elapsed(since: walk.startedAt, now: now))", "receivedEntries": "\(walk.receivedEntries)"])
                }
            }
            // One walk per link at a time, whichever side started it: a walk repairs both ways.
            if link.walks.isEmpty {
                if link.needsWalk, (queuedBytes[connection] ?? 0) < Self.drainedBytes {
                    start(&link, now: now, into: &actions, why: "something was dropped")
                } else if !link.needsWalk, now >= link.nextWalkAt {
                    start(&link, now: now, into: &actions, why: nil)
                }
            }
            peers[connection] = link
        }
        if elapsed(since: lastGossip, now: now) >= configuration.gossipIntervalMilliseconds {
            lastGossip = now
            actions.gossipTo = liveConnections()
        }
        forgetDeadMembers(now: now, into: &actions)
        for address in dialTargets() {
            var dial = dials[address] ?? Dial()
            guard !dial.inFlight, now >= dial.nextAt else { continue }
            dial.inFlight = true
            dials[address] = dial
            actions.dial.append(address)
        }
        pruneAddresses()
        if lastTombstoneCollection == 0 {
            // A random phase: nodes do not collect in lockstep (and tests see them out of step,
            // as real processes are).
            let interval = max(1, configuration.tombstoneCollectionIntervalMilliseconds)
            lastTombstoneCollection = max(1, now &- random.next() % interval)
        } else if elapsed(since: lastTombstoneCollection, now: now) >= configuration.tombstoneCollectionIntervalMilliseconds,
                  !streaming {
            // Not while a catch-up stream is open: its entries were read before the peer's
            // latest coverage report and may hold a value a collected delete overwrote.
            lastTombstoneCollection = now
            // A bound once reached stays true: everything below it was held by every member then,
            // so a tombstone below it that shows up later (handed back by a peer that collected
            // later, or late from a member since removed) goes too, even while the current bound
            // is unknown (a member has not reported). Nodes then agree on it, and converge.
            if let bound = collectionBound() { highestCollectionBound = max(highestCollectionBound, bound) }
            if highestCollectionBound > 0 { actions.collectTombstonesBelow = highestCollectionBound }
        }
        return actions
    }

    /// Milliseconds from `time` to `now`; 0 when `time` is later. Another thread may stamp a
    /// time after this one read `now` (the transport's thread records activity while the
    /// timer's tick runs), so a plain subtraction could wrap and declare a live walk dead.
    func elapsed(since time: UInt64, now: UInt64) -> UInt64 {
        now > time ? now - time : 0
    }

    /// Whether any walk is past its comparison (a summary or entry stream is open).
    var streaming: Bool {
        peers.values.contains { link in link.walks.values.contains { $0.phase != .comparing } }
    }

    /// A link whose transport queue holds less than this has drained enough for a catch-up walk.
    static let drainedBytes = 1 << 20

    private mutating func start(_ link: inout Link, now: UInt64, into actions: inout ReplicatorActions, why: String?) {
        let round = random.next()
        link.needsWalk = false
        link.overflowing = false
        link.nextWalkAt = now + configuration.antiEntropyIntervalMilliseconds
        actions.startWalk.append((link.connection, round))
        if let why {
            actions.log(.info, "catch-up started", ["peer": "\(link.nodeID)", "why": "\(why)"])
        }
    }

    /// The links this side is not closing, in `linkOrder` (sorted by id): where gossip and
    /// acknowledgement requests go.
    func liveConnections() -> [ConnectionID] {
        linkOrder.filter { peers[$0]?.closing == false }
    }

    // MARK: links

    mutating func connected(_ connection: ConnectionID, peer: PeerInfo, now: UInt64) -> ReplicatorActions {
        var actions = ReplicatorActions()
        if let dialed = peer.dialedAddress {
            dials[dialed] = Dial()
            addressOwners[dialed] = peer.nodeID
        }
        if peer.nodeID == selfID {
            actions.close.append((connection, "it is this node itself"))
            return actions
        }
        if leaving {
            // A link whose handshake finished after `leave` told the others: told too, so its
            // peer sees this node left (and does not redial it), not disconnected.
            actions.tellLeaving.append(connection)
            return actions
        }
        if removedFromCluster {
            actions.close.append((connection, "this node was removed from the cluster"))
            return actions
        }
        if members[peer.nodeID]?.removed ?? forgotten.contains(peer.nodeID) {
            actions.refuse.append((connection, Self.removedReason(peer.nodeID)))
            actions.log(.warning, "refused a removed member", [
                "peer": "\(peer.nodeID)",
                "howToRejoin": "start it with an empty data directory and a new node id"])
            return actions
        }
        if members[peer.nodeID] == nil && activeMemberCount >= configuration.maxMembers {
            actions.close.append((connection, "the cluster is at maxMembers \(configuration.maxMembers)"))
            actions.log(.error, "refused a new member: maxMembers reached",
                        ["peer": "\(peer.nodeID)", "maxMembers": "\(configuration.maxMembers)"])
            return actions
        }
        var link = Link(connection: connection, nodeID: peer.nodeID, address: peer.listenAddress, outbound: peer.outbound,
                        connectedAt: now, lastHeard: now, lastPing: now,
                        nextWalkAt: now + configuration.antiEntropyIntervalMilliseconds)
        if let existing = peers.values.first(where: { $0.nodeID == peer.nodeID && !$0.closing }) {
            // One link per pair of nodes: both ends keep the one dialled by the smaller id.
            if isPreferred(outbound: peer.outbound, peerID: peer.nodeID)
                && !isPreferred(outbound: existing.outbound, peerID: existing.nodeID) {
                peers[existing.connection]?.closing = true
                actions.close.append((existing.connection, "duplicate link to \(peer.nodeID)"))
            } else {
                actions.close.append((connection, "duplicate link to \(peer.nodeID)"))
                return actions
            }
        }
        let isNew = members[peer.nodeID] == nil
        var member = members[peer.nodeID]
            ?? Member(nodeID: peer.nodeID, address: peer.listenAddress, status: .alive, incarnation: 0, lastSeen: now)
        if !peer.listenAddress.isEmpty { member.address = peer.listenAddress }
        if member.status != .alive { actions.membershipChanged = true }
        member.status = .alive
        member.connection = connection
        member.lastHeard = now
        member.lastSeen = now
        members[peer.nodeID] = member
        if isNew {
            membershipDidChange(into: &actions)
        }
        if !peer.listenAddress.isEmpty { addressOwners[peer.listenAddress] = peer.nodeID }
        actions.gossipTo = [connection]
        actions.log(.info, "peer joined", ["peer": "\(peer.nodeID)", "address": "\(peer.listenAddress)",
                                           "direction": "\(peer.outbound ? "outbound" : "inbound")"])
        // Catch-up on every (re)connect; the dialling side walks so a pair walks once.
        if peer.outbound {
            start(&link, now: now, into: &actions, why: "connected")
        }
        // The new link's clock is measured at once, not a heartbeat later: until a majority of
        // its links carry an offset, a node with a wrong clock still decides, and versions it
        // makes then are refused by its peers until real time catches up (docs/consistency.md §7).
        ping(&link, now: now, into: &actions)
        peers[connection] = link
        totals.linksUp &+= 1
        return actions
    }

    /// Pings `link` now: its answer measures the peer's clock offset (`ack`).
    private mutating func ping(_ link: inout Link, now: UInt64, into actions: inout ReplicatorActions) {
        link.lastPing = now
        nextNonce &+= 1
        link.unansweredPing = nextNonce
        actions.ping.append((link.connection, nextNonce))
    }

    static func removedReason(_ nodeID: String) -> String {
        "node \(nodeID) was removed from this cluster (forget); it may hold deletes the cluster no longer remembers, so it is not let back in: start it with an empty data directory and a new node id"
    }

    private func isPreferred(outbound: Bool, peerID: String) -> Bool {
        let dialer = outbound ? selfID : peerID
        let acceptor = outbound ? peerID : selfID
        return dialer.utf8.lexicographicallyPrecedes(acceptor.utf8)
    }

    /// Records that `connection` was heard from; nil when it is not (or no longer) a peer link.
    mutating func heard(from connection: ConnectionID, now: UInt64) -> String? {
        // In place (`values[index]` as inout): this runs for every frame, and a link is large to copy.
        guard let index = peers.index(forKey: connection), let heard = Self.hear(&peers.values[index], now: now) else { return nil }
        if heard.first, let member = members.index(forKey: heard.nodeID) {
            members.values[member].lastHeard = now
            members.values[member].lastSeen = now
        }
        return heard.nodeID
    }

    /// Marks an open link heard at `now`: its peer, and whether this is the first time this
    /// millisecond. Nil for a link this side is closing.
    private static func hear(_ link: inout Link, now: UInt64) -> (nodeID: String, first: Bool)? {
        guard !link.closing else { return nil }
        defer { link.lastHeard = now }
        return (link.nodeID, link.lastHeard != now)
    }

    /// Whether `connection` is a link this side is not closing (mutating only to read the link
    /// in place).
    mutating func isOpen(_ connection: ConnectionID) -> Bool {
        guard let index = peers.index(forKey: connection) else { return false }
        return Self.isOpen(&peers.values[index])
    }

    private static func isOpen(_ link: inout Link) -> Bool { !link.closing }

    mutating func disconnected(_ connection: ConnectionID, now: UInt64) -> (String?, Bool) {
        deltaCounts[connection.rawValue] = nil
        guard let link = peers.removeValue(forKey: connection) else { return (nil, true) }
        totals.linksDown &+= 1
        if var member = members[link.nodeID], member.connection == connection {
            member.connection = nil
            member.lastSeen = now
            members[link.nodeID] = member
            if member.status == .alive && !member.removed && !member.address.isEmpty {
                var dial = dials[member.address] ?? Dial()
                dial.nextAt = now + backoff(failures: dial.failures)
                dials[member.address] = dial
            }
        }
        return (link.nodeID, link.closing)
    }

    /// Returns the delay before the next try, in milliseconds.
    mutating func dialFailed(_ address: String, now: UInt64) -> UInt64 {
        var dial = dials[address] ?? Dial()
        dial.inFlight = false
        dial.failures = min(dial.failures + 1, 64)
        let delay = backoff(failures: dial.failures)
        dial.nextAt = now + delay
        dials[address] = dial
        return delay
    }

    /// Exponential from `reconnectBaseMilliseconds` up to `reconnectMaxMilliseconds`, times a
    /// jitter factor in [0.5, 1.5) so peers that lost each other do not redial in lockstep.
    private mutating func backoff(failures: Int) -> UInt64 {
        let exponent = UInt64(min(failures, 20))
        let raw = min(configuration.reconnectMaxMilliseconds, configuration.reconnectBaseMilliseconds << exponent)
        let jitter = 0.5 + Double(random.next() >> 11) / Double(1 << 53)
        return max(1, UInt64(Double(raw) * jitter))
    }

    mutating func peerLeft(_ connection: ConnectionID) -> ReplicatorActions {
        var actions = ReplicatorActions()
        guard var link = peers[connection] else { return actions }
        members[link.nodeID]?.status = .left
        link.closing = true
        peers[connection] = link
        actions.close.append((connection, "\(link.nodeID) left"))
        actions.membershipChanged = true
        return actions
    }

    /// A peer refused this node: keep away from its address for the longest backoff.
    mutating func refused(by connection: ConnectionID, now: UInt64) {
        guard var link = peers[connection] else { return }
        link.closing = true
        peers[connection] = link
        if let address = members[link.nodeID]?.address, !address.isEmpty {
            var dial = dials[address] ?? Dial()
            dial.failures = 64
            dial.nextAt = now + configuration.reconnectMaxMilliseconds
            dials[address] = dial
        }
    }

    // MARK: anti-entropy bookkeeping

    mutating func markForCatchUp(_ connection: ConnectionID) {
        peers[connection]?.needsWalk = true
    }

    /// Records a dropped delta (of timestamp `timestamp`, raw; nil when not known: then no
    /// delta on the link counts as acknowledged any more); true when this starts a new overflow
    /// episode (log it once).
    mutating func deltaDropped(on connection: ConnectionID, timestamp: UInt64?) -> Bool {
        guard var link = peers[connection] else { return false }
        let firstDropped = min(deltaCounts[connection.rawValue]?.firstDropped ?? .max, timestamp ?? 0)
        deltaCounts[connection.rawValue, default: DeltaCounts()].firstDropped = firstDropped
        members[link.nodeID]?.droppedDeltas += 1
        totals.deltasDropped &+= 1
        let first = !link.overflowing
        link.overflowing = true
        link.needsWalk = true
        peers[connection] = link
        return first
    }

    /// The peer on `connection` broke a protocol rule: counts it against the member, marks the
    /// link closing (nothing more of it is handled) and has the link closed, naming the rule.
    mutating func brokeRule(on connection: ConnectionID, rule: String, into actions: inout ReplicatorActions) {
        let peer = peers[connection]?.nodeID
        if let peer { members[peer]?.protocolViolations += 1 }
        totals.protocolViolations &+= 1
        peers[connection]?.closing = true
        actions.violation(connection, peer: peer ?? "?", rule: rule)
    }

    /// Records a delta from the peer dropped before it was applied (the store is slow) and
    /// marks the link for a walk, which repairs it.
    mutating func incomingDeltaDropped(on connection: ConnectionID) {
        guard var link = peers[connection] else { return }
        members[link.nodeID]?.droppedIncomingDeltas += 1
        totals.incomingDeltasDropped &+= 1
        link.needsWalk = true
        peers[connection] = link
    }

    mutating func remember(_ round: UInt64, in link: inout Link) {
        guard !link.finishedRounds.contains(round) else { return }
        link.finishedRounds.append(round)
        if link.finishedRounds.count > 32 { link.finishedRounds.removeFirst() }
    }

    /// Measures the peer's clock offset from the answer to this node's newest ping.
    mutating func ack(nonce: UInt64, peerPhysical: UInt64, on connection: ConnectionID, now: UInt64) {
        guard var link = peers[connection], link.unansweredPing == nonce, now >= link.lastPing else { return }
        let midpoint = link.lastPing + (now - link.lastPing) / 2
        let magnitude = peerPhysical >= midpoint ? peerPhysical - midpoint : midpoint - peerPhysical
        guard magnitude <= UInt64(Int64.max) else { return }
        link.clockOffsetMilliseconds = peerPhysical >= midpoint ? Int64(magnitude) : -Int64(magnitude)
        link.unansweredPing = nil
        peers[connection] = link
    }

    /// Why this node should take no decision now, judged from its peers' clocks: a majority of
    /// the nodes it can see (itself included) disagree with its clock by more than `bound`.
    func clockVerdict(boundMilliseconds: UInt64) -> String? {
        let bound = Int64(clamping: boundMilliseconds)
        var ahead = 0   // peers behind this node: it runs ahead
        var behind = 0
        var voters = 1
        for link in peers.values where !link.closing {
            voters += 1
            guard let offset = link.clockOffsetMilliseconds else { continue }
            if offset < -bound { ahead += 1 } else if offset > bound { behind += 1 }
        }
        if ahead * 2 > voters {
            return "this node's clock is more than \(boundMilliseconds) ms ahead of \(ahead) of its \(voters - 1) peers; it takes no decision until its clock is fixed (check NTP)"
        }
        if behind * 2 > voters {
            return "this node's clock is more than \(boundMilliseconds) ms behind \(behind) of its \(voters - 1) peers; it takes no decision until its clock is fixed (check NTP)"
        }
        return nil
    }

    // MARK: status

    func status(now: UInt64, queuedBytes: [ConnectionID: Int]) -> ReplicationStatus {
        var rows: [ReplicationStatus.Member] = []
        for member in members.values.sorted(by: { $0.nodeID < $1.nodeID }) {
            let link = member.connection.flatMap { peers[$0] }
            let state: ReplicationStatus.LinkState
            if member.removed {
                state = .removed
            } else if member.status == .left {
                state = .left
            } else if link != nil {
                state = .connected
            } else {
                state = .disconnected
            }
            let catchUp: ReplicationStatus.CatchUpState
            if link?.walks.isEmpty == false {
                catchUp = .running
            } else if link?.needsWalk == true {
                catchUp = .needed
            } else {
                catchUp = .idle
            }
            rows.append(ReplicationStatus.Member(
                nodeID: member.nodeID, address: member.address, link: state,
                lastHeardMillisecondsAgo: member.lastHeard.map { elapsed(since: $0, now: now) },
                outboundBytesQueued: link.map { queuedBytes[$0.connection] ?? 0 } ?? 0,
                catchUp: catchUp, droppedDeltas: member.droppedDeltas, droppedIncomingDeltas: member.droppedIncomingDeltas,
                protocolViolations: member.protocolViolations,
                coveredClock: member.covered, reportedCoverage: member.coverage))
        }
        return ReplicationStatus(nodeID: selfID, incarnation: incarnation, members: rows,
                                 coverage: advertisedCoverage, tombstoneBound: collectionBound(),
                                 forgottenMemberIDs: forgotten.count)
    }
}

/// How many links a replicator has, kept by its state (`ReplicatorState.linkCount`) for
/// readers that must not take the state's lock: a count read a moment late only makes a
/// commit check the links under the lock, or skip encoding a frame no link would carry.
final class LinkCount: Sendable {
    let value = Atomic<Int>(0)
}
