/// The in-memory state of one node: the newest entry of every key, merged last-writer-wins,
/// with a `StateDigest` kept current on every write.
///
/// Guarantees: after any sequence of `merge` calls the table holds, for every key, the
/// `Entry.merged` of every entry offered for it (so two tables offered the same entries in any
/// order hold the same entries and the same digest); `digest` always describes exactly the
/// entries held.
///
/// Layout (docs/design/0006-entry-table-layout.md, "The layout"): one dense array of records
/// (interned state name, element bytes in place up to 16, key hash, timestamp, interned node
/// id, value bytes in place up to 16, digest contribution, expiry: 80 bytes), an
/// open-addressing index of 64-bit cells
/// (a record number and the high half of its key's hash) probed by the key's `stableHash` and
/// doubled a few cells per insert (`draining`), per digest leaf the record numbers of
/// its keys, and per collection name the record numbers of its elements (each record knows its
/// slot there: 4 bytes more per record, so listing one collection never scans the table), and,
/// once a value with a lifetime was stored, per record the slot of its item in the expiry
/// schedule (4 bytes) and per expiring value an item there (12 bytes). Decoded values are not kept here; the node layer caches the ones it reads.
///
/// Expiring values (docs/consistency.md, "Expiring keys"): the table has no clock; callers pass
/// the hybrid-clock instant. An expired value stays stored (its digest contribution unchanged,
/// so replicas whose clocks pass the instant at slightly different times still agree) until
/// collected like a tombstone; `expire(dueAtMilliseconds:)` reports each one once.
@usableFromInline
package struct EntryTable: Sendable {
    /// One stored key as the table hands it out: its entry and its digest contribution.
    public struct Slot: Sendable {
        public let entry: Entry
        /// `StateDigest.contribution(of:_:)` of this key and entry, computed once when it was merged.
        public let contribution: UInt64
    }

    /// What `merge` did with an offered entry.
    public enum MergeOutcome: Sendable {
        /// The key was absent; the entry is now stored.
        case inserted
        /// The entry beat the stored one, which it replaced.
        case replaced
        /// The stored entry won (or was equal); nothing changed.
        case kept
        @inlinable
        public var changed: Bool {
            if case .kept = self { return false }
            return true
        }
    }

    /// 80 bytes: the key as its stable hash, an interned name number and its element bytes;
    /// the version as timestamp and interned node number; the value; the digest contribution;
    /// the expiry.
    /// Element bytes and value bytes of up to 16 bytes each are held in the record itself
    /// (`PackedBytes`): a counter, a flag or a short string costs no allocation. An atomic
    /// key (no element) has a name of its own, used by no other key: its record keeps the
    /// name's UTF-8 bytes where an element would be, and `inlineName` as its number, instead of
    /// interning it (no name table entry, no dictionary entry, no memory load beyond the record
    /// for a short name).
    private struct Record {
        let keyHash: UInt64
        var timestamp: HLCTimestamp
        var contribution: UInt64
        /// The expiry instant in the low 48 bits (`instantMask`; 0: the value never expires, and
        /// every tombstone), `ownedBit` for a value its writer owns, `sweptBit` once
        /// `expire(dueAtMilliseconds:)` reported the value expired.
        var meta: UInt64
        /// The value (nil: a tombstone), in place up to `PackedBytes.inlineCapacity` bytes.
        var value: PackedBytes?
        /// Declared between the two byte strings, it fills the padding after the value's.
        let name: UInt32
        /// The element id's bytes, or an atomic key's name (`name == inlineName`).
        let keyBytes: PackedBytes
        var node: UInt32

        var expiry: UInt64 { meta & EntryTable.instantMask }
        var owned: Bool { meta & EntryTable.ownedBit != 0 }
        var swept: Bool { meta & EntryTable.sweptBit != 0 }
    }

    private static let instantMask: UInt64 = (1 << 48) - 1
    private static let ownedBit: UInt64 = 1 << 62
    private static let sweptBit: UInt64 = 1 << 63

    private static func meta(expiresAtMilliseconds: UInt64?, ownedByWriter: Bool) -> UInt64 {
        (expiresAtMilliseconds ?? 0) | (ownedByWriter ? ownedBit : 0)
    }

    /// Adds (`by: 1`) or takes out (`by: -1`) a record's part of `tombstoneCount`,
    /// `expiredCount`, `expiringCount` and `ownedCounts`: every record that enters, leaves or
    /// changes state goes through here, so the counts cannot drift apart.
    @inline(__always)
    private mutating func tally(isTombstone: Bool, meta: UInt64, node: UInt32, by step: Int) {
        if isTombstone {
            tombstoneCount += step
            return
        }
        let swept = meta & Self.sweptBit != 0
        if swept {
            expiredCount += step
        } else if meta & Self.instantMask != 0 {
            expiringCount += step
        }
        if meta & Self.ownedBit != 0 && !swept { ownedCounts[Int(node)] += step }
    }

    /// Adds or takes out the record at `position` in its node's `ownedPositions`, when `meta`
    /// carries the owned bit: an append, or the list's last position moved into its slot.
    @inline(__always)
    private mutating func trackOwned(meta: UInt64, node: UInt32, position: Int, adding: Bool) {
        guard meta & Self.ownedBit != 0 else { return }
        if adding {
            ownedSlots.make(records: records.count)
            ownedSlots[position] = UInt32(ownedPositions[Int(node)].count + 1)
            ownedPositions[Int(node)].append(UInt32(position))
        } else {
            let slot = Int(ownedSlots[position]) - 1
            ownedSlots[position] = 0
            let last = ownedPositions[Int(node)].removeLast()
            guard slot < ownedPositions[Int(node)].count else { return }
            ownedPositions[Int(node)][slot] = last
            ownedSlots[Int(last)] = UInt32(slot + 1)
        }
    }

    /// The name number of a record whose name bytes are in its `keyBytes`.
    private static let inlineName = UInt32.max

    private var records = GrowingArray<Record>()
    /// Open addressing, linear probing: in the low half of a cell, record number + 1; in the high
    /// half, the high half of that record's key hash (`cellValue`), so a probe passes a cell of
    /// another key without reading its record, a cache miss at a large size; 0 for an empty
    /// cell. Its size is a power of two, at most three quarters full (the tags keep a long probe
    /// within the index's lines: at 8 bytes a cell, a limit of one half cost 16–32 bytes an
    /// entry, over `make bench`'s 150 at some sizes). Past that it grows to at least twice the
    /// record count, a few cells at a time (`draining`).
    private var index: GrowingArray<UInt64>
    /// After a growth, the index it replaced, moved into `index` a few cells per insert
    /// (`drain`); empty otherwise. Rehashing the whole index in the insert that filled it held
    /// the node's lock 68 ms at 1.6 M keys and 145 ms at 3.1 M, twice as long at every
    /// doubling (docs/design/0007-growing-without-stalls.md, "The index drains a few cells per
    /// insert"). A key whose home cell here was not moved yet is looked up here first, then in
    /// `index`; new keys always go to `index`. A cell of this index is named `~cell` (negative)
    /// where a probe returns one (`stored(at:)`).
    private var draining = GrowingArray<UInt64>()
    /// `draining.count`, kept beside it: the probe of every merge tests it.
    private var drainingCells = 0
    /// A cell of `draining` that was empty when the growth began: no probe sequence crosses it,
    /// so cells are moved in order from it.
    private var drainStart = 0
    /// How many cells of `draining`, counted on from `drainStart`, were moved. It only ever
    /// stops before an empty cell, so a key whose home cell is among them was moved: its probe
    /// sequence would have had to cross that empty cell.
    private var drained = 0
    /// Cells of `draining` (counted on from `drainStart`) whose memory was handed back to the
    /// system as they drained (`releaseDrainedPages`), so freeing the rest at the end is cheap.
    private var drainReleased = 0
    /// Drained cells are handed back in runs of at least this many (128 KiB).
    private static let releaseCells = 16_384
    /// Whether pages of a mapped `index` were not faulted in yet (`grow`, `drain`).
    private var indexPopulating = false
    /// Bytes of a new mapped index's pages each insert faults in ahead while it drains (16
    /// pages, ~18 µs here): a new index of N pages is done in N / 16 inserts, by when about one
    /// page in 32 was probed first; the old index drains in 8 N.
    private static let populateBytesPerInsert = 64 << 10

    /// The cells of `draining` each insert moves, at least (and on to the end of a run of full
    /// cells). A growth at three quarters full doubles the index, which then takes a quarter of
    /// the old size in inserts and more to reach its own limit; at 32 cells an insert the old
    /// index is empty after a 32nd of its size in inserts. While it drains, a lookup of a key
    /// not moved yet reads both indexes, so a short drain keeps that rare; 32 moves cost an
    /// insert about a microsecond.
    package static let drainCellsPerInsert = 32

    /// The index cell naming record `number` of key hash `hash`.
    @inline(__always)
    private static func cellValue(record number: Int, hash: UInt64) -> UInt64 {
        (hash & 0xFFFF_FFFF_0000_0000) | UInt64(truncatingIfNeeded: number + 1)
    }

    /// The record number a non-empty cell names.
    @inline(__always)
    private static func record(inCell stored: UInt64) -> Int {
        Int(truncatingIfNeeded: stored & 0xFFFF_FFFF) - 1
    }

    /// Whether a non-empty cell may name a record of key hash `hash` (its high halves agree).
    @inline(__always)
    private static func cell(_ stored: UInt64, mayHold hash: UInt64) -> Bool {
        (stored ^ hash) >> 32 == 0
    }
    /// Node ids seen in versions, each once, with their stable hashes; records name them by
    /// position. Bounded by the members that ever wrote (a peer cannot add ids without entries).
    private var nodeIDs: [(id: String, hash: UInt64)] = []
    private var nodeNumbers: [String: UInt32] = [:]
    /// The state names of the stored collection keys, each once, with the record numbers of its
    /// elements (so a collection is listed without a scan); records name them by position. A
    /// name no record uses any more is forgotten and its number reused, so names that come and
    /// go (deleted, collected) do not accumulate.
    private var names: [(name: String, members: GrowingArray<UInt32>)] = []
    /// By name number: what the name stores of the kinds laid out on a collection (none for
    /// most), so the plain elements of a name (a hash's fields), its set members, sorted set
    /// members and counter slots are counted without a scan, from the lookup that found the
    /// name. A dictionary by name number cost a second hash and probe on every command of a
    /// counter, set or hash (about 4 % of a run of pipelined INCRs); a field of `names`' tuples
    /// a copy of the tuple, name and members retained, at every read
    /// (docs/design/0018-the-decision-path.md, "A command's name, looked up once").
    private var nameKinds: [StoredKinds] = []
    /// By record number: where a collection record sits in its name's `members` (0 for an
    /// atomic record), so removing one is O(1) however large its collection.
    private var memberSlots = GrowingArray<UInt32>()
    private var nameNumbers: [String: UInt32] = [:]
    /// The records of each element group (`ElementGroup`: one member's dots of a set), so a
    /// member's live dots are found without a scan of its set: every record holding a value is
    /// listed, and a tombstone is listed until the group's next read, which counts it instead
    /// (`GroupRecords`). A member inserted again and again leaves one tombstone per insert until
    /// collection; walked on every insert they cost 24 % of a run of SADDs, and taken out of the
    /// list at each delete they cost a peer merging those deletes 16 %. Keyed by name number
    /// and a per-process-seeded hash of the group's bytes (a peer cannot aim ids at one entry);
    /// two groups that share a hash share an entry, and
    /// `forEachElement(ofCollectionNamed:inGroupOf:_:)` compares the bytes of what it lists.
    private var groups: [GroupID: GroupRecords] = [:]
    /// Numbers of forgotten names, free for the next new one.
    private var freeNames: [UInt32] = []
    /// The name number of the latest merge or grouped read (runs of writes into one state, and a
    /// command's several reads of one key, skip hashing the name into `nameNumbers`).
    private var latestName: UInt32 = 0
    /// The node number of the latest merge: most merges carry the same node id as the one
    /// before (a node's own writes, a peer's batch), so they skip `nodeNumbers`.
    private var latestNode: UInt32 = 0
    /// `latestNode`'s id and hash, held beside it so the common case compares two fields in
    /// place (no bounds-checked read of `nodeIDs`, no call); `hasLatestNode` is false until the
    /// first merge.
    private var latestNodeID = ""
    private var latestNodeHash: UInt64 = 0
    private var hasLatestNode = false
    /// The record numbers of each digest leaf's keys, so anti-entropy reads a differing leaf
    /// without a scan: a list threaded through the records, newest first. `bucketHeads[leaf]` is
    /// its first record's number + 1 (0: empty), `bucketNext[record]` the next one's (0: end).
    /// Four bytes a record and four a leaf, and an insert allocates nothing (an array per leaf
    /// cost a reallocation on most of a fresh key's inserts and ~12 bytes a key).
    private var bucketHeads: [UInt32]
    private var bucketNext = GrowingArray<UInt32>()
    public private(set) var digest: StateDigest
    /// Number of stored keys whose entry is a tombstone.
    public private(set) var tombstoneCount = 0
    /// Number of stored keys whose value `expire(dueAtMilliseconds:)` reported expired (they
    /// read as absent; collected like tombstones).
    public private(set) var expiredCount = 0
    /// Number of stored values with an expiry that `expire(dueAtMilliseconds:)` has not
    /// reported yet (Redis's `expires` count in INFO keyspace; a few may be past due).
    public private(set) var expiringCount = 0
    /// The expiring values not yet reported expired, by instant.
    private var expirySchedule = ExpirySchedule()
    /// Per record, the slot + 1 of its item in `expirySchedule` (0: it has none); empty until
    /// the first value with a lifetime is stored, one per record from then on. Not a record
    /// field: the record's 80 bytes are full, and a field would cost every table 8 bytes a key
    /// (alignment), where this costs 4 and only tables that ever held an expiring value.
    private var expirySlots = RecordSlots()
    /// The node ids whose owned values read as present (`setPresentOwners`); nil: all of them.
    private var presentOwners: Set<String>?
    /// By node number: whether that node's owned values are hidden now.
    private var ownerHidden: [Bool] = []
    /// By node number: its owned values stored and not reported expired.
    private var ownedCounts: [Int] = []
    /// By node number: the positions of its records that carry the owned bit (reported expired
    /// or not), in no order, so the keys a member owns are found without a scan of the table
    /// (`ownedEntries`). 4 bytes per owned record, in a `GrowingArray`: a `Set` was rehashed
    /// whole in the merge that filled it (106 ms at 3.1 M owned keys;
    /// docs/design/0007-growing-without-stalls.md, "Owned keys").
    private var ownedPositions: [GrowingArray<UInt32>] = []
    /// Per record, its slot + 1 in its node's `ownedPositions` (0: not owned); empty until the
    /// first owned value is stored, one per record from then on (4 bytes a record).
    private var ownedSlots = RecordSlots()

    /// Stored owned values (not reported expired) whose owner is hidden now: they read as
    /// absent. O(node ids).
    public var hiddenCount: Int {
        ownedCounts.indices.reduce(0) { $0 + (ownerHidden[$1] ? ownedCounts[$1] : 0) }
    }

    /// The node ids that own at least one stored value not reported expired. O(node ids).
    public var owners: Set<String> {
        Set(ownedCounts.indices.lazy.filter { self.ownedCounts[$0] > 0 }.map { self.nodeIDs[$0].id })
    }
    /// The highest version ever merged into this table (nil for none); removals do not lower it.
    public var highestVersion: Version? {
        guard let highest else { return nil }
        let node = nodeIDs[Int(highest.node)]
        return Version(timestamp: highest.timestamp, node: node.id, nodeHash: node.hash)
    }
    /// `highestVersion` with its node id as the table numbers it: keeping it current is then
    /// two stores, where a `Version` retained the new node id and released the old one.
    private var highest: (timestamp: HLCTimestamp, node: UInt32)?

    public init(digest: StateDigest = StateDigest()) {
        self.digest = digest
        self.bucketHeads = [UInt32](repeating: 0, count: digest.width(ofLevel: digest.depth))
        self.index = GrowingArray(zeroedCount: 16)
    }

    /// Stored keys, tombstones included.
    public var count: Int { records.count }

    /// Cells of the index a growth replaced that inserts have yet to move into the new one
    /// (`draining`): 0 when no growth is under way. Each insert moves at least
    /// `drainCellsPerInsert` of them.
    package var indexCellsToMove: Int { drainingCells - drained }

    public func entry(for key: StateKey) -> Entry? {
        guard let position = find(key) else { return nil }
        return entry(of: records[position])
    }

    /// Offers `entry` for `key` under last-writer-wins.
    @discardableResult
    public mutating func merge(_ entry: consuming Entry, for key: StateKey) -> MergeOutcome {
        // Moved out of the consumed entry: a copy was a retain, and dropping the entry a
        // release (two atomics a write of a value too long to hold in place).
        let value = Entry.takeValue(from: &entry)
        return merge(version: entry.version, value: value, expiresAtMilliseconds: entry.expiresAtMilliseconds,
                     ownedByWriter: entry.ownedByWriter, for: key)
    }

    /// `merge(_:for:)` of the entry `Entry(version:packedValue:expiresAtMilliseconds:ownedByWriter:)`
    /// would make of these parts (normalised the same way), without making it: a local commit
    /// merges its writes so, and the version it lends is neither copied nor dropped (its node
    /// id's retain and release, and the entry's, were a sixth of a one-write decision's runtime
    /// calls; docs/design/0018-the-decision-path.md, "A local write merged from its parts").
    @discardableResult
    package mutating func merge(version: borrowing Version, value: consuming PackedBytes?, expiresAtMilliseconds expiry: UInt64?,
                                ownedByWriter owned: Bool, for key: StateKey) -> MergeOutcome {
        let isTombstone = value == nil
        let expiresAt = isTombstone ? nil : Entry.normalized(expiry: expiry)
        let ownedByWriter = !isTombstone && owned
        let timestamp = version.timestamp
        let cell = probeInPlace(key)
        let outcome: MergeOutcome
        let stored = stored(at: cell)
        if stored != 0 {
            let position = Self.record(inCell: stored)
            // Timestamps decide almost always; only a tie needs the whole versions and values.
            let storedTimestamp = records[position].timestamp
            if timestamp < storedTimestamp { return .kept }
            if timestamp == storedTimestamp,
               self.entry(of: records[position]).wins(over: Entry(version: copy version, packedValue: copy value,
                                                                   expiresAtMilliseconds: expiresAt, ownedByWriter: ownedByWriter)) {
                return .kept
            }
            let (oldMeta, oldNode) = (records[position].meta, records[position].node)
            let wasTombstone = records[position].value == nil
            tally(isTombstone: wasTombstone, meta: oldMeta, node: oldNode, by: -1)
            // A value again (rare: a peer's later write of a deleted dot) is listed again; a
            // new tombstone stays listed until the group's next read (`GroupRecords`).
            if wasTombstone, !isTombstone, records[position].name != Self.inlineName,
               let group = groupID(name: records[position].name, keyBytes: records[position].keyBytes) {
                groups[group]?.list(UInt32(position))
            }
            let contribution = StateDigest.contribution(keyHash: key.stableHash, timestamp: timestamp, nodeHash: version.nodeHash,
                                                        value: value, expiresAtMilliseconds: expiresAt, ownedByWriter: ownedByWriter)
            let node = nodeNumber(of: version)
            let old = records[position].contribution
            let meta = Self.meta(expiresAtMilliseconds: expiresAt, ownedByWriter: ownedByWriter)
            if (oldMeta | meta) & Self.ownedBit != 0, oldMeta & Self.ownedBit != meta & Self.ownedBit || oldNode != node {
                trackOwned(meta: oldMeta, node: oldNode, position: position, adding: false)
                trackOwned(meta: meta, node: node, position: position, adding: true)
            }
            let record = records.address(of: position)
            record.pointee.timestamp = timestamp
            // Bound first: assigning an optional value copies it through the generic `Optional`
            // value witness (~120 instructions a write).
            if let bytes = consume value { record.pointee.value = bytes } else { record.pointee.value = nil }
            record.pointee.contribution = contribution
            record.pointee.node = node
            record.pointee.meta = meta
            tally(isTombstone: isTombstone, meta: meta, node: node, by: 1)
            if let expiresAt { schedule(position, atMilliseconds: expiresAt) }
            digest.toggle(contribution: old ^ contribution, of: key)
            noteHighest(timestamp: timestamp, node: node, version: version)
            outcome = .replaced
        } else {
            let contribution = StateDigest.contribution(keyHash: key.stableHash, timestamp: timestamp, nodeHash: version.nodeHash,
                                                        value: value, expiresAtMilliseconds: expiresAt, ownedByWriter: ownedByWriter)
            let number = UInt32(records.count)
            let atomic = key.elementCount == 0
            let keyBytes = atomic
                ? PackedBytes(utf8: key.name)
                : key.packedElement
            let node = nodeNumber(of: version)
            let meta = Self.meta(expiresAtMilliseconds: expiresAt, ownedByWriter: ownedByWriter)
            let name = atomic ? Self.inlineName : nameNumber(of: key.name)
            if atomic {
                memberSlots.append(0)
            } else {
                memberSlots.append(UInt32(names[Int(name)].members.count))
                names[Int(name)].members.append(number)
                if Self.isCompound(keyBytes) {
                    countKinds(of: name) { kinds in keyBytes.withUnsafeBytes { kinds.count(compound: $0, by: 1) } }
                    if let group = groupID(name: name, keyBytes: keyBytes) {
                        joinGroup(group, number: number, tombstone: isTombstone, counted: Self.isSetDot(keyBytes))
                    }
                }
            }
            records.append(Record(keyHash: key.stableHash, timestamp: timestamp, contribution: contribution,
                                  meta: meta, value: value, name: name, keyBytes: keyBytes, node: node))
            tally(isTombstone: isTombstone, meta: meta, node: node, by: 1)
            ownedSlots.recordAppended()
            trackOwned(meta: meta, node: node, position: Int(number), adding: true)
            expirySlots.recordAppended()
            if let expiresAt { schedule(Int(number), atMilliseconds: expiresAt) }
            // An absent key's probe ends at an empty cell of `index`, never of `draining`.
            assert(cell >= 0, "EntryTable: an insert into the index being drained")
            index[cell] = Self.cellValue(record: Int(number), hash: key.stableHash)
            digest.toggle(contribution: contribution, of: key)
            let bucket = digest.bucket(of: key)
            bucketNext.append(bucketHeads[bucket])
            bucketHeads[bucket] = number + 1
            noteHighest(timestamp: timestamp, node: node, version: version)
            outcome = .inserted
            if drainingCells != 0 { drain(cells: Self.drainCellsPerInsert) }
            if records.count * 4 > index.count * 3 { grow(minimumCells: records.count * 2) }
        }
        assert(invariantsHold(afterMerging: version, for: key), "EntryTable: an invariant broke in a merge of \(key)")
        return outcome
    }

    /// Raises `highest` to a merged version (`timestamp`, node number `node`) above it.
    @inline(__always)
    private mutating func noteHighest(timestamp: HLCTimestamp, node: UInt32, version: borrowing Version) {
        guard let current = highest else {
            highest = (timestamp, node)
            return
        }
        // The writes of one decision share a version: compare whole versions only on a tie of
        // timestamps between different nodes (rare: only then is a `Version` built).
        if current.timestamp < timestamp
            || (current.timestamp == timestamp && current.node != node && highestVersion! < version) {
            highest = (timestamp, node)
        }
    }

    /// What must hold after a merge that changed the table, checked in debug builds (`assert`):
    /// the stored entry of `key` is `entry` or newer, and its digest contribution is its own;
    /// the index is at most three quarters full and names the record; the counts are within the record
    /// count; the digest's inner nodes on `key`'s path are the XOR of their children; the
    /// highest version is at least `entry`'s; an owned record is in its node's list at its slot;
    /// the record's schedule item, if any, names it, and an
    /// unreported expiring value has one due by its instant. Costs one probe, one contribution and the
    /// children along the path.
    private func invariantsHold(afterMerging version: borrowing Version, for key: StateKey) -> Bool {
        guard let position = find(key) else { return false }
        let record = records[position]
        guard record.keyHash == key.stableHash, record.timestamp >= version.timestamp,
              record.contribution == StateDigest.contribution(of: key, self.entry(of: record)) else { return false }
        guard records.count * 4 <= index.count * 3, tombstoneCount >= 0, expiredCount >= 0, expiringCount >= 0,
              tombstoneCount + expiredCount + expiringCount <= records.count else { return false }
        guard let highest = highestVersion, highest >= version else { return false }
        guard !ownedSlots.isMade || ownedSlots.count == records.count else { return false }
        if record.owned {
            let slot = Int(ownedSlots.slot(of: position))
            guard slot != 0, ownedPositions[Int(record.node)][slot - 1] == position else { return false }
        } else if ownedSlots.slot(of: position) != 0 {
            return false
        }
        guard !expirySlots.isMade || expirySlots.count == records.count else { return false }
        let scheduled = Int(expirySlots.slot(of: position))
        if scheduled != 0 {
            guard Int(expirySchedule[scheduled - 1].record) == position else { return false }
        }
        if record.value != nil, record.expiry != 0, !record.swept {
            guard scheduled != 0, expirySchedule[scheduled - 1].instant <= record.expiry else { return false }
        }
        return digest.pathIsConsistent(toBucket: digest.bucket(of: key))
    }

    /// Below this many records `prefetch` names nothing: a table that small (about 150 bytes a
    /// key with its index cells and value) stays in a core's cache, where the hints are pure
    /// cost (`make bench`'s ten-write decision writes ten keys over and over).
    package static let prefetchMinimumRecords = 4_096

    /// Names to `hint` the memory that merging `count` keys (the stable hash of each, from
    /// `hash`) will read, pass by pass: each key's index cell (all of them first), then (for a
    /// merge, not with `readingValues`) its digest leaf, then the record the probe compares
    /// first, named by the first cell of the key's probe sequence whose hash tag is the key's
    /// (or, for a merge of a key whose sequence ends before one, an insert, the head of the
    /// digest leaf's record list), then the stored value a merge would replace (`forWriting`: its
    /// reference count is about to drop; with `readingValues`, for a reader about to retain and
    /// copy it, also the value's next line). The caller turns each address into a processor
    /// prefetch (DecideCore has no way to; `NodeCore.prefetch` in Decide does), so a batch of
    /// merges of keys spread over a large table waits for its cache misses together instead of
    /// one after another. Reads only the index and the records, changes nothing, and a wrong
    /// guess (a key sharing another's tag, a sequence that leaves the home line) costs a wasted
    /// hint or a wait, never a wrong merge. Names
    /// nothing for fewer than two keys or a table below `prefetchMinimumRecords`.
    package func prefetch(count: Int, readingValues: Bool = false, hash: (Int) -> UInt64,
                          hint: (_ address: UnsafeRawPointer, _ forWriting: Bool) -> Void) {
        guard count > 1, records.count >= Self.prefetchMinimumRecords else { return }
        let mask = index.count - 1
        index.withUnsafeBufferPointer { cells in
          draining.withUnsafeBufferPointer { drainingCells in
            records.withUnsafeBufferPointer { records in
                guard let cellBase = cells.baseAddress, let recordBase = records.baseAddress else { return }
                func home(_ hash: UInt64) -> UnsafePointer<UInt64> {
                    let cell = firstCell(ofHash: hash)
                    return cell >= 0 ? cellBase + cell : drainingCells.baseAddress! + ~cell
                }
                // The first cell of the probe sequence whose tag is the hash's (a record the
                // probe compares), or 0 where the sequence ends without one: a neighbour's
                // record, which the probe passes by its tag, is not worth a hint.
                func candidate(_ hash: UInt64) -> UInt64 {
                    func walk(_ cells: UnsafeBufferPointer<UInt64>, from home: Int) -> UInt64 {
                        let mask = cells.count - 1
                        var cell = home
                        while true {
                            let stored = cells[cell]
                            if stored == 0 || Self.cell(stored, mayHold: hash) { return stored }
                            cell = (cell + 1) & mask
                        }
                    }
                    if let old = drainingHome(of: hash) {
                        let found = walk(drainingCells, from: old)
                        if found != 0 { return found }
                    }
                    return walk(cells, from: Self.homeCell(of: hash, mask: mask))
                }
                for item in 0..<count {
                    hint(UnsafeRawPointer(home(hash(item))), false)
                }
                // A merge also toggles the key's digest leaf (a line a reader never touches).
                if !readingValues {
                    for item in 0..<count { digest.hintLeaf(ofHash: hash(item)) { hint($0, true) } }
                }
                for item in 0..<count {
                    let stored = candidate(hash(item))
                    if stored != 0 {
                        hint(UnsafeRawPointer(recordBase + Self.record(inCell: stored)), false)
                    } else if !readingValues {
                        // No record to compare: the key is absent, and its merge an insert,
                        // which links the new record into its digest leaf's list.
                        hintBucketHead(ofHash: hash(item)) { hint($0, true) }
                    }
                }
                for item in 0..<count {
                    let stored = candidate(hash(item))
                    guard stored != 0 else { continue }
                    // The value's storage object, if it has one (a tombstone and a value held in
                    // place have none), read as the bare pointer it is: no retain, which would
                    // wait for the line.
                    guard let address = recordBase[Self.record(inCell: stored)].value?.heapObjectAddress else { continue }
                    hint(address, true)
                    // A reader copies the bytes too: the line after the header's holds most of
                    // a short value.
                    if readingValues { hint(address + 64, false) }
                }
            }
          }
        }
    }

    /// Names to `hint` the index cell a key of stable hash `hash` is probed from first, for a
    /// writer that knows the key well before it merges (a decision's write, before its value is
    /// encoded): a key spread over a large index misses the cache there, and the line then
    /// arrives while the encoding runs. Names nothing for an index of fewer than
    /// `2 × prefetchMinimumRecords` cells.
    package func hintHomeCell(of hash: UInt64, hint: (_ address: UnsafeRawPointer) -> Void) {
        guard index.count >= 2 * Self.prefetchMinimumRecords else { return }
        let cell = firstCell(ofHash: hash)
        if cell >= 0 {
            index.withUnsafeBufferPointer { cells in hint(UnsafeRawPointer(cells.baseAddress! + cell)) }
        } else {
            draining.withUnsafeBufferPointer { cells in hint(UnsafeRawPointer(cells.baseAddress! + ~cell)) }
        }
        // The digest leaf the merge will toggle, too, and the head of that leaf's list of
        // records, which an insert links its record into.
        digest.hintLeaf(ofHash: hash, hint: hint)
        hintBucketHead(ofHash: hash, hint: hint)
    }

    /// Names to `hint` the slot of `bucketHeads` that inserting the key of stable hash `hash`
    /// reads and writes: a random slot of 256 KiB (the default digest), which a table's
    /// records streaming through the cache push out (docs/design/0010-prefetch.md, "A single
    /// write hints its lines early").
    private func hintBucketHead(ofHash hash: UInt64, hint: (_ address: UnsafeRawPointer) -> Void) {
        bucketHeads.withUnsafeBufferPointer { heads in
            guard let base = heads.baseAddress else { return }
            hint(UnsafeRawPointer(base + digest.bucket(ofHash: hash)))
        }
    }

    /// Removes the tombstone of `key` if it is still the one at `version`; returns whether it
    /// was removed. Live entries are never removed here.
    @discardableResult
    package mutating func collectTombstone(for key: StateKey, version: Version) -> Bool {
        collect(key, version: version)
    }

    /// Removes the entry of `key` if it is still the one at `version` and is absent for good by
    /// the rule a collection sweep applies (`collectAbsent`): a tombstone, a value already
    /// reported expired (`expire(dueAtMilliseconds:)`), or a value owned by a node
    /// `isRemovedOwner` names; returns whether it was removed. One key at a time, for tests and
    /// tools: the node collects with `collectAbsent`.
    @discardableResult
    package mutating func collect(_ key: StateKey, version: Version, isRemovedOwner: (String) -> Bool = { _ in false }) -> Bool {
        let cell = probe(key)
        guard stored(at: cell) != 0 else { return false }
        let position = Self.record(inCell: stored(at: cell))
        guard self.version(of: records[position]) == version,
              isCollectable(position, ownerRemoved: { isRemovedOwner(nodeIDs[Int($0)].id) }) else { return false }
        remove(at: position, cell: cell)
        return true
    }

    /// The rule both collections of stored records apply (`collect`, `collectAbsent`): record
    /// `position` is a tombstone, a value reported expired (one due but not reported yet is not:
    /// no expiry goes untold), or an owned value of a node (by number) that `ownerRemoved` names.
    /// An arriving entry carries no "reported" mark and is judged by the clock instead
    /// (`Entry.isAbsentForGood`).
    @inline(__always)
    private func isCollectable(_ position: Int, ownerRemoved: (UInt32) -> Bool) -> Bool {
        let meta = records[position].meta
        return records[position].value == nil || meta & Self.sweptBit != 0
            || (meta & Self.ownedBit != 0 && ownerRemoved(records[position].node))
    }

    /// Where a collection sweep (`collectAbsent`) goes on from: the records it has not examined
    /// yet. `start` begins a sweep; `isFinished` once every record was examined.
    public struct SweepCursor: Sendable, Equatable {
        /// The records below this position are still to be examined.
        fileprivate var position: Int
        public static let start = SweepCursor(position: .max)
        /// A sweep with nothing left to examine.
        public static let finished = SweepCursor(position: 0)
        public var isFinished: Bool { position <= 0 }
    }

    /// Whether a collection sweep could find anything: a tombstone, a value reported expired
    /// (`expire(dueAtMilliseconds:)`), or an owned value of a node `isRemovedOwner` names.
    /// O(node ids), so a caller skips the sweep when there is nothing to collect.
    public func mayHoldAbsentForGood(isRemovedOwner: (String) -> Bool) -> Bool {
        tombstoneCount > 0 || expiredCount > 0
            || ownedCounts.indices.contains { ownedCounts[$0] > 0 && isRemovedOwner(nodeIDs[$0].id) }
    }

    /// Examines up to `budget` records from `cursor` on and removes each whose timestamp is
    /// below `horizon` and that is absent for good: a tombstone, a value already reported
    /// expired (`expire(dueAtMilliseconds:)`: one due but not reported yet waits, so no expiry
    /// goes untold), or an owned value of a node `isRemovedOwner` names; returns the removed keys
    /// with the versions they held, and moves `cursor` past what it examined. A caller collects
    /// a table of any size in slices,
    /// letting go of its lock between them: a record that enters or moves between two calls
    /// may be examined twice or not at all in that sweep (the next sweep sees it), and a record
    /// is only ever removed when it qualifies as it is examined. A key is built only for a
    /// removed record.
    public mutating func collectAbsent(below horizon: HLCTimestamp,
                                       isRemovedOwner: (String) -> Bool, from cursor: inout SweepCursor,
                                       budget: Int) -> [(key: StateKey, version: Version)] {
        let removedNodes = nodeIDs.map { isRemovedOwner($0.id) }
        var position = min(cursor.position, records.count)
        var examined = 0
        var collected: [(key: StateKey, version: Version)] = []
        while position > 0 && examined < budget {
            position -= 1
            examined += 1
            // Fields read in place: copying the record would retain its value and key bytes.
            guard records[position].timestamp < horizon else { continue }
            guard isCollectable(position, ownerRemoved: { removedNodes[Int($0)] }) else { continue }
            let record = records[position]
            collected.append((key(of: record), version(of: record)))
            // The last record moves into `position`: it was examined already (positions are
            // walked downwards), so the walk goes on below it.
            remove(at: position, cell: cell(ofRecord: position))
        }
        cursor.position = position
        return collected
    }

    /// Up to `budget` stored (key, entry) pairs (tombstones, expired values and those of hidden
    /// owners included) from `cursor` on, moving `cursor` past them: a caller reads a table of
    /// any size in slices, letting go of its lock between them. Over a whole walk from `start`,
    /// every key stored for the whole walk is read at least once; a removal between two calls can
    /// move an already-read record into the part still to read, so a key may be read twice
    /// (with its entry as of each read: keep the newer). Keys stored after the walk began may be
    /// read or not.
    ///
    /// Appended to `output` in the walk's (downward) order, so a caller that keeps one buffer for
    /// its slices allocates nothing large while it holds its lock.
    package func appendEntries(from cursor: inout SweepCursor, budget: Int, into output: inout [KeyedEntry]) {
        let end = min(cursor.position, records.count)
        let start = max(0, end - max(budget, 1))
        cursor.position = start
        for position in stride(from: end - 1, through: start, by: -1) {
            output.append(KeyedEntry(key: key(of: records[position]), entry: entry(of: records[position])))
        }
    }

    /// The index cell that holds record `position` (it is in the index): the probe of its hash
    /// that stops at that record. A cell of `draining` is `~cell` (`stored(at:)`).
    private func cell(ofRecord position: Int) -> Int {
        let target = records.withUnsafeBufferPointer { UnsafePointer($0.baseAddress! + position) }
        let cell = probe(hash: records[position].keyHash) { $0 == target }
        assert(stored(at: cell) == Self.cellValue(record: position, hash: records[position].keyHash), "EntryTable: record \(position) is not in the index")
        return cell
    }

    /// Reports each stored value whose expiry instant is at or before `now` (hybrid-clock
    /// milliseconds) and that was not reported before: once per entry, earliest first, so the
    /// node tells its observers that the key is gone. The entries stay stored (see the type's
    /// notes) and count in `expiredCount`. At most `limit` scheduled items are looked at, so a
    /// caller that lets go of its lock between calls bounds each hold; `nextExpiryMilliseconds`
    /// then says whether more are due.
    public mutating func expire(dueAtMilliseconds now: UInt64, limit: Int = .max) -> [(key: StateKey, entry: Entry)] {
        var expired: [(key: StateKey, entry: Entry)] = []
        var looked = 0
        while looked < limit, let first = expirySchedule.first, first.instant <= now {
            looked += 1
            let position = Int(first.record)
            let (meta, node) = (records[position].meta, records[position].node)
            let expiry = meta & Self.instantMask
            // A value with a lifetime not reported yet (not a tombstone, a lasting value, or swept).
            let expiring = records[position].value != nil && expiry != 0 && meta & Self.sweptBit == 0
            if expiring, expiry > first.instant {
                // Renewed after it was scheduled: due later (perhaps still by `now`, after
                // others that are earlier).
                changeSchedule { $0.reschedule(slot: 0, atMilliseconds: expiry, placed: $1) }
                continue
            }
            unschedule(position)
            guard expiring else { continue }
            tally(isTombstone: false, meta: meta, node: node, by: -1)
            records[position].meta = meta | Self.sweptBit
            tally(isTombstone: false, meta: meta | Self.sweptBit, node: node, by: 1)
            expired.append((key(of: records[position]), entry(of: records[position])))
        }
        return expired
    }

    /// Makes sure record `position`, which expires at `instant`, has an item due by then: a new
    /// one, or its item moved earlier. An item due earlier stays: when it comes up, `expire`
    /// moves it to the record's instant then (a renewal, which only moves an instant later,
    /// costs nothing here).
    @inline(__always)
    private mutating func schedule(_ position: Int, atMilliseconds instant: UInt64) {
        expirySlots.make(records: records.count)
        let scheduled = Int(expirySlots[position])
        if scheduled == 0 {
            changeSchedule { $0.insert(record: UInt32(position), atMilliseconds: instant, placed: $1) }
        } else if expirySchedule[scheduled - 1].instant > instant {
            changeSchedule { $0.reschedule(slot: scheduled - 1, atMilliseconds: instant, placed: $1) }
        }
    }

    /// Takes record `position`'s item, if it has one, off the schedule.
    @inline(__always)
    private mutating func unschedule(_ position: Int) {
        let scheduled = Int(expirySlots.slot(of: position))
        guard scheduled != 0 else { return }
        expirySlots[position] = 0
        changeSchedule { $0.remove(slot: scheduled - 1, placed: $1) }
    }

    /// Runs `body` on the schedule with the `placed` it takes: one that writes each moved item's
    /// slot into `expirySlots` (not empty: only records have items).
    @inline(__always)
    private mutating func changeSchedule(_ body: (inout ExpirySchedule, (UInt32, Int) -> Void) -> Void) {
        let first = expirySlots.firstAddress()
        body(&expirySchedule) { record, slot in first[Int(record)] = UInt32(slot + 1) }
    }

    /// The earliest expiry instant scheduled (possibly of a value since replaced), for a
    /// caller that waits for it; nil when nothing expires.
    public var nextExpiryMilliseconds: UInt64? { expirySchedule.first?.instant }

    /// Items in the expiry schedule: at most one a record, 12 bytes each.
    package var expiryScheduleCount: Int { expirySchedule.count }

    /// The nodes whose owned values read as present from now on (nil: every node's); an owned
    /// value of any other writer reads as absent in `value(ofAtomicNamed:atMilliseconds:)` and
    /// `liveKeys`, and stays stored (docs/consistency.md, "Node-owned keys").
    public mutating func setPresentOwners(_ owners: Set<String>?) {
        presentOwners = owners
        ownerHidden = nodeIDs.map { node in owners.map { !$0.contains(node.id) } ?? false }
    }

    /// Every stored owned value (not tombstones, not reported expired) whose writer is in
    /// `owners`, with its entry: the keys that appear or disappear when those nodes come or go.
    /// O(the records those nodes own), from `ownedPositions`: no scan of the table.
    public func ownedEntries(of owners: Set<String>) -> [(key: StateKey, entry: Entry)] {
        guard !owners.isEmpty else { return [] }
        var found: [(key: StateKey, entry: Entry)] = []
        for number in nodeIDs.indices where ownedCounts[number] > 0 && owners.contains(nodeIDs[number].id) {
            for position in ownedPositions[number] {
                let record = records[Int(position)]
                guard !record.swept, record.value != nil else { continue }
                found.append((key(of: record), entry(of: record)))
            }
        }
        return found
    }

    /// Whether a reader at `now` sees the value of the record at `index`: it has one, not
    /// expired, and not of a hidden owner (`Entry.isExpired`, and the node's own visibility
    /// rule, on a record). Reads the fields in place, without copying the record.
    private func isReadable(at index: Int, _ now: UInt64) -> Bool {
        isReadable(at: index, clock: { now })
    }

    /// `isReadable(at:_:)`, asking `now` for the instant only when the record expires.
    @inline(__always)
    private func isReadable(at index: Int, clock now: () -> UInt64) -> Bool {
        let meta = records[index].meta
        let expiry = meta & Self.instantMask
        return records[index].value != nil && (expiry == 0 || now() < expiry)
            && (meta & Self.ownedBit == 0 || !ownerHidden[Int(records[index].node)])
    }

    /// Every stored (key, entry), in no particular order.
    public var entries: some Sequence<(key: StateKey, entry: Entry)> {
        records.lazy.map { (key: self.key(of: $0), entry: self.entry(of: $0)) }
    }

    /// Every stored (key, entry), sorted by key.
    public func sortedEntries() -> [(key: StateKey, entry: Entry)] {
        entries.sorted { $0.key < $1.key }
    }

    /// The keys in digest leaf `bucket`.
    public func keys(inBucket bucket: Int) -> [StateKey] { members(ofBucket: bucket).map { key(of: records[$0]) } }

    /// The number of digest leaves: the buckets `liveKeys(fromBucket:...)` walks.
    public var bucketCount: Int { bucketHeads.count }

    /// The record numbers in digest leaf `bucket`, newest first.
    private func members(ofBucket bucket: Int) -> [Int] {
        var numbers: [Int] = []
        var next = bucketHeads[bucket]
        while next != 0 {
            numbers.append(Int(next - 1))
            next = bucketNext[Int(next - 1)]
        }
        return numbers
    }

    /// Takes record `number` out of its leaf's list.
    private mutating func unlink(_ number: Int, fromBucket bucket: Int) {
        relink(UInt32(number + 1), to: bucketNext[number], inBucket: bucket)
    }

    /// Record `from` moves to number `to`: it keeps its place in leaf `bucket`'s list.
    private mutating func renumber(_ from: Int, to: Int, inBucket bucket: Int) {
        bucketNext[to] = bucketNext[from]
        relink(UInt32(from + 1), to: UInt32(to + 1), inBucket: bucket)
    }

    /// The link of leaf `bucket`'s list that names `old` (its head or a record's next) names
    /// `new` instead. O(the leaf's length), as finding it in an array per leaf was.
    private mutating func relink(_ old: UInt32, to new: UInt32, inBucket bucket: Int) {
        if bucketHeads[bucket] == old {
            bucketHeads[bucket] = new
            return
        }
        var current = bucketHeads[bucket]
        while current != 0 {
            if bucketNext[Int(current - 1)] == old {
                bucketNext[Int(current - 1)] = new
                return
            }
            current = bucketNext[Int(current - 1)]
        }
        preconditionFailure("record \(old - 1) is not in digest leaf \(bucket)'s list")
    }

    /// The keys holding a value (not tombstones, not expired at `now`, not of a hidden owner) in digest leaves from `bucket` on, leaf by
    /// leaf, stopping after the leaf where `minimumKeys` were reached or after `maximumBuckets`
    /// leaves; returns them and the first leaf not visited (`bucketCount` when every leaf was).
    /// A key's leaf depends only on its hash, so a walk over every leaf in order sees every key
    /// held throughout the walk exactly once, whatever is written meanwhile.
    public func liveKeys(fromBucket bucket: Int, minimumKeys: Int, maximumBuckets: Int,
                         atMilliseconds now: UInt64) -> (keys: [StateKey], next: Int) {
        var keys: [StateKey] = []
        var next = max(0, bucket)
        let end = min(bucketHeads.count, next + max(1, maximumBuckets))
        while next < end && keys.count < minimumKeys {
            var member = bucketHeads[next]
            while member != 0 {
                if isReadable(at: Int(member - 1), now) { keys.append(key(of: records[Int(member - 1)])) }
                member = bucketNext[Int(member - 1)]
            }
            next += 1
        }
        return (keys, next)
    }

    /// Every stored (key, slot) whose key falls in digest leaf `bucket`, without a scan.
    public func slots(inBucket bucket: Int) -> [(key: StateKey, slot: Slot)] {
        members(ofBucket: bucket).map { number in
            let record = records[number]
            return (key: key(of: record), slot: Slot(entry: entry(of: record), contribution: record.contribution))
        }
    }

    /// Every stored (key, entry) whose key falls in digest leaf `bucket`, without a scan.
    public func entries(inBucket bucket: Int) -> [(key: StateKey, entry: Entry)] {
        members(ofBucket: bucket).map { number in
            let record = records[number]
            return (key: key(of: record), entry: entry(of: record))
        }
    }

    // MARK: layout

    private func key(of record: Record) -> StateKey {
        if record.name == Self.inlineName {
            let name = record.keyBytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            return StateKey(name: name, packedElement: .inline(0, 0, count: 0), stableHash: record.keyHash)
        }
        return StateKey(name: names[Int(record.name)].name, packedElement: record.keyBytes, stableHash: record.keyHash)
    }

    /// The stored keys whose `stableHash` is `hash` (nearly always none or one; a hash shared
    /// by two keys gives both). No allocation beyond the result: the index's probe sequence
    /// for `hash` is walked to its first empty cell.
    package func keys(withStableHash hash: UInt64) -> [StateKey] {
        var found: [StateKey] = []
        func walk(_ cells: GrowingArray<UInt64>, from home: Int) {
            let mask = cells.count - 1
            var cell = home
            while cells[cell] != 0 {
                // The hash read in place: only a matching record is copied (a copy retains its bytes).
                let position = Self.record(inCell: cells[cell])
                if Self.cell(cells[cell], mayHold: hash), records[position].keyHash == hash { found.append(key(of: records[position])) }
                cell = (cell + 1) & mask
            }
        }
        if let home = drainingHome(of: hash) { walk(draining, from: home) }
        walk(index, from: Self.homeCell(of: hash, mask: index.count - 1))
        return found
    }

    /// Whether `record` is `key`'s (its stable hash already matched).
    private func holds(_ record: UnsafePointer<Record>, _ key: StateKey) -> Bool {
        guard record.pointee.name == Self.inlineName else {
            return record.pointee.keyBytes == key.packedElement && names[Int(record.pointee.name)].name == key.name
        }
        return key.elementCount == 0 && record.pointee.keyBytes.equals(utf8: key.name)
    }

    /// The number of a state name for a new record (the caller adds the record to its
    /// `members`), interned on first sight.
    private mutating func nameNumber(of name: String) -> UInt32 {
        if let known = lookedUpNumber(ofName: name) { return known }
        let number: UInt32
        if let free = freeNames.popLast() {
            number = free
            names[Int(free)] = (name, GrowingArray())
            nameKinds[Int(free)] = StoredKinds()
            nameNumbers[name] = free
        } else {
            number = UInt32(names.count)
            names.append((name, GrowingArray()))
            nameKinds.append(StoredKinds())
            nameNumbers[name] = number
        }
        latestName = number
        return number
    }

    /// Record `position`, of name `number`, is gone: it leaves the name's members (the last
    /// member takes its slot), and the name is forgotten with its last record.
    private mutating func releaseName(_ number: UInt32, of position: Int) {
        let slot = Int(memberSlots[position])
        let lastMember = names[Int(number)].members.removeLast()
        if slot < names[Int(number)].members.count {
            names[Int(number)].members[slot] = lastMember
            memberSlots[Int(lastMember)] = UInt32(slot)
        }
        guard names[Int(number)].members.isEmpty else { return }
        nameNumbers[names[Int(number)].name] = nil
        names[Int(number)].name = ""
        freeNames.append(number)
    }

    /// Every stored element (tombstones, expired values and those of hidden owners included) of
    /// the collection named `name`, with its entry, in no particular order. O(elements of that
    /// collection), not O(table).
    public func elements(ofCollectionNamed name: String) -> [(key: StateKey, entry: Entry)] {
        guard let number = nameNumbers[name] else { return [] }
        return names[Int(number)].members.map { member in
            let record = records[Int(member)]
            return (key: key(of: record), entry: entry(of: record))
        }
    }

    /// Every stored element holding a value (expired values and those of hidden owners
    /// included; tombstones are counted, not listed) of the collection named `name` in the same
    /// group as element id `element` (`ElementGroup`: the dots of one member of a set), with its
    /// entry; none when `element` has no group. O(values of that group), not O(collection).
    public mutating func elements(ofCollectionNamed name: String, inGroupOf element: [UInt8]) -> [(key: StateKey, entry: Entry)] {
        var found: [(key: StateKey, entry: Entry)] = []
        forEachElement(ofCollectionNamed: name, inGroupOf: element) { found.append(($0, $1)) }
        return found
    }

    /// Calls `body` with each element of `elements(ofCollectionNamed:inGroupOf:)`, building no
    /// array; answers whether the group stores any record at all, a tombstone included (a set
    /// member the table still counts). The group's tombstones cost nothing here: a set member
    /// inserted again and again keeps one per insert until collection
    /// (docs/design/0002-sets.md), and its live dot is all an insert asks for.
    @discardableResult
    public mutating func forEachElement(ofCollectionNamed name: String, inGroupOf element: [UInt8],
                                        _ body: (StateKey, Entry) -> Void) -> Bool {
        guard let number = lookedUpNumber(ofName: name) else { return false }
        return element.withUnsafeBytes { probe -> Bool in
            guard let length = ElementGroup.prefixLength(probe) else { return false }
            let prefix = UnsafeRawBufferPointer(rebasing: probe[..<length])
            // Whether record `member` is in the group, and a tombstone; one that holds a value
            // goes to `body`.
            func visit(_ member: UInt32) -> (inGroup: Bool, tombstone: Bool) {
                let record = self.records[Int(member)]
                guard record.keyBytes.withUnsafeBytes({ $0.count >= length && UnsafeRawBufferPointer(rebasing: $0[..<length]).elementsEqual(prefix) }) else {
                    return (false, false)
                }
                guard record.value != nil else { return (true, true) }
                body(key(of: record), entry(of: record))
                return (true, false)
            }
            // A small collection (a counter's few slots) is walked whole: comparing a few
            // records' first bytes costs less than hashing the group and probing `groups`
            // (GroupID's hash and probe were 8 % of a run of pipelined INCRs).
            if names[Int(number)].members.count <= Self.wholeWalkRecords {
                var stored = false
                for member in names[Int(number)].members where visit(member).inGroup { stored = true }
                return stored
            }
            guard let slot = groups.index(forKey: GroupID(name: number, bytes: probe, length: length)) else { return false }
            let group = groups.values[slot]
            // Counted tombstones are known by group hash, not compared: a group sharing a hash
            // with another (one in 2^64 a pair) answers for that one's tombstones too.
            var stored = group.tombstones > 0
            var listedTombstones = false
            group.forEach { member in
                let seen = visit(member)
                if seen.inGroup { stored = true }
                if seen.tombstone { listedTombstones = true }
            }
            // The tombstones this read met are counted from now on: each is walked once.
            if listedTombstones {
                let records = self.records
                groups.values[slot].countTombstones { records[Int($0)].value == nil }
            }
            return stored
        }
    }

    /// A collection of at most this many records is walked whole for one group's records
    /// (`forEachElement(ofCollectionNamed:inGroupOf:_:)`) instead of looked up in `groups`.
    private static let wholeWalkRecords = 8

    /// The number of state name `name`, if a stored collection key uses it: `latestName` when it
    /// is that name (one string comparison), else from `nameNumbers`, and then the latest.
    @inline(__always)
    private mutating func lookedUpNumber(ofName name: String) -> UInt32? {
        let latest = Int(latestName)
        if latest < names.count, !names[latest].members.isEmpty, names[latest].name == name { return latestName }
        guard !nameNumbers.isEmpty, let number = nameNumbers[name] else { return nil }
        latestName = number
        return number
    }

    /// The group of a collection record of name number `name` and id `keyBytes`, if it has one.
    @inline(__always)
    private func groupID(name: UInt32, keyBytes: PackedBytes) -> GroupID? {
        keyBytes.withUnsafeBytes { bytes in
            guard bytes.count > 3, bytes[0] == 0xFF, let length = ElementGroup.prefixLength(bytes) else { return nil }
            return GroupID(name: name, bytes: bytes, length: length)
        }
    }

    /// Record `number` (a tombstone or not) is in `group`, which it starts when it is the
    /// group's first. A tombstone is counted at once: no read will look for it.
    private mutating func joinGroup(_ group: GroupID, number: UInt32, tombstone: Bool, counted: Bool) {
        if let index = groups.index(forKey: group) {
            groups.values[index].insert(number, tombstone: tombstone)
            return
        }
        var records = GroupRecords()
        records.insert(number, tombstone: tombstone)
        groups[group] = records
        if counted { countKinds(of: group.name) { $0.countSetMember(by: 1) } }
    }

    /// Record `position` (a tombstone or not) is gone from `group`; the group is forgotten with
    /// its last record.
    private mutating func leaveGroup(_ group: GroupID, position: Int, tombstone: Bool, counted: Bool) {
        guard var records = groups.removeValue(forKey: group) else { return }
        records.remove(UInt32(position), tombstone: tombstone)
        if !records.isEmpty {
            groups[group] = records
        } else if counted {
            countKinds(of: group.name) { $0.countSetMember(by: -1) }
        }
    }

    /// Whether a record's id is a set's dot (its groups are counted: `groupCount`).
    @inline(__always)
    private static func isSetDot(_ keyBytes: PackedBytes) -> Bool {
        keyBytes.withUnsafeBytes { $0[1] == ElementGroup.setDotTag.1 }
    }

    /// `ElementGroup.isCompound` of a record's id.
    @inline(__always)
    private static func isCompound(_ keyBytes: PackedBytes) -> Bool {
        keyBytes.withUnsafeBytes { ElementGroup.isCompound($0) }
    }

    /// How many stored elements (tombstones included) of the collection named `name` are plain:
    /// not a counter's slot or a set's dot. O(1).
    public mutating func plainElementCount(ofCollectionNamed name: String) -> Int {
        storedKinds(ofCollectionNamed: name).plain
    }

    /// What the collection named `name` stores, from one lookup of the name (none for a name
    /// no element uses): how many plain elements, set members, sorted set members and counter
    /// slots, tombstones included. A front end tells the kinds a key may hold from it. O(1).
    public mutating func storedKinds(ofCollectionNamed name: String) -> StoredKinds {
        guard let number = lookedUpNumber(ofName: name) else { return StoredKinds() }
        return nameKinds[Int(number)].withPlain(ofRecords: names[Int(number)].members.count)
    }

    /// Calls `body` with every collection name whose compound records `predicate` accepts
    /// (`StoredKinds`, plain counts left out), in no particular order. O(collection names): a
    /// node's restart, and a member's removal, find the counters with a lifetime this way.
    package func forEachName(storing predicate: (StoredKinds) -> Bool, _ body: (String) -> Void) {
        for (number, kinds) in nameKinds.enumerated() where !kinds.isEmpty && predicate(kinds) { body(names[number].name) }
    }

    /// Changes name number `number`'s `nameKinds`.
    @inline(__always)
    private mutating func countKinds(of number: UInt32, _ change: (inout StoredKinds) -> Void) {
        change(&nameKinds[Int(number)])
    }

    /// How many sorted set members (live or tombstones) the collection named `name` stores. O(1).
    public mutating func scoredMemberCount(ofCollectionNamed name: String) -> Int {
        storedKinds(ofCollectionNamed: name).scoredMembers
    }

    /// How many set members (`ElementGroup` groups of set dots, live or with only
    /// tombstoned dots left) the collection named `name` stores. O(1).
    public mutating func groupCount(ofCollectionNamed name: String) -> Int {
        storedKinds(ofCollectionNamed: name).setMembers
    }

    /// Whether a stored element of the collection named `name` satisfies `predicate`, tried in
    /// no particular order until one does: O(elements tried), for "does this set have a member".
    public func containsElement(ofCollectionNamed name: String, where predicate: (StateKey, Entry) -> Bool) -> Bool {
        guard let number = nameNumbers[name] else { return false }
        for member in names[Int(number)].members {
            let record = records[Int(member)]
            if predicate(key(of: record), entry(of: record)) { return true }
        }
        return false
    }

    /// The number of stored elements (tombstones included) of the collection named `name`. O(1).
    public func elementCount(ofCollectionNamed name: String) -> Int {
        nameNumbers[name].map { names[Int($0)].members.count } ?? 0
    }

    /// Distinct state names interned for the stored collection keys (atomic keys keep their
    /// names in their records).
    package var nameCount: Int { nameNumbers.count }

    private func version(of record: Record) -> Version {
        let node = nodeIDs[Int(record.node)]
        return Version(timestamp: record.timestamp, node: node.id, nodeHash: node.hash)
    }

    private func entry(of record: Record) -> Entry {
        Entry(version: version(of: record), packedValue: record.value,
              expiresAtMilliseconds: record.expiry == 0 ? nil : record.expiry, ownedByWriter: record.owned)
    }

    /// The number of `version`'s node id, interned on first sight.
    @inline(__always)
    private mutating func nodeNumber(of version: Version) -> UInt32 {
        if latestNodeHash == version.nodeHash, hasLatestNode, latestNodeID == version.node { return latestNode }
        return nodeNumberNotLatest(of: version)
    }

    /// `nodeNumber(of:)` for a node other than the latest merge's, which it becomes.
    @inline(never)
    private mutating func nodeNumberNotLatest(of version: Version) -> UInt32 {
        let number: UInt32
        if let known = nodeNumbers[version.node] {
            number = known
        } else {
            number = UInt32(nodeIDs.count)
            nodeIDs.append((version.node, version.nodeHash))
            ownerHidden.append(presentOwners.map { !$0.contains(version.node) } ?? false)
            ownedCounts.append(0)
            ownedPositions.append(GrowingArray())
            nodeNumbers[version.node] = number
        }
        (latestNode, latestNodeID, latestNodeHash, hasLatestNode) = (number, version.node, version.nodeHash, true)
        return number
    }

    /// The record of `key`, if stored.
    private func find(_ key: StateKey) -> Int? {
        let stored = stored(at: probe(key))
        return stored == 0 ? nil : Self.record(inCell: stored)
    }

    /// The cell that holds `key`, or the empty cell where it would go.
    private func probe(_ key: StateKey) -> Int {
        probe(hash: key.stableHash) { holds($0, key) }
    }

    /// `probe(_:)` for a merge. `mutating` only so that a `mutating` caller lends the table
    /// where it lies: calling the non-mutating one, it made a bitwise copy of the whole table
    /// (221 bytes, a `memcpy` a merge) to lend as its `self`.
    private mutating func probeInPlace(_ key: StateKey) -> Int {
        probe(hash: key.stableHash) { holds($0, key) }
    }

    /// The cell whose record has stable hash `hash` and satisfies `matches`, or the empty cell
    /// where such a record would go. `matches` reads the record where it lies: handed a copy,
    /// each hit copied the whole record and destroyed it after, through its outlined value
    /// witnesses (docs/design/0008-in-place-access.md, "Records compared and values moved where
    /// they lie").
    /// A cell of `draining` is `~cell` (`stored(at:)`); an empty cell is always `index`'s.
    @inline(__always)
    private func probe(hash: UInt64, matches: (UnsafePointer<Record>) -> Bool) -> Int {
        records.withUnsafeBufferPointer { records in
            // Static searches over the buffers: a method of the table handed `matches` (which
            // captures the table) made the mutating merge copy the whole table to lend it.
            if let home = drainingHome(of: hash) {
                let found = draining.withUnsafeBufferPointer { cells in
                    Self.search(cells, records, from: home, hash: hash, matches: matches)
                }
                if found.matched { return ~found.cell }
            }
            return index.withUnsafeBufferPointer { cells in
                Self.search(cells, records, from: Self.homeCell(of: hash, mask: cells.count - 1), hash: hash, matches: matches).cell
            }
        }
    }

    /// The cell of `cells` from `home` on whose record has stable hash `hash` and satisfies
    /// `matches` (`matched`), or else the empty cell that ends the probe sequence.
    @inline(__always)
    private static func search(_ cells: UnsafeBufferPointer<UInt64>, _ records: UnsafeBufferPointer<Record>, from home: Int,
                               hash: UInt64, matches: (UnsafePointer<Record>) -> Bool) -> (cell: Int, matched: Bool) {
        let mask = cells.count - 1
        var cell = home
        while true {
            let stored = cells[cell]
            if stored == 0 { return (cell, false) }
            if Self.cell(stored, mayHold: hash) {
                let record = Self.record(inCell: stored)
                if records[record].keyHash == hash, matches(records.baseAddress! + record) { return (cell, true) }
            }
            cell = (cell + 1) & mask
        }
    }

    /// The value of the atomic key whose name is the UTF-8 bytes `name` (a Redis-protocol GET)
    /// at hybrid-clock instant `now`: `.none` when the key is not stored, `.some(nil)` for its
    /// tombstone, an expired value, or an owned value of a hidden owner (`setPresentOwners`). No
    /// `StateKey` (and no `String`) is built; bytes that are not UTF-8 match no stored key.
    public func value(ofAtomicNamed name: UnsafeRawBufferPointer, atMilliseconds now: UInt64) -> PackedBytes?? {
        value(ofAtomicNamed: name, clock: { now })
    }

    /// `value(ofAtomicNamed:atMilliseconds:)` with the instant asked of `now` only when the
    /// stored value expires: most keys never do, and a reader that would read a clock for every
    /// GET (syncnode's Redis-protocol endpoint) reads it for those that do.
    package func value(ofAtomicNamed name: UnsafeRawBufferPointer, clock now: () -> UInt64) -> PackedBytes?? {
        let stored = stored(at: probe(hash: Self.stableHash(ofAtomicNamed: name)) { record in
            record.pointee.name == Self.inlineName && record.pointee.keyBytes.equals(name)
        })
        guard stored != 0 else { return .none }
        let record = Self.record(inCell: stored)
        return .some(isReadable(at: record, clock: now) ? records[record].value : nil)
    }

    /// The `StateKey.stableHash` of the atomic key whose name is the UTF-8 bytes `name`,
    /// without building the key.
    package static func stableHash(ofAtomicNamed name: UnsafeRawBufferPointer) -> UInt64 {
        var hash = StableHash()
        hash.combine(buffer: name)
        hash.combine(buffer: UnsafeRawBufferPointer(start: nil, count: 0))
        return hash.value
    }

    /// The first cell a key of stable hash `hash` is probed at, in an index of `mask + 1` cells.
    /// Of the hash's high half only, which its cell holds (`cellValue`): a cell's home is known
    /// from the cell itself, so moving cells (`drain`) and closing a gap (`closeGap`) read no
    /// record, a cache miss each at a large size.
    @inline(__always)
    private static func homeCell(of hash: UInt64, mask: Int) -> Int {
        Int(truncatingIfNeeded: spread(hash >> 32)) & mask
    }

    /// Mixes the bits of `high` (a stable hash's high half) into its low ones, which pick the
    /// cell (the digest uses the hash's top bits for buckets, so keys of one leaf would
    /// otherwise crowd together).
    private static func spread(_ high: UInt64) -> UInt64 {
        let mixed = high &* 0x7FB5_D329_728E_A185
        return mixed ^ (mixed >> 27)
    }

    /// The content of cell `cell`: of `index`, or of `draining` for `~cell`.
    @inline(__always)
    private func stored(at cell: Int) -> UInt64 {
        cell >= 0 ? index[cell] : draining[~cell]
    }

    /// Writes `value` into cell `cell` (`stored(at:)`'s naming).
    private mutating func store(_ value: UInt64, at cell: Int) {
        if cell >= 0 { index[cell] = value } else { draining[~cell] = value }
    }

    /// The first cell a probe of stable hash `hash` reads (`stored(at:)`'s naming): its home
    /// cell in `draining` while that was not moved yet, else its home cell in `index`.
    @inline(__always)
    private func firstCell(ofHash hash: UInt64) -> Int {
        if let old = drainingHome(of: hash) { return ~old }
        return Self.homeCell(of: hash, mask: index.count - 1)
    }

    /// The home cell in `draining` of a key of stable hash `hash`, when its key may still be
    /// there: nil when nothing drains or that cell was moved (and the key with it).
    @inline(__always)
    private func drainingHome(of hash: UInt64) -> Int? {
        guard drainingCells != 0 else { return nil }
        let mask = drainingCells - 1
        let home = Self.homeCell(of: hash, mask: mask)
        return (home &- drainStart) & mask >= drained ? home : nil
    }

    /// Hands back to the system the whole pages of `draining`'s cells drained since the last
    /// call (all zero, and never read again: a probe reads only cells not moved yet). Freeing
    /// a 16 MiB index whose pages were all in use held the lock 1.6 ms in the insert that
    /// finished draining it; handed back bit by bit, little is left to free then.
    private mutating func releaseDrainedPages() {
        let perPage = GrowingArray<UInt64>.elementsPerPage
        // On the line of cells unrolled past the end (a drained run may wrap round to cell 0):
        // the size is a whole number of pages, so page boundaries agree on both turns.
        let from = drainStart + drainReleased
        let end = (drainStart + drained) / perPage * perPage
        guard end > from else { return }
        let cells = drainingCells
        if end <= cells {
            draining.releaseZeroedPages(in: from..<end)
        } else if from >= cells {
            draining.releaseZeroedPages(in: (from - cells)..<(end - cells))
        } else {
            draining.releaseZeroedPages(in: from..<cells)
            draining.releaseZeroedPages(in: 0..<(end - cells))
        }
        drainReleased = end - drainStart
    }

    /// Replaces the index with an empty one of at least `minimumCells` cells (a power of two)
    /// and starts moving the old one's cells into it (`drain`). The memory comes zeroed from
    /// the system (`GrowingArray(zeroedCount:)`): no pass over it here.
    private mutating func grow(minimumCells: Int) {
        // The budget empties one growth's index long before the next growth: finishing it here
        // is for safety, not a path a table takes.
        if drainingCells != 0 { drain(cells: .max) }
        var cells = 16
        while cells < minimumCells { cells <<= 1 }
        draining = index
        index = GrowingArray(zeroedCount: cells)
        // Its pages faulted in ahead, a chunk now and one each insert while it drains
        // (`drain`): a probe reads a cell before an insert writes it, and a page first read
        // faults twice (docs/design/0007-growing-without-stalls.md, "Pages faulted in ahead").
        indexPopulating = index.populateAhead(bytes: Self.populateBytesPerInsert)
        drainingCells = draining.count
        drained = 0
        drainReleased = 0
        // At most three quarters full: an empty cell is near.
        drainStart = draining.withUnsafeBufferPointer { cells in cells.firstIndex(of: 0)! }
    }

    /// Moves at least `budget` cells of `draining` (on from `drainStart` + `drained`) into
    /// `index`, and on to the next empty cell: it stops only before an empty cell, so a key whose
    /// home cell was passed is in `index`. Frees `draining` once every cell is moved.
    private mutating func drain(cells budget: Int) {
        if indexPopulating { indexPopulating = index.populateAhead(bytes: Self.populateBytesPerInsert) }
        let (cells, start, mask, indexMask) = (drainingCells, drainStart, drainingCells - 1, index.count - 1)
        var drained = self.drained
        var moved = 0
        draining.withUnsafeMutableBufferPointer { old in
            index.withUnsafeMutableBufferPointer { new in
                while drained < cells {
                    let from = (start + drained) & mask
                    let stored = old[from]
                    if stored == 0 {
                        if moved >= budget { break }
                    } else {
                        // The home is the cell's own (its hash's high half): no record is read.
                        var cell = Self.homeCell(of: stored, mask: indexMask)
                        while new[cell] != 0 { cell = (cell + 1) & indexMask }
                        new[cell] = stored
                        old[from] = 0
                    }
                    moved += 1
                    drained += 1
                }
            }
        }
        self.drained = drained
        if drained == drainingCells {
            draining = GrowingArray()
            drainingCells = 0
            self.drained = 0
            drainStart = 0
            drainReleased = 0
        } else if drained - drainReleased >= Self.releaseCells, draining.isMapped {
            releaseDrainedPages()
        }
    }

    /// Removes the record at `position`, whose index cell is `cell`: the last record moves into
    /// its place, and the probe sequence after the emptied cell is closed up (backward shift).
    private mutating func remove(at position: Int, cell: Int) {
        unschedule(position)
        let record = records[position]
        tally(isTombstone: record.value == nil, meta: record.meta, node: record.node, by: -1)
        trackOwned(meta: record.meta, node: record.node, position: position, adding: false)
        // By hash: building the key (a `String` for a long atomic name) cost an allocation a
        // removal, for a digest that reads only its hash.
        digest.toggle(contribution: record.contribution, ofHash: record.keyHash)
        let bucket = digest.bucket(ofHash: record.keyHash)
        if record.name != Self.inlineName {
            if Self.isCompound(record.keyBytes) {
                countKinds(of: record.name) { kinds in record.keyBytes.withUnsafeBytes { kinds.count(compound: $0, by: -1) } }
                if let group = groupID(name: record.name, keyBytes: record.keyBytes) {
                    leaveGroup(group, position: position, tombstone: record.value == nil, counted: Self.isSetDot(record.keyBytes))
                }
            }
            releaseName(record.name, of: position)
        }
        unlink(position, fromBucket: bucket)

        // Close the gap in the index the cell is in (`draining`'s for `~cell`): the sequence
        // after it stays in that index, as a key's whole probe sequence is in one.
        if cell >= 0 {
            Self.closeGap(at: cell, in: &index)
        } else {
            Self.closeGap(at: ~cell, in: &draining)
        }

        // Move the last record into the freed position.
        let last = records.count - 1
        if position != last {
            let moved = records[last]
            // Found by the record's address: no key built, no key bytes compared.
            store(Self.cellValue(record: position, hash: moved.keyHash), at: self.cell(ofRecord: last))
            renumber(last, to: position, inBucket: digest.bucket(ofHash: moved.keyHash))
            if moved.name != Self.inlineName {
                names[Int(moved.name)].members[Int(memberSlots[last])] = UInt32(position)
                if let group = groupID(name: moved.name, keyBytes: moved.keyBytes) {
                    groups[group]?.renumber(UInt32(last), to: UInt32(position))
                }
            }
            memberSlots[position] = memberSlots[last]
            let owned = ownedSlots.moveLast(last, to: position)
            if owned != 0 { ownedPositions[Int(moved.node)][Int(owned) - 1] = UInt32(position) }
            records[position] = moved
            let scheduled = expirySlots.moveLast(last, to: position)
            if scheduled != 0 { expirySchedule.renumber(slot: Int(scheduled) - 1, to: UInt32(position)) }
        }
        records.removeLast()
        ownedSlots.removeLast()
        expirySlots.removeLast()
        memberSlots.removeLast()
        bucketNext.removeLast()
    }

    /// Empties cell `hole` of `cells` and closes up the probe sequence after it (backward shift).
    private static func closeGap(at hole: Int, in cells: inout GrowingArray<UInt64>) {
        let mask = cells.count - 1
        var hole = hole
        var next = (hole + 1) & mask
        while cells[next] != 0 {
            let home = Self.homeCell(of: cells[next], mask: mask)
            // Move it back when its home is not cyclically within (hole, next].
            let distanceToNext = (next - home) & mask
            let distanceToHole = (hole - home) & mask
            if distanceToHole < distanceToNext {
                cells[hole] = cells[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        cells[hole] = 0
    }
}

/// An element group's key in `EntryTable.groups`: its collection's name number and a hash of
/// its bytes seeded per process.
private struct GroupID: Hashable {
    let name: UInt32
    let hash: Int

    init(name: UInt32, bytes: UnsafeRawBufferPointer, length: Int) {
        var hasher = Hasher()
        hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[..<length]))
        self.name = name
        self.hash = hasher.finalize()
    }
}

/// One element group's records: the numbers of those listed — every record holding a value,
/// nearly always one (a member inserted once since it was last removed everywhere), held in
/// place, more in an array; and tombstones not yet read past — and how many tombstones are
/// counted instead. A record turned into a tombstone stays listed (the merge that deletes it
/// does not look the group up) until a read of the group counts it (`countTombstones`).
private struct GroupRecords {
    private var first: UInt32 = .max
    private var rest: [UInt32] = []
    private(set) var tombstones: UInt32 = 0

    var isEmpty: Bool { first == .max && tombstones == 0 }

    /// Calls `body` with the number of each listed record, the first inserted first, without
    /// building an array.
    @inline(__always)
    func forEach(_ body: (UInt32) -> Void) {
        guard first != .max else { return }
        body(first)
        for number in rest { body(number) }
    }

    mutating func insert(_ number: UInt32, tombstone: Bool) {
        if tombstone { tombstones += 1 } else { append(number) }
    }

    private mutating func append(_ number: UInt32) {
        if first == .max { first = number } else { rest.append(number) }
    }

    /// Takes listed record `number` out of the list; false when it is not listed.
    private mutating func unlist(_ number: UInt32) -> Bool {
        if first == number {
            first = rest.popLast() ?? .max
        } else if let index = rest.firstIndex(of: number) {
            rest.swapAt(index, rest.count - 1)
            rest.removeLast()
        } else {
            return false
        }
        return true
    }

    /// Record `number` (`tombstone` says which) is gone from the group.
    mutating func remove(_ number: UInt32, tombstone: Bool) {
        if !unlist(number), tombstone { tombstones -= 1 }
    }

    /// Tombstone `number` holds a value again: listed (it may still be).
    mutating func list(_ number: UInt32) {
        if !unlist(number) { tombstones -= 1 }
        append(number)
    }

    /// The listed records `isTombstone` says are tombstones are counted instead.
    /// In place: the array keeps its room for the member's next dot.
    mutating func countTombstones(_ isTombstone: (UInt32) -> Bool) {
        var index = rest.count - 1
        while index >= 0 {
            if isTombstone(rest[index]) {
                rest.swapAt(index, rest.count - 1)
                rest.removeLast()
                tombstones += 1
            }
            index -= 1
        }
        // What takes the first place was checked above.
        if first != .max, isTombstone(first) {
            first = rest.popLast() ?? .max
            tombstones += 1
        }
    }

    mutating func renumber(_ old: UInt32, to new: UInt32) {
        if first == old { first = new } else if let index = rest.firstIndex(of: old) { rest[index] = new }
    }
}
