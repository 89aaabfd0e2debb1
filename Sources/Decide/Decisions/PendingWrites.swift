import DecideCore

/// One write of the decision running now: the key, its encoded value (nil deletes it), the typed
/// value it came from when it had one (for the decoded cache and observers), and its expiry
/// and ownership.
struct PendingWrite {
    let key: StateKey
    /// In place when short (`PackedBytes`): an integer, a flag or a short string is written
    /// without an allocation, and replaces its predecessor in the table without a free.
    var value: PackedBytes?
    var decoded: (any Sendable)?
    var options: WriteOptions

    /// Computed, not `static let`s: the optimiser folds each to a constant, where a stored one
    /// was a `swift_once` call on every access.
    private static var keyOffset: Int { MemoryLayout<PendingWrite>.offset(of: \PendingWrite.key)! }
    private static var valueOffset: Int { MemoryLayout<PendingWrite>.offset(of: \PendingWrite.value)! }

    /// The address of the key of the write at `write`, to lend it in place (`PendingWrites`).
    static func key(in write: UnsafeMutablePointer<PendingWrite>) -> UnsafeMutablePointer<StateKey> {
        (UnsafeMutableRawPointer(write) + keyOffset).assumingMemoryBound(to: StateKey.self)
    }

    /// The address of the value of the write at `write`.
    static func value(in write: UnsafeMutablePointer<PendingWrite>) -> UnsafeMutablePointer<PackedBytes?> {
        (UnsafeMutableRawPointer(write) + valueOffset).assumingMemoryBound(to: PackedBytes?.self)
    }
}

/// The writes of the decision running now, one per key (a later write to a key replaces the
/// earlier), in first-write order. One buffer of `PendingWrite` records, reused from decision to
/// decision and owned by `storage`: clearing it deinitializes the writes in place, and a write
/// is initialized at its end, with no uniqueness or bounds check. An array checked both on
/// every write and every clear (`removeLast` per write, since `removeAll(keepingCapacity:)`
/// is a generic `replaceSubrange`): about 90 instructions of a one-write decision
/// (docs/design/0018-the-decision-path.md, "Pending writes in a buffer of their own"). Parallel
/// arrays of optionals cost a generic `Optional` witness call per element to copy and to
/// destroy, and so does deinitializing a write's optional fields one by one.
///
/// A copy shares the storage (one retain): only the transaction's own
/// `PendingWrites` is ever mutated, and a commit borrows or moves it, under the node's lock.
struct PendingWrites {
    /// The writes, in first-write order: valid until the next change of these writes.
    var writes: UnsafeBufferPointer<PendingWrite> { UnsafeBufferPointer(start: storage.base, count: storage.count) }
    /// Whether any write of the decision expires or is owned (most decisions: none).
    private var hasOptions = false
    /// Built only for decisions with many writes (small ones search `writes` linearly): where
    /// each key is in `writes`, by its stable hash, with open addressing (a cell holds the
    /// position plus one; 0 is empty). Not a `Dictionary<StateKey, Int>`: that hashed every key
    /// again with a seeded `Hasher` and retained it, and clearing it released every key.
    private var cells: [Int32] {
        _read { yield storage.cells }
        nonmutating _modify { yield &storage.cells }
    }
    /// `Node.decisionBytes` of these writes without its fixed part, kept as writes arrive so the
    /// size check at commit is one addition.
    private(set) var entryBytes = 0
    private let nodeBytes: Int
    /// The ordered elements of each index this decision placed into, kept current by its own
    /// placements so a decision of many appends sorts once. Any other write of an element of
    /// that name drops it. Kept here, not on the transaction, so the check costs a write nothing
    /// beyond a field test.
    var indexOrders: [String: [(key: StateKey, position: IndexPosition)]] {
        _read { yield storage.indexOrders }
        nonmutating _modify { yield &storage.indexOrders }
    }
    /// The writes' buffer, `cells` and `indexOrders`, held by reference: a copy of
    /// `PendingWrites` is then one retain. Held inline, the copy of the two lookups went
    /// through generic value witnesses, about 210 instructions with its destroy.
    private let storage = Storage()

