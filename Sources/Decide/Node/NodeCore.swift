import CDecideHints
import DecideCore
import Logging

/// Everything a node guards with its one lock: the entry table, the clock, the key caches,
/// the observers and the commit listeners. Only ever touched while `Node.core` is locked.
/// `@unchecked Sendable`: only ever touched inside `Node.core.withLock`.
final class NodeCore: @unchecked Sendable {
    /// The fields every decision touches, kept `InPlace`: no dynamic exclusivity check per
    /// access in release builds (about 80 instructions each, seven of them a decision before).
    private struct Hot {
        var table: EntryTable
        var decoded: DecodedCache
        var clock: HybridLogicalClock
        var changes: ChangeLog
        var committedDecisions: UInt64 = 0
        /// The timestamp (raw) of this node's newest committed decision since it started (0:
        /// none): what `WAIT` waits for.
        var newestOwnDecision: UInt64 = 0
        var observing = false
        var listening = false
        /// Whether a `LocalCommitSender` was set (its load is skipped when not).
        var sending = false
        /// Whether the node keeps a change feed (`feed` is set).
        var feeding = false
    }
    /// `commitListeners` as the array a commit calls (`commitCalls`), and the replication
    /// engine's `LocalCommitSender`.
    /// Apart from `Hot`: inside it, one-write decisions that never read them measured about 5 %
    /// slower, with no more instructions (docs/design/0008-in-place-access.md, "Alternatives
    /// tried and not kept").
    private struct Calls {
        var commit: [@Sendable (CommittedDelta) -> Void] = []
        /// Strong: the engine's is a `ReplicatorHandle`, which does not own the engine (a weak
        /// reference gave the engine a side table, and every commit a weak load).
        var sender: (any LocalCommitSender)?
    }
    private let calls = InPlace(Calls())
    /// The node's change feed, kept `InPlace`: every commit appends to it.
    private let feedStorage = InPlace<ChangeFeedLog?>(nil)
    private let hot: InPlace<Hot>
    /// The node's one transaction, reused by every decision and snapshot read, and an
    /// unretained reference to it (`withTransaction`).
    private let transactionOwner: Transaction
    private let transactionReference: Unmanaged<Transaction>

    var table: EntryTable {
        _read { yield hot.value.table }
        _modify { yield &hot.value.table }
    }
    /// Values decoded from the table's bytes, for typed reads (bounded; see `DecodedCache`).
    var decoded: DecodedCache {
        _read { yield hot.value.decoded }
        _modify { yield &hot.value.decoded }
    }
    var clock: HybridLogicalClock {
        _read { yield hot.value.clock }
        _modify { yield &hot.value.clock }
    }
    /// Touched on every write: kept `InPlace` (no exclusivity check per access).
    private let atomicKeys = InPlace(TypeTable<StateKey>())
    /// A collection's wire name and its part of every key's hash, found once per type.
    private struct CollectionName {
        let name: String
        let hash: StableHash
    }
    private let collectionNames = InPlace(TypeTable<CollectionName>())
    var observers: [StateKey: [UInt64: Observer]] = [:] {
        didSet { hot.value.observing = !observers.isEmpty || !collectionObservers.isEmpty }
    }
    /// Observers of whole collections and indexes, by state name: told of every change to any
    /// element of that name.
    var collectionObservers: [String: [UInt64: Observer]] = [:] {
        didSet { hot.value.observing = !observers.isEmpty || !collectionObservers.isEmpty }
    }
    /// Whether any observer of either kind is registered: one test on a decision's path.
    var observing: Bool { hot.value.observing }
    var commitListeners: [UInt64: @Sendable (CommittedDelta) -> Void] = [:] {
        didSet { listenersChanged() }
    }
    /// Whether any commit listener is registered: one test on a decision's path.
    var listening: Bool { hot.value.listening }
    /// `commitListeners` in the order they were added, as an array kept `InPlace`: what every
    /// commit calls, without the exclusivity check of a class's stored
    /// dictionary and its iteration (about 200 instructions a replicated write).
    var commitCalls: [@Sendable (CommittedDelta) -> Void] { calls.value.commit }
    var hasCommitListeners: Bool { !calls.value.commit.isEmpty }
    /// The replication engine's way of sending this node's commits (`Node.setLocalCommitSender`).
    var localCommitSender: (any LocalCommitSender)? {
        get { hot.value.sending ? calls.value.sender : nil }
        set {
            calls.value.sender = newValue
            hot.value.sending = newValue != nil
        }
    }

