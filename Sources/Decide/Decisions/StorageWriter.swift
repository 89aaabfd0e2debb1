/// Writes state inside a decision. Valid only during `Decision.execute`: one kept past that call
/// stops the process at a precondition (while its node lives; it does not keep the node alive).
///
/// Guarantees: writes are invisible to every other reader until the decision returns, then all
/// become visible together with one version. Writing a key twice keeps the last value.
public struct StorageWriter {
    @usableFromInline let transaction: TransactionReference

    init(transaction: Transaction, generation: UInt64) {
        self.transaction = TransactionReference(transaction, generation: generation)
    }

    /// Writes `value` into `key`; it expires after `K.lifetime` and belongs to this node when
    /// the type says so (`K.ownedByWriter`).
    @inlinable
    public func callAsFunction<K: AtomicState>(_ value: K.Value, into key: K.Type) {
        write(value, into: key, expiringAfter: K.lifetime, owned: K.ownedByWriter)
    }

    /// Writes `value` into `key`, to read as absent (and be removed on every replica) `lifetime`
    /// after this decision's timestamp, on the hybrid clock. Renewing is another write. A
    /// lifetime that is not positive aborts the decision.
    @inlinable
    public func callAsFunction<K: AtomicState>(_ value: K.Value, into key: K.Type, expiringAfter lifetime: Duration) {
        write(value, into: key, expiringAfter: lifetime, owned: K.ownedByWriter)
    }

    /// Writes `value` into `key`, owned by this node when `ownedByThisNode`: while this node is
    /// not a live member as another node sees it (crashed, cut off, left, removed), the key
    /// reads as absent there, and it returns with this node (docs/consistency.md, "Node-owned
    /// keys"). With `expiringAfter`, it also expires.
    public func callAsFunction<K: AtomicState>(
        _ value: K.Value, into key: K.Type, ownedByThisNode: Bool, expiringAfter lifetime: Duration? = nil
    ) {
        write(value, into: key, expiringAfter: lifetime ?? K.lifetime, owned: ownedByThisNode)
    }

    /// Every atomic write: the value encoded here, inlined into the decision's module and so
    /// specialised for its value type, and the rest in the transaction, which does not depend
    /// on it (docs/design/0018-the-decision-path.md, "The value encoded where the decision is
    /// compiled").
    @inlinable @inline(__always)
    func write<K: AtomicState>(_ value: K.Value, into key: K.Type, expiringAfter lifetime: Duration?, owned: Bool) {
        transaction.open { transaction in
            do throws(ValueCoding.Failure) {
                transaction.write(encoded: try ValueCoding.encodePacked(value), decoded: value, into: key, expiringAfter: lifetime, owned: owned)
            } catch {
                transaction.fail(error)
            }
        }
    }

    /// Writes element `id` of `collection`, with the type's `lifetime` and `ownedByWriter`.
    @inlinable
    public func callAsFunction<C: CollectionState>(_ value: C.Value, into collection: C.Type, at id: C.ID) {
        write(value, into: collection, at: id, expiringAfter: C.lifetime, owned: C.ownedByWriter)
    }

    /// Writes element `id` of `collection`, expiring `lifetime` after this decision's timestamp.
    public func callAsFunction<C: CollectionState>(
        _ value: C.Value, into collection: C.Type, at id: C.ID, expiringAfter lifetime: Duration
    ) {
        write(value, into: collection, at: id, expiringAfter: lifetime, owned: C.ownedByWriter)
    }

    /// Writes element `id` of `collection`, owned by this node when `ownedByThisNode` (see the
    /// atomic form), expiring after `lifetime` when given.
    public func callAsFunction<C: CollectionState>(
        _ value: C.Value, into collection: C.Type, at id: C.ID, ownedByThisNode: Bool, expiringAfter lifetime: Duration? = nil
    ) {
        write(value, into: collection, at: id, expiringAfter: lifetime ?? C.lifetime, owned: ownedByThisNode)
    }

    /// Every element write, as `write(_:into:expiringAfter:owned:)` is every atomic one.
    @inlinable @inline(__always)
    func write<C: CollectionState>(_ value: C.Value, into collection: C.Type, at id: C.ID, expiringAfter lifetime: Duration?, owned: Bool) {
        transaction.open { transaction in
            do throws(ValueCoding.Failure) {
                transaction.write(encoded: try ValueCoding.encodePacked(value), decoded: value, into: collection, at: id,
                                  expiringAfter: lifetime, owned: owned)
            } catch {
                transaction.fail(error)
            }
        }
    }

    /// Deletes `key`: a tombstone is written, and the key reads as its default again.
    public func delete<K: AtomicState>(_ key: K.Type) {
        transaction.open { $0.delete(key) }
    }