    private static let linearSearchLimit = 16

    /// `nodeID`: the id of the node whose decisions these are (its bytes count in every entry).
    init(nodeID: String) {
        nodeBytes = nodeID.utf8.count
    }

    var count: Int { storage.count }
    var isEmpty: Bool { storage.count == 0 }

    /// The key of the write at `index`.
    func key(at index: Int) -> StateKey { writes[index].key }

    /// The bytes `Node.decisionBytes` counts for these writes.
    var decisionBytes: Int { WireCodec.decisionHeaderBytes(nodeBytes: nodeBytes) + entryBytes }

    mutating func removeAll() {
        if !indexOrders.isEmpty { indexOrders.removeAll() }
        if !storage.elementPositions.isEmpty { storage.removeElementPositions() }
        let count = storage.count
        guard count != 0 else { return }
        if count > Self.linearSearchLimit {
            // The cells were in use: cleared for the next large decision (which rebuilds them
            // whole when it outgrows the linear search), or freed when one huge decision grew
            // them. Only then: a small decision must not clear a large decision's cells.
            if cells.count > Self.maxKeptCells { cells = [] } else { cells.withUnsafeMutableBufferPointer { $0.update(repeating: 0) } }
        }
        storage.removeAll()
        hasOptions = false
        entryBytes = 0
    }

    /// Where `key` was written in this decision, if it was.
    func position(of key: StateKey) -> Int? {
        if writes.count > Self.linearSearchLimit { return indexedPosition(of: key) }
        for index in writes.indices where writes[index].key.stableHash == key.stableHash && writes[index].key == key {
            return index
        }
        return nil
    }

    /// Records a write of `key` (replacing an earlier one of it); false, recording nothing, when
    /// it is a new key and `maxKeys` are already written.
    /// `value` and `typed` are consumed: they move into the record instead of being copied
    /// (an `Optional` existential's copy and destroy are generic witness calls, ~180 instructions
    /// a write).
    mutating func set(_ key: consuming StateKey, value: consuming PackedBytes?, decoded typed: consuming (any Sendable)?,
                      options writeOptions: WriteOptions = .plain, maxKeys: Int) -> Bool {
        let existing = position(of: key)
        guard existing != nil || writes.count < maxKeys else { return false }
        if !indexOrders.isEmpty, key.elementCount != 0 { indexOrders[key.name] = nil }
        let options = value == nil ? WriteOptions.plain : writeOptions
        if options != .plain { hasOptions = true }
        set(key, value: value, decoded: typed, options: options, at: existing)
        return true
    }

    /// Whether any write of the decision expires.
    var expires: Bool { hasOptions && writes.contains { $0.options.expiry != .never } }

    /// The entry the write at `index` stores under `version` (its lifetime counted from the
    /// version's timestamp).
    func entry(at index: Int, version: Version) -> Entry {
        // Field by field: binding `writes[index]` copied the whole write, its typed value's
        // existential through a generic witness.
        Self.entry(value: writes[index].value, options: writes[index].options, hasOptions: hasOptions, version: version)
    }

    /// The entry of a write with `value` and `options` (read only when the decision `hasOptions`).
    private static func entry(value: consuming PackedBytes?, options: WriteOptions, hasOptions: Bool, version: Version) -> Entry {
        guard hasOptions else { return Entry(version: version, packedValue: value) }
        let (expiresAt, owned) = lifetime(options, hasOptions: true, version: version)
        return Entry(version: version, packedValue: value, expiresAtMilliseconds: expiresAt, ownedByWriter: owned)
    }