    /// Calls `body` with the replication engine's sender, lent where it lies: not retained and
    /// released around the call (two atomics a commit). Not at all when none is set.
    @inline(__always)
    func lendLocalCommitSender(_ body: (borrowing (any LocalCommitSender)?) -> Void) {
        guard hot.value.sending else { return }
        calls.withAddress { calls in
            withUnsafeMutablePointer(to: &calls.pointee.sender) { $0.lendPointee(body) }
        }
    }

    /// The change feed (`Node.changes(from:filter:)`), nil when the node keeps none.
    var feed: ChangeFeedLog? {
        _read { yield feedStorage.value }
        _modify {
            yield &feedStorage.value
            hot.value.feeding = feedStorage.value != nil
        }
    }
    /// Whether the node keeps a change feed: one test on a commit's path.
    var feeding: Bool { hot.value.feeding }

    /// Hands a change that did not come from a local decision (a peer's writes that changed
    /// this node, a catch-up's, an expiry, an owner's coming or going) to the change feed and
    /// every commit listener, in that order. Call with the lock held, in commit order.
    func publish(_ committed: CommittedDelta) {
        if feeding { feedStorage.value!.append(committed.delta, origin: committed.origin) }
        for listener in commitCalls { listener(committed) }
    }

    /// Hands a local decision's writes, committed at `version`, to the change feed: encoded
    /// from the pending writes into the feed's memory, no `Delta` built. Call with the lock held.
    func feedLocal(version: Version, writes: borrowing PendingWrites) {
        feedStorage.withAddress { feed in
            writes.withDeltaEncoding(version: version, codec: feed.pointee!.codec) { feed.pointee!.append(encodedDelta: $0, origin: .local) }
        }
    }

    /// Whether `publish` has anyone to tell: a change is built only then.
    var publishing: Bool { feeding || hasCommitListeners }

    private func listenersChanged() {
        hot.value.listening = !commitListeners.isEmpty
        calls.value.commit = commitListeners.keys.sorted().map { commitListeners[$0]! }
    }
    /// The channels behind `Node.deltas()`, by their listener id, so shutdown can end them.
    var deltaChannels: [UInt64: DeltaStream.Channel] = [:]
    var nextID: UInt64 = 0
    var committedDecisions: UInt64 {
        get { hot.value.committedDecisions }
        set { hot.value.committedDecisions = newValue }
    }
    var newestOwnDecision: UInt64 {
        get { hot.value.newestOwnDecision }
        set { hot.value.newestOwnDecision = newValue }
    }
    /// The keys of the newest changes, and the count of all of them.
    private var changes: ChangeLog {
        _read { yield hot.value.changes }
        _modify { yield &hot.value.changes }
    }
    var changeSequence: UInt64 { changes.sequence }
    var appliedRemoteDeltas: UInt64 = 0
    /// Tombstones below this were collected here because every member holds them: one that
    /// arrives again (from a peer that has not collected it yet) for a key this node no longer
    /// holds is not stored again.
    var collectedBelow = HLCTimestamp.zero
    var droppedCollectedTombstones: UInt64 = 0
    /// Strict durability: the (raw) timestamps of this node's own decisions that are in the
    /// table but not yet on disk, or never will be (the store failed). Replication must not hand
    /// them on: the decision could still come back `.aborted`.
    var undurable = Set<UInt64>()
    let nodeID: String
    /// This process's incarnation: part of the id of its slot of every counter and of its every
    /// set dot, so that a process never builds on a slot, or reuses a dot, another process of
    /// this node id may have written (docs/design/0001-counters.md). Chosen by a clock tick at
    /// start.
    var incarnation: UInt64 = 0
    /// The stable hashes of the slot keys of `incarnation` this process has written (eight
    /// bytes a counter, not its name: a key's hash is at hand where the slot is read).
    var counterSlotsWritten = Set<UInt64>()
    /// The sequence number of this process's last set insert (`SetDot`): with the incarnation,
    /// it makes every insert's dot unique.
    var setDotSequence: UInt64 = 0
    /// Counters whose lifetime marker a peer changed, or whose own old slots arrived while they
    /// have one, since the last `Node.followLifetimes`: this node gives its own slots the
    /// marker's instant (docs/design/0004-collection-lifetimes.md, "Counters"). Names the table
    /// holds, each once: bounded by the table.
    private(set) var lifetimesToFollow = Set<String>()
    /// Every counter with a lifetime marker is followed once at the next `Node.followLifetimes`:
    /// set for a store loaded from disk (a process that stopped between a marker's merge and its
    /// follow) and when a member is removed (`setOwners`).
    var followsEveryLifetime = false
    /// This node's id, UTF-8, for `CounterSlot.isSlot(_:ofNode:)`.
    private(set) lazy var nodeIDBytes = Array(nodeID.utf8)

