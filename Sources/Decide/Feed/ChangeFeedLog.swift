import DecideCore

/// A node's retained changes, numbered in the order the node took them, each kept as its
/// delta's wire encoding in chunks of bytes, and the readers waiting for the next one
/// (docs/design/0020-the-change-feed.md).
///
/// Only ever touched with the node's lock held (it lives in `NodeCore`): an append is part of
/// the commit that makes the change, so positions follow commit order exactly, and it costs
/// the commit an encoding and a copy, with no allocation and no lock of its own (a `Delta`
/// built and retained per change, behind a lock of its own, made a one-write decision 2.8
/// times slower). Readers copy the bytes of a page out under the lock and decode them after.
///
/// A change is `recordHeaderBytes` (its length and origin) and its delta's encoding, appended
/// to the newest chunk. The oldest changes are dropped by moving the start of retention over
/// them; a chunk is freed once retention has moved past all of it, so nothing retained is ever
/// moved or copied.
struct ChangeFeedLog {
    let id: ChangeFeedID
    let maxChanges: Int
    let maxBytes: Int
    let codec: WireCodec
    /// The size of a chunk (a change larger than one gets a chunk of its own size).
    let chunkBytes: Int
    /// The store of a durable node, which keeps every record in the same transaction as the
    /// entries of its change; nil for a node in memory.
    let store: (any NodeStore)?

    /// One run of retained changes' records, back to back, in memory the log allocates and
    /// frees itself (a struct, not a class: a class's stored `var`s cost a dynamic exclusivity
    /// check on each of the half-dozen touches of an append).
    struct Chunk {
        let base: UnsafeMutableRawPointer
        let capacity: Int
        /// The position of the chunk's first record.
        let firstPosition: UInt64
        var used = 0
        var count = 0
        /// The offset of every `indexStride`-th record, so a reader finds its position by
        /// walking at most that many records.
        var index: [UInt32] = []

        init(capacity: Int, firstPosition: UInt64) {
            self.capacity = capacity
            self.firstPosition = firstPosition
            base = .allocate(byteCount: capacity, alignment: 8)
        }

        /// The bytes the record at `offset` takes, its header included.
        func recordBytes(at offset: Int) -> Int {
            Int(UInt32(littleEndian: (base + offset).loadUnaligned(as: UInt32.self)))
        }
    }

    static let recordHeaderBytes = 5
    static let indexStride = 64

    private var chunks: [Chunk] = []
    /// The oldest retained position (`newest + 1` when none is), and where its record starts in
    /// `chunks[0]`.
    private(set) var oldest: UInt64
    private var oldestOffset = 0
    /// The position of the newest change taken (0: none yet).
    private(set) var newest: UInt64
    /// The newest change readers are given: `newest` in memory; on a durable node, the newest
    /// whose record is on disk with its change's entries. A reader never holds a change that a
    /// crash can take back, so the positions a restarted node gives again were never read.
    private(set) var servable: UInt64
    private(set) var count = 0
    /// The bytes of the retained records.
    private(set) var bytes = 0
    /// Changes dropped from retention so far.
    private(set) var evicted: UInt64 = 0
    private var waiters: [UInt64: @Sendable () -> Void] = [:]
    private var nextWaiter: UInt64 = 0
    private(set) var finished = false

    /// A log whose first change will be numbered `newest + 1`, kept in `store` when given.
    init(id: ChangeFeedID, newest: UInt64 = 0, maxChanges: Int, maxBytes: Int, limits: WireLimits, store: (any NodeStore)? = nil) {
        precondition(maxChanges >= 1, "a change feed log retains at least one change")
        self.id = id
        self.maxChanges = maxChanges
        self.maxBytes = maxBytes
        self.newest = newest
        self.servable = newest
        self.store = store
        oldest = newest + 1
        codec = WireCodec(limits: limits)
        chunkBytes = min(1 << 20, max(4096, maxBytes / 8))
    }

    // MARK: taking changes