    /// The expiry instant and ownership a write with `options` is stored with under `version`
    /// (none unless the decision `hasOptions`), before `Entry`'s normalisation.
    @inline(__always)
    private static func lifetime(_ options: WriteOptions, hasOptions: Bool, version: Version) -> (expiresAt: UInt64?, owned: Bool) {
        hasOptions ? (options.expiry.instant(committedAt: version.timestamp), options.owned) : (nil, false)
    }

    /// Merges every write into `table` as committed under `version`. A local version is newer
    /// than anything stored (the clock ticked past it), so each merge changes the table. Each
    /// key is lent in place (`offer`). Not `mutating`: the commit holds these writes in a `let`,
    /// and a `var` captured by the commit's later closures (the store's) was read through a
    /// box, copying the array each time (docs/design/0009-atomics-off-the-hot-paths.md,
    /// "Alternatives tried and not kept").
    func merge(into table: inout EntryTable, version: Version) {
        // Each write's parts, not an entry: the version is lent to every merge, not copied
        // into an entry and dropped with it.
        forEachKey { key, write in
            let (expiresAt, owned) = Self.lifetime(write.pointee.options, hasOptions: hasOptions, version: version)
            let outcome = table.merge(version: version, value: write.pointee.value, expiresAtMilliseconds: expiresAt,
                                      ownedByWriter: owned, for: key)
            precondition(outcome.changed, "a local version lost to a stored one: the clock went backwards")
        }
    }

    /// Calls `offer` with each write's key and its entry as committed under `version`, in
    /// order. The key is lent where it lies (`lendPointee`): handed on from the buffer, it was
    /// a copy, its name retained and released. Call under the node's lock, which no one else
    /// reads the writes without.
    func offer(version: Version, to offer: (borrowing StateKey, consuming Entry) -> Void) {
        // Built in the call: an entry built before it was captured, then copied for it.
        forEachKey { key, write in offer(key, entry(of: write, version: version)) }
    }

    /// `offer(version:to:)` for a store that builds an entry only when it keeps it: `offer`
    /// gets each write's key, lent, and a way to build its entry.
    func offerLazily(version: Version, to offer: (borrowing StateKey, () -> Entry) -> Void) {
        forEachKey { key, write in offer(key) { entry(of: write, version: version) } }
    }

    /// Calls `body` with each write's key, lent where it lies, and the write's address, in order.
    @inline(__always)
    private func forEachKey(_ body: (borrowing StateKey, UnsafePointer<PendingWrite>) -> Void) {
        let first = storage.base
        for index in 0..<storage.count {
            PendingWrite.key(in: first + index).lendPointee { body($0, first + index) }
        }
    }

    /// The entry of the write at `write` committed under `version`.
    @inline(__always)
    private func entry(of write: UnsafePointer<PendingWrite>, version: Version) -> Entry {
        Self.entry(value: write.pointee.value, options: write.pointee.options, hasOptions: hasOptions, version: version)
    }

    /// Hands the parts of write `index` to `visit` as its delta carries them under `version`
    /// (borrowed for the call): key, value (nil: a delete), expiry instant (the lifetime counted
    /// from the version's timestamp) and ownership, normalised as `entry(at:version:)` is.
    func visit(_ index: Int, version: Version, _ visit: WireCodec.WriteParts) {
        // The key and the value are lent where they lie (`lendPointee`: moved out for the call
        // and back), under the node's lock, which no one else reads them without: handed on
        // from the buffer, each was a copy, retained and released (four atomics a write).
        precondition(index >= 0 && index < storage.count, "a write outside the decision's writes")
        let write = storage.base + index
        // A delete carries neither (as `Entry` normalises it).
        let (expiry, owned) = Self.lifetime(write.pointee.options, hasOptions: hasOptions && write.pointee.value != nil, version: version)
        let expiresAt = Entry.normalized(expiry: expiry)
        PendingWrite.key(in: write).lendPointee { key in
            PendingWrite.value(in: write).lendPointee { value in visit(key, value, expiresAt, owned) }
        }
    }

