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
    private let idHash: UInt64
    let configuration: Configuration
    let logger: Logger
    private let core: Mutex<NodeCore>
    private let delivery = DeliveryQueue()
    private let pool: TaskPool
    private let environmentBox: Mutex<EffectEnvironment>
    /// Where commits go to survive a restart (`InMemoryStorage` when there is no data directory).
    package let storage: any NodeStorage
    /// `storage.persists`, read once: a node without a store skips every storage call.
    package let persists: Bool
    /// Strict durability: `decide` and `apply` wait until their commit is on disk.
    private let waitsForDisk: Bool
    /// Runs `expireDue` while no replication engine does (see `startExpiryTimerIfNeeded`).
    private let expiryTimer = Mutex<ReplicatorTimer?>(nil)
    private let expiryDrivenExternally = Atomic<Bool>(false)
    /// Whether `expiryTimer` was started: one load per expiring decision instead of a lock.
    private let expiryTimerRunning = Atomic<Bool>(false)
    /// Set by the replication engine while this node must take no decision.
    private let writeRefusal = Mutex<String?>(nil)
    /// Whether `writeRefusal` holds a reason: one load per decision instead of a lock.
    private let refusingWrites = Atomic<Bool>(false)
    /// DecideTesting's view of every decision (`tapDecisions`), and whether one is set.
    private let decisionTap = Mutex<(@Sendable (TappedDecision) -> Void)?>(nil)
    private let tappingDecisions = Atomic<Bool>(false)

    /// Creates a node. Without a data directory its state starts empty. With one, it loads the
    /// store into memory and moves its clock past every stored version before any decision.
    /// Throws for an invalid id, bound or durability, and for a store that cannot be opened
    /// (corrupt, unreadable, in use, or another node's).
    public init(configuration: Configuration) throws(NodeConfigurationError) {
        let idBytes = configuration.id.utf8.count
        guard idBytes >= 1 && idBytes <= 255 else { throw .invalidNodeID(configuration.id) }
        guard configuration.effectConcurrency >= 1 else { throw .invalidBound("effectConcurrency must be at least 1") }
        guard configuration.maxQueuedEffects >= 0 else { throw .invalidBound("maxQueuedEffects must not be negative") }
        guard configuration.digestFanoutBits >= 1, configuration.digestDepth >= 0,
              configuration.digestFanoutBits * configuration.digestDepth <= 24 else {
            throw .invalidBound("digestFanoutBits × digestDepth must be at most 24")
        }
        guard configuration.recentChangeCapacity >= 1 else { throw .invalidBound("recentChangeCapacity must be at least 1") }
        guard (1...86_400_000).contains(configuration.maxClockSkewMilliseconds) else {
            throw .invalidBound("maxClockSkewMilliseconds must be 1 to 86,400,000 (one day)")
        }
        guard (1...60_000).contains(configuration.expiryCheckIntervalMilliseconds) else {
            throw .invalidBound("expiryCheckIntervalMilliseconds must be 1 to 60,000")
        }
        guard configuration.maxDecisionBytes >= 1024 else { throw .invalidBound("maxDecisionBytes must be at least 1,024") }
        guard configuration.maxQueuedStorageCommits >= 1 else { throw .invalidBound("maxQueuedStorageCommits must be at least 1") }
        switch (configuration.durability, configuration.dataDirectory) {
        case (.memory, nil), (.strict, .some):
            break
        case (.batched(let interval), .some):
            guard (1...60_000).contains(interval) else {
                throw .invalidDurability("the batch interval must be 1 to 60,000 ms, not \(interval)")
            }
        case (.memory, .some):
            throw .invalidDurability("durability .memory keeps nothing: choose .batched or .strict for a data directory")
        case (_, nil):
            throw .invalidDurability("durability \(configuration.durability) needs a dataDirectory")
        }
        self.id = configuration.id
        self.idHash = Version(timestamp: .zero, node: configuration.id).nodeHash
        self.configuration = configuration
        var logger = configuration.logger
        logger[metadataKey: "node"] = "\(configuration.id)"
        self.logger = logger
        var table = EntryTable(digest: StateDigest(
            fanoutBits: configuration.digestFanoutBits, depth: configuration.digestDepth))
        var clock = HybridLogicalClock(maxSkewMilliseconds: configuration.maxClockSkewMilliseconds)
        let storage: any NodeStorage
        do throws(StorageError) {
            if let directory = configuration.dataDirectory {
                storage = try SQLiteStorage(
                    directory: directory, nodeID: configuration.id, durability: configuration.durability,
                    maxQueuedCommits: configuration.maxQueuedStorageCommits, logger: logger)
            } else {
                storage = InMemoryStorage()
            }
            let storedClock = try storage.load { key, entry in table.merge(entry, for: key) }
            clock.advance(pastOrTo: storedClock)
            if let highest = table.highestVersion { clock.advance(pastOrTo: highest.timestamp) }
        } catch {
            logger.error("cannot start: \(error)")
            throw .storage(error)
        }
        if storage.persists {
            logger.info("loaded store", metadata: [
                "entries": "\(table.count)", "durability": "\(configuration.durability)",
                "clock": "\(clock.last)"])
        }
        self.storage = storage
        self.persists = storage.persists
        self.waitsForDisk = storage.persists && configuration.durability == .strict
        let core = NodeCore(
            nodeID: configuration.id, table: table, clock: clock,
            logger: logger, limits: configuration.limits,
            recentChangeCapacity: configuration.recentChangeCapacity,
            maxCachedDecodedValues: max(0, configuration.maxCachedDecodedValues))
        self.core = Mutex(core)
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

    @discardableResult
    private func runOne<D: Decision>(_ decision: D, followUps: inout [any Decision]) -> Commit {
        let tapping = tappingDecisions.load(ordering: .acquiring)
        if refusingWrites.load(ordering: .acquiring), let reason = writeRefusal.withLock({ $0 }) {
            logger.error("decision \(type(of: decision)) refused, nothing written: \(reason)")
            if tapping { tap(TappedDecision(decision: decision, commit: .aborted(reason: reason), writes: [])) }
            return .aborted(reason: reason)
        }
        // Back-pressure from the store's writer waits here, before the lock.
        if persists, let error = storage.admit() {
            logger.error("decision \(type(of: decision)) refused, nothing written: \(error)")
            if tapping { tap(TappedDecision(decision: decision, commit: .aborted(reason: "\(error)"), writes: [])) }
            return .aborted(reason: "\(error)")
        }
        var tappedWrites: [Delta.Write] = []
        let (commit, effect, ticket, afterDisk) = core.withLock {
            core -> (Commit, Effect, UInt64, (CommittedDelta, [@Sendable (CommittedDelta) -> Void])?) in
            let transaction = core.transaction
            let physical = configuration.clock.nowMilliseconds()
            let generation = transaction.begin(atMilliseconds: hybridNow(core, physical: physical))
            let effect = decision.execute(
                read: StorageReader(transaction: transaction, generation: generation),
                write: StorageWriter(transaction: transaction, generation: generation))
            transaction.end()
            if let failure = transaction.failure {
                if persists { storage.cancelAdmission() }
                logger.error("decision \(type(of: decision)) aborted, nothing written: \(failure)")
                return (.aborted(reason: failure), .none, 0, nil)
            }
            let writes = transaction.pending
            guard !writes.isEmpty else {
                if persists { storage.cancelAdmission() }
                return (.unchanged, effect, 0, nil)
            }
            if let refusal = refusal(bytes: writes.decisionBytes, clock: core.clock, physicalMilliseconds: physical) {
                if persists { storage.cancelAdmission() }
                logger.error("decision \(type(of: decision)) aborted, nothing written: \(refusal)")
                return (.aborted(reason: refusal), .none, 0, nil)
            }
            let timestamp = core.clock.tick(physicalMilliseconds: physical)
            let version = Version(timestamp: timestamp, node: id, nodeHash: idHash)
            if writes.expires { startExpiryTimerIfNeeded() }
            let now = transaction.now
            core.prefetch(count: writes.count) { writes.writes[$0].key.stableHash }
            // The table is taken by address once for every write (`withTable`), the change log
            // once, and the observers and the decoded cache are visited only when they hold
            // something.
            core.withTable { table in
                for index in 0..<writes.count {
                    let outcome = table.pointee.merge(writes.entry(at: index, version: version), for: writes.writes[index].key)
                    precondition(outcome.changed, "a local version lost to a stored one: the clock went backwards")
                }
            }
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
            if tapping {
                tappedWrites = writes.writes.indices.map { Delta.Write(key: writes.key(at: $0), entry: writes.entry(at: $0, version: version)) }
            }
            var afterDisk: (CommittedDelta, [@Sendable (CommittedDelta) -> Void])?
            if core.listening {
                let delta = CommittedDelta(
                    delta: Delta(version: version, writes: writes.writes.indices.map { index in
                        Delta.Write(key: writes.key(at: index), entry: writes.entry(at: index, version: version))
                    }),
                    origin: .local)
                for listener in core.commitCalls { listener(delta) }
                if waitsForDisk {
                    afterDisk = (delta, core.durableCalls)
                } else {
                    for listener in core.durableCalls { listener(delta) }
                }
            }
            var ticket: UInt64 = 0
            if persists {
                // No array per commit: the queue coalesces the writes as it is handed them.
                ticket = storage.append(changeCount: writes.count, clock: core.clock.last) {
                    .upsert(writes.key(at: $0), writes.entry(at: $0, version: version))
                }
                // Strict: anti-entropy must not hand it on either until it is on disk.
                if waitsForDisk { core.undurable.insert(timestamp.rawValue) }
            }
            return (.committed(version), effect, ticket, afterDisk)
        }
        if waitsForDisk && ticket > 0 {
            if let error = storage.waitUntilDurable(ticket) {
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
        if let (delta, listeners) = afterDisk {
            for listener in listeners { listener(delta) }
        }
        delivery.drain()
        // Before the effect: a decision an effect makes is tapped after the one that made it.
        if tapping { tap(TappedDecision(decision: decision, commit: commit, writes: tappedWrites)) }
        perform(effect, handlers: [], followUps: &followUps)
        return commit
    }

    private func tap(_ record: TappedDecision) {
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
    private func refusal(bytes: Int, clock: HybridLogicalClock, physicalMilliseconds physical: UInt64) -> String? {
        if bytes > configuration.maxDecisionBytes {
            return "decision of \(bytes) bytes is over maxDecisionBytes \(configuration.maxDecisionBytes): split it into smaller decisions"
        }
        let lead = clock.last.physicalMilliseconds.subtractingReportingOverflow(physical)
        if !lead.overflow, lead.partialValue > configuration.maxClockSkewMilliseconds {
            return "this node's clock ran \(lead.partialValue) ms ahead of its physical clock (more than maxClockSkewMilliseconds \(configuration.maxClockSkewMilliseconds)); peers would refuse its writes, so it takes none until real time catches up"
        }
        return nil
    }

    /// The size `maxDecisionBytes` bounds: a decision's writes encoded as catch-up entries (each
    /// carries the version), the larger of its two encodings.
    package static func decisionBytes(nodeID: String, writes: some Sequence<(StateKey, [UInt8]?)>) -> Int {
        var bytes = 16 + nodeID.utf8.count
        for (key, value) in writes {
            bytes += WireCodec.maxEncodedEntryBytes(nameBytes: key.name.utf8.count, elementBytes: key.element.count,
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

    private func perform(
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

    private func handle(_ error: any Error, handlers: [@Sendable (any Error) -> Effect]) {
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

    // MARK: reading

    /// The value of `key` now.
    public func read<K: AtomicState>(_ key: K.Type) -> K.Value {
        read { $0(key) }
    }

    /// The value of element `id` of `collection` now.
    public func read<C: CollectionState>(_ collection: C.Type, at id: C.ID) -> C.Value {
        read { $0(collection, at: id) }
    }

    /// Runs `body` against one consistent snapshot: no decision commits while it runs. Keep it
    /// short; it holds the node.
    public func read<T>(_ body: (StorageReader) -> T) -> T {
        core.withLock { core in
            let transaction = core.transaction
            let generation = transaction.begin(atMilliseconds: hybridNow(core))
            defer { transaction.end() }
            return body(StorageReader(transaction: transaction, generation: generation))
        }
    }

    /// Every element of `collection` that holds a value now, in one snapshot (see
    /// `CollectionSnapshot`). O(n log n) in the collection's size, not the store's.
    public func elements<C: CollectionState>(_ collection: C.Type) -> CollectionSnapshot<C> {
        read { $0.elements(collection) }
    }

    /// The ids of `index` now, in order.
    public func read<I: IndexState>(_ index: I.Type) -> [I.ID] {
        read { $0(index) }
    }

    /// The stored entry of an untyped key (tombstones and expired values included: see
    /// `Entry.isExpired(atMilliseconds:)` and `nowMilliseconds`), nil when never written.
    public func entry(for key: StateKey) -> Entry? {
        core.withLock { $0.entry(for: key) }
    }

    /// The value of the atomic state named by the UTF-8 bytes `name` (the wire name, as
    /// `StateKey(name:)` takes it): `.none` when never written here, `.some(nil)` when deleted,
    /// expired, or owned by a node that is not a live member here. For protocol front ends that
    /// hold a name as bytes: no `StateKey` is built.
    package func value(ofAtomicNamed name: UnsafeRawBufferPointer) -> [UInt8]?? {
        core.withLock { core in core.value(ofAtomicNamed: name, atMilliseconds: hybridNow(core)) }
    }

    /// Has the processor fetch the table lines that reading the keys of these stable hashes
    /// will touch, their values included (`EntryTable.prefetch`), under one hold of the lock:
    /// for a protocol front end about to answer a pipelined run of reads, whose cache misses
    /// then overlap. Changes nothing.
    package func prefetchValues(stableHashes hashes: [UInt64]) {
        guard hashes.count > 1 else { return }  // before the lock, not only inside
        core.withLock { core in
            hashes.withUnsafeBufferPointer { hashes in core.prefetch(count: hashes.count, readingValues: true) { hashes[$0] } }
        }
    }

    /// The hybrid-clock instant (Unix milliseconds) at which this node judges expiry now: its
    /// physical clock, or the hybrid clock's last timestamp when that is ahead (a peer's clock
    /// ahead of this one moves it; docs/consistency.md, "Expiring keys").
    public var nowMilliseconds: UInt64 {
        core.withLock { hybridNow($0) }
    }

    /// Call with the lock held.
    private func hybridNow(_ core: NodeCore, physical: UInt64? = nil) -> UInt64 {
        min(max(physical ?? configuration.clock.nowMilliseconds(), core.clock.last.physicalMilliseconds),
            HLCTimestamp.maxPhysicalMilliseconds)
    }

    /// Every stored entry, tombstones included, sorted by key: one snapshot, read under the
    /// state lock (every decision waits for it: about 0.35 s at a million keys). For a large
    /// state, `entriesReadInSlices` does not hold the lock for long.
    public func entries() -> [KeyedEntry] {
        core.withLock { core in core.table.sortedEntries().map { KeyedEntry(key: $0.key, entry: $0.entry) } }
    }

    /// Every stored entry, tombstones included, sorted by key, read `Self.readSliceRecords`
    /// records at a time with the state lock let go between slices and the sort done after:
    /// decisions and peers' batches wait for one slice, never for the whole state. Not one
    /// snapshot: a key stored for the whole call appears exactly once, with its entry as of when
    /// it was read (the newest, if a record moved and was read twice); a key written, deleted or
    /// collected meanwhile may appear or not. What `syncnode dump` reads.
    package func entriesReadInSlices() -> [KeyedEntry] {
        var slices: [[(key: StateKey, entry: Entry)]] = []
        var cursor = EntryTable.SweepCursor.start
        while !cursor.isFinished {
            slices.append(core.withLock { core in core.table.entries(from: &cursor, budget: Self.readSliceRecords) })
        }
        // The walk goes downwards; joined upwards again, the entries are in the table's order,
        // which is often close to key order (the sort then has little to do).
        var found: [KeyedEntry] = []
        found.reserveCapacity(slices.reduce(0) { $0 + $1.count })
        for slice in slices.reversed() {
            for item in slice { found.append(KeyedEntry(key: item.key, entry: item.entry)) }
        }
        slices = []
        return Self.sortedKeepingNewest(consume found)
    }

    /// `entries` sorted by key, one per key: of a key read more than once, its newest entry.
    /// Consumed, so a caller that hands over its only copy has it sorted in place.
    static func sortedKeepingNewest(_ entries: consuming [KeyedEntry]) -> [KeyedEntry] {
        // Sorted by key, then newest first: the first of each key is the one kept.
        entries.sort { $0.key == $1.key ? $0.entry.version > $1.entry.version : $0.key < $1.key }
        var kept = 0
        for index in entries.indices where kept == 0 || entries[kept - 1].key != entries[index].key {
            entries.swapAt(kept, index)
            kept += 1
        }
        entries.removeLast(entries.count - kept)
        return entries
    }

    /// One page of the keys holding a value, for cursor-based listing (the Redis protocol's
    /// SCAN): digest leaves from `cursor` on, until `minimumKeys` keys were found or
    /// `maximumBuckets` leaves visited, read in one snapshot. `next` is the cursor of the next
    /// page, 0 when the walk is complete. A key held throughout a walk from cursor 0 to 0 is
    /// listed exactly once; one written or deleted meanwhile may or may not be.
    package func scanKeys(cursor: Int, minimumKeys: Int, maximumBuckets: Int) -> (keys: [StateKey], next: Int) {
        core.withLock { core in
            let page = core.table.liveKeys(fromBucket: cursor, minimumKeys: minimumKeys, maximumBuckets: maximumBuckets,
                                           atMilliseconds: hybridNow(core))
            return (page.keys, page.next >= core.table.bucketCount ? 0 : page.next)
        }
    }

    /// How many cursor values `scanKeys` accepts (0 ..< this).
    package var scanCursorLimit: Int { core.withLock { $0.table.bucketCount } }

    /// A summary of the node's state for status displays and convergence checks.
    public var stateSummary: StateSummary {
        core.withLock { core in
            StateSummary(
                entryCount: core.table.count, tombstoneCount: core.table.tombstoneCount,
                expiredCount: core.table.expiredCount, expiringCount: core.table.expiringCount,
                hiddenOwnedCount: core.table.hiddenCount,
                digest: core.table.digest.root, highestVersion: core.table.highestVersion,
                committedDecisions: core.committedDecisions, appliedRemoteDeltas: core.appliedRemoteDeltas)
        }
    }

    /// The digest tree (a copy), for anti-entropy.
    package var digest: StateDigest {
        core.withLock { $0.table.digest }
    }

    // MARK: observing

    /// The values of `key`: the current one first, then every change (local or replicated),
    /// skipping equal values and keeping only the newest unread one.
    public func observe<K: AtomicState>(_ key: K.Type) -> Observation<K.Value> {
        let stateKey = core.withLock { $0.key(for: key) }
        return observation(of: stateKey, default: { K.defaultValue() })
    }

    /// The values of element `id` of `collection`, as `observe(_:)` gives them.
    public func observe<C: CollectionState>(_ collection: C.Type, at id: C.ID) -> Observation<C.Value> {
        guard let stateKey = try? core.withLock({ core throws(ValueCoding.Failure) in try core.key(for: collection, at: id) }) else {
            let (stream, continuation) = AsyncStream<C.Value>.makeStream()
            logger.error("cannot observe \(C.name): its element id does not encode as JSON")
            continuation.finish()
            return Observation(stream: stream)
        }
        return observation(of: stateKey, default: { C.defaultValue(at: id) })
    }

    /// Snapshots of every element of `collection`: the current one first, then one after each
    /// batch of changes to its elements (local, replicated, catch-up, expiry, owners coming and
    /// going), skipping equal snapshots; built when the reader asks (see `CollectionObservation`).
    public func observe<C: CollectionState>(_ collection: C.Type) -> CollectionObservation<CollectionSnapshot<C>> {
        let name = core.withLock { $0.name(of: C.self, named: C.name) }
        return collectionObservation(of: name) { node in node.elements(collection) }
    }

    /// The ids of `index` in order: the current list first, then the list after each batch of
    /// changes, skipping equal lists (see `CollectionObservation`).
    public func observe<I: IndexState>(_ index: I.Type) -> CollectionObservation<[I.ID]> {
        let name = core.withLock { $0.name(of: I.self, named: I.name) }
        return collectionObservation(of: name) { node in node.read(index) }
    }

    /// Calls `handler` with a snapshot of `collection`, then with a new one after each batch of
    /// changes to its elements, one call at a time, outside the node's lock; equal snapshots
    /// are skipped. Each call builds a snapshot: O(collection) per batch of changes delivered.
    public func subscribe<C: CollectionState>(
        _ collection: C.Type, handler: @escaping @Sendable (CollectionSnapshot<C>) -> Void
    ) -> Subscription {
        let name = core.withLock { $0.name(of: C.self, named: C.name) }
        return collectionSubscription(of: name, snapshot: { node in node.elements(collection) }, handler: handler)
    }

    /// Calls `handler` with the ids of `index` in order, then with the new list after each batch
    /// of changes, as `subscribe(_:handler:)` does for a collection.
    public func subscribe<I: IndexState>(_ index: I.Type, handler: @escaping @Sendable ([I.ID]) -> Void) -> Subscription {
        let name = core.withLock { $0.name(of: I.self, named: I.name) }
        return collectionSubscription(of: name, snapshot: { node in node.read(index) }, handler: handler)
    }

    /// The callback form of `collectionObservation`: each delivery batch builds a snapshot and
    /// hands it on unless it equals the one before.
    private func collectionSubscription<Snapshot: Sendable & Equatable>(
        of name: String, snapshot: @escaping @Sendable (Node) -> Snapshot, handler: @escaping @Sendable (Snapshot) -> Void
    ) -> Subscription {
        let last = Mutex<Snapshot?>(nil)
        return registerCollection(name: name, onFinish: nil) { [weak self] in
            guard let current = self.map(snapshot) else { return }
            let changed = last.withLock { last -> Bool in
                defer { last = current }
                return last != current
            }
            if changed { handler(current) }
        }
    }

    private func collectionObservation<Snapshot: Sendable & Equatable>(
        of name: String, snapshot: @escaping @Sendable (Node) -> Snapshot
    ) -> CollectionObservation<Snapshot> {
        let (signals, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let subscription = registerCollection(name: name, onFinish: { continuation.finish() }) { continuation.yield() }
        continuation.onTermination = { _ in subscription.cancel() }
        return CollectionObservation(signals: signals) { [weak self] in self.map(snapshot) }
    }

    /// Registers an observer of every element named `name`; `changed` runs once at once and then
    /// after each delivery batch that touched one.
    private func registerCollection(name: String, onFinish: (@Sendable () -> Void)?,
                                    changed: @escaping @Sendable () -> Void) -> Subscription {
        let observer = core.withLock { core -> Observer in
            let observer = CollectionObserver(id: core.makeID(), name: name, onFinish: onFinish, changed: changed)
            core.collectionObservers[name, default: [:]][observer.id] = observer
            delivery.enqueue(.init(observer: observer, entry: nil, decoded: nil))
            return observer
        }
        delivery.drain()
        return Subscription { [weak self] in
            observer.cancel()
            self?.core.withLock { core in
                core.collectionObservers[name]?[observer.id] = nil
                if core.collectionObservers[name]?.isEmpty == true { core.collectionObservers[name] = nil }
            }
        }
    }

    /// Calls `handler` with the current value of `key`, then with every change, one call at a
    /// time, outside the node's lock (it may make decisions). Equal values are skipped; a
    /// handler that falls behind gets the newest value, not every one.
    public func subscribe<K: AtomicState>(
        _ key: K.Type, handler: @escaping @Sendable (K.Value) -> Void
    ) -> Subscription {
        let stateKey = core.withLock { $0.key(for: key) }
        return register(key: stateKey) { id in
            self.typedObserver(id: id, key: stateKey, default: { K.defaultValue() }, handler: handler)
        }
    }

    /// Calls `handler` with the value of element `id` of `collection`, then with every change,
    /// as `subscribe(_:handler:)` does for an atomic key.
    public func subscribe<C: CollectionState>(
        _ collection: C.Type, at id: C.ID, handler: @escaping @Sendable (C.Value) -> Void
    ) -> Subscription {
        guard let stateKey = try? core.withLock({ core throws(ValueCoding.Failure) in try core.key(for: collection, at: id) }) else {
            logger.error("cannot subscribe to \(C.name): its element id does not encode as JSON")
            return Subscription {}
        }
        return register(key: stateKey) { observerID in
            self.typedObserver(id: observerID, key: stateKey, default: { C.defaultValue(at: id) }, handler: handler)
        }
    }

    /// Calls `handler` with the entry of an untyped key (nil when never written), then with
    /// every new entry of it, tombstones included. For tools.
    public func subscribe(entryOf key: StateKey, handler: @escaping @Sendable (Entry?) -> Void) -> Subscription {
        register(key: key) { id in EntryObserver(id: id, key: key, handler: handler) }
    }

    private func observation<Value: Codable & Sendable & Equatable>(
        of key: StateKey, default defaultValue: @escaping @Sendable () -> Value
    ) -> Observation<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let subscription = register(key: key) { id in
            self.typedObserver(id: id, key: key, default: defaultValue, onFinish: { continuation.finish() }) {
                continuation.yield($0)
            }
        }
        continuation.onTermination = { _ in subscription.cancel() }
        return Observation(stream: stream)
    }

    private func typedObserver<Value: Codable & Sendable & Equatable>(
        id: UInt64, key: StateKey, default defaultValue: @escaping @Sendable () -> Value,
        onFinish: (@Sendable () -> Void)? = nil,
        handler: @escaping @Sendable (Value) -> Void
    ) -> Observer {
        let logger = self.logger
        return TypedObserver(
            id: id, key: key, defaultValue: defaultValue,
            onDecodeFailure: { key, error in logger.warning("observing \(key) as its default value: \(error)") },
            onFinish: onFinish, handler: handler)
    }

    private func register(key: StateKey, make: (UInt64) -> Observer) -> Subscription {
        let observer = core.withLock { core -> Observer in
            let observer = make(core.makeID())
            core.observers[key, default: [:]][observer.id] = observer
            let now = hybridNow(core)
            let entry = core.entry(for: key).flatMap { core.isVisible($0, now: now) ? $0 : nil }
            delivery.enqueue(.init(observer: observer, entry: entry,
                                   decoded: entry.flatMap { core.decoded.value(of: key, at: $0.version) }))
            return observer
        }
        delivery.drain()
        return Subscription { [weak self] in
            observer.cancel()
            self?.core.withLock { core in
                core.observers[key]?[observer.id] = nil
                if core.observers[key]?.isEmpty == true { core.observers[key] = nil }
            }
        }
    }

    /// Call with the lock held.
    /// An entry a reader at `now` does not see (expired, or of an absent owner) is delivered as
    /// absent (nil).
    private func notifyObservers(_ core: NodeCore, key: StateKey, entry: Entry?, decoded: (any Sendable)?, now: UInt64) {
        guard core.observing else { return }
        if !key.element.isEmpty, !core.collectionObservers.isEmpty, let watchers = core.collectionObservers[key.name] {
            for observer in watchers.values { delivery.enqueue(.init(observer: observer, entry: nil, decoded: nil)) }
        }
        guard !core.observers.isEmpty, let observers = core.observers[key] else { return }
        let entry = entry.flatMap { core.isVisible($0, now: now) ? $0 : nil }
        let decoded = entry == nil ? nil : decoded
        for observer in observers.values {
            delivery.enqueue(.init(observer: observer, entry: entry, decoded: decoded))
        }
    }

    // MARK: the replication seam

    /// Every delta this node commits from now on, every remote delta applied through `apply(_:)`
    /// that changed at least one key, and the entries a catch-up changed (origin `.catchUp`,
    /// one delta per version), in commit order, with a bounded buffer (see `DeltaStream`).
    public func deltas(maxBuffered: Int = 4096) -> DeltaStream {
        let channel = DeltaStream.Channel(maxBuffered: maxBuffered)
        let token = core.withLock { core in
            let id = core.makeID()
            core.commitListeners[id] = { channel.push($0) }
            core.deltaChannels[id] = channel
            return id
        }
        channel.onFinish.withLock { $0 = { [weak self] in self?.removeCommitListener(token) } }
        return DeltaStream(channel: channel)
    }

    /// Ends every `observe` sequence and `deltas` stream, stops every callback, and waits for
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
            core.durableListeners.removeAll()
            return (observers, channels)
        }
        for observer in observers {
            observer.cancel()
            observer.onFinish?()
        }
        for channel in channels { channel.finish() }
        await pool.waitUntilIdle()
        do {
            try storage.flush()
        } catch {
            logger.error("flushing the store at shutdown: \(error)")
        }
        logger.debug("node shut down")
    }

    /// Calls `listener` with every delta committed or applied here, under the node's lock and
    /// in commit order. It must only hand the delta on (e.g. into a bounded queue).
    package func addCommitListener(_ listener: @escaping @Sendable (CommittedDelta) -> Void) -> UInt64 {
        core.withLock { core in
            let id = core.makeID()
            core.commitListeners[id] = listener
            return id
        }
    }

    /// Calls `listener` with every decision committed here once it is as durable as the node
    /// promises: at commit for `.memory` and `.batched`, after its sync for `.strict` (then
    /// outside the lock, and not at all when the sync failed). Remove it with `removeCommitListener`.
    package func addDurableCommitListener(_ listener: @escaping @Sendable (CommittedDelta) -> Void) -> UInt64 {
        core.withLock { core in
            let id = core.makeID()
            core.durableListeners[id] = listener
            return id
        }
    }

    /// Whether applies must reach the disk before they are acknowledged (strict durability).
    package var acknowledgesAfterDisk: Bool { waitsForDisk }

    package func removeCommitListener(_ id: UInt64) {
        core.withLock { core in
            core.durableListeners[id] = nil
            core.commitListeners[id] = nil
            core.deltaChannels[id] = nil
        }
    }

    /// Applies a delta from another node exactly as a local commit is applied: the clock merges
    /// its timestamp (refusing one too far ahead, and then applying nothing), every write is
    /// merged last-writer-wins, and observers hear of the keys that actually changed, all at
    /// once. Returns how many keys changed.
    @discardableResult
    package func apply(_ delta: Delta) throws(ClockError) -> Int {
        try apply(delta, waitingForDisk: waitsForDisk).changed
    }

    /// `apply(_:)` that waits for the disk only when `waitingForDisk`; returns the store ticket
    /// (0 for none) so the replication engine can wait elsewhere than on its network thread.
    package func apply(_ delta: Delta, waitingForDisk: Bool) throws(ClockError) -> (changed: Int, ticket: UInt64) {
        let outcome = apply(deltas: CollectionOfOne(delta))
        if let refusal = outcome.refusals.first { throw refusal.error }
        if waitingForDisk && waitsForDisk && outcome.ticket > 0 { _ = storage.waitUntilDurable(outcome.ticket) }
        return (outcome.changed, outcome.ticket)
    }

    /// What `apply(deltas:)` did: keys changed in all, the store ticket (0 for none), and the
    /// deltas refused by the clock rule (by their position), which changed nothing.
    package struct DeltaBatchOutcome {
        package var changed = 0
        package var ticket: UInt64 = 0
        package var refusals: [(index: Int, error: ClockError)] = []
    }

    /// Applies peers' deltas in order under one hold of the lock and one store append, without
    /// waiting for the disk: each delta still lands whole or not at all (a delta the clock
    /// refuses changes nothing), and observers and listeners hear of each as before.
    package func apply(deltas: some Collection<Delta>) -> DeltaBatchOutcome {
        let admitted = admitToStorage()
        let outcome = core.withLock { core -> DeltaBatchOutcome in
            var outcome = DeltaBatchOutcome()
            var stored: [StorageChange] = []
            let physical = configuration.clock.nowMilliseconds()
            var now = hybridNow(core, physical: physical)
            for (index, delta) in deltas.enumerated() {
                do throws(ClockError) {
                    try core.clock.merge(remote: delta.version.timestamp, physicalMilliseconds: physical)
                } catch {
                    outcome.refusals.append((index, error))
                    continue
                }
                now = max(now, min(delta.version.timestamp.physicalMilliseconds, HLCTimestamp.maxPhysicalMilliseconds))
                var changed = 0
                // A delta of several writes (a peer's batch of SETs) has their misses overlap
                // (`EntryTable.prefetch`). A run of one-write deltas is not gathered: over
                // 10,000 keys that cost `make bench`'s replication row 5-7 % and gained nothing
                // (docs/benchmarks.md, "The prefetch and allocator pass").
                core.prefetch(count: delta.writes.count) { delta.writes[$0].key.stableHash }
                for write in delta.writes {
                    let entry = write.entry(at: delta.version)
                    if !core.isCollected(entry, for: write.key, now: now), core.table.merge(entry, for: write.key).changed {
                        changed += 1
                        core.recordChange(write.key)
                        notifyObservers(core, key: write.key, entry: entry, decoded: nil, now: now)
                        if admitted { stored.append(.upsert(write.key, entry)) }
                    }
                }
                core.appliedRemoteDeltas += 1
                if changed > 0 && core.hasCommitListeners {
                    let committed = CommittedDelta(delta: delta, origin: .remote)
                    for listener in core.commitCalls { listener(committed) }
                }
                outcome.changed += changed
            }
            outcome.ticket = appendToStorage(admitted, stored, clock: core.clock.last)
            return outcome
        }
        delivery.drain()
        return outcome
    }

    /// Waits until the store holds the commit of `ticket` (from `apply(_:waitingForDisk:)` or
    /// `applyCatchUp`); nil when it does, the store's error when it never will.
    package func waitUntilDurable(_ ticket: UInt64) -> StorageError? {
        guard ticket > 0 else { return nil }
        return storage.waitUntilDurable(ticket)
    }

    /// `storage.admit()` for a remote apply: false without a store, or when the store refuses
    /// writes (failed or closed) — remote entries are then applied in memory only (peers hold
    /// them, and a restarted node catches up).
    private func admitToStorage() -> Bool {
        guard persists else { return false }
        if let error = storage.admit() {
            logger.debug("applying in memory only: \(error)")
            return false
        }
        return true
    }

    /// Call with the lock held, after `admitToStorage` returned `admitted`: queues `changes`
    /// (or gives the slot back when there are none); returns the ticket, 0 for none.
    private func appendToStorage(_ admitted: Bool, _ changes: [StorageChange], clock: HLCTimestamp) -> UInt64 {
        guard admitted else { return 0 }
        guard !changes.isEmpty else {
            storage.cancelAdmission()
            return 0
        }
        return storage.append(StorageBatch(changes: changes, clock: clock))
    }

    /// What applying one batch of catch-up entries did.
    package struct CatchUpOutcome: Sendable {
        /// Keys whose entry changed.
        package var changed = 0
        /// Decisions (version groups) refused because their timestamp is too far ahead; the
        /// first refusal, for the log.
        package var refusedVersions = 0
        package var firstRefusal: ClockError?
        /// The store ticket of the batch (0 for none), for `waitUntilDurable`.
        package var ticket: UInt64 = 0
    }

    /// Applies entries received in a catch-up (each with its own version) like `apply(_:)`:
    /// all of them as one unit, each decision (version) whole. A version whose timestamp is too
    /// far ahead is refused alone (`ClockError` for the first); the others still apply. Throws
    /// only when every version was refused.
    @discardableResult
    package func apply(entries: [KeyedEntry]) throws(ClockError) -> Int {
        let outcome = applyCatchUp(entries)
        if waitsForDisk { _ = waitUntilDurable(outcome.ticket) }
        if let refusal = outcome.firstRefusal, outcome.changed == 0, outcome.refusedVersions > 0 { throw refusal }
        return outcome.changed
    }

    /// `apply(entries:)` without waiting for the disk and without throwing.
    package func applyCatchUp(_ entries: [KeyedEntry]) -> CatchUpOutcome {
        var outcome = CatchUpOutcome()
        guard !entries.isEmpty else { return outcome }
        let admitted = admitToStorage()
        outcome = core.withLock { core -> CatchUpOutcome in
            var outcome = CatchUpOutcome()
            let physical = configuration.clock.nowMilliseconds()
            var refused = Set<Version>()
            var newest: HLCTimestamp?
            for item in entries where !refused.contains(item.entry.version) {
                do throws(ClockError) {
                    try core.clock.check(remote: item.entry.version.timestamp, physicalMilliseconds: physical)
                    if newest.map({ $0 < item.entry.version.timestamp }) ?? true { newest = item.entry.version.timestamp }
                } catch {
                    refused.insert(item.entry.version)
                    outcome.refusedVersions += 1
                    if outcome.firstRefusal == nil { outcome.firstRefusal = error }
                }
            }
            if let newest { _ = try? core.clock.merge(remote: newest, physicalMilliseconds: physical) }
            let now = hybridNow(core, physical: physical)
            var stored: [StorageChange] = []
            var applied: [KeyedEntry] = []
            for item in entries where refused.isEmpty || !refused.contains(item.entry.version) {
                guard !core.isCollected(item.entry, for: item.key, now: now), core.table.merge(item.entry, for: item.key).changed else { continue }
                outcome.changed += 1
                core.recordChange(item.key)
                notifyObservers(core, key: item.key, entry: item.entry, decoded: nil, now: now)
                if admitted { stored.append(.upsert(item.key, item.entry)) }
                if core.hasCommitListeners { applied.append(item) }
            }
            // Listeners (e.g. `deltas()` behind `syncnode watch`) hear of catch-up changes too,
            // one delta per version, oldest first.
            if !applied.isEmpty {
                let byVersion = Dictionary(grouping: applied, by: \.entry.version)
                for version in byVersion.keys.sorted() {
                    let writes = byVersion[version]!.map { Delta.Write(key: $0.key, entry: $0.entry) }
                    let committed = CommittedDelta(delta: Delta(version: version, writes: writes), origin: .catchUp)
                    for listener in core.commitCalls { listener(committed) }
                }
            }
            outcome.ticket = appendToStorage(admitted, stored, clock: core.clock.last)
            return outcome
        }
        delivery.drain()
        return outcome
    }

    /// The hashes of digest-tree nodes `indices` at `level` (0 = root), read under the lock
    /// without copying the tree.
    package func digestHashes(level: Int, indices: [Int]) -> [UInt64] {
        core.withLock { core in indices.map { core.table.digest.node(level: level, index: $0) } }
    }

    /// The shape of this node's digest tree.
    package var digestShape: (fanoutBits: Int, depth: Int) {
        core.withLock { ($0.table.digest.fanoutBits, $0.table.digest.depth) }
    }

    /// The change sequence and the hybrid clock (raw) at one instant: where this node's part in
    /// an anti-entropy walk starts. Every entry this node holds then has a timestamp at or
    /// below the clock, or was received from a peer.
    /// The clock first moves up to physical time (as a commit would), so an idle node's
    /// report keeps pace with real time; every later local version is above it. It does not
    /// while decisions are refused (the physical clock is then suspect). Under strict durability
    /// it stays below every own decision not yet on disk (the walk leaves those out).
    package var walkStart: (sequence: UInt64, clock: UInt64) {
        let physical = min(configuration.clock.nowMilliseconds(), HLCTimestamp.maxPhysicalMilliseconds)
        let trusted = writeRefusal.withLock { $0 == nil }
        return core.withLock { core in
            if trusted { core.clock.advance(pastOrTo: HLCTimestamp(physicalMilliseconds: physical, logical: 0)) }
            guard let oldest = core.undurable.min() else { return (core.changeSequence, core.clock.last.rawValue) }
            return (core.changeSequence, min(core.clock.last.rawValue, oldest - 1))
        }
    }

    /// The hybrid clock's last timestamp, raw.
    package var clockLast: UInt64 {
        core.withLock { $0.clock.last.rawValue }
    }

    /// The next piece of a summary of leaf `buckets`, read in one snapshot: groups from bucket
    /// `index`, item `itemOffset`, with at most `maxItems` items (each group counts one more),
    /// and where the next piece starts.
    package func summaryChunk(of buckets: [Int], from index: Int, itemOffset: Int, maxItems: Int)
        -> (groups: [ReplicationMessage.SummaryGroup], index: Int, itemOffset: Int) {
        core.withLock { core in
            var groups: [ReplicationMessage.SummaryGroup] = []
            var items = 0
            var index = index
            var offset = itemOffset
            while index < buckets.count && items < maxItems {
                let slots = core.table.slots(inBucket: buckets[index])
                let start = min(offset, slots.count)
                let take = min(slots.count - start, maxItems - items)
                // A strict decision not yet on disk is left out, as if this node did not hold it yet.
                groups.append(.init(bucket: UInt32(buckets[index]), items: slots[start..<start + take].compactMap { item in
                    core.isUndurable(item.slot.entry) ? nil : ReplicationMessage.SummaryItem(
                        keyHash: item.key.stableHash, timestamp: item.slot.entry.version.timestamp.rawValue,
                        entryHash: item.slot.contribution)
                }))
                items += take + 1
                if start + take >= slots.count {
                    index += 1
                    offset = 0
                } else {
                    offset = start + take
                }
            }
            return (groups, index, offset)
        }
    }

    /// Compares a peer's summaries of leaf buckets with this node's entries there, in one
    /// snapshot: per bucket, the keys of this node the peer lacks or holds older (to push),
    /// and the key hashes of the peer's the node lacks or holds older (to request). Equal
    /// timestamps with different entries go both ways.
    package func compare(buckets: [(bucket: Int, items: [UInt64: ReplicationMessage.SummaryItem])])
        -> [(bucket: Int, push: [StateKey], request: [UInt64])] {
        guard !buckets.isEmpty else { return [] }
        return core.withLock { core in
            buckets.map { bucket, theirs in
                var push: [StateKey] = []
                var remaining = theirs
                for item in core.table.slots(inBucket: bucket) where !core.isUndurable(item.slot.entry) {
                    let hash = item.key.stableHash
                    guard let other = remaining.removeValue(forKey: hash) else {
                        push.append(item.key)
                        continue
                    }
                    let mine = item.slot.entry.version.timestamp.rawValue
                    if other.entryHash == item.slot.contribution { continue }
                    if mine >= other.timestamp { push.append(item.key) }
                    if mine <= other.timestamp { remaining[hash] = other }
                }
                return (bucket, push, remaining.keys.sorted())
            }
        }
    }

    /// The keys named by (leaf bucket, key hash) references that this node holds, in one snapshot.
    package func keys(for references: [ReplicationMessage.KeyReference]) -> [StateKey] {
        let sorted = references.sorted { ($0.bucket, $0.keyHash) < ($1.bucket, $1.keyHash) }
        return core.withLock { core in
            var found: [StateKey] = []
            found.reserveCapacity(sorted.count)
            var start = 0
            while start < sorted.count {
                let bucket = sorted[start].bucket
                var end = start
                while end < sorted.count && sorted[end].bucket == bucket { end += 1 }
                let wanted = sorted[start..<end]
                for key in core.table.keys(inBucket: Int(bucket)) where Self.contains(wanted, key.stableHash) {
                    found.append(key)
                }
                start = end
            }
            return found
        }
    }

    /// Binary search for `hash` among references sorted by key hash.
    private static func contains(_ references: ArraySlice<ReplicationMessage.KeyReference>, _ hash: UInt64) -> Bool {
        var low = references.startIndex, high = references.endIndex
        while low < high {
            let middle = (low + high) / 2
            if references[middle].keyHash < hash { low = middle + 1 } else { high = middle }
        }
        return low < references.endIndex && references[low].keyHash == hash
    }

    /// `entries` ordered so that every version's entries are contiguous, oldest timestamps
    /// first (ties between nodes broken by the node id's stable hash, the same on every node).
    /// Sorts compact (timestamp, node hash, index) triples rather than the entries themselves
    /// (moving an entry costs reference counting on its key and value).
    static func sortedByVersion(_ entries: [KeyedEntry]) -> [KeyedEntry] {
        var order = entries.indices.map {
            (timestamp: entries[$0].entry.version.timestamp.rawValue, node: entries[$0].entry.version.nodeHash, index: $0)
        }
        order.sort { ($0.timestamp, $0.node) < ($1.timestamp, $1.node) }
        return order.map { entries[$0.index] }
    }

    /// The entries of `keys` (distinct keys; those still held), plus every entry that changed
    /// after change number `sequence`, read in one snapshot and grouped by version
    /// (`sortedByVersion`); nil when more changes happened since `sequence` than the node's
    /// change log (`recentChangeCapacity`) holds.
    package func walkEntries(keys: [StateKey], changedAfter sequence: UInt64) -> [KeyedEntry]? {
        core.withLock { core in
            guard let changed = core.keysChanged(after: sequence) else { return nil }
            let changedSet = Set(changed)
            var result: [KeyedEntry] = []
            result.reserveCapacity(keys.count + changed.count)
            for key in keys where changedSet.isEmpty || !changedSet.contains(key) {
                if let entry = core.entry(for: key), !core.isUndurable(entry) { result.append(KeyedEntry(key: key, entry: entry)) }
            }
            for key in changed {
                if let entry = core.entry(for: key), !core.isUndurable(entry) { result.append(KeyedEntry(key: key, entry: entry)) }
            }
            return Self.sortedByVersion(result)
        }
    }

    /// Removes tombstones, expired values (after reporting any newly due: `expireDue`), and owned
    /// values of members removed for good, whose version is older than `horizon`; returns how
    /// many. The
    /// replication engine calls it only with a bound that every member of the cluster is known
    /// to cover (docs/consistency.md, "Deletes and tombstones"). From then on a tombstone below
    /// `horizon` that arrives again for a key this node no longer holds is not stored (a peer
    /// that has not collected it yet sends it back; it collects it within one interval). With a
    /// store, the tombstones are deleted from it too (in the next group commit; this call does
    /// not wait for the disk).
    ///
    /// The table is swept in slices of `collectionSliceRecords` records, the state lock let go
    /// between them, so decisions and peers' batches wait for one slice, not for a scan of the
    /// whole state (docs/benchmarks.md, "collection"). A record written during the sweep may
    /// wait for the next one.
    @discardableResult
    package func collectTombstones(olderThan horizon: HLCTimestamp) -> Int {
        // Values that expired since the last sweep count too: they are reported first (only a
        // reported expiry is collected).
        expireDue()
        var cursor = EntryTable.SweepCursor.start
        var total = 0
        while !cursor.isFinished {
            let admitted = admitToStorage()
            total += core.withLock { core -> Int in
                if core.collectedBelow < horizon { core.collectedBelow = horizon }
                if cursor == .start, !core.table.mayHoldAbsentForGood(isRemovedOwner: core.isRemovedOwner) {
                    _ = appendToStorage(admitted, [], clock: core.clock.last)
                    cursor = EntryTable.SweepCursor.finished
                    return 0
                }
                let removed = core.table.collectAbsent(below: horizon, isRemovedOwner: core.isRemovedOwner,
                                                       from: &cursor, budget: Self.collectionSliceRecords)
                _ = appendToStorage(admitted, removed.map { .remove($0.key, upTo: $0.version) }, clock: core.clock.last)
                return removed.count
            }
        }
        return total
    }

    /// Records one collection slice examines under the state lock (about a millisecond's work
    /// here; `make bench` prints the longest hold at a million keys).
    static let collectionSliceRecords = 16_384

    /// Values one batch of `expireDue` reports under the state lock (each is popped from the
    /// schedule, looked up and announced: about a microsecond apiece here).
    static let expirySliceValues = 1_024

    /// Records one slice of `entriesReadInSlices` reads under the state lock: fewer than a
    /// collection slice, since each builds its key and entry (about a millisecond here).
    static let readSliceRecords = 8_192

    // MARK: expiry

    /// Tells observers and commit listeners (origin `.expired`) of every value
    /// whose expiry instant this node's `nowMilliseconds` has reached since the last call: once
    /// per value, on this node only (nothing is written or replicated: every replica does the
    /// same on its own clock). Returns how many. The replication engine calls it on every tick;
    /// a node without one runs it on a timer of its own every `expiryCheckIntervalMilliseconds`.
    @discardableResult
    package func expireDue() -> Int {
        // One instant for the whole call, reported `expirySliceValues` at a time with the
        // lock let go between batches: a million keys due at once do not stall decisions.
        var instant: UInt64?
        var total = 0
        while true {
            let (count, more) = core.withLock { core -> (Int, Bool) in
                let now = instant ?? hybridNow(core)
                instant = now
                let expired = core.table.expire(dueAtMilliseconds: now, limit: Self.expirySliceValues)
                if !expired.isEmpty { reportExpired(core, expired) }
                return (expired.count, (core.table.nextExpiryMilliseconds ?? .max) <= now)
            }
            total += count
            if count > 0 { delivery.drain() }
            if !more { return total }
        }
    }

    /// Call with the lock held: observers hear `expired` keys as absent, and listeners get one
    /// `.expired` delta per key (version: the expired entry's).
    private func reportExpired(_ core: NodeCore, _ expired: [(key: StateKey, entry: Entry)]) {
        for item in expired { announce(core, item.key, entry: item.entry, present: false, origin: .expired, now: 0) }
    }

    /// Call with the lock held: `key`'s stored `entry` started (`present`) or stopped reading
    /// here without a write (it expired, its owner came or went). Observers hear the value or
    /// its absence; listeners get one delta of `origin` with the entry's version.
    private func announce(_ core: NodeCore, _ key: StateKey, entry: Entry, present: Bool, origin: CommittedDelta.Origin, now: UInt64) {
        notifyObservers(core, key: key, entry: present ? entry : nil, decoded: nil, now: now)
        guard core.hasCommitListeners else { return }
        let write = present ? Delta.Write(key: key, entry: entry) : Delta.Write(key: key, value: nil)
        let committed = CommittedDelta(delta: Delta(version: entry.version, writes: [write]), origin: origin)
        for listener in core.commitCalls { listener(committed) }
    }

    /// The replication engine's view of the cluster: `present` are the members linked to this
    /// node now (this node is added), `removed` the members removed for good (`forgotten`: the
    /// removals the engine keeps by id hash only). Owned values
    /// (`Entry.ownedByWriter`) of any other writer read as absent from now on; observers and
    /// listeners (`.ownerGone` / `.ownerBack`) hear of every key that disappears or returns,
    /// once per change. Without a call, every owner counts as present.
    package func setPresentOwners(_ present: Set<String>, removed: Set<String>,
                                  forgotten: ForgottenMembers = ForgottenMembers(capacity: 0)) {
        let changed = core.withLock { core -> Bool in
            let (appeared, disappeared) = core.setOwners(present: present, removed: removed, forgotten: forgotten)
            guard !appeared.isEmpty || !disappeared.isEmpty else { return false }
            let now = hybridNow(core)
            for (owners, origin) in [(disappeared, CommittedDelta.Origin.ownerGone), (appeared, .ownerBack)] where !owners.isEmpty {
                let entries = core.table.ownedEntries(of: owners).filter { !$0.entry.isExpired(atMilliseconds: now) }
                guard !entries.isEmpty else { continue }
                logger.info(origin == .ownerGone ? "owned keys of absent members read as absent" : "owned keys of returning members read again",
                            metadata: ["members": "\(owners.sorted())", "keys": "\(entries.count)"])
                for item in entries { announce(core, item.key, entry: item.entry, present: origin == .ownerBack, origin: origin, now: now) }
            }
            return true
        }
        if changed { delivery.drain() }
    }

    /// Makes this node run `expireDue` on its own timer (a node without a replication engine);
    /// idempotent. A replication engine attached later stops it (`expiryDrivenExternally`).
    private func startExpiryTimerIfNeeded() {
        guard !expiryDrivenExternally.load(ordering: .acquiring), !expiryTimerRunning.load(ordering: .acquiring) else { return }
        expiryTimer.withLock { timer in
            guard timer == nil, !expiryDrivenExternally.load(ordering: .acquiring) else { return }
            expiryTimerRunning.store(true, ordering: .releasing)
            timer = ReplicatorTimer(intervalMilliseconds: configuration.expiryCheckIntervalMilliseconds) { [weak self] in
                self?.expireDue()
            }
        }
    }

    /// The replication engine runs `expireDue` on its own ticks from now on (the simulator's
    /// ticks are virtual time, so expiry stays deterministic there): the node's own timer stops.
    package func driveExpiryExternally() {
        expiryDrivenExternally.store(true, ordering: .releasing)
        expiryTimer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }

    // MARK: durability

    /// Returns once every decision committed and every delta applied before the call is on
    /// disk. Without a data directory, returns at once. Throws when the store failed or is
    /// closed.
    public func flush() throws(StorageError) {
        try storage.flush()
    }

    /// Flushes and closes the store, releasing the data directory for another `Node`. After
    /// this, decisions are refused (`.aborted`) and remote deltas are applied in memory only.
    /// Idempotent; without a data directory, does nothing. Also done when the node is
    /// deinitialized.
    public func close() throws(StorageError) {
        try storage.close()
    }

    deinit {
        expiryTimer.withLock { $0?.cancel() }
        do {
            try storage.close()
        } catch {
            logger.error("closing the store: \(error)")
        }
    }
}

/// Counts and the digest of a node's state at one moment.
public struct StateSummary: Hashable, Sendable {
    /// Stored keys: values, tombstones, expired and hidden owned values alike.
    public let entryCount: Int
    /// Stored tombstones (deleted keys not yet collected).
    public let tombstoneCount: Int
    /// Stored values that expired (reported by `Node.expireDue`) and await collection; they
    /// read as absent. `liveCount` keys hold a value.
    public let expiredCount: Int
    /// Stored values that will expire (or are past due and not yet reported).
    public let expiringCount: Int
    /// Stored owned values whose owner is not a live member here: they read as absent.
    public let hiddenOwnedCount: Int
    /// Keys that hold a value a reader sees (give or take values past due and not yet reported).
    public var liveCount: Int { entryCount - tombstoneCount - expiredCount - hiddenOwnedCount }
    /// The root of the digest tree: equal on two nodes iff their entries are equal.
    public let digest: UInt64
    /// The greatest version stored, nil for an empty state.
    public let highestVersion: Version?
    /// Decisions this node committed since it started.
    public let committedDecisions: UInt64
    /// Peers' deltas this node applied since it started.
    public let appliedRemoteDeltas: UInt64
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