    /// Takes a change whose delta is `encodedDelta` (`WireCodec`'s encoding, no type byte):
    /// numbers it, retains it, drops the oldest past the bounds, and wakes every waiting reader.
    mutating func append(encodedDelta: UnsafeRawBufferPointer, origin: CommittedDelta.Origin) {
        guard !finished else { return }
        let recordBytes = Self.recordHeaderBytes + encodedDelta.count
        let record = reserve(recordBytes)
        record.storeBytes(of: UInt32(recordBytes).littleEndian, toByteOffset: 0, as: UInt32.self)
        record.storeBytes(of: Self.code(of: origin), toByteOffset: 4, as: UInt8.self)
        (record + Self.recordHeaderBytes).copyMemory(from: encodedDelta.baseAddress!, byteCount: encodedDelta.count)
        store?.appendFeedRecordHoldingExclusion(UnsafeRawBufferPointer(start: record, count: recordBytes), position: newest)
        keepWithinBounds()
        // A durable node's readers get it once the store wrote it (`markDurable`).
        guard store == nil else { return }
        servable = newest
        if !waiters.isEmpty { wakeAll() }
    }

    /// Takes back a record `loadFeed` found in the store at start, at `position`; false when it
    /// does not follow the last one (the store is not what this log wrote).
    mutating func restore(_ record: UnsafeRawBufferPointer, position: UInt64) -> Bool {
        if count == 0 && newest == 0 {
            newest = position - 1
            oldest = position
        }
        guard position == newest + 1, record.count >= Self.recordHeaderBytes else { return false }
        reserve(record.count).copyMemory(from: record.baseAddress!, byteCount: record.count)
        keepWithinBounds()
        servable = newest
        return true
    }

    /// The store wrote the records up to `position` with their changes: readers get them now.
    mutating func markDurable(upTo position: UInt64) {
        guard position > servable else { return }
        servable = min(position, newest)
        if !waiters.isEmpty { wakeAll() }
    }

    /// Room for the next record, of `recordBytes`, numbered `newest + 1` and counted retained;
    /// the caller writes it there.
    @discardableResult
    private mutating func reserve(_ recordBytes: Int) -> UnsafeMutableRawPointer {
        if chunks.isEmpty || chunks[chunks.count - 1].capacity - chunks[chunks.count - 1].used < recordBytes {
            chunks.append(Chunk(capacity: max(chunkBytes, recordBytes), firstPosition: newest + 1))
        }
        let last = chunks.count - 1
        if chunks[last].count % Self.indexStride == 0 { chunks[last].index.append(UInt32(chunks[last].used)) }
        let record = chunks[last].base + chunks[last].used
        chunks[last].used += recordBytes
        chunks[last].count += 1
        newest += 1
        count += 1
        bytes += recordBytes
        return record
    }

    /// Takes `delta` (a peer's writes that changed this node, a catch-up's, an expiry's, an
    /// owner's coming or going).
    mutating func append(_ delta: Delta, origin: CommittedDelta.Origin) {
        let encoded = codec.encode(delta, afterTypeByte: nil)
        encoded.withUnsafeBytes { append(encodedDelta: $0, origin: origin) }
    }

    /// Drops the oldest changes past the bounds (the newest always stays); a durable node's
    /// store drops their rows with its next group.
    private mutating func keepWithinBounds() {
        guard isPastBounds else { return }
        repeat { dropOldest() } while isPastBounds
        store?.trimFeedHoldingExclusion(below: oldest)
    }

    private var isPastBounds: Bool { count > 1 && (count > maxChanges || bytes > maxBytes) }

    private mutating func dropOldest() {
        let length = chunks[0].recordBytes(at: oldestOffset)
        oldestOffset += length
        bytes -= length
        count -= 1
        oldest += 1
        evicted += 1
        if oldestOffset == chunks[0].used && chunks.count > 1 {
            chunks.removeFirst().base.deallocate()
            oldestOffset = 0
        }
    }

    private mutating func wakeAll() {
        let woken = waiters.values
        waiters = [:]
        for wake in woken { wake() }
    }

    // MARK: reading

    /// What `copy(after:maxChanges:maxBytes:)` found.
    enum Read {
        /// The records of the changes right after the position asked (at least one), back to
        /// back, and how many.
        case records([UInt8], count: Int)
        /// Nothing after the position yet.
        case upToDate
        /// The change right after the position was dropped; the oldest retained is `oldest`.
        case outOfRetention(oldest: FeedPosition)
        /// The position is past the newest change.
        case ahead(newest: FeedPosition)
        /// The node shut down: nothing more comes.
        case finished
    }

