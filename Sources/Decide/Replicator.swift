import Logging
import Synchronization

/// Keeps a node's state equal to its peers': sends every local decision to every connected
/// peer as one delta, repairs what deltas missed by digest anti-entropy, and keeps a full mesh
/// of links by gossip, heartbeats and redial with backoff. Written only against `Transport`,
/// so the same code runs over libuv and over the seeded simulator.
///
/// Guarantees:
/// - a delta is applied on a peer as one unit (its observers see the whole decision or none);
/// - when links are up long enough for one anti-entropy walk, both ends hold the same entries
///   (anti-entropy, not the delta path, is what guarantees this; see docs/replication.md);
/// - memory stays bounded behind a slow peer: when its transport queue is full, deltas to it
///   are dropped and it is marked for catch-up, which repairs the difference;
/// - the engine never calls the node while holding its own lock, and the node's commit path
///   never waits on the network.
///
/// Drive it with `tick()` (every ~50 ms: `startTimer` does so in production; the simulator
/// calls it from its scheduler). All methods are thread-safe.
public final class Replicator: TransportDelegate, @unchecked Sendable {
    public let node: Node
    public let transport: any Transport
    public let configuration: Configuration
    let clock: any PhysicalClock
    let codec: ReplicationCodec
    let logger: Logger
    private let state: Mutex<ReplicatorState>
    private let listenerID = Mutex<UInt64?>(nil)
    private let timer = Mutex<ReplicatorTimer?>(nil)
    private let syncMarker: SyncMarker?
    private let markerWritten = Mutex<UInt64>(0)

    /// `clock` drives timers (heartbeats, timeouts, backoff); it is the node's clock unless a
    /// test says otherwise.
    public init(node: Node, transport: any Transport, configuration: Configuration, clock: (any PhysicalClock)? = nil) {
        self.node = node
        self.transport = transport
        self.configuration = configuration
        self.clock = clock ?? node.configuration.clock
        self.codec = ReplicationCodec(wire: WireCodec(limits: node.configuration.limits))
        var logger = configuration.logger
        logger[metadataKey: "node"] = "\(node.id)"
        self.logger = logger
        var configuration = configuration
        syncMarker = configuration.syncMarkerPath.map(SyncMarker.init(path:))
        if configuration.lastSyncMilliseconds == nil, let stored = syncMarker?.read() {
            configuration.lastSyncMilliseconds = stored
        }
        self.state = Mutex(ReplicatorState(
            selfID: node.id, configuration: configuration, random: SplitMix64(seed: configuration.randomSeed),
            now: (clock ?? node.configuration.clock).nowMilliseconds()))
    }

    // MARK: lifecycle

    /// Starts the transport with this engine as its delegate, listens on `listenAddress` when
    /// given (port 0 picks one), hooks the node's commits and dials the seeds. Returns the bound
    /// address, which becomes the advertised one unless the configuration names another.
    @discardableResult
    public func start(listeningOn listenAddress: String? = nil) throws -> String? {
        try transport.start(delegate: self)
        var bound: String?
        if let listenAddress {
            let address = try transport.listen(on: listenAddress)
            bound = address
            state.withLock { state in
                if state.advertisedAddress.isEmpty { state.advertisedAddress = address }
            }
        }
        let id = node.addCommitListener { [weak self] committed in
            guard committed.origin == .local else { return }
            self?.broadcast(committed.delta)
        }
        listenerID.withLock { $0 = id }
        tick()
        return bound
    }

    /// Calls `tick()` every `intervalMilliseconds` on a background thread until `stop`.
    public func startTimer(intervalMilliseconds: UInt64 = 50) {
        let timer = ReplicatorTimer(intervalMilliseconds: intervalMilliseconds) { [weak self] in self?.tick() }
        self.timer.withLock { $0 = timer }
    }

    /// Tells every peer this node leaves (they stop redialling it and report it left), stops
    /// dialling, and unhooks from the node. The caller shuts the transport down after.
    public func leave() {
        let connections = state.withLock { state -> [ConnectionID] in
            state.leaving = true
            return state.peers.keys.sorted { $0.rawValue < $1.rawValue }
        }
        let frame = codec.encode(.leave)
        for connection in connections { _ = transport.send(frame, to: connection) }
        logger.info("leaving the cluster", metadata: ["peers": "\(connections.count)"])
        stop()
    }

    /// Stops the timer and unhooks from the node (no more deltas are sent); saves the sync
    /// marker, if any. Idempotent.
    public func stop() {
        writeSyncMarker(lastSyncMilliseconds)
        timer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
        if let id = listenerID.withLock({ id -> UInt64? in defer { id = nil }; return id }) {
            node.removeCommitListener(id)
        }
    }

    // MARK: status

