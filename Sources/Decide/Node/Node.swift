import Logging
import Synchronization

/// A Decide node: the state of this process, changed only by decisions, observed by anyone,
/// and (with a replication engine attached) kept equal to its peers'.
///
/// Guarantees:
/// - decisions run one at a time; each commits all of its writes with one version, or none;
/// - readers (`read`, observers, decisions) never see part of a decision;
/// - a local version is greater than every version this node has committed or applied before;
/// - effects run only here, after their decision commits, on a bounded task pool.
public final class Node: Sendable {
    /// This node's id: the `node` of every version it commits, unique in its cluster.
    public let id: String
    /// `Version.nodeHash` of `id`, hashed once rather than per decision.
    let idHash: UInt64
    let configuration: Configuration
    let logger: Logger
    let core: NodeLock<NodeCore>
    /// Whether this node's table ever held a counter slot or set dot (`CompoundPresence`).
    package let compoundPresence: CompoundPresence
    let delivery = DeliveryQueue()
    let pool: TaskPool
    let environmentBox: Mutex<EffectEnvironment>
    /// Where commits go to survive a restart (`InMemoryStore` when there is no data directory).
    let store: any NodeStore
    /// `store.persists`, read once: a node without a store skips every storage call.
    package let persists: Bool
    /// Strict durability: `decide` and `apply` wait until their commit is on disk.
    let waitsForDisk: Bool
    /// Whether the node's clock is the `SystemClock`, read once: a decision then reads it
    /// directly, not through the `any PhysicalClock` witness (docs/design/0011-counter-clock.md,
    /// "The system clock without its witness").
    let readsSystemClock: Bool
    /// Runs `expireDue` while no replication engine does (see `startExpiryTimerIfNeeded`).
    let expiryTimer = Mutex<ReplicatorTimer?>(nil)
    let expiryDrivenExternally = Atomic<Bool>(false)
    /// Whether `expiryTimer` was started: one load per expiring decision instead of a lock.
    let expiryTimerRunning = Atomic<Bool>(false)
    /// Set by the replication engine while this node must take no decision.
    let writeRefusal = Mutex<String?>(nil)
    /// Whether `writeRefusal` holds a reason: one load per decision instead of a lock.
    let refusingWrites = Atomic<Bool>(false)
    /// DecideTesting's view of every decision (`tapDecisions`), and whether one is set.
    let decisionTap = Mutex<(@Sendable (TappedDecision) -> Void)?>(nil)
    /// The id of the node's change feed (`NodeCore.feed`), nil when it keeps none
    /// (`Configuration.changeFeed` nil).
    let changeFeedID: ChangeFeedID?
    let tappingDecisions = Atomic<Bool>(false)