    /// Call after a peer's write of compound key `key` changed the table: notes a counter whose
    /// lifetime this node must follow (`lifetimesToFollow`). O(1) for every other key.
    @inline(__always)
    func noteMergedCompound(_ key: StateKey) {
        guard CompoundPresence.isCompound(key) else { return }
        if CollectionLifetime.isMarker(key) {
            if Self.holdsCounterSlots(storedKinds(ofCollectionNamed: key.name)) { lifetimesToFollow.insert(key.name) }
        } else if CounterSlot.isSlot(key, ofNode: nodeIDBytes), storedKinds(ofCollectionNamed: key.name).lifetimeMarkers > 0 {
            lifetimesToFollow.insert(key.name)
        }
    }

    /// Whether a collection storing `kinds` has counter slots that follow its lifetime marker: a
    /// counter's, or a hash's counter fields'.
    private static func holdsCounterSlots(_ kinds: StoredKinds) -> Bool {
        kinds.counterSlots > 0 || kinds.fieldCounterRecords > 0
    }

    /// Hands over at most `limit` of the counters to follow (`lifetimesToFollow`, and every
    /// counter with a lifetime marker when `followsEveryLifetime`), and forgets those.
    func takeLifetimesToFollow(limit: Int) -> [String] {
        if followsEveryLifetime {
            followsEveryLifetime = false
            withTable { $0.pointee.forEachName(storing: { $0.lifetimeMarkers > 0 && Self.holdsCounterSlots($0) }) { lifetimesToFollow.insert($0) } }
        }
        guard lifetimesToFollow.count > limit else {
            defer { lifetimesToFollow.removeAll() }
            return Array(lifetimesToFollow)
        }
        var taken: [String] = []
        taken.reserveCapacity(limit)
        while taken.count < limit, let name = lifetimesToFollow.popFirst() { taken.append(name) }
        return taken
    }

    /// `Node.Configuration.maxCounterSlots`.
    var maxCounterSlots = 4096
    /// `Node.Configuration.maxSetMembers`.
    var maxSetMembers = 1_000_000
    /// Whether the table ever held a counter slot (shared with `Node`, read without the lock).
    let compoundPresence = CompoundPresence()

    /// Takes a new incarnation, past the current one and the clock, when the current one turned
    /// out to be another process's too (a counter slot or set dot of it, in `state`, that this
    /// process never wrote).
    func renewIncarnation(logger: Logger, state: String) {
        let previous = incarnation
        incarnation = max(incarnation, clock.last.rawValue) + 1
        counterSlotsWritten.removeAll()
        logger.warning("a slot or dot of this incarnation was already written by another process of this node id; taking a new incarnation", metadata: [
            "state": "\(state)", "previous": "\(previous)", "incarnation": "\(incarnation)"])
    }

    /// Whether `entry` is one of this node's own decisions not yet on disk (strict durability).
    func isUndurable(_ entry: Entry) -> Bool {
        !undurable.isEmpty && undurable.contains(entry.version.timestamp.rawValue) && entry.version.node == nodeID
    }

    /// The nodes whose owned values read as present here (this node always does); nil until a
    /// replication engine says (`Node.setPresentOwners`): then every owner's do.
    private(set) var presentOwners: Set<String>?
    /// Members removed from the cluster for good: their owned values never return, and are
    /// collected like tombstones. By id, and past the engine's `maxMembers` removal records by
    /// id hash (`ForgottenMembers`): `isRemovedOwner` consults both.
    private(set) var removedOwners: Set<String> = []
    private(set) var forgottenOwners = ForgottenMembers(capacity: 0)

    /// Whether `nodeID` was removed from the cluster for good (by id or by id hash).
    func isRemovedOwner(_ nodeID: String) -> Bool {
        removedOwners.contains(nodeID) || forgottenOwners.contains(nodeID)
    }

    /// Whether a reader at hybrid-clock instant `now` sees `entry`: not expired, and not owned
    /// by a node that is not a live member here. Tombstones are "seen" (as deletes).
    func isVisible(_ entry: Entry, now: UInt64) -> Bool {
        if entry.isExpired(atMilliseconds: now) { return false }
        guard entry.ownedByWriter, let presentOwners else { return true }
        return entry.version.node == nodeID || presentOwners.contains(entry.version.node)
    }

