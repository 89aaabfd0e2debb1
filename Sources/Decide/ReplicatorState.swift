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
    var ping: [(ConnectionID, UInt64)] = []
    var gossipTo: [ConnectionID] = []
    var gossipRecords: [ReplicationMessage.MemberRecord] = []
    var startWalk: [(ConnectionID, UInt64)] = []
    var collectTombstonesBefore: HLCTimestamp?
    /// This node was out of sync for longer than the tombstone horizon: drop its entries older
    /// than this before any walk sends them (they may be deletes the others have collected).
    var discardStaleBefore: HLCTimestamp?
    var logs: [LogLine] = []

    mutating func log(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata = [:]) {
        logs.append(LogLine(level: level, message: message, metadata: metadata))
    }
}

/// The engine's bookkeeping: links, members, dials, walks and timers. Pure: no I/O, no locks,
/// no clock; every method takes `now` and returns what to do. `Replicator` owns it behind a lock.
struct ReplicatorState {
    enum CatchUp {
        case idle
        /// Something was lost (a dropped queue, an abandoned walk): walk as soon as the link drains.
        case needed
        case running(round: UInt64, startedAt: UInt64, lastActivity: UInt64, received: Int, changed: Int)
    }

    struct Link {
        let connection: ConnectionID
        let nodeID: String
        let address: String
        let outbound: Bool
        let connectedAt: UInt64
        var lastHeard: UInt64
        var lastPing: UInt64
        var catchUp: CatchUp = .idle
        var nextWalkAt: UInt64
        var overflowing = false
        /// This side is closing it (duplicate, leave, timeout): its disconnect is expected.
        var closing = false
        /// For each walk this side takes part in: the node's change sequence when it first did
        /// (what changed after that is sent with the walk's entries). Newest last, at most 8.
        var walkStarts: [(round: UInt64, sequence: UInt64)] = []
        /// Catch-up entries received for a round, applied together when its last message comes.
        var pendingEntries: [UInt64: [KeyedEntry]] = [:]
        var pendingEntryCount = 0
        /// Walks that ended here; late or duplicated messages of them are ignored (their
        /// snapshots are stale, and sending entries for them could split a decision).
        var finishedRounds: [UInt64] = []
    }

    struct Member {
        enum Status { case alive, left }
        let nodeID: String
        var address: String
        var status: Status
        var incarnation: UInt64
        var connection: ConnectionID?
        var lastHeard: UInt64?
        /// Deltas not queued to it because its link's queue was full, over all its links.
        var droppedDeltas = 0
    }

    struct Dial {
        var inFlight = false
        var failures = 0
        var nextAt: UInt64 = 0
    }

    let selfID: String
    let configuration: Replicator.Configuration
    var random: SplitMix64
    var incarnation: UInt64
    /// What gossip tells others to dial for this node.
    var advertisedAddress: String
    var leaving = false
    var peers: [ConnectionID: Link] = [:]
    var members: [String: Member] = [:]
    var dials: [String: Dial] = [:]
    /// Addresses that turned out to reach this node itself, or a node reached by another link.
    var addressOwners: [String: String] = [:]
    /// When this node last finished an anti-entropy walk with any peer (or started).
    var lastSyncMilliseconds: UInt64
    var lastGossip: UInt64 = 0
    var lastTombstoneCollection: UInt64 = 0
    var nextNonce: UInt64 = 0

    init(selfID: String, configuration: Replicator.Configuration, random: SplitMix64, now: UInt64) {
        self.lastSyncMilliseconds = configuration.lastSyncMilliseconds ?? now
        self.selfID = selfID
        self.configuration = configuration
        self.random = random
        self.incarnation = configuration.incarnation
        self.advertisedAddress = configuration.advertisedAddress
    }

    // MARK: timers

