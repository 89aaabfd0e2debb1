import Logging

/// The working set of the decision (or snapshot read) that holds the node's lock. One instance
/// per node, reused: `generation` changes on every `begin`, so a reader or writer kept past
/// its call is caught by a precondition instead of touching a later decision.
@usableFromInline
final class Transaction: @unchecked Sendable {
    /// The node's core, which owns this transaction and so outlives it: not retained. Set once,
    /// by `attach(to:)` from the core's initializer.
    @exclusivity(unchecked) private var coreReference: Unmanaged<NodeCore>?
    var core: NodeCore { coreReference.unsafelyUnwrapped.takeUnretainedValue() }
    let logger: Logger
    private(set) var generation: UInt64 = 0
    private(set) var isOpen = false
    /// Touched on every write: kept `InPlace` (no exclusivity check per access).
    private let pendingStorage: InPlace<PendingWrites>
    var pending: PendingWrites {
        _read { yield pendingStorage.value }
        _modify { yield &pendingStorage.value }
    }
    /// An empty set of writes that stands in for the decision's own while the commit holds
    /// them (`takePending`).
    private let sparePending: InPlace<PendingWrites>

    /// Moves the decision's writes out for the commit to hold as its own, leaving an empty set
    /// in their place; `restorePending` puts them back, so the next decision reuses their
    /// storage. Moves, not copies: a copy of them retained and released their array and
    /// lookups, four atomics a decision (docs/design/0009-atomics-off-the-hot-paths.md, "The
    /// technique").
    func takePending() -> PendingWrites {
        let taken = pendingStorage.take()
        pendingStorage.put(sparePending.take())
        return taken
    }

    /// Puts back the writes `takePending` handed out.
    func restorePending(_ writes: consuming PendingWrites) {
        sparePending.put(pendingStorage.take())
        pendingStorage.put(writes)
    }

    /// Why the decision must abort (the first reason found), or nil.
    var failure: String?
    /// The dot this decision inserted for each member, by set name (`Transaction+Sets`): found
    /// without a scan of the decision's writes.
    var insertedDots: [String: [MemberBytes: StateKey]] = [:]
    /// The hybrid-clock instant (milliseconds) this decision or snapshot reads at: values
    /// expired at it read as absent.
    private(set) var now: UInt64 = 0

    private let limits: WireCodec.Limits

    /// A transaction for the core of node `nodeID`; `attach(to:)` hands it that core.
    init(nodeID: String, logger: Logger, limits: WireCodec.Limits) {
        self.logger = logger
        self.limits = limits
        self.pendingStorage = InPlace(PendingWrites(nodeID: nodeID))
        self.sparePending = InPlace(PendingWrites(nodeID: nodeID))
    }

    /// Hands the transaction the core that owns it (once, before any decision).
    func attach(to core: NodeCore) {
        precondition(coreReference == nil, "a transaction attached to a second core")
        coreReference = .passUnretained(core)
    }

    deinit {
        pendingStorage.release()
        sparePending.release()
    }

    /// Opens the transaction for a decision or snapshot read at hybrid-clock instant `now`.
    func begin(atMilliseconds now: UInt64) -> UInt64 {
        precondition(!isOpen, "a decision started while another held the node")
        generation &+= 1
        isOpen = true
        self.now = now
        pending.removeAll()
        // Only when set: assigning nil released the old value, a runtime call every decision.
        if failure != nil { failure = nil }
        if !insertedDots.isEmpty { insertedDots.removeAll() }
        return generation
    }

    func end() { isOpen = false }

    @usableFromInline
    func check(_ generation: UInt64) {
        precondition(isOpen && generation == self.generation,
                     "a StorageReader or StorageWriter was used outside the call it was given to")
    }

    /// `core` lent to `body` without a retain: a key lookup through `core` retained and
    /// released it around the call, two atomics a write
    /// (docs/design/0009-atomics-off-the-hot-paths.md, "The technique").
    @inline(__always)
    func withCore<Result, Failure: Error>(_ body: (NodeCore) throws(Failure) -> Result) throws(Failure) -> Result {
        try coreReference.unsafelyUnwrapped.lend(body)
    }

    // MARK: reads

    func read<K: AtomicState>(_ key: K.Type) -> K.Value {
        let stateKey = withCore { $0.key(for: key) }
        return value(of: stateKey, as: K.Value.self) ?? K.defaultValue()
    }

    func read<C: CollectionState>(_ collection: C.Type, at id: C.ID) -> C.Value {
        guard let stateKey = try? withCore({ core throws(ValueCoding.Failure) in try core.key(for: collection, at: id) }) else { return C.defaultValue(at: id) }
        return value(of: stateKey, as: C.Value.self) ?? C.defaultValue(at: id)
    }

    /// The stored entry of `key`, nil when never written, expired at `now`, or owned by a node
    /// that is not a live member here (tombstones are returned).
    func entry(for key: StateKey) -> Entry? {
        guard let entry = core.entry(for: key), core.isVisible(entry, now: now) else { return nil }
        return entry
    }

    /// The typed value of a key with the current decision's writes applied; nil means "the
    /// default" (absent, deleted, or not decodable).
    private func value<Value: Decodable & Sendable>(of key: StateKey, as type: Value.Type) -> Value? {
        if let index = pending.position(of: key) {
            if let decoded = pending.writes[index].decoded as? Value { return decoded }
            guard let bytes = pending.writes[index].value else { return nil }
            return decode(type, bytes, key: key)
        }
        guard let entry = core.entry(for: key), let bytes = entry.packedValue, core.isVisible(entry, now: now) else { return nil }
        if let decoded = core.decoded.value(of: key, at: entry.version) as? Value { return decoded }
        guard let decoded = decode(type, bytes, key: key) else { return nil }
        core.decoded.keep(decoded, of: key, at: entry.version)
        return decoded
    }