    /// Sets who is present and removed (this node is added to `present`; `forgotten` holds the
    /// removals past the engine's records, by id hash); returns the owners whose values appear
    /// and disappear with the change.
    func setOwners(present: Set<String>, removed: Set<String>, forgotten: ForgottenMembers) -> (appeared: Set<String>, disappeared: Set<String>) {
        var present = present
        present.insert(nodeID)
        let before = presentOwners
        presentOwners = present
        // A member removed since the last call never follows a lifetime again: every counter
        // with one is followed, so this node writes that member's slots with it
        // (`Transaction.followLifetime`). An id that moved to the hashes counts too (harmless).
        if !removed.isSubset(of: removedOwners) || forgotten.generation != forgottenOwners.generation { followsEveryLifetime = true }
        removedOwners = removed
        forgottenOwners = forgotten
        withTable { $0.pointee.setPresentOwners(present) }
        guard let before else {
            // Until now every owner was present: the ones not present now disappear.
            let owners = withTable { $0.pointee.inPlaceOwners() }
            return ([], owners.subtracting(present))
        }
        return (present.subtracting(before), before.subtracting(present))
    }

    /// Whether `entry` is a tombstone, a value expired at hybrid-clock instant `now`, or a
    /// value of a removed owner, of the kind this node already collected below
    /// `collectedBelow`, for an absent `key`.
    func isCollected(_ entry: Entry, for key: StateKey, now: UInt64) -> Bool {
        guard entry.version.timestamp < collectedBelow, entry.isAbsentForGood(atMilliseconds: now, isRemovedOwner: isRemovedOwner),
              self.entry(for: key) == nil else { return false }
        droppedCollectedTombstones += 1
        return true
    }

    /// Calls `body` with this core and the node's one transaction, both lent without a retain:
    /// reading the transaction into a local retained and released it, and a closure that uses
    /// the lock's `inout` core retains it around every call
    /// (docs/design/0009-atomics-off-the-hot-paths.md, "The technique").
    @inline(__always)
    func withTransaction<Result>(_ body: (NodeCore, Transaction) -> Result) -> Result {
        transactionReference.lend { body(self, $0) }
    }

    init(nodeID: String, table: EntryTable, clock: HybridLogicalClock, logger: Logger, limits: WireCodec.Limits,
         recentChangeCapacity: Int, maxCachedDecodedValues: Int) {
        self.nodeID = nodeID
        self.hot = InPlace(Hot(table: table, decoded: DecodedCache(capacity: maxCachedDecodedValues), clock: clock,
                               changes: ChangeLog(capacity: recentChangeCapacity)))
        let transaction = Transaction(nodeID: nodeID, logger: logger, limits: limits)
        transactionOwner = transaction
        transactionReference = .passUnretained(transaction)
        transaction.attach(to: self)
    }

    deinit {
        atomicKeys.release()
        calls.release()
        feedStorage.value?.release()
        feedStorage.release()
        collectionNames.release()
        hot.release()
    }

    /// Calls `body` with the table's address (the field inside `hot`, not a temporary).
    ///
    /// A read of the table must borrow it in place: a non-mutating `EntryTable` method called
    /// on `table`, or on `pointer.pointee`, gets a *copy* of the whole struct (every array and
    /// dictionary in it retained, then released: a third of a Redis-protocol GET's time in the
    /// profile), because nothing tells Swift that memory stays unchanged during the call. The
    /// `inPlace` readers below are `mutating`, so the table is passed by address, and inside
    /// them the exclusive access lets the real method borrow `self` without a copy.
    func withTable<R>(_ body: (UnsafeMutablePointer<EntryTable>) throws -> R) rethrows -> R {
        try hot.withAddress { hot in try withUnsafeMutablePointer(to: &hot.pointee.table, body) }
    }

    /// The stored entry of `key`, read in place (`withTable`).
    func entry(for key: StateKey) -> Entry? {
        withTable { $0.pointee.inPlaceEntry(for: key) }
    }

    /// `EntryTable.value(ofAtomicNamed:clock:)`, read in place (`withTable`).
    func value(ofAtomicNamed name: UnsafeRawBufferPointer, clock now: () -> UInt64) -> PackedBytes?? {
        withTable { $0.pointee.inPlaceValue(ofAtomicNamed: name, clock: now) }
    }

    /// Records that `key` changed (after a merge that changed it).
    func recordChange(_ key: StateKey) {
        changes.record(key)
    }

