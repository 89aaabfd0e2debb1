/// Reads state inside a decision (or a `Node.read` snapshot). Valid only during that call: one
/// kept past it stops the process at a precondition (while its node lives; it does not keep the
/// node alive).
///
/// Guarantees: every read within one call sees one consistent state (no other decision commits
/// in between); the typed reads see it with the writes the current decision has made so far,
/// `entry(_:)` without them (an entry has a version, and they have none until the commit).
public struct StorageReader {
    let transaction: TransactionReference

    init(transaction: Transaction, generation: UInt64) {
        self.transaction = TransactionReference(transaction, generation: generation)
    }

    /// The value of `key`, or its default when never written, deleted, or not decodable as
    /// `K.Value` (the last is logged).
    public func callAsFunction<K: AtomicState>(_ key: K.Type) -> K.Value {
        transaction.open { $0.read(key) }
    }

    /// The value of element `id` of `collection`, or its default.
    public func callAsFunction<C: CollectionState>(_ collection: C.Type, at id: C.ID) -> C.Value {
        transaction.open { $0.read(collection, at: id) }
    }

    /// Every element of `collection` that holds a value, with this decision's writes applied, in
    /// the order of their encoded ids (see `CollectionSnapshot`). Costs O(n log n) in the
    /// collection's size, not the store's.
    public func elements<C: CollectionState>(_ collection: C.Type) -> CollectionSnapshot<C> {
        transaction.open { $0.elements(collection) }
    }

    /// The ids of `index` in order, with this decision's writes applied. Costs O(n log n) in the
    /// index's size.
    public func callAsFunction<I: IndexState>(_ index: I.Type) -> [I.ID] {
        transaction.open { $0.ids(index) }
    }

    /// The total of `counter`: every change this node holds, this decision's included (0 when
    /// never changed). O(slots): one per node process that changed it.
    public func callAsFunction<C: CounterState>(_ counter: C.Type) -> Int64 {
        transaction.open { $0.total(counter) }
    }

    /// The elements of `set`, this decision's changes applied. O(elements).
    public func callAsFunction<S: SetState>(_ set: S.Type) -> Set<S.Element> {
        transaction.open { $0.members(set) }
    }

    /// The JSON of every member of the set named `name` (a front end's), in no order.
    package func members(ofSetNamed name: String) -> [[UInt8]] {
        transaction.open { $0.members(ofSetNamed: name) }
    }

    /// Whether `member` (JSON bytes) is in the set named `name`. O(dots of the member).
    package func contains(member: [UInt8], inSetNamed name: String) -> Bool {
        transaction.open { $0.contains(member: member, inSetNamed: name) }
    }

    /// Whether the set named `name` has a member (O(1) for a name that never had one).
    package func hasMembers(ofSetNamed name: String) -> Bool {
        transaction.open { $0.hasMembers(ofSetNamed: name) }
    }

    /// The members of `sortedSet` with their scores, by score, then by the member's JSON
    /// bytes, this decision's changes applied. O(n log n) in its members.
    public func callAsFunction<Z: SortedSetState>(_ sortedSet: Z.Type) -> [ScoredMember<Z.Member>] {
        transaction.open { $0.scoredMembers(sortedSet) }
    }

    /// The score of `member` in `sortedSet`, nil when it is not in it. O(1).
    public func callAsFunction<Z: SortedSetState>(_ sortedSet: Z.Type, scoreOf member: Z.Member) -> Double? {
        transaction.open { $0.score(of: member, in: sortedSet) }
    }

    /// Every member (JSON bytes) of the sorted set named `name` (a front end's) with its score,
    /// in `SortedSetState`'s order.
    package func scoredMembers(ofSortedSetNamed name: String) -> [(member: [UInt8], score: Double)] {
        transaction.open { $0.scoredMembers(ofSortedSetNamed: name) }
    }

    /// The score of `member` (JSON bytes) in the sorted set named `name`, nil when not in it. O(1).
    package func score(of member: [UInt8], inSortedSetNamed name: String) -> Double? {
        transaction.open { $0.score(of: member, inSortedSetNamed: name) }
    }

