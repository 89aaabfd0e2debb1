import Logging
import Synchronization

/// Reading a node's state: typed values, entries, slices for dumps and scans, and its summary.
extension Node {
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
            core.withTransaction { core, transaction in
                let generation = transaction.begin(atMilliseconds: hybridNow(core))
                defer { transaction.end() }
                return body(StorageReader(transaction: transaction, generation: generation))
            }
        }
    }

    /// Every element of `collection` that holds a value now, in one snapshot (see
    /// `CollectionSnapshot`). O(n log n) in the collection's size, not the store's.
    public func elements<C: CollectionState>(_ collection: C.Type) -> CollectionSnapshot<C> {
        read { $0.elements(collection) }
    }

    /// The elements of `set` now.
    public func read<S: SetState>(_ set: S.Type) -> Set<S.Element> {
        read { $0(set) }
    }

    /// The total of `counter` now.
    public func read<C: CounterState>(_ counter: C.Type) -> Int64 {
        read { $0(counter) }
    }

    /// The members of `sortedSet` now, by score, then by the member's JSON bytes.
    public func read<Z: SortedSetState>(_ sortedSet: Z.Type) -> [ScoredMember<Z.Member>] {
        read { $0(sortedSet) }
    }

    /// The score of `member` in `sortedSet` now, nil when it is not in it.
    public func read<Z: SortedSetState>(_ sortedSet: Z.Type, scoreOf member: Z.Member) -> Double? {
        read { $0(sortedSet, scoreOf: member) }
    }

    /// One counter slot as `counterSlots` reads it: whose (node and process), its running sums,
    /// and when it expires (its counter's lifetime), nil for never.
    package typealias CounterSlotReading = (node: String, incarnation: UInt64, increments: UInt64, decrements: UInt64, expiresAtMilliseconds: UInt64?)

    /// The slots of `counter` this node holds, in element order: the node and process
    /// (incarnation) each belongs to, its running sums and its expiry; slots whose value is not a pair of
    /// sums are left out. For status pages, syncnode and tests.
    package func counterSlots<C: CounterState>(_ counter: C.Type) -> [CounterSlotReading] {
        counterSlots(named: C.name)
    }

    /// `counterSlots(_:)` of the counter named `name` (a front end's, with no Swift type).
    package func counterSlots(named name: String) -> [CounterSlotReading] {
        core.withLock { core in
            let now = hybridNow(core)
            return core.elements(ofCollectionNamed: name, inGroupOf: CounterSlot.tag)
                .filter { CounterSlot.isSlot($0.key) && core.isVisible($0.entry, now: now) }
                .sorted { $0.key < $1.key }
                .compactMap { item in
                    guard let owner = CounterSlot.owner(of: item.key), let value = item.entry.packedValue,
                          let sums = CounterSlot.sums(value) else { return nil }
                    return (owner.node, owner.incarnation, sums.increments, sums.decrements, item.entry.expiresAtMilliseconds)
                }
        }
    }

    /// The live dots of `member` (its JSON) in the set named `name` this node holds, in key
    /// order: one per insert no remove has seen (docs/design/0002-sets.md). For syncnode's
    /// DECIDE.GET and tests.
    package func setDots(named name: String, member: [UInt8]) -> [StateKey] {
        core.withLock { core in
            let now = hybridNow(core)
            return core.elements(ofCollectionNamed: name, inGroupOf: SetDot.group(of: member))
                .filter { $0.entry.packedValue != nil && core.isVisible($0.entry, now: now) }
                .map(\.key).sorted()
        }
    }

    /// This process's incarnation: the part of its counter slots' and set dots' ids that tells
    /// it from this node id's earlier processes.
    package var incarnation: UInt64 { core.withLock { $0.incarnation } }

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
    package func value(ofAtomicNamed name: UnsafeRawBufferPointer) -> PackedBytes?? {
        core.withLock { core in
            // The physical clock is read only for a value that expires
            // (`EntryTable.value(ofAtomicNamed:clock:)`); the hybrid clock's part before the
            // lookup, which holds the table, so that asking for the instant does not reach
            // back into the core meanwhile (an overlapping access).
            let lastPhysical = core.clock.last.physicalMilliseconds
            return core.value(ofAtomicNamed: name) {
                Self.hybridNow(physical: configuration.clock.nowMilliseconds(), lastPhysical: lastPhysical)
            }
        }
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
    func hybridNow(_ core: NodeCore, physical: UInt64? = nil) -> UInt64 {
        Self.hybridNow(physical: physical ?? configuration.clock.nowMilliseconds(), lastPhysical: core.clock.last.physicalMilliseconds)
    }

    /// The physical clock's `physical`, or the hybrid clock's last physical part when that is
    /// ahead, capped at what a timestamp holds.
    static func hybridNow(physical: UInt64, lastPhysical: UInt64) -> UInt64 {
        min(max(physical, lastPhysical), HLCTimestamp.maxPhysicalMilliseconds)
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
        // Under the lock a slice is read into `slice`, memory already allocated and touched by
        // the slices before it; growing `found` (a large allocation can make the allocator tidy
        // its free lists first) and touching its fresh pages (each a page fault) happen outside,
        // where no decision waits for them (docs/design/0017-table-wide-chores.md, "The
        // technique").
        var found: [KeyedEntry] = []
        var slice: [KeyedEntry] = []
        slice.reserveCapacity(Self.readSliceRecords)
        var cursor = EntryTable.SweepCursor.start
        while !cursor.isFinished {
            core.withLock { core in core.appendEntries(from: &cursor, budget: Self.readSliceRecords, into: &slice) }
            if found.isEmpty { found.reserveCapacity(core.withLock { $0.table.count } + Self.readSliceRecords) }
            found.append(contentsOf: slice)
            slice.removeAll(keepingCapacity: true)
        }
        // The walk goes downwards; turned around, the entries are in the table's order, which
        // is often close to key order (the sort then has little to do).
        found.reverse()
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

    /// Records one slice of `entriesReadInSlices` reads under the state lock: fewer than a
    /// collection slice, since each builds its key and entry (about 0.12 ms here at a million
    /// keys; 8,192 took 0.7 ms, more than four times as long, as the slice no longer fit in the
    /// core's cache).
    static let readSliceRecords = 2_048
}