    /// Records that the key of every write of `writes` changed, in order (one access to the log).
    func recordChanges(_ writes: UnsafeBufferPointer<PendingWrite>) {
        changes.record(writes)
    }

    /// The stored keys changed after sequence number `sequence` (each once; a key removed
    /// since is not among them, and a key sharing a changed key's stable hash may be), or nil
    /// when more changes than the log holds happened since.
    func keysChanged(after sequence: UInt64) -> [StateKey]? {
        guard let hashes = changes.hashes(after: sequence) else { return nil }
        var keys: [StateKey] = []
        keys.reserveCapacity(hashes.count)
        for hash in hashes { keys.append(contentsOf: table.keys(withStableHash: hash)) }
        return keys
    }

    func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    func key<K: AtomicState>(for key: K.Type) -> StateKey {
        let id = ObjectIdentifier(key)
        if let known = atomicKeys.value.value(for: id) { return known }
        let made = StateKey(name: K.name)
        atomicKeys.value.insert(made, for: id)
        return made
    }

    /// An element's key, whose index line is asked for at once (`prefetchHomeCell`): a write
    /// encodes its value before the commit merges it, and the line arrives meanwhile
    /// (docs/design/0010-prefetch.md, "A single write hints its lines early"). Atomic keys are
    /// few and stay in the cache; elements are what make a table large.
    func key<C: CollectionState>(for collection: C.Type, at element: C.ID) throws(ValueCoding.Failure) -> StateKey {
        let name = collectionName(of: collection, named: C.name)
        // An integer id's digits go straight into the key, no array between.
        let key = if let number = ValueCoding.integer(element) {
            ValueCoding.withIntegerText(number) { StateKey(name: name.name, nameHash: name.hash, elementBytes: $0) }
        } else {
            StateKey(name: name.name, nameHash: name.hash, element: try ValueCoding.encode(element))
        }
        prefetchHomeCell(of: key.stableHash)
        return key
    }

    /// The key of element `element` (already encoded) of the collection or index `type` named `name`.
    func key(of type: Any.Type, named name: @autoclosure () -> String, element: [UInt8]) -> StateKey {
        let known = collectionName(of: type, named: name())
        return StateKey(name: known.name, nameHash: known.hash, element: element)
    }

    /// The wire name of a collection or index type (`C.name`, computed once per type).
    func name(of type: Any.Type, named name: @autoclosure () -> String) -> String {
        collectionName(of: type, named: name()).name
    }

    /// The wire name of a collection or index type and its part of every key's hash, found once per type.
    private func collectionName(of type: Any.Type, named name: @autoclosure () -> String) -> CollectionName {
        let id = ObjectIdentifier(type)
        if let known = collectionNames.value.value(for: id) { return known }
        let made = CollectionName(name: name(), hash: StateKey.nameHash(name()))
        collectionNames.value.insert(made, for: id)
        return made
    }

    /// Has the processor fetch the table lines that merging (or, `readingValues`, reading) these
    /// keys will touch (`EntryTable.prefetch`), in place: docs/design/0010-prefetch.md, "A batch
    /// of merges prefetches what it will touch". A single key has no misses to overlap and
    /// returns before any call (the call chain alone was 67 instructions of a one-write
    /// decision).
    @inline(__always)
    func prefetch(count: Int, readingValues: Bool = false, hash: (Int) -> UInt64) {
        guard count > 1 else { return }
        withTable { $0.pointee.inPlacePrefetch(count: count, readingValues: readingValues, hash: hash) }
    }

    /// Has the processor fetch the index cell `EntryTable.hintHomeCell` names for a key of
    /// stable hash `hash`, in place: called as a decision writes a key, so the line is there by
    /// the time the commit merges it.
    @inline(__always)
    func prefetchHomeCell(of hash: UInt64) {
        withTable { $0.pointee.inPlaceHintHomeCell(of: hash) }
    }

    /// Every stored element of the collection named `name` (`EntryTable.elements(ofCollectionNamed:)`), read in place.
    func elements(ofCollectionNamed name: String) -> [(key: StateKey, entry: Entry)] {
        withTable { $0.pointee.inPlaceElements(ofCollectionNamed: name) }
    }

    /// `EntryTable.containsElement(ofCollectionNamed:where:)`, read in place.
    func containsElement(ofCollectionNamed name: String, where predicate: (StateKey, Entry) -> Bool) -> Bool {
        withTable { $0.pointee.inPlaceContainsElement(ofCollectionNamed: name, where: predicate) }
    }