    /// Creates a node. Without a data directory its state starts empty. With one, it loads the
    /// store into memory and moves its clock past every stored version before any decision.
    /// Throws for an invalid id, bound or durability, and for a store that cannot be opened
    /// (corrupt, unreadable, in use, or another node's).
    public init(configuration: Configuration) throws(NodeConfigurationError) {
        try configuration.validate()
        self.id = configuration.id
        self.idHash = Version(timestamp: .zero, node: configuration.id).nodeHash
        self.configuration = configuration
        var logger = configuration.logger
        logger[metadataKey: "node"] = "\(configuration.id)"
        self.logger = logger
        var table = EntryTable(digest: StateDigest(
            fanoutBits: configuration.digestFanoutBits, depth: configuration.digestDepth))
        var clock = HybridLogicalClock(maxSkewMilliseconds: configuration.maxClockSkewMilliseconds)
        let store: any NodeStore
        var loadedCompounds = false
        do throws(StorageError) {
            if let directory = configuration.dataDirectory {
                store = try SQLiteStore(
                    directory: directory, nodeID: configuration.id, durability: configuration.durability,
                    maxQueuedCommits: configuration.maxQueuedStorageCommits, logger: logger,
                    wrapFile: configuration.storeFileWrapper)
            } else {
                store = InMemoryStore()
            }
            let storedClock = try store.load { key, entry in
                if !loadedCompounds, CompoundPresence.isCompound(key) { loadedCompounds = true }
                table.merge(entry, for: key)
            }
            clock.advance(pastOrTo: storedClock)
            if let highest = table.highestVersion { clock.advance(pastOrTo: highest.timestamp) }
        } catch {
            logger.error("cannot start: \(error)")
            throw .storage(error)
        }
        if store.persists {
            logger.info("loaded store", metadata: [
                "entries": "\(table.count)", "durability": "\(configuration.durability)",
                "clock": "\(clock.last)"])
        }
        self.store = store
        self.persists = store.persists
        self.waitsForDisk = store.persists && configuration.durability == .strict
        self.readsSystemClock = configuration.clock is SystemClock
        let core = NodeCore(
            nodeID: configuration.id, table: table, clock: clock,
            logger: logger, limits: configuration.limits,
            recentChangeCapacity: configuration.recentChangeCapacity,
            maxCachedDecodedValues: max(0, configuration.maxCachedDecodedValues))
        core.incarnation = core.clock.tick(physicalMilliseconds: configuration.clock.nowMilliseconds()).rawValue
        compoundPresence = core.compoundPresence
        if loadedCompounds {
            core.compoundPresence.noteWritten()
            core.followsEveryLifetime = true
        }
        core.maxCounterSlots = configuration.maxCounterSlots
        core.maxSetMembers = configuration.maxSetMembers
        // A durable node's feed goes on from its store, under the store's feed id; a node in
        // memory starts a new one (docs/design/0020-the-change-feed.md, "Durable retention").
        do throws(StorageError) {
            if let retention = configuration.changeFeed {
                let feed = store.feedID.map { ChangeFeedID(rawValue: $0) } ?? .random()
                var log = ChangeFeedLog(id: feed, maxChanges: retention.maxRetainedChanges,
                                        maxBytes: retention.maxRetainedBytes, limits: configuration.limits,
                                        store: store.persists ? store : nil)
                var followed = true
                try store.loadFeed { position, record in
                    if followed { followed = log.restore(record, position: position) }
                }
                guard followed else { throw StorageError.corrupt(path: configuration.dataDirectory ?? "", reason: "the change feed's records are not in sequence") }
                changeFeedID = feed
                core.feed = log
            } else {
                // A feed kept while this node kept none would miss what changed meanwhile:
                // whatever feed comes later is a new one.
                if store.persists { try store.startNewFeed() }
                changeFeedID = nil
            }
        } catch {
            logger.error("cannot start: \(error)")
            throw .storage(error)
        }
        let lock = NodeLock(core, handoffMicroseconds: configuration.lockHandoffMicroseconds)
        self.core = lock
        // Commits queue under the node's lock; the store's writer takes it, politely, to take them.
        // Its writer reads a hot key's entry from the table then (`GroupCommit.reread(from:)`).
        // Unowned: the change feed holds the store, so a strong lock here would keep the store
        // and the node's whole state alive after the node goes; the writer stops when the node
        // closes its store (at the latest in `deinit`), before the lock goes.
        store.start(exclusion: { [unowned lock] body in lock.withPoliteLock { core in body { key in core.entry(for: key) } } })
        if store.persists && changeFeedID != nil {
            // Weakly, as the exclusion above.
            store.onFeedDurable { [weak lock] position in lock?.withLock { $0.feed?.markDurable(upTo: position) } }
        }
        self.pool = TaskPool(maxConcurrent: configuration.effectConcurrency, maxQueued: configuration.maxQueuedEffects)
        self.environmentBox = Mutex(configuration.environment)
        // Expiring values loaded from the store expire on this node's own timer until a
        // replication engine takes over.
        if table.nextExpiryMilliseconds != nil { startExpiryTimerIfNeeded() }
    }

    /// The dependencies effects get from now on (effects already running keep theirs).
    public var environment: EffectEnvironment {
        get { environmentBox.withLock { $0 } }
        set { environmentBox.withLock { $0 = newValue } }
    }

