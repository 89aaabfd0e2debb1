@_spi(Engine) import DecideCore
import Dispatch
import Logging
import Synchronization

/// Keeps a node's state equal to its peers': sends every local decision to every connected
/// peer as one delta, repairs what deltas missed by digest anti-entropy with streamed,
/// flow-controlled catch-up, keeps a full mesh of links by gossip, heartbeats and redial with
/// backoff, and collects tombstones only once every member is known to hold them. Written only
/// against `Transport`, so the same code runs over libuv and over the seeded simulator.
///
/// Guarantees:
/// - a delta is applied on a peer as one unit (its observers see the whole decision or none),
///   and so is every decision a catch-up stream carries (streams cut only between versions);
/// - when links are up long enough for one anti-entropy walk, both ends hold the same entries,
///   whatever the size of the state (anti-entropy, not the delta path, guarantees this);
/// - memory stays bounded behind a slow peer (its queue is dropped and repaired by a walk),
///   and a catch-up stream keeps at most `catchUpWindowMessages` messages unacknowledged;
/// - a tombstone is collected only when every member, reachable or not, reported holding it;
///   no wall-clock rule removes an entry (docs/consistency.md, "Deletes and tombstones");
/// - whatever a peer sends is checked before use; a peer that breaks a rule loses its link
///   with a log line naming the rule, and the node keeps serving the others;
/// - the engine never calls the node while holding its own lock, never sends a frame over
///   `maxFrameBytes`, and never waits for the disk on the transport's thread.
///
/// Drive it with `tick()` (every ~50 ms: `startTimer` does so in production; a simulation
/// calls it from its scheduler). It is the transport's delegate through an object of its own,
/// so the link callbacks, which only a transport makes, are not part of its API. All methods
/// are thread-safe.
public final class Replicator: @unchecked Sendable {
    /// The node whose commits it sends and into which it applies its peers'.
    public let node: Node
    /// The links to its peers.
    public let transport: any Transport
    /// Its settings, as checked by `init`.
    public let configuration: Configuration
    let clock: any PhysicalClock
    let codec: ReplicationCodec
    let logger: Logger
    private let state: Mutex<ReplicatorState>
    private let timer = Mutex<ReplicatorTimer?>(nil)
    private let membershipFile: MembershipFile?
    private let membershipDirty = Mutex(false)
    /// Strict durability: acknowledgements of applied catch-up batches wait for the disk here,
    /// never on the transport's thread.
    private let durableAcks = DispatchQueue(label: "decide.replicator.durable-acks")
    /// Deltas and walk messages, which may wait for the store, are handled here in arrival
    /// order rather than on the transport's thread; nil when the transport's delegate may block
    /// (the simulator), which then handles everything in the call.
    private let inbound: DispatchQueue?
    private let inboundLoad = Mutex(InboundLoad(batchMessages: Replicator.inboundBatchMessages))
    /// What the transport's delegate calls keep between frames. Touched only inside those
    /// calls, which come one at a time, so it is kept `InPlace`: a class's stored `var` costs a
    /// dynamic exclusivity check on every access, two or three of them a delta.
    private struct Receiving {
        /// A node without a store: deltas of the current read as they arrived (checked, not
        /// decoded), applied together from their bytes when it ends; each tagged with its link.
        var heldDeltas: ReceivedDeltas
        /// The batch being applied, swapped out of `heldDeltas` first: a link closed meanwhile
        /// (a violation) applies what is held again, which must then be nothing. Kept for its
        /// memory.
        var applying: ReceivedDeltas
        /// The strings of the delta decoded last (a peer's node id, a collection's name), for
        /// the next one to reuse.
        var recentStrings = RecentWireStrings()
        /// The link the last delta was held from, with its peer's id, while nothing else has
        /// been handled since in the same read: the next delta of that link is held without
        /// asking the shared state again (`heard`, a lock and a dictionary lookup a frame).
        /// Forgotten at the end of every read, whenever held deltas are applied (one of them
        /// may condemn its link, whose later frames must then be dropped), and whenever a frame
        /// takes any other path (it may condemn the link or queue work ahead of later deltas).
        var heardLink: (connection: ConnectionID, peerID: String)?

        /// Moves the held deltas to `applying` (which must be empty) and holds none.
        mutating func takeHeld() { swap(&heldDeltas, &applying) }
    }
    private let receiving: InPlace<Receiving>
    /// The state's link count (`ReplicatorState.linkCount`), read without its lock.
    private let linkCount: LinkCount
    /// Whether deltas are held for `didFinishReading`: a node without a store, on a transport
    /// that reports the ends of its reads (an event loop's, or the simulator's, where the
    /// frames of one instant on one link are one read).
    private let holdsDeltas: Bool
    private let stopped = Mutex(false)
    private let writeRefusal = Mutex<String?>(nil)
    /// Callers of `decide(_:acknowledgedBy:...)` waiting for their peers, by id.
    private let waiters = Mutex<(next: UInt64, byID: [UInt64: AcknowledgementWaiter])>((0, [:]))
    /// The store ticket of the newest batch of deltas or catch-up entries applied here (strict
    /// durability: an `applied` answer waits for it).
    private let lastAppliedTicket = Mutex<UInt64>(0)
    /// Publishes counts, gauges and latencies to swift-metrics (nil when turned off).
    private let metrics: ReplicationMetrics?

    /// `clock` drives timers (heartbeats, timeouts, backoff); it is the node's clock unless a
    /// test says otherwise.
    public init(node: Node, transport: any Transport, configuration: Configuration, clock: (any PhysicalClock)? = nil) {
        self.node = node
        node.driveExpiryExternally()
        self.transport = transport
        self.configuration = configuration
        self.clock = clock ?? node.configuration.clock
        self.codec = ReplicationCodec(wire: WireCodec(limits: node.configuration.limits))
        self.receiving = InPlace(Receiving(heldDeltas: ReceivedDeltas(codec: codec.wire), applying: ReceivedDeltas(codec: codec.wire)))
        self.inbound = transport.delegateMayBlock ? nil : DispatchQueue(label: "decide.replicator.inbound")
        self.holdsDeltas = transport.reportsReadEnds && !node.persists
        var logger = configuration.logger
        logger[metadataKey: "node"] = "\(node.id)"
        self.logger = logger
        self.metrics = configuration.metricsIntervalMilliseconds.map { ReplicationMetrics(nodeID: node.id, intervalMilliseconds: $0) }
        membershipFile = configuration.membershipPath.map(MembershipFile.init(path:))
        var remembered = MembershipFile.Contents()
        if let membershipFile {
            do {
                remembered = try membershipFile.read()
            } catch {
                logger.error("cannot read the member list; starting without it", metadata: [
                    "path": "\(membershipFile.path)", "error": "\(error)"])
            }
        }
        self.state = Mutex(ReplicatorState(
            selfID: node.id, configuration: configuration, random: SplitMix64(seed: configuration.randomSeed),
            now: (clock ?? node.configuration.clock).nowMilliseconds(), remembered: remembered.records,
            forgotten: remembered.forgotten))
        linkCount = state.withLock { $0.linkCount }
        if state.withLock({ $0.removedFromCluster }) {
            logger.critical("this node was removed from its cluster: it links with nobody; start it with an empty data directory and a new node id")
        }
        handle = ReplicatorHandle(self)
    }

    /// What the node and the timer hold to reach this engine (`ReplicatorHandle`). Made at the
    /// end of `init` (it needs `self`), before anyone else can see the engine; read-only after.
    private var handle: ReplicatorHandle!

    deinit {
        // Before anything of this engine goes: the node stops calling it (under its lock, so a
        // commit under way finishes first), and the timer and strict sends find it detached.
        cancelTimer()
        node.unhookLocalCommitSender(handle)
        handle.detach()
        receiving.release()
    }

    // MARK: lifecycle

