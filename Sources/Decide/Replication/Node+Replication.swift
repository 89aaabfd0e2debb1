import Logging
import Synchronization

/// The node's side of the replication seam: the commits it hands on, and the deltas, catch-up
/// entries, digests and walks the engine (`Replicator`) applies and reads through it.
extension Node {
    /// Every delta this node commits from now on, the writes of every remote delta applied
    /// through `apply(_:)` that changed a key here (a write that lost to a newer entry is left
    /// out), and the entries a catch-up changed (origin `.catchUp`, one delta per version), in
    /// commit order, with a bounded buffer (see `DeltaStream`). A reader that must miss nothing
    /// across disconnects reads `changes(from:filter:)` instead.
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

    /// Calls `listener` with every delta committed or applied here, under the node's lock and
    /// in commit order. It must only hand the delta on (e.g. into a bounded queue).
    package func addCommitListener(_ listener: @escaping @Sendable (CommittedDelta) -> Void) -> UInt64 {
        core.withLock { core in
            let id = core.makeID()
            core.commitListeners[id] = listener
            return id
        }
    }

    /// Hands every decision committed here from now on to `sender` (nil: to nobody): encoded
    /// under the lock, sent once as durable as the node promises (`LocalCommitSender`). Held
    /// strongly; one at a time.
    func setLocalCommitSender(_ sender: (any LocalCommitSender)?) {
        core.withLock { $0.localCommitSender = sender }
    }

    /// `setLocalCommitSender(nil)` if `sender` is the one set (a later engine's stays).
    func unhookLocalCommitSender(_ sender: any LocalCommitSender) {
        core.withLock { core in
            if let current = core.localCommitSender, current === sender { core.localCommitSender = nil }
        }
    }

    /// Whether applies must reach the disk before they are acknowledged (strict durability).
    package var acknowledgesAfterDisk: Bool { waitsForDisk }

    /// Why this node's store no longer takes writes (it failed or closed), nil while it does or
    /// when there is none: such a node acknowledges nothing (docs/consistency.md, "Writes
    /// acknowledged by replicas").
    package var storeFailure: StorageError? { persists ? store.failure : nil }

    /// The timestamp (raw) of this node's newest committed decision since it started, 0 for
    /// none. Read under the node's lock, so every decision committed before the read is at or
    /// below it and every one after is above it.
    package var newestOwnDecisionTimestamp: UInt64 { core.withLock { $0.newestOwnDecision } }