    // MARK: deciding

    /// Runs `decision`, commits its writes, then performs its effect: `.decide` follow-ups
    /// before returning, `.run` operations on the task pool. Returns what became of
    /// `decision` itself. Safe to call from any thread and from async code; never blocks on
    /// I/O. Must not be called from inside `Decision.execute` or `read`.
    @discardableResult
    public func decide(_ decision: some Decision) -> Commit {
        var followUps: [any Decision] = []
        let commit = runOne(decision, followUps: &followUps)
        var index = 0
        while index < followUps.count {
            let next = followUps[index]
            index += 1
            runOne(next, followUps: &followUps)
        }
        return commit
    }

    /// Writes `value` into `key` as a decision of its own (an escape hatch for tools and tests).
    @discardableResult
    public func set<K: AtomicState>(_ value: K.Value, into key: K.Type) -> Commit {
        decide(SetValue<K>(value: value))
    }

    /// Writes `value` into element `id` of `collection` as a decision of its own.
    @discardableResult
    public func set<C: CollectionState>(_ value: C.Value, into collection: C.Type, at id: C.ID) -> Commit {
        decide(SetElement<C>(id: id, value: value))
    }

    /// Waits until no effect runs or waits on this node's task pool.
    public func effectsIdle() async {
        await pool.waitUntilIdle()
    }