    /// Deletes element `id` of `collection`.
    public func delete<C: CollectionState>(_ collection: C.Type, at id: C.ID) {
        transaction.open { $0.delete(collection, at: id) }
    }

    /// Deletes every element of `collection` that holds a value now (each gets a tombstone; an
    /// element another node writes concurrently with a later version survives, as for any key).
    public func deleteAll<C: CollectionState>(_ collection: C.Type) {
        transaction.open { $0.deleteAll(collection) }
    }

    /// Puts `id` into `index` at `placement`; an id already in the index moves there. The seed's
    /// `write(message.id, into: MessagesIndex.self, .append)`. Placing after or before an id that
    /// is not in the index aborts the decision.
    public func callAsFunction<I: IndexState>(_ id: I.ID, into index: I.Type, _ placement: IndexPlacement<I.ID> = .append) {
        transaction.open { $0.place(id, into: index, placement) }
    }

    /// Takes `id` out of `index` (nothing happens when it is not there).
    public func remove<I: IndexState>(_ id: I.ID, from index: I.Type) {
        transaction.open { $0.remove(id, from: index) }
    }

    /// Changes `counter`: `write(.increment(by: 3), into: Quota.self)`. Concurrent changes on
    /// other nodes all count (see `CounterState`). A change that would take the total this
    /// decision reads outside `Int64`, or give the counter more than `maxCounterSlots` slots,
    /// aborts the decision.
    public func callAsFunction<C: CounterState>(_ change: CounterChange, into counter: C.Type) {
        transaction.open { $0.change(change, counter: counter) }
    }

    /// Changes `set`: `write(.insert(user), into: Online.self)`. An insert on one node and a
    /// remove of the same element on another at once leave it in (see `SetState`).
    public func callAsFunction<S: SetState>(_ change: SetChange<S.Element>, into set: S.Type) {
        transaction.open { $0.change(change, set: set) }
    }

    /// Puts `member` (JSON bytes) in the set named `name` (a front end's, with no Swift type),
    /// its dot expiring as `expiry` says; true when it was not in it.
    @discardableResult
    package func insert(member: [UInt8], intoSetNamed name: String, expiry: WriteExpiry = .never) -> Bool {
        transaction.open { $0.insert(member: member, intoSetNamed: name, expiry: expiry) }
    }

    /// Takes `member` (JSON bytes) out of the set named `name`; true when it was in it.
    @discardableResult
    package func remove(member: [UInt8], fromSetNamed name: String) -> Bool {
        transaction.open { $0.remove(member: member, fromSetNamed: name) }
    }

    /// Deletes every live field of the hash named `name` (a front end's); how many there were.
    @discardableResult
    package func deleteFields(ofHashNamed name: String) -> Int {
        transaction.open { $0.deleteFields(ofHashNamed: name) }
    }

    /// Takes every member this decision sees out of the set named `name`; how many there were.
    @discardableResult
    package func removeAll(fromSetNamed name: String) -> Int {
        transaction.open { $0.removeAll(fromSetNamed: name) }
    }

    /// Changes `sortedSet`: `write(.add("ann", score: 12), into: Board.self)`. Each member's
    /// score is replaced last-writer-wins (see `SortedSetState`); an infinite or NaN score, or a
    /// new member past `maxSetMembers`, aborts the decision.
    public func callAsFunction<Z: SortedSetState>(_ change: SortedSetChange<Z.Member>, into sortedSet: Z.Type) {
        transaction.open { $0.change(change, sortedSet: sortedSet) }
    }

    /// Puts `member` (JSON bytes) in the sorted set named `name` (a front end's) with `score`,
    /// expiring as `expiry` says; true when it was not in it.
    @discardableResult
    package func add(member: [UInt8], score: Double, intoSortedSetNamed name: String, expiry: WriteExpiry = .never) -> Bool {
        transaction.open { $0.add(member: member, score: score, intoSortedSetNamed: name, expiry: expiry) }
    }

    /// Takes `member` (JSON bytes) out of the sorted set named `name`; true when it was in it.
    @discardableResult
    package func remove(member: [UInt8], fromSortedSetNamed name: String) -> Bool {
        transaction.open { $0.remove(member: member, fromSortedSetNamed: name) }
    }

    /// Takes every member this decision sees out of the sorted set named `name`; how many there were.
    @discardableResult
    package func removeAll(fromSortedSetNamed name: String) -> Int {
        transaction.open { $0.removeAll(fromSortedSetNamed: name) }
    }