    package func removeCommitListener(_ id: UInt64) {
        core.withLock { core in
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
        if waitingForDisk && waitsForDisk && outcome.ticket > 0 { _ = store.waitUntilDurable(outcome.ticket) }
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
        let deltas = Array(deltas)
        return applyBatch(count: deltas.count, skip: { _ in false }, timestamp: { deltas[$0].version.timestamp }) { core, index, merge in
            let delta = deltas[index]
            // A delta of several writes (a peer's batch of SETs) has their misses overlap
            // (`EntryTable.prefetch`). A run of one-write deltas is not gathered: over
            // 10,000 keys that cost `make bench`'s replication row 5-7 % and gained nothing
            // (docs/design/0010-prefetch.md, "Alternatives tried and not kept").
            core.prefetch(count: delta.writes.count) { delta.writes[$0].key.stableHash }
            var changed = 0
            for write in delta.writes where merge(write.entry(at: delta.version), write.key) { changed += 1 }
            return changed
        }
    }

    /// `apply(deltas:)` for peers' deltas held as they arrived (`ReceivedDeltas`), read where
    /// they lie, without a `Delta` built for each (one is built only for commit listeners); the
    /// ones `skip` names (by position) are left out, and a refusal names its delta by position.
    /// The node ids and names of `recent` are reused where the bytes are theirs.
    ///
    /// Each write's key hash was worked out as the delta arrived (`ReceivedDeltas.read`), so
    /// the next delta's first index line is asked for while this one is applied
    /// (`NodeCore.prefetchHomeCell`; docs/design/0010-prefetch.md, "A single write hints its
    /// lines early").
    package func apply(received: ReceivedDeltas, recent: inout RecentWireStrings, skip: (Int) -> Bool) -> DeltaBatchOutcome {
        applyBatch(count: received.count, skip: skip, timestamp: { received.timestamp(ofDelta: $0) }) { core, index, merge in
            var version: Version?
            var changed = 0
            let writeCount = received.writeCount(ofDelta: index)
            if writeCount > 1 {
                // As in `apply(deltas:)`: the misses of a delta's writes overlap.
                core.prefetch(count: writeCount) { received.keyHash(ofWrite: $0, ofDelta: index) }
            }
            if index + 1 < received.count, received.writeCount(ofDelta: index + 1) > 0 {
                core.prefetchHomeCell(of: received.keyHash(ofWrite: 0, ofDelta: index + 1))
            }
            received.read(index) { node in
                version = recent.version(timestamp: received.timestamp(ofDelta: index), node: node)
            } write: { name, element, value, keyHash in
                let known = recent.name(utf8: name)
                let key = StateKey(name: known.text, packedElement: PackedBytes(element), stableHash: keyHash)
                let entry = Entry(version: version!, packedValue: value.map { PackedBytes($0.bytes) }, expiresAtMilliseconds: value?.expiresAt,
                                  ownedByWriter: value?.owned ?? false)
                if merge(entry, key) { changed += 1 }
            }
            return changed
        }
    }

    /// What both forms of applying peers' deltas share: under one hold of the lock, for each
    /// delta `skip` does not name, the clock merges its `timestamp` (or refuses it, and then
    /// nothing of it is applied), `mergeWrites` merges its writes through the closure it is
    /// given (which answers whether the key changed) and says how many changed, and commit
    /// listeners get the writes that changed, when any did; one store append for all.
    @inline(__always)
    private func applyBatch(count: Int, skip: (Int) -> Bool, timestamp: (Int) -> HLCTimestamp,
                            mergeWrites: (NodeCore, Int, (consuming Entry, StateKey) -> Bool) -> Int) -> DeltaBatchOutcome {
        var admission = StorageAdmission.underTheLock
        while true {
            // Ahead of this node's own deciding threads: every peer's view of this node waits on
            // it (docs/design/0005-node-lock.md, "The technique").
            let outcome = core.withUrgentLock { core -> DeltaBatchOutcome in
                var outcome = DeltaBatchOutcome()
                guard let admitted = admitHoldingLock(&admission) else { return outcome }
                var stored: [StoreChange] = []
                let physical = configuration.clock.nowMilliseconds()
                var now = hybridNow(core, physical: physical)
                for index in 0..<count where !skip(index) {
                    let stamp = timestamp(index)
                    do throws(ClockError) {
                        try core.clock.merge(remote: stamp, physicalMilliseconds: physical)
                    } catch {
                        outcome.refusals.append((index, error))
                        continue
                    }
                    now = max(now, min(stamp.physicalMilliseconds, HLCTimestamp.maxPhysicalMilliseconds))
                    // The node's state lent, not retained and released around each delta and
                    // each write's merge (two atomics each): the lock's holder keeps it alive.
                    let lent = Unmanaged.passUnretained(core)
                    // Listeners (the change feed among them) hear only the writes that changed
                    // this node: one that lost to a newer entry here is no change, and a reader
                    // mirroring the node would go back to an older value with it.
                    let listening = core.publishing
                    var won: [Delta.Write] = []
                    var version: Version?
                    let changed = lent.lend { core in
                        mergeWrites(core, index) { entry, key in
                            guard listening else {
                                return lent.lend { core in mergeReceived(core, entry, for: key, now: now, admitted: admitted, into: &stored) }
                            }
                            let write = Delta.Write(key: key, entry: entry)
                            version = entry.version
                            let merged = lent.lend { core in mergeReceived(core, entry, for: key, now: now, admitted: admitted, into: &stored) }
                            if merged { won.append(write) }
                            return merged
                        }
                    }
                    core.appliedRemoteDeltas += 1
                    if changed > 0 && listening, let version {
                        core.publish(CommittedDelta(delta: Delta(version: version, writes: won), origin: .remote))
                    }
                    outcome.changed += changed
                }
                outcome.ticket = appendToStorage(admitted, stored, clock: core.clock.last)
                return outcome
            }
            if mustApplyAgain(&admission) { continue }
            return outcome
        }
    }

    /// Call with the lock held: what a peer's delta and a catch-up do with each entry they
    /// receive. Merges `entry` into `key` unless collection has already removed that entry for
    /// good; if the table changed, records the change, tells the key's observers and, when the
    /// store `admitted` the batch, queues the entry in `stored`. Returns whether it changed.
    @inline(__always)
    func mergeReceived(_ core: NodeCore, _ entry: consuming Entry, for key: StateKey, now: UInt64, admitted: Bool,
                       into stored: inout [StoreChange]) -> Bool {
        guard !core.isCollected(entry, for: key, now: now) else { return false }
        core.compoundPresence.note(key)
        guard admitted || core.observing else {
            // Nothing reads the entry after the merge: moved into the table, not copied (a
            // retain and a release of its value, a write).
            guard core.table.merge(entry, for: key).changed else { return false }
            core.recordChange(key)
            core.noteMergedCompound(key)
            return true
        }
        guard core.table.merge(copy entry, for: key).changed else { return false }
        core.recordChange(key)
        core.noteMergedCompound(key)
        notifyObservers(core, key: key, entry: entry, decoded: nil, now: now)
        if admitted { stored.append(.upsert(key, entry)) }
        return true
    }

    /// Waits until the store holds the commit of `ticket` (from `apply(_:waitingForDisk:)` or
    /// `applyCatchUp`); nil when it does, the store's error when it never will.
    package func waitUntilDurable(_ ticket: UInt64) -> StorageError? {
        guard ticket > 0 else { return nil }
        return store.waitUntilDurable(ticket)
    }

    /// After an apply's lock: true when the store's queue was full, so nothing was applied and
    /// the apply runs again, its slot now reserved outside the lock (or the store refusing, and
    /// then in memory only); otherwise wakes the store's writer if asked and delivers.
    func mustApplyAgain(_ admission: inout StorageAdmission) -> Bool {
        if waitedForRoom(&admission) { return true }
        if persists { store.wakeWriterIfAsked() }
        delivery.drain()
        return false
    }

    /// After a commit's lock: true when the store's queue was full (so nothing was done), once
    /// a slot is reserved outside the lock, or the store refused (then in memory only).
    func waitedForRoom(_ admission: inout StorageAdmission) -> Bool {
        guard case .waitForRoom = admission else { return false }
        admission = .admitted(admitToStorage())
        return true
    }

    /// Where an apply's store slot comes from: reserved under the apply's own lock (the first
    /// try), or already decided before it (the second try, after the queue was full).
    enum StorageAdmission {
        case underTheLock
        /// The queue was full: nothing was applied; wait for room without the lock, try again.
        case waitForRoom
        case admitted(Bool)
    }

    /// Call with the lock held: whether the apply's changes go to the store (a slot reserved),
    /// or nil when the store's queue is full, with `admission` set to wait for room. A store
    /// that refuses writes (failed or closed) means applying in memory only.
    @inline(__always)
    func admitHoldingLock(_ admission: inout StorageAdmission) -> Bool? {
        switch admission {
        case .admitted(let admitted): return admitted
        case .waitForRoom: preconditionFailure("an apply tried again without waiting for room")
        case .underTheLock:
            guard persists else { return false }
            switch store.admitHoldingExclusion() {
            case .admitted: return true
            case .refused(let error):
                logger.debug("applying in memory only: \(error)")
                return false
            case .full:
                admission = .waitForRoom
                return nil
            }
        }
    }

    /// `store.admit()` before the lock (the store takes the lock for the admission and waits
    /// outside it): false without a store, or when the store refuses writes (failed or closed)
    /// — remote entries are then applied in memory only (peers hold them, and a restarted node
    /// catches up).
    func admitToStorage() -> Bool {
        guard persists else { return false }
        if let error = store.admit() {
            logger.debug("applying in memory only: \(error)")
            return false
        }
        return true
    }

    /// Call with the lock held, the store having `admitted` the commit (`admitHoldingLock` or
    /// `admitToStorage`): queues `changes` (or gives the slot back when there are none);
    /// returns the ticket, 0 for none. After the lock, the caller calls
    /// `store.wakeWriterIfAsked()`.
    func appendToStorage(_ admitted: Bool, _ changes: [StoreChange], clock: HLCTimestamp) -> UInt64 {
        guard admitted else { return 0 }
        guard !changes.isEmpty else {
            store.cancelAdmission()
            return 0
        }
        return store.append(changeCount: changes.count, clock: clock) { changes[$0] }
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
        var admission = StorageAdmission.underTheLock
        while true {
            outcome = core.withLock { core -> CatchUpOutcome in
                var outcome = CatchUpOutcome()
                guard let admitted = admitHoldingLock(&admission) else { return outcome }
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
                var stored: [StoreChange] = []
                var applied: [KeyedEntry] = []
                for item in entries where refused.isEmpty || !refused.contains(item.entry.version) {
                    guard mergeReceived(core, item.entry, for: item.key, now: now, admitted: admitted, into: &stored) else { continue }
                    outcome.changed += 1
                    if core.publishing { applied.append(item) }
                }
                // Listeners (e.g. `deltas()` behind `syncnode watch`) hear of catch-up changes too,
                // one delta per version, oldest first.
                if !applied.isEmpty {
                    let byVersion = Dictionary(grouping: applied, by: \.entry.version)
                    for version in byVersion.keys.sorted() {
                        let writes = byVersion[version]!.map { Delta.Write(key: $0.key, entry: $0.entry) }
                        core.publish(CommittedDelta(delta: Delta(version: version, writes: writes), origin: .catchUp))
                    }
                }
                outcome.ticket = appendToStorage(admitted, stored, clock: core.clock.last)
                return outcome
            }
            if mustApplyAgain(&admission) { continue }
            return outcome
        }
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
    static func contains(_ references: ArraySlice<ReplicationMessage.KeyReference>, _ hash: UInt64) -> Bool {
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
    /// whole state (docs/design/0017-table-wide-chores.md, "The technique"). A record written
    /// during the sweep may wait for the next one.
    @discardableResult
    package func collectTombstones(olderThan horizon: HLCTimestamp) -> Int {
        // Values that expired since the last sweep count too: they are reported first (only a
        // reported expiry is collected).
        expireDue()
        var cursor = EntryTable.SweepCursor.start
        var total = 0
        var admission = StorageAdmission.underTheLock
        while !cursor.isFinished {
            // Politely: a decision queued behind one slice goes before the next. Each slice is
            // one commit, its slot reserved under the same hold of the lock.
            total += core.withPoliteLock { core -> Int in
                guard let admitted = admitHoldingLock(&admission) else { return 0 }
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
            if waitedForRoom(&admission) { continue }
            admission = .underTheLock
            if persists { store.wakeWriterIfAsked() }
        }
        return total
    }

    /// Records one collection slice examines under the state lock (about a millisecond's work
    /// here; `make bench` prints the longest hold at a million keys).
    static let collectionSliceRecords = 16_384
}