    /// Runs one decision. `admitted`: the store already reserved its commit's slot (the second
    /// try, after the queue was full); otherwise the slot is reserved under the lock.
    @discardableResult
    func runOne<D: Decision>(_ decision: D, followUps: inout [any Decision], admitted: Bool = false) -> Commit {
        let tapping = tappingDecisions.load(ordering: .acquiring)
        if refusingWrites.load(ordering: .acquiring), let reason = writeRefusal.withLock({ $0 }) {
            logger.error("decision \(type(of: decision)) refused, nothing written: \(reason)")
            if tapping { tap(TappedDecision(decision: decision, commit: .aborted(reason: reason), writes: [])) }
            return .aborted(reason: reason)
        }
        var tappedWrites: [Delta.Write] = []
        let (commit, effect, ticket, afterDisk) = core.withLock { core in
            // The commit's slot in the store's queue, reserved under the lock the commit holds
            // anyway (docs/design/0016-group-commit.md, "The technique"). A full queue
            // (or a stopped store) runs nothing here: the wait is outside the lock, below.
            if persists && !admitted {
                guard store.tryAdmitHoldingExclusion() else {
                    return (Commit.unchanged, Effect.none, UInt64(0), AfterDisk(notAdmitted: true))
                }
            }
            return core.withTransaction { core, transaction -> (Commit, Effect, UInt64, AfterDisk) in
                let physical = readsSystemClock ? SystemClock.milliseconds() : configuration.clock.nowMilliseconds()
                let generation = transaction.begin(atMilliseconds: hybridNow(core, physical: physical))
                let effect = decision.execute(
                    read: StorageReader(transaction: transaction, generation: generation),
                    write: StorageWriter(transaction: transaction, generation: generation))
                transaction.end()
                if let failure = transaction.failure {
                    if persists { store.cancelAdmission() }
                    logger.error("decision \(type(of: decision)) aborted, nothing written: \(failure)")
                    return (.aborted(reason: failure), .none, 0, AfterDisk())
                }
                // Moved out and back (`takePending`, `restorePending`): a copy retained the
                // writes' array and lookups.
                let writes = transaction.takePending()
                guard !writes.isEmpty else {
                    transaction.restorePending(writes)
                    if persists { store.cancelAdmission() }
                    return (.unchanged, effect, 0, AfterDisk())
                }
                if let refusal = refusal(bytes: writes.decisionBytes, clock: core.clock, physicalMilliseconds: physical) {
                    transaction.restorePending(writes)
                    if persists { store.cancelAdmission() }
                    logger.error("decision \(type(of: decision)) aborted, nothing written: \(refusal)")
                    return (.aborted(reason: refusal), .none, 0, AfterDisk())
                }
                let timestamp = core.clock.tick(physicalMilliseconds: physical)
                let version = Version(timestamp: timestamp, node: id, nodeHash: idHash)
                if writes.expires { startExpiryTimerIfNeeded() }
                let now = transaction.now
                core.prefetch(count: writes.count) { writes.writes[$0].key.stableHash }
                // The table is taken by address once for every write (`withTable`), the change log
                // once, and the observers and the decoded cache are visited only when they hold
                // something.
                core.withTable { writes.merge(into: &$0.pointee, version: version) }
                if core.observing || !core.decoded.isEmpty {
                    for index in 0..<writes.count {
                        let key = writes.key(at: index)
                        let entry = writes.entry(at: index, version: version)
                        // One copy of the typed value on each path: binding it first would copy the
                        // existential twice per write.
                        if let decoded = writes.writes[index].decoded {
                            core.decoded.written(decoded, of: key, at: version)
                            notifyObservers(core, key: key, entry: entry, decoded: decoded, now: now)
                        } else {
                            notifyObservers(core, key: key, entry: entry, decoded: nil, now: now)
                        }
                    }
                }
                core.recordChanges(writes.writes)
                core.committedDecisions += 1
                core.newestOwnDecision = timestamp.rawValue
                if tapping {
                    tappedWrites = writes.writes.indices.map { Delta.Write(key: writes.key(at: $0), entry: writes.entry(at: $0, version: version)) }
                }
                var afterDisk = AfterDisk()
                if core.listening {
                    let delta = CommittedDelta(
                        delta: Delta(version: version, writes: writes.writes.indices.map { index in
                            Delta.Write(key: writes.key(at: index), entry: writes.entry(at: index, version: version))
                        }),
                        origin: .local)
                    for listener in core.commitCalls { listener(delta) }
                }
                if core.feeding { core.feedLocal(version: version, writes: writes) }
                // The replication engine's frame, encoded from the pending writes: no `Delta`.
                if !waitsForDisk {
                    core.lendLocalCommitSender { $0?.sendCommit(version: version, writes: writes) }
                } else if let sender = core.localCommitSender, let frame = sender.frame(version: version, writes: writes) {
                    afterDisk.frame = (sender, frame, timestamp)
                }
                var ticket: UInt64 = 0
                if persists {
                    // No array per commit: the queue coalesces the writes as it is handed them.
                    ticket = store.appendUpserts(clock: core.clock.last) { writes.offerLazily(version: version, to: $0) }
                    // Strict: anti-entropy must not hand it on either until it is on disk.
                    if waitsForDisk { core.undurable.insert(timestamp.rawValue) }
                }
                transaction.restorePending(writes)
                return (.committed(version), effect, ticket, afterDisk)
            }
        }
        if afterDisk.notAdmitted {
            // Back-pressure from the store's writer waits here, without the lock.
            if let error = store.admit() {
                logger.error("decision \(type(of: decision)) refused, nothing written: \(error)")
                if tapping { tap(TappedDecision(decision: decision, commit: .aborted(reason: "\(error)"), writes: [])) }
                return .aborted(reason: "\(error)")
            }
            return runOne(decision, followUps: &followUps, admitted: true)
        }
        if persists { store.wakeWriterIfAsked() }
        if waitsForDisk && ticket > 0 {
            if let error = store.waitUntilDurable(ticket) {
                // It stays out of replication for good: the store refuses everything from now on,
                // and a restart (without it) is how this node recovers.
                logger.error("decision \(type(of: decision)) is in memory but not on disk, its effect is dropped and it is not replicated: \(error)")
                delivery.drain()
                if tapping { tap(TappedDecision(decision: decision, commit: .aborted(reason: "committed in memory but not on disk: \(error)"), writes: [])) }
                return .aborted(reason: "committed in memory but not on disk: \(error)")
            }
            if let version = commit.version {
                core.withLock { _ = $0.undurable.remove(version.timestamp.rawValue) }
            }
        }
        // Strict: peers hear of the decision only now that it is on disk.
        afterDisk.deliver()
        delivery.drain()
        // Before the effect: a decision an effect makes is tapped after the one that made it.
        if tapping { tap(TappedDecision(decision: decision, commit: commit, writes: tappedWrites)) }
        // Most decisions return `.none`: tested here, no call.
        if case .none = effect.operation { return commit }
        perform(effect, handlers: [], followUps: &followUps)
        return commit
    }