    /// Starts the transport with this engine as its delegate, listens on `listenAddress` when
    /// given (port 0 picks one), hooks the node's commits and dials the seeds. Returns the bound
    /// address, which becomes the advertised one unless the configuration names another.
    /// Throws `ReplicatorConfigurationError` for bounds that cannot work together.
    @discardableResult
    public func start(listeningOn listenAddress: String? = nil) throws -> String? {
        try validate()
        try transport.start(delegate: ReplicatorEvents(replicator: self))
        var bound: String?
        if let listenAddress {
            let address = try transport.listen(on: listenAddress)
            bound = address
            state.withLock { state in
                if state.advertisedAddress.isEmpty { state.advertisedAddress = address }
            }
        }
        node.setLocalCommitSender(handle)
        tick()
        return bound
    }

    private func validate() throws(ReplicatorConfigurationError) {
        let shape = node.digestShape
        let leaves = 1 << (shape.fanoutBits * shape.depth)
        let digestBytes = leaves * ReplicationCodec.maxDigestNodeBytes + ReplicationCodec.maxHeaderBytes
        guard digestBytes <= configuration.maxFrameBytes else {
            throw .init("the digest tree's \(leaves) leaves need frames of \(digestBytes) bytes, over maxFrameBytes \(configuration.maxFrameBytes): use a smaller digest shape")
        }
        guard node.configuration.maxDecisionBytes + ReplicationCodec.maxHeaderBytes <= configuration.maxFrameBytes else {
            throw .init("the node's maxDecisionBytes \(node.configuration.maxDecisionBytes) must be at least 64 bytes below maxFrameBytes \(configuration.maxFrameBytes)")
        }
        guard configuration.catchUpBatchBytes >= 1024, configuration.catchUpBatchBytes <= configuration.maxFrameBytes / 2 else {
            throw .init("catchUpBatchBytes must be 1,024 to half of maxFrameBytes")
        }
        guard configuration.catchUpBatchBytes + node.configuration.maxDecisionBytes + ReplicationCodec.maxHeaderBytes
                <= configuration.maxFrameBytes else {
            throw .init("catchUpBatchBytes + maxDecisionBytes must fit maxFrameBytes: a batch is cut after the decision that crosses its budget")
        }
        let limits = node.configuration.limits
        let largestEntry = WireCodec.maxEncodedEntryBytes(nameBytes: limits.maxNameBytes, elementBytes: limits.maxElementBytes,
                                                         nodeBytes: limits.maxNodeIDBytes, valueBytes: limits.maxValueBytes)
        guard largestEntry + ReplicationCodec.maxHeaderBytes <= configuration.maxFrameBytes else {
            throw .init("the largest entry the node's limits allow (\(largestEntry) bytes) does not fit maxFrameBytes \(configuration.maxFrameBytes)")
        }
        guard configuration.catchUpWindowMessages >= 1, configuration.maxMembers >= 1 else {
            throw .init("catchUpWindowMessages and maxMembers must be at least 1")
        }
        guard configuration.maxForgottenMemberIDs >= 0 else {
            throw .init("maxForgottenMemberIDs must not be negative (0 remembers no removal past maxMembers)")
        }
        guard configuration.maxInboundDeltaBytes >= configuration.maxFrameBytes else {
            throw .init("maxInboundDeltaBytes must be at least maxFrameBytes \(configuration.maxFrameBytes): one delta must fit")
        }
    }

    /// Stops the timer `startTimer` started, if any (a tick under way may still finish).
    private func cancelTimer() {
        timer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }

    /// Calls `tick()` every `intervalMilliseconds` on a background thread until `stop`.
    public func startTimer(intervalMilliseconds: UInt64 = 50) {
        let timer = ReplicatorTimer(intervalMilliseconds: intervalMilliseconds) { [handle] in handle.withEngine { $0.tick() } }
        self.timer.withLock { $0 = timer }
    }

    /// Tells every peer this node leaves (they stop redialling it and report it left), stops
    /// dialling, and unhooks from the node. The caller shuts the transport down after.
    public func leave() {
        let connections = state.withLock { state -> [ConnectionID] in
            state.leaving = true
            return state.linkOrder
        }
        let frame = codec.encode(.leave)
        for connection in connections { _ = transport.send(frame, to: connection) }
        logger.info("leaving the cluster", metadata: ["peers": "\(connections.count)"])
        stop()
    }

    /// Stops the timer and unhooks from the node (no more deltas are sent); saves the member
    /// list, if kept. Idempotent.
    public func stop() {
        stopped.withLock { $0 = true }
        cancelTimer()
        // Only this engine's handle: a later engine already started on this node keeps its own.
        node.unhookLocalCommitSender(handle)
        // A refusal this engine set (its peers' clocks) ends with it: a later engine on the same
        // node judges afresh.
        if writeRefusal.withLock({ refusal -> Bool in defer { refusal = nil }; return refusal != nil }) {
            node.refuseWrites(nil)
        }
        saveMembership(force: true)
        settleWaiters(now: clock.nowMilliseconds())
    }