    mutating func tick(now: UInt64, queuedBytes: [ConnectionID: Int]) -> ReplicatorActions {
        var actions = ReplicatorActions()
        guard !leaving else { return actions }
        if peers.values.contains(where: { !$0.closing }) { checkStaleness(now: now, into: &actions) }
        for connection in peers.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard var link = peers[connection], !link.closing else { continue }
            let silent = now &- link.lastHeard
            if now > link.lastHeard && silent > configuration.failureTimeoutMilliseconds {
                link.closing = true
                peers[connection] = link
                actions.close.append((connection, "no message for \(silent) ms"))
                actions.log(.warning, "peer unreachable", ["peer": "\(link.nodeID)", "silentMs": "\(silent)"])
                continue
            }
            if now &- link.lastPing >= configuration.heartbeatIntervalMilliseconds {
                link.lastPing = now
                nextNonce &+= 1
                actions.ping.append((connection, nextNonce))
            }
            switch link.catchUp {
            case .needed where (queuedBytes[connection] ?? 0) < Self.drainedBytes:
                start(&link, now: now, into: &actions, why: "queue dropped")
            case .idle where now >= link.nextWalkAt:
                start(&link, now: now, into: &actions, why: nil)
            case let .running(_, _, lastActivity, _, _) where now &- lastActivity > configuration.antiEntropyTimeoutMilliseconds:
                actions.log(.warning, "catch-up abandoned: no answer", ["peer": "\(link.nodeID)"])
                link.catchUp = .needed
            default:
                break
            }
            peers[connection] = link
        }
        if now &- lastGossip >= configuration.gossipIntervalMilliseconds {
            lastGossip = now
            actions.gossipTo = liveConnections()
            actions.gossipRecords = gossipRecords()
        }
        for address in dialTargets() {
            var dial = dials[address] ?? Dial()
            guard !dial.inFlight, now >= dial.nextAt else { continue }
            dial.inFlight = true
            dials[address] = dial
            actions.dial.append(address)
        }
        if lastTombstoneCollection == 0 {
            lastTombstoneCollection = now
        } else if now &- lastTombstoneCollection >= configuration.tombstoneCollectionIntervalMilliseconds,
                  now > configuration.tombstoneHorizonMilliseconds {
            lastTombstoneCollection = now
            actions.collectTombstonesBefore = HLCTimestamp(
                physicalMilliseconds: now - configuration.tombstoneHorizonMilliseconds, logical: 0)
        }
        return actions
    }

    /// A node that finished no walk for longer than the tombstone horizon may hold values whose
    /// deletes the others have since collected; before it syncs again it drops everything
    /// older than the horizon (peers send back whatever of it is still alive).
    private mutating func checkStaleness(now: UInt64, into actions: inout ReplicatorActions) {
        guard now > lastSyncMilliseconds, now - lastSyncMilliseconds > configuration.tombstoneHorizonMilliseconds,
              now > configuration.tombstoneHorizonMilliseconds else { return }
        actions.discardStaleBefore = HLCTimestamp(
            physicalMilliseconds: now - configuration.tombstoneHorizonMilliseconds, logical: 0)
        actions.log(.warning, "out of sync for longer than the tombstone horizon: dropping older entries, catching up from peers",
                    ["outOfSyncMs": "\(now - lastSyncMilliseconds)", "horizonMs": "\(configuration.tombstoneHorizonMilliseconds)"])
        lastSyncMilliseconds = now
    }

    /// A link whose transport queue holds less than this has drained enough for a catch-up walk.
    static let drainedBytes = 1 << 20

    private mutating func start(_ link: inout Link, now: UInt64, into actions: inout ReplicatorActions, why: String?) {
        let round = random.next()
        link.catchUp = .running(round: round, startedAt: now, lastActivity: now, received: 0, changed: 0)
        link.overflowing = false
        link.nextWalkAt = now + configuration.antiEntropyIntervalMilliseconds
        actions.startWalk.append((link.connection, round))
        if let why {
            actions.log(.info, "catch-up started", ["peer": "\(link.nodeID)", "why": "\(why)"])
        }
    }

    /// Alive members not connected (by their address) and seeds not known to reach anyone connected.
    private func dialTargets() -> [String] {
        var targets: [String] = []
        let connectedIDs = Set(peers.values.filter { !$0.closing }.map(\.nodeID))
        for member in members.values.sorted(by: { $0.nodeID < $1.nodeID })
        where member.status == .alive && !member.address.isEmpty && !connectedIDs.contains(member.nodeID) {
            targets.append(member.address)
        }
        for seed in configuration.seeds where !targets.contains(seed) {
            if let owner = addressOwners[seed], owner == selfID || connectedIDs.contains(owner) { continue }
            if let owner = addressOwners[seed], members[owner]?.status == .left { continue }
            if members.values.contains(where: { $0.address == seed && connectedIDs.contains($0.nodeID) }) { continue }
            targets.append(seed)
        }
        return targets.filter { addressOwners[$0] != selfID && $0 != advertisedAddress }
    }

    private func liveConnections() -> [ConnectionID] {
        peers.values.filter { !$0.closing }.map(\.connection).sorted { $0.rawValue < $1.rawValue }
    }

    func gossipRecords() -> [ReplicationMessage.MemberRecord] {
        var records = [ReplicationMessage.MemberRecord(
            nodeID: selfID, address: advertisedAddress, status: .alive, incarnation: incarnation)]
        for member in members.values.sorted(by: { $0.nodeID < $1.nodeID }) {
            records.append(.init(nodeID: member.nodeID, address: member.address,
                                 status: member.status == .alive ? .alive : .left, incarnation: member.incarnation))
        }
        return records
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
            actions.close.append((connection, "this node is leaving"))
            return actions
        }
        checkStaleness(now: now, into: &actions)
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
        var member = members[peer.nodeID]
            ?? Member(nodeID: peer.nodeID, address: peer.listenAddress, status: .alive, incarnation: 0)
        if !peer.listenAddress.isEmpty { member.address = peer.listenAddress }
        member.status = .alive
        member.connection = connection
        member.lastHeard = now
        members[peer.nodeID] = member
        if !peer.listenAddress.isEmpty { addressOwners[peer.listenAddress] = peer.nodeID }
        actions.gossipTo = [connection]
        actions.gossipRecords = gossipRecords()
        actions.log(.info, "peer joined", ["peer": "\(peer.nodeID)", "address": "\(peer.listenAddress)",
                                           "direction": "\(peer.outbound ? "outbound" : "inbound")"])
        // Catch-up on every (re)connect; the dialling side walks so a pair walks once.
        if peer.outbound {
            start(&link, now: now, into: &actions, why: "connected")
        }
        peers[connection] = link
        return actions
    }

    private func isPreferred(outbound: Bool, peerID: String) -> Bool {
        let dialer = outbound ? selfID : peerID
        let acceptor = outbound ? peerID : selfID
        return dialer.utf8.lexicographicallyPrecedes(acceptor.utf8)
    }

    /// Records that `connection` was heard from; nil when it is not (or no longer) a peer link.
    mutating func heard(from connection: ConnectionID, now: UInt64) -> String? {
        guard var link = peers[connection] else { return nil }
        link.lastHeard = now
        peers[connection] = link
        members[link.nodeID]?.lastHeard = now
        return link.nodeID
    }

    mutating func disconnected(_ connection: ConnectionID, now: UInt64) -> (String?, Bool) {
        guard let link = peers.removeValue(forKey: connection) else { return (nil, true) }
        if var member = members[link.nodeID], member.connection == connection {
            member.connection = nil
            members[link.nodeID] = member
            if member.status == .alive && !member.address.isEmpty {
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
        dial.failures += 1
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
        return actions
    }

    // MARK: membership

    mutating func gossip(_ records: [ReplicationMessage.MemberRecord], now: UInt64) -> ReplicatorActions {
        var actions = ReplicatorActions()
        for record in records {
            if record.nodeID == selfID {
                if record.status == .left && record.incarnation >= incarnation {
                    incarnation = record.incarnation + 1   // refute stale news of our leaving
                }
                continue
            }
            let status: Member.Status = record.status == .alive ? .alive : .left
            guard var member = members[record.nodeID] else {
                members[record.nodeID] = Member(nodeID: record.nodeID, address: record.address, status: status,
                                                incarnation: record.incarnation)
                if status == .alive {
                    actions.log(.info, "learnt of member", ["peer": "\(record.nodeID)", "address": "\(record.address)"])
                }
                continue
            }
            if record.incarnation > member.incarnation {
                member.incarnation = record.incarnation
                if !record.address.isEmpty { member.address = record.address }
                if member.connection == nil || status == .alive { member.status = status }
            } else if record.incarnation == member.incarnation && status == .left && member.connection == nil {
                member.status = .left
            }
            members[record.nodeID] = member
        }
        return actions
    }

    // MARK: anti-entropy bookkeeping

    mutating func markForCatchUp(_ connection: ConnectionID) {
        guard var link = peers[connection] else { return }
        if case .idle = link.catchUp { link.catchUp = .needed }
        peers[connection] = link
    }

    /// Records a dropped delta; true when this starts a new overflow episode (log it once).
    mutating func deltaDropped(on connection: ConnectionID) -> Bool {
        guard var link = peers[connection] else { return false }
        members[link.nodeID]?.droppedDeltas += 1
        let first = !link.overflowing
        link.overflowing = true
        switch link.catchUp {
        case .idle: link.catchUp = .needed
        case .running: link.catchUp = .needed   // the walk's own frames may have been lost too
        case .needed: break
        }
        peers[connection] = link
        return first
    }

    /// Records where this side's part in walk `round` starts, unless already known; returns
    /// the recorded sequence, or nil when the round already ended here (ignore its message).
    @discardableResult
    mutating func noteWalk(_ round: UInt64, on connection: ConnectionID, sequence: UInt64) -> UInt64? {
        guard var link = peers[connection], !link.finishedRounds.contains(round) else { return nil }
        if let known = link.walkStarts.first(where: { $0.round == round }) { return known.sequence }
        link.walkStarts.append((round, sequence))
        if link.walkStarts.count > 8 { link.walkStarts.removeFirst() }
        peers[connection] = link
        return sequence
    }

    /// Where this side's part in a live walk started; nil for a walk unknown or ended here.
    func walkStart(_ round: UInt64, on connection: ConnectionID) -> UInt64? {
        peers[connection]?.walkStarts.first { $0.round == round }?.sequence
    }

    /// Buffers catch-up entries; returns all of the round's entries when `last` (to apply as
    /// one unit), or nil while more are to come. Past `maxBufferedEntries` the round's buffer
    /// is dropped and the peer marked for catch-up (returns an empty batch).
    mutating func bufferEntries(_ batch: [KeyedEntry], round: UInt64, last: Bool, on connection: ConnectionID,
                                maxBufferedEntries: Int) -> [KeyedEntry]? {
        guard var link = peers[connection], !link.finishedRounds.contains(round) else { return nil }
        link.pendingEntries[round, default: []].append(contentsOf: batch)
        link.pendingEntryCount += batch.count
        var complete: [KeyedEntry]?
        if last {
            complete = link.pendingEntries.removeValue(forKey: round) ?? []
            link.pendingEntryCount -= complete!.count
        } else if link.pendingEntryCount > maxBufferedEntries {
            link.pendingEntries.removeAll()
            link.pendingEntryCount = 0
            link.catchUp = .needed
            complete = []
        }
        peers[connection] = link
        return complete
    }

    mutating func walkStep(round: UInt64, on connection: ConnectionID, now: UInt64) {
        guard var link = peers[connection], case let .running(mine, started, _, received, changed) = link.catchUp,
              mine == round else { return }
        link.catchUp = .running(round: mine, startedAt: started, lastActivity: now, received: received, changed: changed)
        peers[connection] = link
    }

    mutating func received(entries: Int, changed: Int, round: UInt64, on connection: ConnectionID) {
        guard var link = peers[connection], case let .running(mine, started, _, received, changedSoFar) = link.catchUp,
              mine == round else { return }
        link.catchUp = .running(round: mine, startedAt: started, lastActivity: link.lastHeard,
                                received: received + entries, changed: changedSoFar + changed)
        peers[connection] = link
    }

    mutating func walkFinished(round: UInt64, on connection: ConnectionID, now: UInt64) -> ReplicatorActions {
        var actions = ReplicatorActions()
        if let index = peers[connection]?.walkStarts.firstIndex(where: { $0.round == round }) {
            peers[connection]!.walkStarts.remove(at: index)
        }
        if let stale = peers[connection]?.pendingEntries.removeValue(forKey: round) {
            peers[connection]!.pendingEntryCount -= stale.count
        }
        lastSyncMilliseconds = max(lastSyncMilliseconds, now)
        if peers[connection] != nil, !peers[connection]!.finishedRounds.contains(round) {
            peers[connection]!.finishedRounds.append(round)
            if peers[connection]!.finishedRounds.count > 32 { peers[connection]!.finishedRounds.removeFirst() }
        }
        guard var link = peers[connection], case let .running(mine, started, _, received, changed) = link.catchUp,
              mine == round else { return actions }
        link.catchUp = .idle
        link.nextWalkAt = now + configuration.antiEntropyIntervalMilliseconds
        peers[connection] = link
        let level: Logger.Level = changed > 0 ? .info : .debug
        actions.log(level, "catch-up finished", [
            "peer": "\(link.nodeID)", "receivedEntries": "\(received)", "changedKeys": "\(changed)",
            "ms": "\(now &- started)",
        ])
        return actions
    }

    // MARK: status

    func status(now: UInt64, queuedBytes: [ConnectionID: Int]) -> ReplicationStatus {
        var rows: [ReplicationStatus.Member] = []
        for member in members.values.sorted(by: { $0.nodeID < $1.nodeID }) {
            let link = member.connection.flatMap { peers[$0] }
            let state: ReplicationStatus.LinkState
            if member.status == .left {
                state = .left
            } else if link != nil {
                state = .connected
            } else {
                state = .disconnected
            }
            let catchUp: ReplicationStatus.CatchUpState
            switch link?.catchUp {
            case .running?: catchUp = .running
            case .needed?: catchUp = .needed
            case .idle?, nil: catchUp = .idle
            }
            rows.append(ReplicationStatus.Member(
                nodeID: member.nodeID, address: member.address, link: state,
                lastHeardMillisecondsAgo: member.lastHeard.map { now &- $0 },
                outboundBytesQueued: link.map { queuedBytes[$0.connection] ?? 0 } ?? 0,
                catchUp: catchUp, droppedDeltas: member.droppedDeltas))
        }
        return ReplicationStatus(nodeID: selfID, incarnation: incarnation, members: rows)
    }
}