    /// What a strict commit hands on only once it is on disk: its frame, for the replication
    /// engine. Or that nothing ran because the store's queue had no room (or the store stopped).
    struct AfterDisk {
        var frame: (any LocalCommitSender, [UInt8], HLCTimestamp)?
        var notAdmitted = false

        func deliver() {
            if let (sender, frame, timestamp) = frame { sender.send(frame, timestamp: timestamp) }
        }
    }

    func tap(_ record: TappedDecision) {
        guard let tap = decisionTap.withLock({ $0 }) else { return }
        // A decision a handler made reaches `decide` wrapped: report the one the code wrote.
        if let wrapped = record.decision as? AnyDecision {
            tap(TappedDecision(decision: wrapped.base, commit: record.commit, writes: record.writes))
        } else {
            tap(record)
        }
    }

    /// Calls `tap` with every decision this node runs from now on (nil stops it): the decision,
    /// what became of it, and its writes with their version. Called on the deciding thread after
    /// the commit and before its effect is performed, so a decision an effect makes is tapped after
    /// the one that returned the effect. DecideTesting's `TestNode` is built on it.
    package func tapDecisions(_ tap: (@Sendable (TappedDecision) -> Void)?) {
        decisionTap.withLock { current in
            current = tap
            tappingDecisions.store(tap != nil, ordering: .releasing)
        }
    }

    /// Why a decision of `bytes` (its `decisionBytes`) must not commit now, or nil: it is larger than one
    /// replication frame may carry, or this node's hybrid clock runs so far ahead of its
    /// physical clock that every peer would refuse its version.
    @inline(__always)
    func refusal(bytes: Int, clock: HybridLogicalClock, physicalMilliseconds physical: UInt64) -> String? {
        // The test inlined into every commit; the message built apart, only for a refusal.
        let lead = clock.last.physicalMilliseconds.subtractingReportingOverflow(physical)
        guard bytes > configuration.maxDecisionBytes || (!lead.overflow && lead.partialValue > configuration.maxClockSkewMilliseconds) else {
            return nil
        }
        return refusalMessage(bytes: bytes, lead: lead.overflow ? nil : lead.partialValue)
    }

    /// Why a commit of `bytes` is refused, the clock `lead` milliseconds ahead of real time (nil:
    /// not ahead).
    @inline(never)
    private func refusalMessage(bytes: Int, lead: UInt64?) -> String {
        if bytes > configuration.maxDecisionBytes {
            return "decision of \(bytes) bytes is over maxDecisionBytes \(configuration.maxDecisionBytes): split it into smaller decisions"
        }
        let lead = lead ?? 0
        return "this node's clock ran \(lead) ms ahead of its physical clock (more than maxClockSkewMilliseconds \(configuration.maxClockSkewMilliseconds)); peers would refuse its writes, so it takes none until real time catches up"
    }

    /// The size `maxDecisionBytes` bounds: a decision's writes encoded as catch-up entries (each
    /// carries the version), the larger of its two encodings.
    package static func decisionBytes(nodeID: String, writes: some Sequence<(StateKey, PackedBytes?)>) -> Int {
        var bytes = WireCodec.decisionHeaderBytes(nodeBytes: nodeID.utf8.count)
        for (key, value) in writes {
            bytes += WireCodec.maxEncodedEntryBytes(nameBytes: key.name.utf8.count, elementBytes: key.elementCount,
                                                    nodeBytes: nodeID.utf8.count, valueBytes: value?.count ?? 0)
        }
        return bytes
    }