    /// The records of up to `maxChanges` changes right after `position`, stopping after the
    /// record that reaches `maxBytes` (so a page is never empty).
    func copy(after position: UInt64, maxChanges: Int, maxBytes: Int) -> Read {
        if position > newest { return .ahead(newest: FeedPosition(rawValue: servable)) }
        if position >= servable { return finished ? .finished : .upToDate }
        let first = position + 1
        guard first >= oldest else { return .outOfRetention(oldest: FeedPosition(rawValue: oldest)) }
        // The last chunk starting at or before `first`.
        var low = 0, high = chunks.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if chunks[middle].firstPosition <= first { low = middle } else { high = middle - 1 }
        }
        var chunkIndex = low
        var chunk = chunks[chunkIndex]
        let stride = Int(first - chunk.firstPosition) / Self.indexStride
        var offset = Int(chunk.index[stride])
        var at = chunk.firstPosition + UInt64(stride * Self.indexStride)
        while at < first {
            offset += chunk.recordBytes(at: offset)
            at += 1
        }
        var page: [UInt8] = []
        var copied = 0
        while copied < maxChanges && at <= servable && page.count < maxBytes {
            if offset == chunk.used {
                chunkIndex += 1
                chunk = chunks[chunkIndex]
                offset = 0
            }
            let length = chunk.recordBytes(at: offset)
            page.append(contentsOf: UnsafeRawBufferPointer(start: chunk.base + offset, count: length))
            offset += length
            at += 1
            copied += 1
        }
        return .records(page, count: copied)
    }

    /// The changes of a page `copy` returned, the first at `first`, decoded by the log's `codec`
    /// (outside the node's lock).
    static func decode(_ records: [UInt8], first: UInt64, codec: WireCodec) -> [FeedChange] {
        var changes: [FeedChange] = []
        var recent = RecentWireStrings()
        records.withUnsafeBytes { raw in
            var offset = 0
            var position = first
            while offset < raw.count {
                let length = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                let origin = origin(of: raw[offset + 4])
                let encoded = UnsafeRawBufferPointer(rebasing: raw[(offset + Self.recordHeaderBytes)..<(offset + length)])
                do throws(WireDecodeError) {
                    let delta = try codec.decodeDelta(encoded, recent: &recent)
                    changes.append(FeedChange(position: FeedPosition(rawValue: position), delta: delta, origin: origin))
                } catch {
                    // The node's own memory, encoded by the same codec a moment ago: not input.
                    preconditionFailure("change feed record \(position) does not decode: \(error)")
                }
                offset += length
                position += 1
            }
        }
        return changes
    }

    /// Frees every chunk; the log's owner calls it once, when the node's state goes.
    mutating func release() {
        for chunk in chunks { chunk.base.deallocate() }
        chunks = []
    }

    // MARK: waiting and ending

    /// Registers `wake` to be called once when a change after `position` is taken or the log
    /// finishes; returns its token, or nil (registering nothing) when one already was or the
    /// log has finished.
    mutating func wait(after position: UInt64, _ wake: @escaping @Sendable () -> Void) -> UInt64? {
        guard !finished, servable <= position else { return nil }
        nextWaiter += 1
        waiters[nextWaiter] = wake
        return nextWaiter
    }

    /// How many waiters are registered.
    var waiterCount: Int { waiters.count }

    /// Drops the waiter `token` without calling it.
    mutating func cancelWait(_ token: UInt64) {
        waiters[token] = nil
    }

    /// Ends the log: readers get what is retained, then the end; waiters are woken.
    mutating func finish() {
        finished = true
        wakeAll()
    }

    // MARK: origins

    private static func code(of origin: CommittedDelta.Origin) -> UInt8 {
        switch origin {
        case .local: 0
        case .remote: 1
        case .catchUp: 2
        case .expired: 3
        case .ownerGone: 4
        case .ownerBack: 5
        }
    }

    private static func origin(of code: UInt8) -> CommittedDelta.Origin {
        switch code {
        case 0: .local
        case 1: .remote
        case 2: .catchUp
        case 3: .expired
        case 4: .ownerGone
        default: .ownerBack
        }
    }
}