    /// The delta message (`ReplicationMessage.delta`, type byte first) of these writes committed
    /// at `version`, encoded from them: the bytes `ReplicationCodec` writes for their `Delta`.
    /// One pass over the writes, into scratch memory sized by `decisionBytes`.
    func deltaMessage(version: Version, codec: WireCodec) -> [UInt8] {
        var message: [UInt8] = []
        withDeltaMessage(version: version, codec: codec) { message = [UInt8](copying: $0) }
        return message
    }

    /// `deltaMessage`, lent to `body` from the scratch memory it was written in: no array.
    func withDeltaMessage(version: Version, codec: WireCodec, _ body: (UnsafeRawBufferPointer) -> Void) {
        codec.withEncodedDelta(version: version, count: count, afterTypeByte: ReplicationMessage.deltaType,
                               maxBytes: WireCodec.maxDeltaBytes(decisionBytes: decisionBytes),
                               write: { index, visit in self.visit(index, version: version, visit) }, body)
    }

    /// The delta of these writes committed at `version` as `WireCodec` encodes a `Delta` (no
    /// type byte), lent to `body` from scratch memory: what the change feed keeps.
    func withDeltaEncoding(version: Version, codec: WireCodec, _ body: (UnsafeRawBufferPointer) -> Void) {
        codec.withEncodedDelta(version: version, count: count, afterTypeByte: nil,
                               maxBytes: WireCodec.maxDeltaBytes(decisionBytes: decisionBytes),
                               write: { index, visit in self.visit(index, version: version, visit) }, body)
    }

    /// Records a write of `key`; `at` is its `position(of:)`, found by the caller.
    /// The key is consumed: it moves into the record, not copied (a copy retains its name).
    private mutating func set(_ key: consuming StateKey, value: consuming PackedBytes?, decoded typed: consuming (any Sendable)?,
                              options: WriteOptions, at existing: Int?) {
        let (nameBytes, elementBytes, nodeBytes) = (key.name.utf8.count, key.elementCount, nodeBytes)
        func bytes(_ value: PackedBytes?) -> Int {
            WireCodec.maxEncodedEntryBytes(nameBytes: nameBytes, elementBytes: elementBytes,
                                           nodeBytes: nodeBytes, valueBytes: value?.count ?? 0)
        }
        if let existing {
            let write = storage.base + existing
            entryBytes += bytes(value) - bytes(write.pointee.value)
            write.pointee.value = value
            write.pointee.decoded = typed
            write.pointee.options = options
            return
        }
        entryBytes += bytes(value)
        storage.append(PendingWrite(key: key, value: value, decoded: typed, options: options))
        let count = storage.count
        if count > Self.linearSearchLimit {
            // Built whole when the decision first outgrows the linear search (cells kept from
            // an earlier decision are empty), and again when half full.
            if count == Self.linearSearchLimit + 1 || count * 2 > cells.count {
                rebuildCells()
            } else {
                insertCell(for: count - 1)
            }
            if count == Self.linearSearchLimit + 1 {
                for position in 0..<count { noteElementWrite(at: position) }
            } else {
                noteElementWrite(at: count - 1)
            }
        }
    }
}

/// The element writes of one collection name in a large decision (`PendingWrites`): where they
/// are, and which kinds they are (plain: a hash's field, a collection's element; or compound, by
/// the kind byte of their id, `ElementGroup`), so "did this decision write a counter slot of
/// this name" is no walk over a set's thousand dots.
struct ElementWrites {
    var positions: [Int32] = []
    var kinds = WrittenKinds()

    /// Adds the write of `key` at `position`.
    mutating func note(_ key: StateKey, at position: Int) {
        positions.append(Int32(position))
        kinds.note(key)
    }

    /// Whether a write of `kind` (nil: plain) may be among these.
    func mayHold(_ kind: UInt8?) -> Bool { kinds.mayHold(kind) }
}