    /// One row per known member (connected or not), sorted by node id.
    public var status: ReplicationStatus {
        let queued = queuedBytes()
        return state.withLock { state in state.status(now: clock.nowMilliseconds(), queuedBytes: queued) }
    }

    /// Bytes the transport holds for each current link, read outside the engine's lock.
    private func queuedBytes() -> [ConnectionID: Int] {
        let connections = state.withLock { Array($0.peers.keys) }
        var queued: [ConnectionID: Int] = [:]
        for connection in connections { queued[connection] = transport.outboundBytes(for: connection) }
        return queued
    }

    // MARK: timers

    /// Runs whatever is due: pings, failure detection, gossip, redials, anti-entropy walks,
    /// tombstone collection.
    public func tick() {
        let now = clock.nowMilliseconds()
        let queued = queuedBytes()
        let (actions, lastSync) = state.withLock { state in (state.tick(now: now, queuedBytes: queued), state.lastSyncMilliseconds) }
        perform(actions)
        saveSyncMarker(lastSync, now: now)
    }

    /// When this node last finished an anti-entropy walk (or started, or declared itself stale).
    public var lastSyncMilliseconds: UInt64 { state.withLock { $0.lastSyncMilliseconds } }

    private func saveSyncMarker(_ lastSync: UInt64, now: UInt64) {
        guard syncMarker != nil else { return }
        let due = markerWritten.withLock { written -> Bool in
            guard lastSync > written, now &- written >= configuration.syncMarkerIntervalMilliseconds else { return false }
            written = lastSync
            return true
        }
        if due { writeSyncMarker(lastSync) }
    }

    private func writeSyncMarker(_ lastSync: UInt64) {
        guard let syncMarker else { return }
        do {
            try syncMarker.write(lastSync)
        } catch {
            logger.warning("cannot save the sync marker", metadata: ["path": "\(syncMarker.path)", "error": "\(error)"])
        }
    }

    // MARK: the delta path

    /// Called under the node's lock for every local commit: encode once, queue to every peer.
    private func broadcast(_ delta: Delta) {
        // Sorted: the order of sends must not depend on hashing (the simulator replays seeds).
        let connections = state.withLock { $0.peers.keys.sorted { $0.rawValue < $1.rawValue } }
        guard !connections.isEmpty else { return }
        let frame = codec.encode(.delta(delta))
        guard frame.count <= configuration.maxFrameBytes else {
            logger.warning("delta too large for one frame: peers will catch up instead",
                           metadata: ["bytes": "\(frame.count)", "maxFrameBytes": "\(configuration.maxFrameBytes)"])
            state.withLock { state in for connection in connections { state.markForCatchUp(connection) } }
            return
        }
        var overflowed: [ConnectionID] = []
        for connection in connections {
            switch transport.send(frame, to: connection) {
            case .queued, .notConnected: break
            case .overLimit: overflowed.append(connection)
            }
        }
        if !overflowed.isEmpty {
            let newlyFull = state.withLock { state in overflowed.filter { state.deltaDropped(on: $0) } }
            for connection in newlyFull {
                logger.warning("outbound queue full: dropping deltas, catch-up scheduled",
                               metadata: ["peer": "\(state.withLock { $0.peers[connection]?.nodeID ?? "?" })"])
            }
        }
    }

    // MARK: TransportDelegate