    /// A reason set by the replication engine to refuse every decision (e.g. this node's
    /// clock is far from its peers'), nil to accept them.
    package func refuseWrites(_ reason: String?) {
        writeRefusal.withLock { current in
            current = reason
            refusingWrites.store(reason != nil, ordering: .releasing)
        }
    }

    // MARK: effects

    func perform(
        _ effect: Effect, handlers: [@Sendable (any Error) -> Effect], followUps: inout [any Decision]
    ) {
        switch effect.operation {
        case .none:
            return
        case .decide(let decision):
            followUps.append(decision)
        case .merge(let effects):
            for effect in effects { perform(effect, handlers: handlers, followUps: &followUps) }
        case .mapError(let inner, let transform):
            perform(inner, handlers: [transform] + handlers, followUps: &followUps)
        case .run(let operation):
            let context = EffectContext(environment: environment, node: self)
            let accepted = pool.submit { [self] in
                do {
                    try await operation(context)
                } catch {
                    self.handle(error, handlers: handlers)
                }
            }
            if !accepted {
                handle(EffectPoolSaturated(maxQueuedEffects: configuration.maxQueuedEffects), handlers: handlers)
            }
        }
    }

    func handle(_ error: any Error, handlers: [@Sendable (any Error) -> Effect]) {
        logger.warning("effect failed: \(error)")
        let mapped: Effect
        var outer = handlers
        if outer.isEmpty {
            mapped = configuration.mapError(error)
        } else {
            mapped = outer.removeFirst()(error)
        }
        var followUps: [any Decision] = []
        perform(mapped, handlers: outer, followUps: &followUps)
        for decision in followUps { decide(AnyDecision(decision)) }
    }

    // MARK: lifecycle

    /// Ends every `observe` sequence and `deltas` stream (and `changes` readers, once they read
    /// what is retained: the feed takes no change after this), stops every callback, and waits for
    /// running and queued effects to finish, then flushes the store (with a data directory).
    /// The state stays readable; decisions made after this still commit, but nothing observes
    /// them. `close()` releases the store.
    public func shutdown() async {
        let (observers, channels) = core.withLock { core -> ([Observer], [DeltaStream.Channel]) in
            let observers = core.observers.values.flatMap(\.values) + core.collectionObservers.values.flatMap(\.values)
            core.collectionObservers.removeAll()
            let channels = Array(core.deltaChannels.values)
            core.observers.removeAll()
            core.deltaChannels.removeAll()
            core.commitListeners.removeAll()
            return (observers, channels)
        }
        for observer in observers {
            observer.cancel()
            observer.onFinish?()
        }
        for channel in channels { channel.finish() }
        core.withLock { $0.feed?.finish() }
        await pool.waitUntilIdle()
        do {
            try store.flush()
        } catch {
            logger.error("flushing the store at shutdown: \(error)")
        }
        logger.debug("node shut down")
    }

    // MARK: durability

    /// Returns once every decision committed and every delta applied before the call is on
    /// disk. Without a data directory, returns at once. Throws when the store failed or is
    /// closed.
    public func flush() throws(StorageError) {
        try store.flush()
    }

    /// Flushes and closes the store, releasing the data directory for another `Node`. After
    /// this, decisions are refused (`.aborted`) and remote deltas are applied in memory only.
    /// Idempotent; without a data directory, does nothing. Also done when the node is
    /// deinitialized.
    public func close() throws(StorageError) {
        try store.close()
    }

    deinit {
        expiryTimer.withLock { $0?.cancel() }
        do {
            try store.close()
        } catch {
            logger.error("closing the store: \(error)")
        }
    }
}

/// The decision behind `Node.set`.
struct SetValue<K: AtomicState>: Decision {
    let value: K.Value
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        write(value, into: K.self)
        return .none
    }
}

struct SetElement<C: CollectionState>: Decision {
    let id: C.ID
    let value: C.Value
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        write(value, into: C.self, at: id)
        return .none
    }
}

/// Lets an existential decision go through the generic `decide`.
struct AnyDecision: Decision {
    let base: any Decision
    init(_ base: any Decision) { self.base = base }
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        base.execute(read: read, write: write)
    }
}