/// Which kinds of element of one collection name a decision wrote (plain, or compound by the
/// kind byte of the id, `ElementGroup`): what a front end's "which kinds may this key hold"
/// asks of the decision's writes, answered for every kind from one lookup of the name.
struct WrittenKinds {
    var plain = false
    /// Bit `k - 64` for each compound kind byte `k` in 64 ..< 128 written (every kind there is).
    var kinds: UInt64 = 0
    /// A compound kind byte outside 64 ..< 128 was written (a peer's, say): every kind may be.
    var otherKinds = false

    /// Adds the kind of element key `key`.
    mutating func note(_ key: StateKey) {
        guard CompoundPresence.isCompound(key) else {
            plain = true
            return
        }
        let kind = key.packedElement.withUnsafeBytes { $0[1] }
        if kind >= 64 && kind < 128 { kinds |= 1 << UInt64(kind - 64) } else { otherKinds = true }
    }

    /// Whether a write of `kind` (nil: plain) may be among these.
    func mayHold(_ kind: UInt8?) -> Bool {
        guard let kind else { return plain }
        return otherKinds || !(kind >= 64 && kind < 128) || kinds & (1 << UInt64(kind - 64)) != 0
    }
}

extension PendingWrites {
    /// Whether this decision wrote (or deleted) an element of collection `name` of compound
    /// kind `kind` (the second byte of its id, `ElementGroup`; nil: a plain element), and that
    /// write satisfies `predicate` (given its position). O(1) in a large decision that wrote
    /// none of that kind of that name.
    func writesElement(ofCollectionNamed name: String, kind: UInt8?, where predicate: (Int) -> Bool = { _ in true }) -> Bool {
        let writes = writes
        func matches(_ position: Int) -> Bool {
            let key = writes[position].key
            let compound = CompoundPresence.isCompound(key)
            guard let kind else { return !compound && predicate(position) }
            return compound && key.packedElement.withUnsafeBytes { $0[1] == kind } && predicate(position)
        }
        if storage.count > Self.linearSearchLimit {
            guard let found = storage.elementWrites(ofCollectionNamed: name), found.mayHold(kind) else { return false }
            return found.positions.contains { matches(Int($0)) }
        }
        return containsElementWrite(ofCollectionNamed: name, where: matches)
    }

    /// The kinds of element of collection `name` this decision wrote, nil when it wrote none:
    /// one lookup of the name in a large decision, one walk over the writes in a small one.
    /// (`mayHold` is exact, but for a kind byte outside 64 ..< 128, which answers "may".)
    func writtenKinds(ofCollectionNamed name: String) -> WrittenKinds? {
        if storage.count > Self.linearSearchLimit { return storage.elementWrites(ofCollectionNamed: name)?.kinds }
        var kinds: WrittenKinds?
        let writes = writes
        forEachElementWrite(ofCollectionNamed: name) { position in
            if kinds == nil { kinds = WrittenKinds() }
            kinds!.note(writes[position].key)
        }
        return kinds
    }

    /// Whether, in a large decision, no element of collection `name` of compound kind `kind`
    /// was written: a read of that kind's elements may skip this decision's writes.
    func writesNoElement(ofCollectionNamed name: String, kind: UInt8) -> Bool {
        storage.count > Self.linearSearchLimit && !(storage.elementWrites(ofCollectionNamed: name)?.mayHold(kind) ?? false)
    }

    /// Whether a write of an element of collection `name` satisfies `predicate` (given its
    /// position), tried in order. Each key is read where it lies: a `for write in writes` copied
    /// every write (a retain and release of its key, value and typed value), 12 % of a run of
    /// pipelined INCRs, whose every counter read looks through this decision's writes.
    func containsElementWrite(ofCollectionNamed name: String, where predicate: (Int) -> Bool = { _ in true }) -> Bool {
        if storage.count > Self.linearSearchLimit {
            guard let found = storage.elementWrites(ofCollectionNamed: name) else { return false }
            return found.positions.contains { predicate(Int($0)) }
        }
        let base = storage.base
        for index in 0..<storage.count {
            let key = PendingWrite.key(in: base + index)
            if key.pointee.elementCount != 0, key.pointee.name == name, predicate(index) { return true }
        }
        return false
    }