    public func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
        let now = clock.nowMilliseconds()
        let actions = state.withLock { state in state.connected(connection, peer: peer, now: now) }
        perform(actions)
    }

    public func transport(_ transport: any Transport, didReceive frame: [UInt8], from connection: ConnectionID) {
        let message: ReplicationMessage
        do {
            message = try codec.decode(frame)
        } catch {
            let peer = state.withLock { $0.peers[connection]?.nodeID ?? "?" }
            logger.warning("closing link: undecodable message", metadata: ["peer": "\(peer)", "error": "\(error)"])
            transport.close(connection)
            return
        }
        let now = clock.nowMilliseconds()
        guard let peerID = state.withLock({ $0.heard(from: connection, now: now) }) else { return }
        switch message {
        case .delta(let delta):
            do {
                try node.apply(delta)
            } catch {
                logger.warning("refused delta", metadata: ["peer": "\(peerID)", "error": "\(error)"])
            }
        case let .digest(round, shape, level, nodes):
            handleDigest(round: round, shape: shape, level: level, nodes: nodes, from: connection, peerID: peerID)
        case .digestDone(let round):
            let actions = state.withLock { $0.walkFinished(round: round, on: connection, now: now) }
            perform(actions)
        case let .entriesRequest(round, buckets):
            // Only for a walk this side took part in and has not ended: the request's buckets
            // were chosen against this side's snapshots since its start.
            guard state.withLock({ $0.walkStart(round, on: connection) }) != nil else { break }
            let width = 1 << (node.digestShape.fanoutBits * node.digestShape.depth)
            let wanted = Set(buckets.map(Int.init).filter { $0 < width })
            sendWalkEntries(buckets: wanted, round: round, to: connection, peerID: peerID)
            _ = transport.send(codec.encode(.digestDone(round: round)), to: connection)
            perform(state.withLock { $0.walkFinished(round: round, on: connection, now: now) })
        case let .entries(round, last, batch):
            let complete = state.withLock {
                $0.bufferEntries(batch, round: round, last: last, on: connection,
                                 maxBufferedEntries: configuration.maxBufferedCatchUpEntries)
            }
            guard let complete, !complete.isEmpty else { break }
            do {
                let changed = try node.apply(entries: complete)
                state.withLock { $0.received(entries: complete.count, changed: changed, round: round, on: connection) }
            } catch {
                logger.warning("refused catch-up entries", metadata: ["peer": "\(peerID)", "error": "\(error)"])
            }
        case .gossip(let records):
            let actions = state.withLock { $0.gossip(records, now: now) }
            perform(actions)
        case .ping(let nonce):
            _ = transport.send(codec.encode(.ack(nonce: nonce)), to: connection)
        case .ack:
            break
        case .leave:
            let actions = state.withLock { $0.peerLeft(connection) }
            logger.info("peer left the cluster", metadata: ["peer": "\(peerID)"])
            perform(actions)
        }
    }

    public func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {
        state.withLock { state in _ = state.deltaDropped(on: connection) }
    }

    public func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {
        let now = clock.nowMilliseconds()
        let (peerID, expected) = state.withLock { $0.disconnected(connection, now: now) }
        guard let peerID else { return }
        if expected {
            logger.debug("link closed", metadata: ["peer": "\(peerID)", "reason": "\(reason)"])
        } else {
            logger.info("peer disconnected", metadata: ["peer": "\(peerID)", "reason": "\(reason)"])
        }
    }

    public func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {
        let now = clock.nowMilliseconds()
        let retry = state.withLock { $0.dialFailed(address, now: now) }
        logger.debug("dial failed", metadata: ["address": "\(address)", "reason": "\(reason)", "retryInMs": "\(retry)"])
    }

    // MARK: anti-entropy

    private func handleDigest(
        round: UInt64, shape: ReplicationMessage.DigestShape, level: UInt8,
        nodes: [ReplicationMessage.DigestNode], from connection: ConnectionID, peerID: String
    ) {
        let mine = node.digestShape
        guard Int(shape.fanoutBits) == mine.fanoutBits, Int(shape.depth) == mine.depth else {
            logger.error("cannot compare state: digest shapes differ; set the same digest shape on every node",
                         metadata: ["peer": "\(peerID)", "theirs": "\(shape.fanoutBits)x\(shape.depth)",
                                    "mine": "\(mine.fanoutBits)x\(mine.depth)"])
            _ = transport.send(codec.encode(.digestDone(round: round)), to: connection)
            return
        }
        let now = clock.nowMilliseconds()
        let sequence = node.changeSequence
        let live = state.withLock { state -> Bool in
            guard state.noteWalk(round, on: connection, sequence: sequence) != nil else { return false }
            state.walkStep(round: round, on: connection, now: now)
            return true
        }
        guard live else { return }   // a late or duplicated message of a walk that ended here
        let indices = nodes.map { Int($0.index) }
        let hashes = node.digestHashes(level: Int(level), indices: indices)
        let differing = zip(nodes, hashes).filter { $0.0.hash != $0.1 }.map { Int($0.0.index) }
        if differing.isEmpty {
            _ = transport.send(codec.encode(.digestDone(round: round)), to: connection)
            perform(state.withLock { $0.walkFinished(round: round, on: connection, now: now) })
        } else if Int(level) == mine.depth {
            // Leaves: push ours, pull theirs. Their reply ends with `digestDone`.
            guard sendWalkEntries(buckets: Set(differing), round: round, to: connection, peerID: peerID) else { return }
            _ = transport.send(codec.encode(.entriesRequest(round: round, buckets: differing.map(UInt32.init))), to: connection)
        } else {
            let fanout = 1 << mine.fanoutBits
            let children = differing.flatMap { index in (index * fanout)..<((index + 1) * fanout) }
            let childHashes = node.digestHashes(level: Int(level) + 1, indices: children)
            let message = ReplicationMessage.digest(
                round: round, shape: shape, level: level + 1,
                nodes: zip(children, childHashes).map { .init(index: UInt32($0.0), hash: $0.1) })
            _ = transport.send(codec.encode(message), to: connection)
        }
    }

    /// Sends this side's entries for a walk's differing `buckets`, plus every entry that
    /// changed since this side joined the walk: with them, every decision applied here during
    /// the walk travels whole (docs/replication.md, "Atomic catch-up"). Returns false (and
    /// ends the walk, marking the peer for a new one) when the change log no longer covers it.
    @discardableResult
    private func sendWalkEntries(buckets: Set<Int>, round: UInt64, to connection: ConnectionID, peerID: String) -> Bool {
        guard let start = state.withLock({ $0.walkStart(round, on: connection) }) else { return false }
        guard let entries = node.entries(inBuckets: buckets, changedAfter: start) else {
            logger.info("restarting catch-up: more changes during the walk than the change log holds",
                        metadata: ["peer": "\(peerID)"])
            _ = transport.send(codec.encode(.digestDone(round: round)), to: connection)
            state.withLock { $0.markForCatchUp(connection) }
            return false
        }
        sendEntries(entries, round: round, to: connection)
        return true
    }

    /// Sends `entries` in batches of at most `maxEntriesPerMessage` entries and half of
    /// `maxFrameBytes`, cutting only between versions: the entries of one decision travel in
    /// one batch, which the receiver applies as one unit, so catch-up never shows part of a
    /// decision (one decision is itself within the codec limits, so within one frame).
    private func sendEntries(_ unsorted: [KeyedEntry], round: UInt64, to connection: ConnectionID) {
        let entries = unsorted.sorted { $0.entry.version < $1.entry.version }
        let byteBudget = configuration.maxFrameBytes / 2
        var batch: [KeyedEntry] = []
        var batchBytes = 0
        var isLast = false
        func flush() {
            guard !batch.isEmpty else { return }
            let frame = codec.encode(.entries(round: round, last: isLast, batch: batch))
            guard frame.count <= configuration.maxFrameBytes else {
                logger.error("cannot send a decision larger than one frame; raise maxFrameBytes on every node",
                             metadata: ["bytes": "\(frame.count)", "version": "\(batch[0].entry.version)"])
                batch.removeAll(keepingCapacity: true)
                batchBytes = 0
                return
            }
            if transport.send(frame, to: connection) == .overLimit {
                state.withLock { _ = $0.deltaDropped(on: connection) }
            }
            batch.removeAll(keepingCapacity: true)
            batchBytes = 0
        }
        for item in entries {
            let size = 32 + item.key.name.utf8.count + item.key.element.count + (item.entry.value?.count ?? 0)
                + item.entry.version.node.utf8.count
            let full = batch.count >= configuration.maxEntriesPerMessage || batchBytes + size > byteBudget
            if full, let last = batch.last, last.entry.version != item.entry.version { flush() }
            batch.append(item)
            batchBytes += size
        }
        isLast = true
        flush()
    }

    // MARK: performing what the state machine decided

    private func perform(_ actions: ReplicatorActions) {
        for line in actions.logs { logger.log(level: line.level, "\(line.message)", metadata: line.metadata) }
        // Before any walk message leaves: nothing possibly stale may be offered to a peer.
        if let floor = actions.discardStaleBefore {
            let dropped = node.discardEntries(olderThan: floor)
            logger.warning("dropped entries older than the tombstone horizon", metadata: ["count": "\(dropped)"])
        }
        if let horizon = actions.collectTombstonesBefore {
            let collected = node.collectTombstones(olderThan: horizon)
            if collected > 0 { logger.info("collected tombstones", metadata: ["count": "\(collected)"]) }
        }
        for address in actions.dial {
            logger.debug("dialling", metadata: ["address": "\(address)"])
            transport.connect(to: address)
        }
        for (connection, why) in actions.close {
            logger.info("closing link", metadata: ["connection": "\(connection)", "why": "\(why)"])
            transport.close(connection)
        }
        for (connection, nonce) in actions.ping {
            _ = transport.send(codec.encode(.ping(nonce: nonce)), to: connection)
        }
        if !actions.gossipTo.isEmpty {
            let frame = codec.encode(.gossip(actions.gossipRecords))
            for connection in actions.gossipTo { _ = transport.send(frame, to: connection) }
        }
        for (connection, round) in actions.startWalk {
            let sequence = node.changeSequence
            state.withLock { _ = $0.noteWalk(round, on: connection, sequence: sequence) }
            let root = node.digestHashes(level: 0, indices: [0])
            let shape = node.digestShape
            let message = ReplicationMessage.digest(
                round: round, shape: .init(fanoutBits: UInt8(shape.fanoutBits), depth: UInt8(shape.depth)),
                level: 0, nodes: [.init(index: 0, hash: root[0])])
            _ = transport.send(codec.encode(message), to: connection)
        }
    }
}