    /// Whether the sorted set named `name` has a member (O(1) for a name that never had one).
    package func hasScoredMembers(ofSortedSetNamed name: String) -> Bool {
        transaction.open { $0.hasScoredMembers(ofSortedSetNamed: name) }
    }

    /// The live fields of the hash named `name` as a front end reads them, each its element key
    /// and value, in no order: the plain elements of that collection, and each counter field
    /// (HINCRBY's) whose total is not 0 and that has no plain value, as its total (a JSON
    /// number). O(elements).
    package func fields(ofHashNamed name: String) -> [(field: StateKey, value: PackedBytes)] {
        transaction.open { $0.fieldsAsRead(ofHashNamed: name) }
    }

    /// The live plain fields of the hash named `name` (its counter fields left out), each its
    /// element key and value, in no order. O(elements).
    package func plainFields(ofHashNamed name: String) -> [(field: StateKey, value: PackedBytes)] {
        transaction.open { $0.fields(ofHashNamed: name) }
    }

    /// Whether the table stores an element of the collection named `name` (a field, a counter's
    /// slot, a set's dot; tombstones included), or, `countingThisDecision`, this decision wrote
    /// one: O(1) without (for every plain SET), O(this decision's writes) with.
    package func storesElements(ofCollectionNamed name: String, countingThisDecision: Bool) -> Bool {
        transaction.open { transaction in
            transaction.core.elementCount(ofCollectionNamed: name) > 0
                || (countingThisDecision && transaction.pending.containsElementWrite(ofCollectionNamed: name))
        }
    }

    /// Whether the hash named `name` has a live field, plain or counter (O(1) for a name with
    /// neither).
    package func hasFields(ofHashNamed name: String) -> Bool {
        transaction.open { $0.hasFields(ofHashNamed: name) }
    }

    /// Which of a set, a hash, a sorted set and a counter the collection named `name` may hold
    /// (one lookup; true means "look": `hasMembers`, `hasFields`, `hasScoredMembers` and
    /// `counterTotal` answer).
    package func mayHoldKinds(ofCollectionNamed name: String) -> (set: Bool, hash: Bool, sortedSet: Bool, counter: Bool) {
        transaction.open { $0.mayHoldKinds(ofCollectionNamed: name) }
    }

    /// Whether this node's table ever held a counter slot or set dot (this decision's
    /// included): until then a front end skips its counter and set checks.
    package var holdsCompounds: Bool {
        transaction.open { $0.core.compoundPresence.exists }
    }

    /// When the counter, set, hash or sorted set named `name` expires as a whole (Unix
    /// milliseconds, hybrid clock; its `CollectionLifetime` marker, this decision's writes
    /// applied), nil when it has no lifetime.
    package func lifetime(ofCollectionNamed name: String) -> UInt64? {
        transaction.open { $0.lifetime(ofCollectionNamed: name) }
    }

    /// The total of the counter named `name` (a front end's, with no Swift type).
    package func counterTotal(named name: String) -> Int64 {
        transaction.open { $0.total(ofCounterNamed: name) }
    }

    /// The total of counter field `field` (its JSON id) of the hash named `name`, 0 when it has
    /// none; O(1) for a hash that never had a counter field.
    package func counterTotal(ofField field: [UInt8], ofHashNamed name: String) -> Int64 {
        transaction.open { $0.mayHoldCounterFields(name) ? $0.total(ofCounterField: field, ofHashNamed: name) : 0 }
    }

    /// The counter fields of the hash named `name` whose total is not 0, with their totals.
    package func counterFields(ofHashNamed name: String) -> [(field: [UInt8], total: Int64)] {
        transaction.open { $0.counterFields(ofHashNamed: name) }
    }

    /// The stored entry of an untyped key (nil when never written, or expired); includes
    /// tombstones. A live expiring value carries its `expiresAtMilliseconds`. It is the entry as
    /// the last commit left it: a write of this decision to `key` does not show here.
    public func entry(_ key: StateKey) -> Entry? {
        transaction.open { $0.entry(for: key) }
    }

    /// The hybrid-clock instant (Unix milliseconds) this decision or snapshot reads at: a value
    /// whose `expiresAtMilliseconds` is at or before it reads as absent.
    public var nowMilliseconds: UInt64 {
        transaction.open { $0.now }
    }
}