    /// Calls `body` with the position of each write of an element of collection `name`, in
    /// order (`containsElementWrite`'s walk, never stopped).
    func forEachElementWrite(ofCollectionNamed name: String, _ body: (Int) -> Void) {
        _ = containsElementWrite(ofCollectionNamed: name) { position in
            body(position)
            return false
        }
    }

    /// Keeps the position of the write at `position` by its name, when it writes an element.
    fileprivate func noteElementWrite(at position: Int) {
        let key = PendingWrite.key(in: storage.base + position)
        guard key.pointee.elementCount != 0 else { return }
        storage.noteElementWrite(key.pointee, at: position)
    }
}

extension PendingWrites {
    /// `cells` is freed, not cleared, above this many (256 KiB).
    fileprivate static let maxKeptCells = 65_536

    /// The cell `hash` starts probing at (stable hashes are already mixed: `StableHash.value`).
    private func firstCell(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash) & (cells.count - 1) }

    fileprivate func indexedPosition(of key: StateKey) -> Int? {
        guard !cells.isEmpty else { return nil }
        let mask = cells.count - 1
        var cell = firstCell(key.stableHash)
        while cells[cell] != 0 {
            let position = Int(cells[cell] - 1)
            if writes[position].key.stableHash == key.stableHash && writes[position].key == key { return position }
            cell = (cell + 1) & mask
        }
        return nil
    }

    /// Places the write at `position` (a key not in the cells yet) in the first free cell of
    /// its probe sequence; the caller keeps the cells at most half full.
    fileprivate mutating func insertCell(for position: Int) {
        let mask = cells.count - 1
        var cell = firstCell(writes[position].key.stableHash)
        while cells[cell] != 0 { cell = (cell + 1) & mask }
        cells[cell] = Int32(position + 1)
    }

    /// Sizes the cells to at least four times the writes (a power of two) and places every write.
    fileprivate mutating func rebuildCells() {
        var size = 64
        while size < writes.count * 4 { size *= 2 }
        if cells.count == size {
            cells.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        } else {
            cells = [Int32](repeating: 0, count: size)
        }
        for position in writes.indices { insertCell(for: position) }
    }
}