    /// Removes `nodeID` from the cluster for good: it no longer holds back tombstone collection,
    /// is not dialled, and is refused (with a message telling it why) if it comes back. Every
    /// other member learns of the removal by gossip. Use it for a member that will not return;
    /// a returning node must start with an empty data directory and a new node id.
    public func forget(_ nodeID: String) throws(ForgetError) {
        let now = clock.nowMilliseconds()
        let (outcome, actions) = state.withLock { $0.forget(nodeID, now: now) }
        switch outcome {
        case .removed: break
        case .unknown: throw .unknownMember(nodeID)
        case .isSelf: throw .isThisNode(nodeID)
        case .alreadyRemoved: throw .alreadyRemoved(nodeID)
        }
        perform(actions)
        saveMembership(force: true)
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
    /// coverage reports, tombstone collection, the clock check, the node's expired values
    /// (`Node.expireDue`) and the counter lifetimes peers set (`Node.followLifetimes`).
    public func tick() {
        let now = clock.nowMilliseconds()
        let queued = queuedBytes()
        let nodeClock = node.clockLast
        let (actions, proposed, advertised, owners) = state.withLock { state in
            let actions = state.tick(now: now, queuedBytes: queued)
            return (actions, state.coverageNow(clock: nodeClock), state.advertisedCoverage, state.ownerViewIfChanged())
        }
        perform(actions)
        if let owners { node.setPresentOwners(owners.present, removed: owners.removed, forgotten: owners.forgotten) }
        if proposed > advertised {
            // Report coverage only once the store holds what it covers: a crash must not take
            // back a tombstone this node told the others it holds.
            do {
                try node.flush()
                state.withLock { $0.advertise(coverage: proposed) }
            } catch {
                logger.warning("coverage not reported: the store cannot flush", metadata: ["error": "\(error)"])
            }
        }
        checkClock()
        saveMembership(force: false)
        node.expireDue()
        node.followLifetimes()
        settleWaiters(now: now)
        publishMetrics(now: now, queued: queued)
    }

    /// Hands what the engine and the node did since the last publication to swift-metrics, at
    /// most every `metricsIntervalMilliseconds` (docs/operations.md, "Metrics").
    private func publishMetrics(now: UInt64, queued: [ConnectionID: Int]) {
        guard let metrics else { return }
        let due = state.withLock { state -> (ReplicatorState.Totals, ReplicationStatus)? in
            guard metrics.isDue(now: now) else { return nil }
            return (state.totals, state.status(now: now, queuedBytes: queued))
        }
        guard let (totals, status) = due else { return }
        metrics.publish(totals: totals, status: status, summary: node.stateSummary)
    }

    // MARK: acknowledged writes

    /// Runs `decision` on this node, then waits until `target` peers hold it — each applied it
    /// at its own durability level and said so on the link its delta travelled — or until
    /// `timeout` passes, and says who acknowledged it (docs/consistency.md, "Writes acknowledged
    /// by replicas"). A decision that commits nothing returns at once with no acknowledgement.
    /// The peers' answers ride the existing links, asked for only when someone waits. Needs the
    /// engine's timer (`startTimer`) for the timeout.
    public func decide(_ decision: some Decision, acknowledgedBy target: AcknowledgementTarget, timeout: Duration) async -> Acknowledged {
        let timeoutMilliseconds = Transaction.milliseconds(of: timeout) ?? 0
        return await withCheckedContinuation { continuation in
            decide(decision, acknowledgedBy: target, timeoutMilliseconds: timeoutMilliseconds) { continuation.resume(returning: $0) }
        }
    }

    /// `decide(_:acknowledgedBy:timeout:)` with a completion handler, called once, outside
    /// every lock (on the calling thread when it is settled at once).
    public func decide(_ decision: some Decision, acknowledgedBy target: AcknowledgementTarget, timeoutMilliseconds: UInt64,
                       completion: @escaping @Sendable (Acknowledged) -> Void) {
        let commit = node.decide(decision)
        guard let version = commit.version else { return completion(Acknowledged(commit: commit, acknowledgedBy: [], required: 0)) }
        let required: Int
        switch target {
        case .peers(let count): required = max(0, count)
        case .allMembers: required = state.withLock { $0.members.values.filter { !$0.removed && $0.status == .alive }.count }
        }
        waitForAcknowledgements(of: version.timestamp.rawValue, commit: commit, required: required,
                                timeoutMilliseconds: timeoutMilliseconds, completion: completion)
    }

    /// Waits until `required` peers hold this node's decisions up to `timestamp` (raw;
    /// `newestOwnDecisionTimestamp` for "everything so far"), or `timeoutMilliseconds` pass, and
    /// calls `completion` once. For Redis-protocol WAIT.
    package func waitForAcknowledgements(of timestamp: UInt64, commit: Commit = .unchanged, required: Int,
                                         timeoutMilliseconds: UInt64, completion: @escaping @Sendable (Acknowledged) -> Void) {
        let now = clock.nowMilliseconds()
        // Who holds it already, and what to ask each open link: how many deltas were queued on it.
        let (held, requests) = state.withLock { state -> ([String], [(ConnectionID, UInt64)]) in
            let open = state.liveConnections()
            return (state.acknowledging(timestamp), open.map { ($0, state.deltaCounts[$0.rawValue]?.queued ?? 0) })
        }
        guard required > 0, held.count < required, timestamp > 0, !stopped.withLock({ $0 }) else {
            return completion(Acknowledged(commit: commit, acknowledgedBy: held, required: required))
        }
        waiters.withLock { waiters in
            waiters.next += 1
            let (deadline, overflow) = now.addingReportingOverflow(timeoutMilliseconds)
            waiters.byID[waiters.next] = AcknowledgementWaiter(
                timestamp: timestamp, required: required, deadline: overflow ? .max : deadline, commit: commit, complete: completion)
        }
        for (connection, count) in requests {
            send(frame: codec.encode(.ackRequest(timestamp: timestamp, deltas: count)), to: connection)
        }
    }

    /// The timestamp (raw) of this node's newest decision since it started, linked or not (0:
    /// none): what "every write so far" waits for.
    package var newestOwnDecisionTimestamp: UInt64 { node.newestOwnDecisionTimestamp }

    /// Records the store ticket of a batch of deltas or catch-up entries just applied (0: it
    /// stored nothing), for `heldAnswer` to wait for.
    private func noteApplied(ticket: UInt64) {
        if ticket > 0 { lastAppliedTicket.withLock { $0 = max($0, ticket) } }
    }

    /// The peer on `connection` says what it holds: the waiters it completes are settled, after
    /// every delta that link brought before the answer was applied.
    private func handleApplied(timestamp: UInt64, covered: UInt64, from connection: ConnectionID) {
        state.withLock { $0.peerHolds(appliedUpTo: timestamp, covered: covered, on: connection) }
        settleWaiters(now: clock.nowMilliseconds())
    }

    /// What this node answers a peer that asks what it holds (`ackRequest`) or is told of its
    /// coverage: `upTo` and `covered` as they stand, once everything applied so far is stored
    /// when the node runs strict; zeros when its store stopped taking writes, since nothing
    /// more can be promised at its durability level. May wait for the disk: never called on
    /// the transport's thread under strict durability.
    private func heldAnswer(upTo: UInt64, covered: UInt64) -> ReplicationMessage {
        if node.acknowledgesAfterDisk {
            let ticket = lastAppliedTicket.withLock { $0 }
            if node.waitUntilDurable(ticket) != nil { return .applied(timestamp: 0, covered: 0) }
        }
        // Checked after the wait: a delta applied in memory only (its store had failed) was
        // counted above, and the failure is set by then.
        guard node.storeFailure == nil else { return .applied(timestamp: 0, covered: 0) }
        return .applied(timestamp: upTo, covered: covered)
    }

    /// Completes the waiters that have their acknowledgements, or whose time is up (or all of
    /// them once the engine stopped), outside the locks.
    private func settleWaiters(now: UInt64) {
        guard !waiters.withLock({ $0.byID.isEmpty }) else { return }
        let stopping = stopped.withLock { $0 }
        let pending = waiters.withLock { $0.byID.sorted { $0.key < $1.key } }
        let held = state.withLock { state in pending.map { state.acknowledging($0.value.timestamp) } }
        let done = waiters.withLock { waiters -> [(AcknowledgementWaiter, [String])] in
            var done: [(AcknowledgementWaiter, [String])] = []
            for ((id, waiter), held) in zip(pending, held) where waiters.byID[id] != nil {
                if held.count >= waiter.required || now >= waiter.deadline || stopping {
                    waiters.byID[id] = nil
                    done.append((waiter, held))
                }
            }
            return done
        }
        for (waiter, held) in done {
            waiter.complete(Acknowledged(commit: waiter.commit, acknowledgedBy: held, required: waiter.required))
        }
    }

    /// Judges this node's clock against its peers' (`ReplicatorState.clockVerdict`) and tells the
    /// node to refuse or take decisions when the verdict changes. Called by the timer and by the
    /// transport's thread as each ping's answer arrives: the verdict is read and applied under
    /// one hold of `writeRefusal`, so a stale verdict never overwrites a newer one. Nothing once
    /// the engine stopped.
    private func checkClock() {
        let changed = writeRefusal.withLock { current -> String?? in
            // `stop` marks the engine stopped before it clears the refusal: an answer that arrives
            // after that sets none again.
            guard !stopped.withLock({ $0 }) else { return .none }
            let verdict = state.withLock { $0.clockVerdict(boundMilliseconds: node.configuration.maxClockSkewMilliseconds) }
            guard verdict != current else { return .none }
            current = verdict
            node.refuseWrites(verdict)
            return .some(verdict)
        }
        guard case .some(let verdict) = changed else { return }
        if let verdict {
            logger.critical("refusing decisions: \(verdict)")
        } else {
            logger.notice("clock agrees with the peers again: taking decisions")
        }
    }

    private func saveMembership(force: Bool) {
        guard let membershipFile else { return }
        let due = membershipDirty.withLock { dirty -> Bool in defer { dirty = false }; return dirty || force }
        guard due else { return }
        let contents = state.withLock { MembershipFile.Contents(records: $0.rememberedRecords(), forgotten: $0.forgotten.oldestFirst) }
        do {
            try membershipFile.write(contents)
        } catch {
            membershipDirty.withLock { $0 = true }
            logger.warning("cannot save the member list", metadata: ["path": "\(membershipFile.path)", "error": "\(error)"])
        }
    }

    // MARK: sending

    /// Sends `message` and closes the link once it is written (or at the next tick past
    /// `reconnectMaxMilliseconds`): closing at once would discard it with the link's queue.
    private func sendThenClose(_ message: ReplicationMessage, on connection: ConnectionID) {
        send(message, to: connection)
        let deadline = clock.nowMilliseconds() + configuration.reconnectMaxMilliseconds
        state.withLock { $0.pendingCloses[connection] = deadline }
    }

    /// Queues one frame; refuses (and logs) one over `maxFrameBytes` instead of handing it to
    /// the transport. Returns what the transport answered, `.overLimit` for a refused frame.
    @discardableResult
    private func send(_ message: ReplicationMessage, to connection: ConnectionID) -> SendResult {
        send(frame: codec.encode(message), to: connection)
    }

    @discardableResult
    private func send(frame: [UInt8], to connection: ConnectionID) -> SendResult {
        guard frame.count <= configuration.maxFrameBytes else {
            logger.error("not sending a message over maxFrameBytes", metadata: [
                "bytes": "\(frame.count)", "maxFrameBytes": "\(configuration.maxFrameBytes)", "type": "\(frame.first ?? 0)"])
            return .overLimit
        }
        return transport.send(frame, to: connection)
    }

    // MARK: the delta path

    /// Called for every local commit under the node's lock (`LocalCommitSender`, memory and
    /// batched durability): the delta frame, encoded once for every peer from the pending writes
    /// into scratch memory and copied into each link's outbox; nothing while no link is up.
    func sendCommit(version: Version, writes: borrowing PendingWrites) {
        guard linkCount.value.load(ordering: .acquiring) > 0 else { return }
        writes.withDeltaMessage(version: version, codec: codec.wire) { send(bytes: $0, timestamp: version.timestamp) }
    }

    /// `sendCommit`'s frame as an array, for a strict commit sent once on disk; none while no
    /// link is up.
    func frame(version: Version, writes: borrowing PendingWrites) -> [UInt8]? {
        guard linkCount.value.load(ordering: .acquiring) > 0 else { return nil }
        return writes.deltaMessage(version: version, codec: codec.wire)
    }

    /// Sends a strict commit's frame once it is on disk (`LocalCommitSender`).
    func send(_ frame: [UInt8], timestamp: HLCTimestamp) {
        frame.withUnsafeBytes { send(bytes: $0, timestamp: timestamp) }
    }

    /// Queues a local commit's frame (lent for the call) to every peer.
    private func send(bytes frame: UnsafeRawBufferPointer, timestamp stamp: HLCTimestamp) {
        let timestamp = stamp.rawValue
        let connections = state.withLock { state in
            let connections = state.linkOrder
            for connection in connections {
                state.deltaCounts[connection.rawValue, default: .init()].noteQueued(timestamp)
            }
            state.totals.deltasQueued &+= UInt64(connections.count)
            return connections
        }
        guard !connections.isEmpty else { return }
        guard frame.count <= configuration.maxFrameBytes else {
            logger.error("delta too large for one frame: peers will catch up instead",
                         metadata: ["bytes": "\(frame.count)", "maxFrameBytes": "\(configuration.maxFrameBytes)"])
            state.withLock { state in
                for connection in connections {
                    state.markForCatchUp(connection)
                    _ = state.deltaDropped(on: connection, timestamp: timestamp)
                }
            }
            return
        }
        var overflowed: [ConnectionID] = []
        for connection in connections {
            switch transport.send(bytes: frame, to: connection) {
            case .queued, .notConnected: break
            case .overLimit: overflowed.append(connection)
            }
        }
        if !overflowed.isEmpty {
            let newlyFull = state.withLock { state in overflowed.filter { state.deltaDropped(on: $0, timestamp: timestamp) } }
            for connection in newlyFull {
                logger.warning("outbound queue full: dropping deltas, catch-up scheduled",
                               metadata: ["peer": "\(state.withLock { $0.peers[connection]?.nodeID ?? "?" })"])
            }
        }
    }

    // MARK: link events (the transport calls them through `ReplicatorEvents`)

    func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
        let now = clock.nowMilliseconds()
        let actions = state.withLock { state in state.connected(connection, peer: peer, now: now) }
        // Read after the link is in `linkOrder`, under the node's lock (`sendCommit` runs under
        // it): every decision above this one is queued on the link.
        let newest = node.newestOwnDecisionTimestamp
        state.withLock { $0.noteOwnBeforeOpen(newest, on: connection) }
        perform(actions)
    }