    func decode<Value: Decodable>(_ type: Value.Type, _ bytes: PackedBytes, key: StateKey) -> Value? {
        do {
            return try ValueCoding.decode(type, from: bytes)
        } catch {
            logger.warning("reading \(key) as its default value: \(error)")
            return nil
        }
    }

    // MARK: writes

    /// An atomic write of a value `StorageWriter` encoded where the decision is compiled.
    @usableFromInline
    func write<K: AtomicState>(encoded: consuming PackedBytes, decoded: consuming any Sendable, into key: K.Type,
                               expiringAfter lifetime: Duration?, owned: Bool) {
        let options = WriteOptions(expiry: expiry(after: lifetime, of: "\(key)"), owned: owned)
        // Moved in (`consume`): passed as they are, the bytes were copied for the store and the
        // original dropped after it, two outlined calls a write.
        store(withCore { $0.key(for: key) }, consume encoded, decoded: consume decoded, options: options)
    }

    /// Aborts the decision with an encoding failure (a value's or an element id's).
    @usableFromInline
    func fail(_ error: ValueCoding.Failure) {
        failure = failure ?? "\(error)"
    }

    /// An element write of a value `StorageWriter` encoded where the decision is compiled.
    @usableFromInline
    func write<C: CollectionState>(encoded: consuming PackedBytes, decoded: consuming any Sendable, into collection: C.Type, at id: C.ID,
                                   expiringAfter lifetime: Duration?, owned: Bool) {
        do {
            let key = try withCore { core throws(ValueCoding.Failure) in try core.key(for: collection, at: id) }
            let options = WriteOptions(expiry: expiry(after: lifetime, of: "\(collection)"), owned: owned)
            store(key, consume encoded, decoded: consume decoded, options: options)
        } catch {
            fail(error)
        }
    }

    /// The expiry of a write with `lifetime` (nil: none); records a failure for a lifetime
    /// that is not positive.
    func expiry(after lifetime: Duration?, of state: @autoclosure () -> String) -> WriteExpiry {
        guard let lifetime else { return .never }
        guard let milliseconds = Self.milliseconds(of: lifetime) else {
            failure = failure ?? "the lifetime of a write to \(state()) must be positive, not \(lifetime)"
            return .never
        }
        return .after(milliseconds: milliseconds)
    }

    /// Whole milliseconds of a positive `duration` (at least 1, at most the clock's range); nil
    /// for zero or less.
    static func milliseconds(of duration: Duration) -> UInt64? {
        let (seconds, attoseconds) = duration.components
        guard seconds > 0 || (seconds == 0 && attoseconds > 0) else { return nil }
        let limit = HLCTimestamp.maxPhysicalMilliseconds
        guard seconds < Int64(limit / 1000) else { return limit }
        return max(1, UInt64(seconds) * 1000 + UInt64(attoseconds / 1_000_000_000_000_000))
    }

    func delete<K: AtomicState>(_ key: K.Type) {
        store(core.key(for: key), nil, decoded: nil)
    }

    func delete<C: CollectionState>(_ collection: C.Type, at id: C.ID) {
        do {
            store(try core.key(for: collection, at: id), nil, decoded: nil)
        } catch {
            failure = failure ?? "\(error)"
        }
    }

    /// Raw value bytes (nil: a delete), packed as the table holds them.
    func writeRaw(_ value: PackedBytes?, into key: StateKey, options: WriteOptions = .plain) {
        store(key, value, decoded: nil, options: options)
    }

    /// One mutation of `pending` per write (it is `InPlace`, so no exclusivity check either).
    @inline(__always)
    func store(_ key: consuming StateKey, _ value: consuming PackedBytes?, decoded: consuming (any Sendable)?, options: WriteOptions = .plain) {
        guard withinLimits(key, value) else { return }
        if !pending.set(key, value: value, decoded: decoded, options: options, maxKeys: limits.maxEntriesPerMessage) {
            failure = failure ?? "more than maxEntriesPerMessage \(limits.maxEntriesPerMessage) writes in one decision"
        }
    }

    /// Whether every peer's decoder would accept this write's key and value; records the failure
    /// if not (the count of writes is `PendingWrites.set`'s to check). The test alone is inlined
    /// into every write; the message is built apart, only for a write over a limit.
    @inline(__always)
    private func withinLimits(_ key: StateKey, _ value: PackedBytes?) -> Bool {
        if key.name.utf8.count <= limits.maxNameBytes, key.elementCount <= limits.maxElementBytes,
           (value?.count ?? 0) <= limits.maxValueBytes {
            return true
        }
        recordLimitFailure(key, value)
        return false
    }

    /// Records why `key` and `value` are over a limit (the first limit of name, element, value).
    @inline(never)
    private func recordLimitFailure(_ key: StateKey, _ value: PackedBytes?) {
        let problem = if key.name.utf8.count > limits.maxNameBytes {
            "state name of \(key.name.utf8.count) bytes is over maxNameBytes \(limits.maxNameBytes)"
        } else if key.elementCount > limits.maxElementBytes {
            "element id of \(key.elementCount) bytes in \(key.name) is over maxElementBytes \(limits.maxElementBytes)"
        } else {
            "value of \(value?.count ?? 0) bytes for \(key) is over maxValueBytes \(limits.maxValueBytes)"
        }
        failure = failure ?? problem
    }
}