extension PendingWrites {
    /// The writes' buffer and the lookups only large decisions and index placements use (see
    /// `storage`). Touched only by the transaction that owns them, under the node's lock: no
    /// dynamic exclusivity check on every write.
    fileprivate final class Storage {
        /// `count` writes initialized from `base`, room for `capacity`.
        @exclusivity(unchecked) private(set) var base: UnsafeMutablePointer<PendingWrite>
        @exclusivity(unchecked) private(set) var count = 0
        @exclusivity(unchecked) private var capacity: Int
        @exclusivity(unchecked) var cells: [Int32] = []
        @exclusivity(unchecked) var indexOrders: [String: [(key: StateKey, position: IndexPosition)]] = [:]
        /// In a large decision (past the linear search): the positions of the element writes of
        /// each collection name, so a counter, set or hash read inside it finds this decision's
        /// writes of its name without comparing every write's name (a run of 256 pipelined
        /// INCRs spent 40 % of its time there).
        @exclusivity(unchecked) private(set) var elementPositions: [String: ElementWrites] = [:]
        /// The name of the latest `elementPositions` lookup and where it was (nil: absent): a
        /// command asks about its key's name several times (its kinds, a counter's slots, the
        /// lifetime, the write), and each asking hashed the name again, 11 % of a run of
        /// pipelined SADDs (docs/design/0018-the-decision-path.md, "A command's name, looked up
        /// once"). Reset by every insertion (which may move the entries).
        @exclusivity(unchecked) private var latestName: String?
        @exclusivity(unchecked) private var latestIndex: Dictionary<String, ElementWrites>.Index?

        /// `elementPositions[name]`, through the one-name cache.
        func elementWrites(ofCollectionNamed name: String) -> ElementWrites? {
            index(ofCollectionNamed: name).map { elementPositions.values[$0] }
        }

        /// Adds element write `key` at `position` to its name's entry.
        func noteElementWrite(_ key: StateKey, at position: Int) {
            if let index = index(ofCollectionNamed: key.name) {
                elementPositions.values[index].note(key, at: position)
                return
            }
            var writes = ElementWrites()
            writes.note(key, at: position)
            elementPositions[key.name] = writes
            latestName = nil
        }

        /// Forgets every name's entry (the decision's writes are cleared).
        func removeElementPositions() {
            elementPositions.removeAll(keepingCapacity: true)
            latestName = nil
        }

        private func index(ofCollectionNamed name: String) -> Dictionary<String, ElementWrites>.Index? {
            if let latestName, latestName == name { return latestIndex }
            let index = elementPositions.index(forKey: name)
            (latestName, latestIndex) = (name, index)
            return index
        }

        /// Room kept from decision to decision; a buffer grown past it by one large decision
        /// is freed when that decision's writes are cleared.
        private static let keptCapacity = 1_024

        /// Room a fresh buffer has, and a freed one gets back.
        private static let initialCapacity = 16

        init() {
            capacity = Self.initialCapacity
            base = .allocate(capacity: capacity)
        }

        deinit {
            base.deinitialize(count: count)
            base.deallocate()
        }

        /// Initializes `write` after the last, doubling the buffer when full.
        @inline(__always)
        func append(_ write: consuming PendingWrite) {
            if count == capacity { grow() }
            (base + count).initialize(to: write)
            count &+= 1
        }

        private func grow() {
            let larger = UnsafeMutablePointer<PendingWrite>.allocate(capacity: capacity * 2)
            larger.moveInitialize(from: base, count: count)
            base.deallocate()
            base = larger
            capacity *= 2
        }

        /// Deinitializes every write, in place: one by one, since `deinitialize(count:)` is the
        /// runtime's generic `swift_arrayDestroy` (115 instructions for one write).
        @inline(__always)
        func removeAll() {
            for index in 0..<count { _ = (base + index).move() }
            count = 0
            if capacity > Self.keptCapacity {
                base.deallocate()
                capacity = Self.initialCapacity
                base = .allocate(capacity: capacity)
            }
        }
    }
}

/// What a pending write carries beside its value: when it expires, and whether this node owns it.
struct WriteOptions: Sendable, Equatable {
    var expiry: WriteExpiry = .never
    var owned = false

    static let plain = WriteOptions()
}

/// When a pending write's value expires: never, a lifetime counted from the decision's
/// timestamp, or an instant (hybrid-clock milliseconds).
package enum WriteExpiry: Sendable, Equatable {
    case never
    case after(milliseconds: UInt64)
    case at(milliseconds: UInt64)

    /// The entry's `expiresAtMilliseconds` for a decision at `timestamp` (within the clock's
    /// range, as `Entry` keeps it).
    func instant(committedAt timestamp: HLCTimestamp) -> UInt64? {
        instant(atMilliseconds: timestamp.physicalMilliseconds)
    }

    /// The expiry instant of a write made at `now` (hybrid-clock Unix milliseconds): a lifetime
    /// counts from `now`, saturating at the clock's range; nil for `.never`.
    package func instant(atMilliseconds now: UInt64) -> UInt64? {
        switch self {
        case .never: return nil
        case .after(let lifetime):
            let (sum, overflow) = now.addingReportingOverflow(lifetime)
            return overflow ? HLCTimestamp.maxPhysicalMilliseconds : min(sum, HLCTimestamp.maxPhysicalMilliseconds)
        case .at(let instant): return instant
        }
    }
}