    /// `EntryTable.elementCount(ofCollectionNamed:)`.
    func elementCount(ofCollectionNamed name: String) -> Int {
        withTable { $0.pointee.inPlaceElementCount(ofCollectionNamed: name) }
    }

    /// `EntryTable.plainElementCount(ofCollectionNamed:)`.
    func plainElementCount(ofCollectionNamed name: String) -> Int {
        withTable { $0.pointee.inPlacePlainElementCount(ofCollectionNamed: name) }
    }

    /// `EntryTable.storedKinds(ofCollectionNamed:)`.
    func storedKinds(ofCollectionNamed name: String) -> StoredKinds {
        withTable { $0.pointee.storedKinds(ofCollectionNamed: name) }
    }

    /// `EntryTable.scoredMemberCount(ofCollectionNamed:)`.
    func scoredMemberCount(ofCollectionNamed name: String) -> Int {
        withTable { $0.pointee.inPlaceScoredMemberCount(ofCollectionNamed: name) }
    }

    /// `EntryTable.groupCount(ofCollectionNamed:)`.
    func groupCount(ofCollectionNamed name: String) -> Int {
        withTable { $0.pointee.groupCount(ofCollectionNamed: name) }
    }

    /// The stored elements holding a value of the collection named `name` in `element`'s group
    /// (`EntryTable.elements(ofCollectionNamed:inGroupOf:)`), read in place.
    func elements(ofCollectionNamed name: String, inGroupOf element: [UInt8]) -> [(key: StateKey, entry: Entry)] {
        withTable { $0.pointee.elements(ofCollectionNamed: name, inGroupOf: element) }
    }

    /// `EntryTable.forEachElement(ofCollectionNamed:inGroupOf:_:)`, read in place: the elements
    /// holding a value of `element`'s group, and whether the group stores any record.
    @discardableResult
    func forEachElement(ofCollectionNamed name: String, inGroupOf element: [UInt8], _ body: (StateKey, Entry) -> Void) -> Bool {
        withTable { $0.pointee.forEachElement(ofCollectionNamed: name, inGroupOf: element, body) }
    }

    /// One slice of a walk over every stored entry (`EntryTable.appendEntries`), appended to
    /// `output`, read in place.
    func appendEntries(from cursor: inout EntryTable.SweepCursor, budget: Int, into output: inout [KeyedEntry]) {
        withTable { $0.pointee.inPlaceAppendEntries(from: &cursor, budget: budget, into: &output) }
    }
}

/// The table's reads, taken by address (`NodeCore.withTable` says why they are `mutating`).
/// They change nothing.
private extension EntryTable {
    mutating func inPlaceEntry(for key: StateKey) -> Entry? { entry(for: key) }

    mutating func inPlaceHintHomeCell(of hash: UInt64) {
        hintHomeCell(of: hash) { decide_prefetch_read($0) }
    }

    mutating func inPlacePrefetch(count: Int, readingValues: Bool, hash: (Int) -> UInt64) {
        prefetch(count: count, readingValues: readingValues, hash: hash) { address, forWriting in
            if forWriting { decide_prefetch_write(address) } else { decide_prefetch_read(address) }
        }
    }

    mutating func inPlaceValue(ofAtomicNamed name: UnsafeRawBufferPointer, clock now: () -> UInt64) -> PackedBytes?? {
        value(ofAtomicNamed: name, clock: now)
    }

    mutating func inPlacePlainElementCount(ofCollectionNamed name: String) -> Int { plainElementCount(ofCollectionNamed: name) }

    mutating func inPlaceScoredMemberCount(ofCollectionNamed name: String) -> Int { scoredMemberCount(ofCollectionNamed: name) }

    mutating func inPlaceElementCount(ofCollectionNamed name: String) -> Int { elementCount(ofCollectionNamed: name) }

    mutating func inPlaceContainsElement(ofCollectionNamed name: String, where predicate: (StateKey, Entry) -> Bool) -> Bool {
        containsElement(ofCollectionNamed: name, where: predicate)
    }

    mutating func inPlaceElements(ofCollectionNamed name: String) -> [(key: StateKey, entry: Entry)] {
        elements(ofCollectionNamed: name)
    }

    mutating func inPlaceAppendEntries(from cursor: inout SweepCursor, budget: Int, into output: inout [KeyedEntry]) {
        appendEntries(from: &cursor, budget: budget, into: &output)
    }

    mutating func inPlaceOwners() -> Set<String> { owners }
}