    /// Changes the counter named `name` (a front end's, with no Swift type), as
    /// `callAsFunction(_:into:)` does; its total after the change (read once, not again).
    @discardableResult
    package func change(_ change: CounterChange, counterNamed name: String) -> Int64 {
        transaction.open { $0.change(change, counterNamed: name) }
    }

    /// Writes the base slot of the counter named `name` that takes over `value`, the whole
    /// number a plain key held at `version` (a front end's INCR of a string; the plain key is the
    /// caller's to delete).
    /// The base slot expires as `expiry` says: the string's lifetime, taken over with it.
    package func counterBase(named name: String, from version: Version, value: Int64, expiry: WriteExpiry = .never) {
        transaction.open { $0.writeCounterBase(named: name, from: version, value: value, expiry: expiry) }
    }

    /// Changes counter field `field` (its JSON id) of the hash named `name` (HINCRBY): a counter
    /// of its own in the hash's collection, whose concurrent changes on different nodes all
    /// count, as a counter's do; its total after the change.
    @discardableResult
    package func change(_ change: CounterChange, counterField field: [UInt8], ofHashNamed name: String) -> Int64 {
        transaction.open { $0.change(change, counterField: field, ofHashNamed: name) }
    }

    /// `counterBase(named:from:value:expiry:)` for counter field `field` of the hash named `name`:
    /// the whole number a plain field held at `version`, taken over by HINCRBY (the plain field
    /// is the caller's to delete).
    package func counterBase(ofField field: [UInt8], ofHashNamed name: String, from version: Version, value: Int64, expiry: WriteExpiry) {
        transaction.open { $0.writeCounterBase(ofField: field, ofHashNamed: name, from: version, value: value, expiry: expiry) }
    }

    /// Gives the counter fields of the hash named `name` the lifetime `expiry` without losing a
    /// concurrent change: this node's own slots, removed members' and base slots are written
    /// again with it; every other node follows for its own (`followLifetime`). The hash's
    /// marker and plain fields are the caller's.
    package func giveLifetime(_ expiry: WriteExpiry, toCounterFieldsOfHashNamed name: String) {
        transaction.open { $0.giveLifetime(expiry, toCounterFieldsOfHashNamed: name) }
    }

    /// Gives the counter named `name` a lifetime as a whole (`.never`: none; an instant not after
    /// the decision's time: it expires now), as Redis's EXPIRE and PERSIST give a key one: its
    /// slots expire together at that instant on every node, and no change made to it is lost
    /// (docs/design/0004-collection-lifetimes.md, "Counters").
    package func giveLifetime(_ expiry: WriteExpiry, toCounterNamed name: String) {
        transaction.open { $0.giveLifetime(expiry, toCounterNamed: name) }
    }

    /// Gives this node's own slots of counter `name` its lifetime marker's instant
    /// (`Node.followLifetimes`); how many slots it wrote.
    func followLifetime(ofCounterNamed name: String) -> Int {
        transaction.open { $0.followLifetime(ofCounterNamed: name) }
    }

    /// Writes raw value bytes to an untyped key (`nil` deletes it). For tools such as syncnode;
    /// the bytes should be JSON so typed readers can decode them.
    public func raw(_ value: [UInt8]?, into key: StateKey) {
        raw(packed: value.map(PackedBytes.init), into: key)
    }

    /// Writes raw value bytes to an untyped key, expiring `lifetime` after this decision's
    /// timestamp when given (a lifetime that is not positive aborts the decision), and owned by
    /// this node when `ownedByThisNode`.
    public func raw(_ value: [UInt8], into key: StateKey, expiringAfter lifetime: Duration?, ownedByThisNode: Bool = false) {
        transaction.open { transaction in
            let expiry = transaction.expiry(after: lifetime, of: "\(key)")
            transaction.writeRaw(PackedBytes(value), into: key, options: WriteOptions(expiry: expiry, owned: ownedByThisNode))
        }
    }

    /// `raw(_:into:)` of bytes already packed, as the table will hold them: no copy between a
    /// front end's parser and the table (nil: a delete).
    package func raw(packed value: PackedBytes?, into key: StateKey) {
        transaction.open { $0.writeRaw(value, into: key) }
    }

    /// Writes packed value bytes to an untyped key with `expiry` as it is (an instant already
    /// past stores a value that reads as absent at once), owned by this node when
    /// `ownedByThisNode`. For protocol front ends (Redis EXPIREAT, KEEPTTL, SET PX).
    package func raw(packed value: PackedBytes, into key: StateKey, expiry: WriteExpiry, ownedByThisNode: Bool) {
        transaction.open { $0.writeRaw(value, into: key, options: WriteOptions(expiry: expiry, owned: ownedByThisNode)) }
    }
}