    func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID) {
        // A node without a store never waits to apply a delta: with nothing queued ahead of it
        // (arrival order holds), it is checked and held as it arrived, then applied from its
        // bytes on this thread with the other deltas of the same read (`didFinishReading`),
        // saving the hop to the queue's and the decoding into a `Delta`. Anything else is
        // handled only after the deltas that arrived before it.
        if holdsDeltas, frame.first == ReplicationMessage.deltaType {
            switch holding(from: connection) {
            case .hold(let peerID):
                // Lent, not retained: a class reference read from `receiving` was retained and
                // released around each of these three calls, a frame
                // (docs/design/0009-atomics-off-the-hot-paths.md, "The technique").
                let full: Bool
                do throws(WireDecodeError) {
                    full = try Unmanaged.passUnretained(receiving.value.heldDeltas).lend { held throws(WireDecodeError) in
                        try held.append(frame, from: 1, source: connection.rawValue)
                        return held.count >= Self.inboundBatchMessages || held.byteCount >= Self.maxHeldDeltaBytes
                    }
                } catch {
                    receiving.value.heardLink = nil
                    logger.warning("closing link: undecodable message", metadata: ["peer": "\(peerID)", "error": "\(error)"])
                    transport.close(connection)
                    return
                }
                if full { applyHeldDeltas() }
                return
            case .closing:
                return
            case .queue:
                break
            }
        }
        receiving.value.heardLink = nil
        let message: ReplicationMessage
        do {
            message = try codec.decode(frame, recent: &receiving.value.recentStrings)
        } catch {
            let peer = state.withLock { $0.peers[connection]?.nodeID ?? "?" }
            logger.warning("closing link: undecodable message", metadata: ["peer": "\(peer)", "error": "\(error)"])
            transport.close(connection)
            return
        }
        let now = clock.nowMilliseconds()
        let walkBytes: UInt64
        switch message {
        case .digest, .digestDone, .summary, .entries: walkBytes = UInt64(frame.count)
        default: walkBytes = 0
        }
        guard let peerID = state.withLock({ state -> String? in
            if walkBytes > 0 { state.totals.walkBytesReceived &+= walkBytes }
            return state.heard(from: connection, now: now)
        }) else { return }
        applyHeldDeltas()
        switch message {
        case let .streamAck(round, seq):
            // Credit for this node's own stream: sending more never waits for the store, and the
            // walk cannot end before the peer's stream to us is applied (`incomingDone` is set
            // only after the last batch was, on the inbound queue).
            switch state.withLock({ $0.acked(round, seq: seq, on: connection, now: now) }) {
            case nil:
                violation(connection, peerID, "streamAck for a message never sent")
            case true?:
                finishWalk(round, on: connection, synced: true)
            case false?:
                pump(round, on: connection)
            }
        case .gossip(let records):
            let actions = state.withLock { $0.gossip(records, from: connection, now: now) }
            perform(actions)
        case .ping(let nonce):
            send(.ack(nonce: nonce, physicalMilliseconds: node.configuration.clock.nowMilliseconds()), to: connection)
        case let .ack(nonce, physical):
            state.withLock { $0.ack(nonce: nonce, peerPhysical: physical, on: connection, now: now) }
            // Judged as soon as an offset is known, not at the next tick: a node whose clock is
            // off stops deciding one round trip after its links come up.
            checkClock()
        case .leave:
            let actions = state.withLock { $0.peerLeft(connection) }
            logger.info("peer left the cluster", metadata: ["peer": "\(peerID)"])
            perform(actions)
        case .refusal(let reason):
            logger.error("a peer refuses this node", metadata: ["peer": "\(peerID)", "reason": "\(reason)"])
            state.withLock { $0.refused(by: connection, now: now) }
            transport.close(connection)
        default:
            // Deltas, walk messages and `applied` (after the deltas before it: a waiter that reads
            // what it waited for, a lease, then sees what the peer had sent it first).
            guard let inbound else { return handleOrdered(message, from: connection, peerID: peerID) }
            enqueue(message, bytes: frame.count, on: inbound, from: connection, peerID: peerID)
        }
    }

    /// What becomes of a delta frame arriving on `connection`, for a node that holds deltas.
    private enum Holding {
        /// Held with the other deltas of the read; the link is open, its peer `peerID`.
        case hold(peerID: String)
        /// Dropped: this side is closing the link.
        case closing
        /// Handled in arrival order after what the inbound queue holds.
        case queue
    }

    /// Whether a delta from `connection` can be held now: nothing waits on the inbound queue
    /// and the link is open (marked heard). A delta of the link the previous delta of the same
    /// read was held from is held at once: nothing this thread did since could have queued
    /// work or condemned the link (`Receiving.heardLink`), and the queue only empties
    /// elsewhere.
    private func holding(from connection: ConnectionID) -> Holding {
        if let heard = receiving.value.heardLink, heard.connection == connection { return .hold(peerID: heard.peerID) }
        guard inboundLoad.withLock({ $0.isIdle }) else { return .queue }
        let now = clock.nowMilliseconds()
        guard let peerID = state.withLock({ $0.heard(from: connection, now: now) }) else { return .closing }
        receiving.value.heardLink = (connection, peerID)
        return .hold(peerID: peerID)
    }

    /// Queues a delta or walk message for the inbound queue, within its bounds: a delta past
    /// `maxInboundDeltaBytes` is dropped (its peer marked for a walk, which repairs it); walk
    /// messages past what the stream window lets an honest peer send close the link.
    private func enqueue(_ message: ReplicationMessage, bytes: Int, on inbound: DispatchQueue,
                         from connection: ConnectionID, peerID: String) {
        let isDelta = if case .delta = message { true } else { false }
        // Two walks can stream at once on a link (each side's own), each with `window` stream
        // messages unacknowledged plus its control messages (digest, requests, done).
        let walkBound = 2 * (configuration.catchUpWindowMessages + 2) * configuration.maxFrameBytes
        let admitted = inboundLoad.withLock { load in
            load.admit(bytes, delta: isDelta, on: connection, deltaBound: configuration.maxInboundDeltaBytes, walkBound: walkBound)
        }
        switch admitted {
        case .queued:
            break
        case .deltaDropped(let first):
            state.withLock { $0.incomingDeltaDropped(on: connection) }
            if first {
                logger.warning("dropping a peer's delta: the store is slow and \(configuration.maxInboundDeltaBytes) bytes of deltas already wait; a catch-up walk repairs it",
                               metadata: ["peer": "\(peerID)"])
            }
            return
        case .overWindow:
            return violation(connection, peerID, "more catch-up messages than the stream window allows are waiting")
        }
        let waiting = InboundLoad.Waiting(message: message, bytes: bytes, isDelta: isDelta, connection: connection, peerID: peerID)
        if inboundLoad.withLock({ $0.push(waiting) }) {
            inbound.async { [self] in drainInbound() }
        }
    }

    /// One pass of the inbound queue: handles what waits, in arrival order, until nothing does.
    /// Consecutive deltas are applied together (`applyDeltas`), at most `inboundBatchMessages`
    /// at a time so a long burst does not hold the node's lock for long.
    private func drainInbound() {
        while true {
            let batch = inboundLoad.withLock { $0.take() }
            guard !batch.isEmpty else { return }
            var start = batch.startIndex
            while start < batch.endIndex {
                // A run of deltas, or one walk message; its bytes stop counting once handled
                // (the peer's window counts on it: what was handled no longer waits).
                var end = start + 1
                if batch[start].isDelta { while end < batch.endIndex && batch[end].isDelta { end += 1 } }
                let run = batch[start..<end]
                if !stopped.withLock({ $0 }) {
                    if run.count > 1 || run[start].isDelta {
                        applyDeltas(run)
                    } else if state.withLock({ $0.isOpen(run[start].connection) }) {
                        // The link may have gone, or been condemned, while this waited.
                        handleOrdered(run[start].message, from: run[start].connection, peerID: run[start].peerID)
                    }
                }
                inboundLoad.withLock { load in
                    for item in run { load.release(item.bytes, delta: item.isDelta, on: item.connection) }
                }
                start = end
            }
        }
    }

    /// The most messages one step of the inbound queue takes (and deltas applied under one lock).
    static let inboundBatchMessages = 256
    /// Held deltas (`heldDeltas`) are applied once the memory they use (their bytes and the
    /// positions of their parts) reaches this, even mid-read.
    static let maxHeldDeltaBytes = 1 << 20

    /// Applies peers' deltas from the inbound queue, in order, as one batch: those of links that
    /// went or were condemned meanwhile are dropped, one over `maxDecisionBytes` condemns its
    /// link (and drops the rest of that link's), and the node applies the others under one hold
    /// of its lock.
    private func applyDeltas<Items: Collection<InboundLoad.Waiting>>(_ items: Items) {
        // Links not to apply from: usually none, so a short array rather than a set.
        var dropped: [ConnectionID] = state.withLock { state in
            var closed: [ConnectionID] = []
            for item in items where !closed.contains(item.connection) && !state.isOpen(item.connection) {
                closed.append(item.connection)
            }
            return closed
        }
        var deltas: [Delta] = []
        deltas.reserveCapacity(items.count)
        // Deltas taken from each link, for acknowledged writes (usually one link per batch).
        var counts: [(connection: ConnectionID, deltas: UInt64)] = []
        // Where each applied delta came from, kept only once one was skipped (for the log).
        var sources: [Items.Index]?
        for position in items.indices {
            let item = items[position]
            guard dropped.isEmpty || !dropped.contains(item.connection), case .delta(let delta) = item.message else {
                if sources == nil { sources = Array(items.indices.prefix(while: { $0 != position })) }
                continue
            }
            let bytes = Node.decisionBytes(nodeID: delta.version.node, writes: delta.writes.lazy.map { ($0.key, $0.packedValue) })
            guard bytes <= node.configuration.maxDecisionBytes else {
                dropped.append(item.connection)
                if sources == nil { sources = Array(items.indices.prefix(while: { $0 != position })) }
                violation(item.connection, item.peerID, "a delta of \(bytes) bytes is over maxDecisionBytes \(node.configuration.maxDecisionBytes) (every node must share the bound)")
                continue
            }
            deltas.append(delta)
            if counts.last?.connection == item.connection {
                counts[counts.count - 1].deltas &+= 1
            } else {
                counts.append((item.connection, 1))
            }
            sources?.append(position)
        }
        guard !deltas.isEmpty else { return }
        let outcome = node.apply(deltas: deltas)
        noteApplied(ticket: outcome.ticket)
        // The item each refused delta came from.
        let refused = outcome.refusals.map { refusal in
            (refusal, sources.map { items[$0[refusal.index]] } ?? items[items.index(items.startIndex, offsetBy: refusal.index)])
        }
        // Count what each link brought and was applied (acknowledged writes); a refused delta
        // is not counted.
        for (_, source) in refused {
            if let slot = counts.firstIndex(where: { $0.connection == source.connection }) { counts[slot].deltas &-= 1 }
        }
        state.withLock { state in
            for count in counts where state.peers[count.connection] != nil {
                state.deltaCounts[count.connection.rawValue, default: .init()].applied &+= count.deltas
            }
            state.totals.deltasApplied &+= UInt64(deltas.count - refused.count)
        }
        metrics?.propagated(deltas.lazy.map(\.version.timestamp), now: node.configuration.clock.nowMilliseconds())
        for (refusal, source) in refused {
            logger.warning("refused delta", metadata: [
                "peer": "\(source.peerID)", "version": "\(deltas[refusal.index].version)", "error": "\(refusal.error)"])
        }
    }

    /// Handles a delta or walk message: in arrival order per link, possibly waiting for the store.
    private func handleOrdered(_ message: ReplicationMessage, from connection: ConnectionID, peerID: String) {
        switch message {
        case .delta:
            applyDeltas(CollectionOfOne(InboundLoad.Waiting(message: message, bytes: 0, isDelta: true, connection: connection, peerID: peerID)))
        case let .digest(round, seq, peerClock, shape, level, nodes):
            handleDigest(round: round, seq: seq, peerClock: peerClock, shape: shape, level: level, nodes: nodes,
                         from: connection, peerID: peerID)
        case let .digestDone(round, seq, peerClock, synced):
            guard accept(round, seq, from: connection, peerID: peerID) else { return }
            handleDigestDone(round: round, peerClock: peerClock, synced: synced, from: connection, peerID: peerID)
        case let .summary(round, seq, peerClock, last, groups):
            guard accept(round, seq, from: connection, peerID: peerID) else { return }
            handleSummary(round: round, seq: seq, peerClock: peerClock, last: last, groups: groups, from: connection, peerID: peerID)
        case let .keysRequest(round, seq, last, keys):
            guard accept(round, seq, from: connection, peerID: peerID) else { return }
            handleKeysRequest(round: round, last: last, keys: keys, from: connection, peerID: peerID)
        case let .entries(round, seq, last, batch):
            guard accept(round, seq, from: connection, peerID: peerID) else { return }
            handleEntries(round: round, seq: seq, last: last, batch: batch, from: connection, peerID: peerID)
        case let .ackRequest(timestamp, deltas):
            // The deltas this link brought before the request are applied (arrival order); when
            // their count is the sender's, none was lost on the way. Under strict durability,
            // they are on disk once the newest applied batch is.
            let (complete, covered) = state.withLock {
                (($0.deltaCounts[connection.rawValue]?.applied ?? 0) == deltas, $0.coverage(ofPeerOn: connection))
            }
            _ = send(heldAnswer(upTo: complete ? timestamp : 0, covered: covered), to: connection)
        case let .applied(timestamp, covered):
            handleApplied(timestamp: timestamp, covered: covered, from: connection)
        case .gossip, .ping, .ack, .leave, .refusal, .streamAck:
            break  // never queued: `transport(_:didReceive:from:)` handles them on the transport's thread
        }
    }

    func transport(_ transport: any Transport, didFinishReading connection: ConnectionID) {
        applyHeldDeltas()
    }

    /// Applies the deltas held back on the transport's thread (`heard` found each link open as
    /// it arrived), as one batch, from their bytes: as `applyDeltas` does, one over
    /// `maxDecisionBytes` condemns its link (and drops the rest of that link's).
    private func applyHeldDeltas() {
        receiving.value.heardLink = nil
        guard !receiving.value.heldDeltas.isEmpty else { return }
        receiving.value.takeHeld()
        defer { receiving.value.applying.removeAll() }
        let held = receiving.value.applying.items
        var dropped: [UInt64] = []
        var skipped: [Bool] = []
        var counts: [(connection: UInt64, deltas: UInt64)] = []
        for (index, item) in held.enumerated() {
            var skip = dropped.contains(item.source)
            if !skip && item.decisionBytes > node.configuration.maxDecisionBytes {
                skip = true
                dropped.append(item.source)
                let connection = ConnectionID(rawValue: item.source)
                violation(connection, peerName(connection), "a delta of \(item.decisionBytes) bytes is over maxDecisionBytes \(node.configuration.maxDecisionBytes) (every node must share the bound)")
            }
            if skip {
                if skipped.isEmpty { skipped = Array(repeating: false, count: held.count) }
                skipped[index] = true
            } else if counts.last?.connection == item.source {
                counts[counts.count - 1].deltas &+= 1
            } else {
                counts.append((item.source, 1))
            }
        }
        guard !counts.isEmpty else { return }
        var recent = receiving.value.recentStrings
        let outcome = node.apply(received: receiving.value.applying, recent: &recent, skip: { !skipped.isEmpty && skipped[$0] })
        receiving.value.recentStrings = recent
        // Counted as `applyDeltas` counts: what each link brought and was applied; a refused
        // delta is not.
        for refusal in outcome.refusals {
            if let slot = counts.firstIndex(where: { $0.connection == held[refusal.index].source }) { counts[slot].deltas &-= 1 }
        }
        let applied = counts.reduce(0) { $0 &+ $1.deltas }
        state.withLock { state in
            for count in counts where state.peers[ConnectionID(rawValue: count.connection)] != nil {
                state.deltaCounts[count.connection, default: .init()].applied &+= count.deltas
            }
            state.totals.deltasApplied &+= applied
        }
        metrics?.propagated(held.indices.lazy.filter { skipped.isEmpty || !skipped[$0] }.map { held[$0].timestamp },
                            now: node.configuration.clock.nowMilliseconds())
        for refusal in outcome.refusals {
            let connection = ConnectionID(rawValue: held[refusal.index].source)
            logger.warning("refused delta", metadata: [
                "peer": "\(peerName(connection))", "version": "\(receiving.value.applying.delta(at: refusal.index, recent: &recent).version)",
                "error": "\(refusal.error)"])
        }
    }

    /// The node id of the peer on `connection`, for a log line ("?" once it is gone).
    private func peerName(_ connection: ConnectionID) -> String {
        state.withLock { $0.peers[connection]?.nodeID ?? "?" }
    }

    func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {
        state.withLock { state in _ = state.deltaDropped(on: connection, timestamp: nil) }
    }

    func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {
        applyHeldDeltas()
        let now = clock.nowMilliseconds()
        let (peerID, expected) = state.withLock { $0.disconnected(connection, now: now) }
        guard let peerID else { return }
        if expected {
            logger.debug("link closed", metadata: ["peer": "\(peerID)", "reason": "\(reason)"])
        } else {
            logger.info("peer disconnected", metadata: ["peer": "\(peerID)", "reason": "\(reason)"])
        }
    }

    func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {
        let now = clock.nowMilliseconds()
        let retry = state.withLock { $0.dialFailed(address, now: now) }
        logger.debug("dial failed", metadata: ["address": "\(address)", "reason": "\(reason)", "retryInMs": "\(retry)"])
    }

    /// Whether a walk message is the next one of a live walk (duplicates and messages of
    /// walks that ended are dropped; a gap abandons the walk, which a later one redoes).
    private func accept(_ round: UInt64, _ seq: UInt64, from connection: ConnectionID, peerID: String) -> Bool {
        switch state.withLock({ $0.arrival(round, seq: seq, on: connection) }) {
        case .process:
            return true
        case .gap:
            logger.info("catch-up abandoned: a message of the walk was lost or reordered", metadata: ["peer": "\(peerID)"])
            return false
        case .duplicate, .unknown:
            return false
        }
    }

    /// Sends a walk message numbered in sequence; nothing when the walk ended meanwhile.
    @discardableResult
    private func sendWalk(_ round: UInt64, to connection: ConnectionID,
                          _ make: (UInt64) -> ReplicationMessage) -> SendResult {
        guard let seq = state.withLock({ $0.takeSeq(round, on: connection) }) else { return .notConnected }
        return send(make(seq), to: connection)
    }

    private func violation(_ connection: ConnectionID, _ peerID: String, _ rule: String) {
        var actions = ReplicatorActions()
        state.withLock { $0.brokeRule(on: connection, rule: rule, into: &actions) }
        perform(actions)
    }

    // MARK: anti-entropy

    private var shape: ReplicationMessage.DigestShape {
        let mine = node.digestShape
        return .init(fanoutBits: UInt8(mine.fanoutBits), depth: UInt8(mine.depth))
    }

    private func beginWalk(_ round: UInt64, on connection: ConnectionID) {
        let start = node.walkStart
        let now = clock.nowMilliseconds()
        guard state.withLock({ $0.beginWalk(round, on: connection, start: start, now: now) }) else { return }
        let root = node.digestHashes(level: 0, indices: [0])
        sendWalk(round, to: connection) {
            .digest(round: round, seq: $0, clock: start.clock, shape: shape, level: 0, nodes: [.init(index: 0, hash: root[0])])
        }
    }

    private func handleDigest(
        round: UInt64, seq: UInt64, peerClock: UInt64, shape theirs: ReplicationMessage.DigestShape, level: UInt8,
        nodes: [ReplicationMessage.DigestNode], from connection: ConnectionID, peerID: String
    ) {
        let mine = shape
        guard theirs == mine else {
            logger.error("cannot compare state: digest shapes differ; set the same digest shape on every node",
                         metadata: ["peer": "\(peerID)", "theirs": "\(theirs.fanoutBits)x\(theirs.depth)",
                                    "mine": "\(mine.fanoutBits)x\(mine.depth)"])
            send(.digestDone(round: round, seq: 1, clock: 0, synced: false), to: connection)
            return
        }
        var seen = Set<UInt32>(minimumCapacity: nodes.count)
        guard nodes.allSatisfy({ seen.insert($0.index).inserted }) else {
            return violation(connection, peerID, "digest repeats a node index")
        }
        let now = clock.nowMilliseconds()
        let start = node.walkStart
        let verdict = state.withLock {
            $0.digestArrived(round: round, seq: seq, level: level, peerClock: peerClock, on: connection, start: start, now: now)
        }
        guard case .compare(let startClock) = verdict else { return }
        let indices = nodes.map { Int($0.index) }
        let hashes = node.digestHashes(level: Int(level), indices: indices)
        let differing = zip(nodes, hashes).filter { $0.0.hash != $0.1 }.map { Int($0.0.index) }
        if differing.isEmpty {
            sendWalk(round, to: connection) { .digestDone(round: round, seq: $0, clock: startClock, synced: true) }
            finishWalk(round, on: connection, synced: true)
        } else if level == mine.depth {
            // Leaves: send a per-key summary of the differing buckets; the peer answers with the
            // keys it wants and streams what this side lacks.
            state.withLock { state in
                state.withWalk(round, on: connection) { walk in
                    walk.phase = .summarySender
                    walk.outgoing = .summary(buckets: differing.sorted(), bucketIndex: 0, itemOffset: 0)
                }
            }
            pump(round, on: connection)
        } else {
            let fanout = 1 << Int(mine.fanoutBits)
            let children = differing.flatMap { index in (index * fanout)..<((index + 1) * fanout) }
            let childHashes = node.digestHashes(level: Int(level) + 1, indices: children)
            sendWalk(round, to: connection) {
                .digest(round: round, seq: $0, clock: startClock, shape: mine, level: level + 1,
                        nodes: zip(children, childHashes).map { .init(index: UInt32($0.0), hash: $0.1) })
            }
        }
    }

    private func handleDigestDone(round: UInt64, peerClock: UInt64, synced: Bool, from connection: ConnectionID, peerID: String) {
        let phase = state.withLock { state in
            state.withWalk(round, on: connection) { walk -> Walk.Phase in
                if walk.peerClock == nil { walk.peerClock = peerClock }
                return walk.phase
            }
        }
        guard let phase else { return }
        if !synced {
            logger.info("catch-up ended by the peer without syncing", metadata: ["peer": "\(peerID)"])
        }
        // Only a comparison can end in agreement; in a leaf step the streams end the walk.
        finishWalk(round, on: connection, synced: synced && phase == .comparing)
    }

    private func finishWalk(_ round: UInt64, on connection: ConnectionID, synced: Bool) {
        let now = clock.nowMilliseconds()
        let (actions, raised) = state.withLock { state -> (ReplicatorActions, UInt64?) in
            let before = state.coverage(ofPeerOn: connection)
            let actions = state.endWalk(round, on: connection, synced: synced, now: now)
            let after = state.coverage(ofPeerOn: connection)
            return (actions, after > before ? after : nil)
        }
        perform(actions)
        if let raised { tellCoverage(raised, to: connection) }
    }

    /// Tells the peer on `connection` that this node now holds everything it held when its
    /// clock read `covered` (a clean walk proved it), so its waiters count this node for
    /// decisions made before the link opened. Strict: once what the walk applied is on disk,
    /// off the transport's thread.
    private func tellCoverage(_ covered: UInt64, to connection: ConnectionID) {
        guard node.acknowledgesAfterDisk else {
            send(heldAnswer(upTo: 0, covered: covered), to: connection)
            return
        }
        durableAcks.async { [self] in send(heldAnswer(upTo: 0, covered: covered), to: connection) }
    }

    private func handleSummary(round: UInt64, seq: UInt64, peerClock: UInt64, last: Bool, groups: [ReplicationMessage.SummaryGroup],
                               from connection: ConnectionID, peerID: String) {
        let now = clock.nowMilliseconds()
        let leafWidth = 1 << (Int(shape.fanoutBits) * Int(shape.depth))
        // Stage the items in place (the walk's collections are never copied out of the lock).
        let staged = state.withLock { state in
            state.withWalk(round, on: connection) { walk in
                walk.stageSummary(groups, last: last, leafWidth: leafWidth, peerClock: peerClock, now: now,
                                  maxItems: codec.maxItemsPerMessage)
            }
        }
        guard let staged else { return }
        let closed: [(bucket: Int, items: [UInt64: ReplicationMessage.SummaryItem])]
        switch staged {
        case .failure(let rule): return violation(connection, peerID, rule.description)
        case .success(let buckets): closed = buckets
        }
        let compared = node.compare(buckets: closed)
        var requests: [ReplicationMessage.KeyReference] = []
        for (bucket, _, request) in compared {
            requests.append(contentsOf: request.map { .init(bucket: UInt32(bucket), keyHash: $0) })
        }
        // Requests go out in pieces that fit a frame.
        let perMessage = max(1, (configuration.catchUpBatchBytes - ReplicationCodec.maxHeaderBytes) / ReplicationCodec.maxKeyReferenceBytes)
        var pieces = stride(from: 0, to: requests.count, by: perMessage).map {
            requests[$0..<min(requests.count, $0 + perMessage)]
        }
        if last && pieces.isEmpty { pieces.append([]) }   // the final piece carries `last`
        let seqs = state.withLock { state in
            state.withWalk(round, on: connection) { walk -> [UInt64] in
                for (_, push, _) in compared { walk.pushKeys.append(contentsOf: push) }
                return pieces.map { _ in
                    walk.sentSeq += 1
                    return walk.sentSeq
                }
            }
        }
        guard let seqs else { return }
        var sentAll = true
        for (number, piece) in zip(seqs, pieces) {
            let final = last && number == seqs.last
            if send(.keysRequest(round: round, seq: number, last: final, keys: Array(piece)), to: connection) == .overLimit {
                sentAll = false
            }
        }
        guard sentAll, send(.streamAck(round: round, seq: seq), to: connection) != .overLimit else {
            state.withLock { $0.abandonWalk(round, on: connection) }
            return
        }
        if last { startEntryStream(round, on: connection, peerID: peerID, keys: \.pushKeys) }
    }

    /// Reads the entries of `keys` (the walk's push or requested keys, taken out of it) plus
    /// everything changed since the walk started, and starts streaming them.
    private func startEntryStream(_ round: UInt64, on connection: ConnectionID, peerID: String,
                                  keys: WritableKeyPath<Walk, [StateKey]>) {
        let taken = state.withLock { state in
            state.withWalk(round, on: connection) { walk -> ([StateKey], UInt64) in
                defer { walk[keyPath: keys] = [] }
                return (walk[keyPath: keys], walk.startSequence)
            }
        }
        guard let (chosen, startSequence) = taken else { return }
        guard let entries = node.walkEntries(keys: chosen, changedAfter: startSequence) else {
            changeLogOverflowed(round, on: connection, peerID: peerID)
            return
        }
        state.withLock { state in
            state.withWalk(round, on: connection) { walk in
                walk.entryStreamStarted = true
                walk.outgoing = .entries(entries, cursor: 0)
            }
        }
        pump(round, on: connection)
    }

    private func changeLogOverflowed(_ round: UInt64, on connection: ConnectionID, peerID: String) {
        logger.info("restarting catch-up: more changes during the walk than the change log holds",
                    metadata: ["peer": "\(peerID)", "recentChangeCapacity": "\(node.configuration.recentChangeCapacity)"])
        sendWalk(round, to: connection) { .digestDone(round: round, seq: $0, clock: 0, synced: false) }
        state.withLock { $0.abandonWalk(round, on: connection) }
    }

    private func handleKeysRequest(round: UInt64, last: Bool, keys: [ReplicationMessage.KeyReference],
                                   from connection: ConnectionID, peerID: String) {
        let now = clock.nowMilliseconds()
        let leafWidth = 1 << (Int(shape.fanoutBits) * Int(shape.depth))
        let inTurn = state.withLock { state in
            state.withWalk(round, on: connection) { walk -> Bool in
                guard walk.phase == .summarySender, !walk.entryStreamStarted else { return false }
                walk.lastActivity = now
                return true
            }
        }
        guard let inTurn else { return }
        guard inTurn else { return violation(connection, peerID, "keys request out of turn") }
        guard keys.allSatisfy({ Int($0.bucket) < leafWidth }) else {
            return violation(connection, peerID, "requested bucket outside the tree")
        }
        let found = node.keys(for: keys)
        let complete = state.withLock { state in
            state.withWalk(round, on: connection) { walk -> Bool in
                // Requested keys are this node's own, each counted once: bounded by its key count.
                for key in found where walk.requestedSet.insert(key).inserted { walk.requestedKeys.append(key) }
                if last { walk.requestedSet = [] }
                return last
            }
        }
        if complete == true { startEntryStream(round, on: connection, peerID: peerID, keys: \.requestedKeys) }
    }

    private func handleEntries(round: UInt64, seq: UInt64, last: Bool, batch: [KeyedEntry], from connection: ConnectionID, peerID: String) {
        guard let walk = state.withLock({ $0.walk(round, on: connection) }) else { return }
        guard walk.phase != .comparing, !walk.incomingDone else {
            return violation(connection, peerID, "entries out of turn")
        }
        let outcome = node.applyCatchUp(batch)
        noteApplied(ticket: outcome.ticket)
        let now = clock.nowMilliseconds()
        let done = state.withLock { state in
            state.withWalk(round, on: connection) { walk -> Bool in
                walk.receivedEntries += batch.count
                walk.changedKeys += outcome.changed
                walk.lastActivity = now
                if outcome.refusedVersions > 0 { walk.clean = false }
                if last {
                    walk.incomingDone = true
                    walk.noteOutgoingDone()
                }
                return walk.streamsDone
            } ?? false
        }
        if let refusal = outcome.firstRefusal {
            logger.warning("refused catch-up entries: their timestamps are too far ahead of this node's clock",
                           metadata: ["peer": "\(peerID)", "refusedDecisions": "\(outcome.refusedVersions)",
                                      "error": "\(refusal)"])
        }
        acknowledge(round, seq: seq, ticket: outcome.ticket, to: connection)
        if done { finishWalk(round, on: connection, synced: true) }
    }

    /// Acknowledges one applied batch: at once, or (strict durability) once the store holds it,
    /// from a queue of its own so the transport's thread never waits for the disk.
    private func acknowledge(_ round: UInt64, seq: UInt64, ticket: UInt64, to connection: ConnectionID) {
        // Strict: every ack goes through the queue, so a batch that changed nothing is not
        // acknowledged (cumulatively) before an earlier one reached the disk.
        guard node.acknowledgesAfterDisk else {
            send(.streamAck(round: round, seq: seq), to: connection)
            return
        }
        durableAcks.async { [self] in
            if let error = node.waitUntilDurable(ticket) {
                logger.error("catch-up batch applied in memory but not stored; not acknowledging it", metadata: ["error": "\(error)"])
                transport.close(connection)
                return
            }
            send(.streamAck(round: round, seq: seq), to: connection)
        }
    }

    /// Sends `round`'s next stream messages while credit allows. One thread at a time produces
    /// a walk's frames; node reads happen outside the engine's lock.
    private func pump(_ round: UInt64, on connection: ConnectionID) {
        let window = configuration.catchUpWindowMessages
        while let (outgoing, seq, startClock) = state.withLock({ $0.claimPump(round, on: connection, window: window) }) {
            let (message, next) = produce(outgoing, round: round, seq: seq, startClock: startClock)
            let result = message.map { send($0, to: connection) }
            let now = clock.nowMilliseconds()
            if result == .overLimit || result == .notConnected {
                state.withLock { state in
                    _ = state.pumped(round, on: connection, next: next, seq: nil, now: now)
                    state.abandonWalk(round, on: connection)
                }
                if result == .overLimit {
                    logger.warning("catch-up paused: the link's queue is full; a new walk resumes it",
                                   metadata: ["connection": "\(connection)"])
                }
                return
            }
            let ended = state.withLock { $0.pumped(round, on: connection, next: next, seq: message == nil ? nil : seq, now: now) }
            if ended {
                finishWalk(round, on: connection, synced: true)
                return
            }
        }
    }

    /// The next stream message and what is left after it (nil when the stream ended with it).
    private func produce(_ outgoing: Walk.Outgoing, round: UInt64, seq: UInt64, startClock: UInt64)
        -> (ReplicationMessage?, Walk.Outgoing?) {
        switch outgoing {
        case let .summary(buckets, bucketIndex, itemOffset):
            let budget = (configuration.catchUpBatchBytes - ReplicationCodec.maxHeaderBytes) / ReplicationCodec.summaryItemBytes
            let (groups, index, offset) = node.summaryChunk(
                of: buckets, from: bucketIndex, itemOffset: itemOffset, maxItems: budget)
            let last = index >= buckets.count
            return (.summary(round: round, seq: seq, clock: startClock, last: last, groups: groups),
                    last ? nil : .summary(buckets: buckets, bucketIndex: index, itemOffset: offset))
        case let .entries(entries, cursor):
            let rest = entries[cursor...]
            let count = ReplicatorState.batchLength(rest, budgetBytes: configuration.catchUpBatchBytes,
                                                    hardLimitBytes: configuration.maxFrameBytes - ReplicationCodec.maxHeaderBytes,
                                                    maxEntries: node.configuration.limits.maxEntriesPerMessage)
            let end = cursor + count
            let last = end >= entries.count
            return (.entries(round: round, seq: seq, last: last, batch: Array(entries[cursor..<end])),
                    last ? nil : .entries(entries, cursor: end))
        }
    }

    // MARK: performing what the state machine decided

    private func perform(_ actions: ReplicatorActions) {
        for line in actions.logs { logger.log(level: line.level, "\(line.message)", metadata: line.metadata) }
        if actions.membershipChanged { membershipDirty.withLock { $0 = true } }
        if let bound = actions.collectTombstonesBelow {
            // Every member holds every entry at or below the bound: collect those.
            let collected = node.collectTombstones(olderThan: HLCTimestamp(rawValue: bound &+ 1))
            if collected > 0 {
                logger.info("collected tombstones every member holds", metadata: [
                    "count": "\(collected)", "below": "\(HLCTimestamp(rawValue: bound))"])
            }
        }
        for address in actions.dial {
            logger.debug("dialling", metadata: ["address": "\(address)"])
            transport.connect(to: address)
        }
        for (connection, reason) in actions.refuse { sendThenClose(.refusal(reason: reason), on: connection) }
        for connection in actions.tellLeaving {
            logger.info("closing link", metadata: ["connection": "\(connection)", "why": "this node is leaving (told)"])
            sendThenClose(.leave, on: connection)
        }
        for (connection, why) in actions.close {
            logger.info("closing link", metadata: ["connection": "\(connection)", "why": "\(why)"])
            transport.close(connection)
        }
        for (connection, nonce) in actions.ping {
            send(.ping(nonce: nonce), to: connection)
        }
        if !actions.gossipTo.isEmpty {
            let frames = gossipFrames(state.withLock { $0.gossipRecords() })
            for connection in actions.gossipTo {
                for frame in frames { send(frame: frame, to: connection) }
            }
        }
        for (connection, round) in actions.startWalk {
            beginWalk(round, on: connection)
        }
    }

    /// The member list in as many gossip messages as its size needs.
    private func gossipFrames(_ records: [ReplicationMessage.MemberRecord]) -> [[UInt8]] {
        let budget = configuration.catchUpBatchBytes
        var frames: [[UInt8]] = []
        var piece: [ReplicationMessage.MemberRecord] = []
        var bytes = ReplicationCodec.maxHeaderBytes
        for record in records {
            let size = ReplicationCodec.encodedSize(of: record)
            if !piece.isEmpty && bytes + size > budget {
                frames.append(codec.encode(.gossip(piece)))
                piece.removeAll()
                bytes = ReplicationCodec.maxHeaderBytes
            }
            piece.append(record)
            bytes += size
        }
        if !piece.isEmpty { frames.append(codec.encode(.gossip(piece))) }
        return frames
    }
}

/// Why `Replicator.forget` did nothing.
public enum ForgetError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No member with this id is known here.
    case unknownMember(String)
    /// The id is this node's own: a node does not forget itself.
    case isThisNode(String)
    /// The member was already removed.
    case alreadyRemoved(String)

    public var description: String {
        switch self {
        case .unknownMember(let id): return "no member \(id) is known to this node"
        case .isThisNode(let id): return "\(id) is this node itself; forget it from another member"
        case .alreadyRemoved(let id): return "\(id) was already removed"
        }
    }
}

/// Bounds of a `Replicator.Configuration` that cannot work together (with the node's own).
public struct ReplicatorConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
