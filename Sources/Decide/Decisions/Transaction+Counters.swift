import DecideCore

/// Counters inside a decision or snapshot read (`CounterState`): the total over the counter's
/// slots with this decision's writes applied, and a change written into this process's own slot
/// (docs/design/0001-counters.md).
extension Transaction {
    /// What a decision sees of counter `name`: the total, the sums of the slot asked for (this
    /// process's), and how many slots the counter has.
    struct CounterView {
        var total: Int64
        var own: (increments: UInt64, decrements: UInt64)
        var slots: Int
        var ownExists: Bool
        /// The lifetime markers the table stores under the counter's name (0: no lookup needed).
        var lifetimeMarkers: Int
    }

    func total<C: CounterState>(_ counter: C.Type) -> Int64 {
        counterView(CounterName(C.self, core: core)).total
    }

    /// The total of the counter named `name` (a front end's, with no Swift type).
    func total(ofCounterNamed name: String) -> Int64 {
        counterView(CounterName(name)).total
    }

    /// Applies `change` to this process's slot of `C`, or aborts the decision with why.
    func change<C: CounterState>(_ change: CounterChange, counter: C.Type) {
        apply(change, to: CounterName(C.self, core: core))
    }

    /// Applies `change` to this process's slot of the counter named `name`, or aborts the
    /// decision with why; the total after it.
    @discardableResult
    func change(_ change: CounterChange, counterNamed name: String) -> Int64 {
        apply(change, to: CounterName(name))
    }

    /// The total of counter field `field` (its JSON id) of the hash named `name` (HINCRBY's).
    func total(ofCounterField field: [UInt8], ofHashNamed name: String) -> Int64 {
        counterView(CounterName(field: field, ofHashNamed: name)).total
    }

    /// Applies `change` to this process's slot of counter field `field` of the hash named
    /// `name`, or aborts the decision with why; the field's total after it.
    @discardableResult
    func change(_ change: CounterChange, counterField field: [UInt8], ofHashNamed name: String) -> Int64 {
        apply(change, to: CounterName(field: field, ofHashNamed: name))
    }

    /// `writeCounterBase` for counter field `field` of the hash named `name`: the plain field
    /// value `value` at `version` taken over by HINCRBY.
    func writeCounterBase(ofField field: [UInt8], ofHashNamed name: String, from version: Version, value: Int64, expiry: WriteExpiry) {
        let element = CounterSlot.element(CounterSlot.group(ofField: field, base: true), version.timestamp.rawValue, node: version.node)
        core.compoundPresence.noteWritten()
        store(StateKey(name: name, element: element),
              CounterSlot.value(increments: value >= 0 ? value.magnitude : 0, decrements: value < 0 ? value.magnitude : 0),
              decoded: nil, options: WriteOptions(expiry: expiry))
    }

    /// The counter fields of the hash named `name` with a total other than 0, this decision's
    /// writes applied: each field's JSON id and total. O(elements of the collection).
    func counterFields(ofHashNamed name: String) -> [(field: [UInt8], total: Int64)] {
        guard mayHoldCounterFields(name) else { return [] }
        return Self.counterFieldTotals(presentElements(named: name).lazy.map { ($0.key, $0.bytes) })
    }

    /// Each counter field's total among `elements` (a hash's present elements, any kind) that is
    /// not 0: the field's JSON id and total.
    static func counterFieldTotals(_ elements: some Sequence<(key: StateKey, bytes: PackedBytes)>) -> [(field: [UInt8], total: Int64)] {
        var sums: [[UInt8]: Int128] = [:]
        for (key, bytes) in elements {
            guard let field = CounterSlot.field(of: key), let slot = CounterSlot.sums(bytes) else { continue }
            sums[field, default: 0] += Int128(slot.increments) - Int128(slot.decrements)
        }
        return sums.compactMap { field, sum in sum == 0 ? nil : (field, Int64(clamping: sum)) }
    }

    /// False when the collection named `name` stores no counter field slot and this decision
    /// wrote none.
    func mayHoldCounterFields(_ name: String) -> Bool {
        core.storedKinds(ofCollectionNamed: name).fieldCounterRecords > 0
            || pending.writesElement(ofCollectionNamed: name, kind: ElementGroup.fieldSlotKind)
            || pending.writesElement(ofCollectionNamed: name, kind: ElementGroup.fieldBaseKind)
    }

    /// Writes the base slot of counter `name` that takes over the whole number `value` a plain
    /// key held at `version` (a front end's INCR of a string), expiring as `expiry` says (the
    /// string's lifetime, which the counter takes over with it): every node that converts that
    /// same value writes the same slot, so it counts once however many do
    /// (docs/design/0001-counters.md).
    func writeCounterBase(named name: String, from version: Version, value: Int64, expiry: WriteExpiry = .never) {
        let key = StateKey(name: name, element: CounterSlot.baseElement(timestamp: version.timestamp.rawValue, node: version.node))
        core.compoundPresence.noteWritten()
        store(key, CounterSlot.value(increments: value >= 0 ? value.magnitude : 0, decrements: value < 0 ? value.magnitude : 0),
              decoded: nil, options: WriteOptions(expiry: expiry))
    }

    // MARK: lifetimes (docs/design/0004-collection-lifetimes.md, "Counters")

    /// When the collection named `name` expires as a whole — a counter, set, hash or sorted set
    /// of that name (its live lifetime marker's instant, this decision's writes applied) — nil
    /// when it has no lifetime. `storedMarkers`: the lifetime markers the table stores under
    /// the name, when the caller looked its kinds up already.
    func lifetime(ofCollectionNamed name: String, storedMarkers: Int? = nil) -> UInt64? {
        let marker = CollectionLifetime.marker(ofCollectionNamed: name)
        if pending.writesElement(ofCollectionNamed: name, kind: ElementGroup.lifetimeMarkerKind), let index = pending.position(of: marker) {
            guard pending.writes[index].value != nil,
                  let instant = pending.writes[index].options.expiry.instant(atMilliseconds: now), instant > now else { return nil }
            return instant
        }
        guard (storedMarkers ?? core.storedKinds(ofCollectionNamed: name).lifetimeMarkers) > 0,
              let entry = entry(for: marker), entry.packedValue != nil else { return nil }
        return entry.expiresAtMilliseconds
    }

    /// Gives counter `name` the lifetime `expiry` (`.never`: none, PERSIST; an instant not after
    /// the decision's time: it expires now, DEL of a counter with a lifetime). Writes the marker,
    /// and again every slot this node may write without losing another node's change: its own
    /// (every incarnation), the base slots (whose value never changes) and removed members'
    /// (which never change again). Every other node gives its own slots the marker's instant when
    /// it holds the marker (`followLifetime`); its later changes take it too (`apply`).
    func giveLifetime(_ expiry: WriteExpiry, toCounterNamed name: String) {
        let marker = CollectionLifetime.marker(ofCollectionNamed: name)
        if expiry == .never {
            store(marker, nil, decoded: nil)
        } else {
            store(marker, CollectionLifetime.value, decoded: nil, options: WriteOptions(expiry: expiry))
        }
        var rewrites: [(StateKey, PackedBytes)] = []
        forEachPresentElement(named: name, inGroupOf: CounterSlot.tag) { key, bytes in
            if mayTakeLifetime(key) { rewrites.append((key, bytes)) }
        }
        forEachPresentElement(named: name, inGroupOf: CounterSlot.baseTag) { key, bytes in rewrites.append((key, bytes)) }
        for (key, bytes) in rewrites { store(key, bytes, decoded: nil, options: WriteOptions(expiry: expiry)) }
    }

    /// Gives the counter fields of the hash named `name` the lifetime `expiry`, as
    /// `giveLifetime(_:toCounterNamed:)` gives a counter's: the slots this node may write
    /// without losing another node's change (its own, removed members', the base slots). The
    /// hash's marker and plain fields are the caller's (syncnode's KeyLifetime). O(elements).
    func giveLifetime(_ expiry: WriteExpiry, toCounterFieldsOfHashNamed name: String) {
        guard mayHoldCounterFields(name) else { return }
        let rewrites = presentElements(named: name).filter { CounterSlot.field(of: $0.key) != nil && mayTakeLifetime($0.key) }
        for item in rewrites { store(item.key, item.bytes, decoded: nil, options: WriteOptions(expiry: expiry)) }
    }

    /// Whether this node may write slot or base slot `key` again, with a new expiry, without
    /// losing another node's change: a base slot (never changes), its own slot, a removed
    /// member's (never changes again).
    private func mayTakeLifetime(_ key: StateKey) -> Bool {
        guard let owner = CounterSlot.owner(of: key) else { return CounterSlot.counts(key) }
        return owner.node == core.nodeID || core.isRemovedOwner(owner.node)
    }

    /// Gives the slots of counter `name` this node may write without losing a change
    /// (`mayTakeLifetime`: its own, every incarnation; removed members'; the base slots) the
    /// instant of the counter's lifetime marker, as a peer set it: a deleted marker's (PERSIST:
    /// none) to every such slot with an instant; a live or expired marker's to every such slot
    /// with another one that was written before that instant (by its version) — so a change made
    /// while the lifetime ran goes with it even where the marker came late, and a slot written
    /// after the counter expired, a new count, keeps none. Removed members' and base slots never
    /// change again, and own slots only change here, so no change is lost; a removed member, which
    /// never follows, and a base slot the giver had not yet received, go with the lifetime too.
    /// Run as a decision of its own, after the marker merged or a member was removed
    /// (`Node.followLifetimes`). Returns how many slots it wrote.
    @discardableResult
    func followLifetime(ofCounterNamed name: String) -> Int {
        guard let marker = core.entry(for: CollectionLifetime.marker(ofCollectionNamed: name)) else { return 0 }
        let target = marker.packedValue == nil ? nil : marker.expiresAtMilliseconds
        var rewrites: [(StateKey, PackedBytes)] = []
        func follow(_ key: StateKey, _ entry: Entry) {
            guard let bytes = entry.packedValue, core.isVisible(entry, now: now), entry.expiresAtMilliseconds != target,
                  target.map({ entry.version.timestamp.physicalMilliseconds < $0 }) ?? true,
                  mayTakeLifetime(key) else { return }
            rewrites.append((key, bytes))
        }
        let stored = core.storedKinds(ofCollectionNamed: name)
        core.forEachElement(ofCollectionNamed: name, inGroupOf: CounterSlot.tag, follow)
        if stored.counterBases > 0 { core.forEachElement(ofCollectionNamed: name, inGroupOf: CounterSlot.baseTag, follow) }
        // A hash's counter fields: one group each, so the whole collection is walked.
        if stored.fieldCounterRecords > 0 {
            for (key, entry) in core.elements(ofCollectionNamed: name) where CounterSlot.field(of: key) != nil { follow(key, entry) }
        }
        let expiry = target.map { WriteExpiry.at(milliseconds: $0) } ?? .never
        for (key, bytes) in rewrites { store(key, bytes, decoded: nil, options: WriteOptions(expiry: expiry)) }
        return rewrites.count
    }

    /// A counter's wire name, and its slot keys for this process, from its type (name computed
    /// once per type) or a front end's name.
    struct CounterName {
        let name: String
        let makeKey: (_ element: [UInt8]) -> StateKey
        /// The group its slots share (a counter's tag; a counter field's tag and field) and its
        /// base slots'.
        let slotGroup: [UInt8]
        let baseGroup: [UInt8]
        /// The field, for a hash's counter field (nil: a counter of its own).
        let field: [UInt8]?

        init<C: CounterState>(_ type: C.Type, core: NodeCore) {
            name = core.name(of: C.self, named: C.name)
            makeKey = { core.key(of: C.self, named: C.name, element: $0) }
            (slotGroup, baseGroup, field) = (CounterSlot.tag, CounterSlot.baseTag, nil)
        }

        init(_ name: String) {
            self.name = name
            makeKey = { StateKey(name: name, element: $0) }
            (slotGroup, baseGroup, field) = (CounterSlot.tag, CounterSlot.baseTag, nil)
        }

        init(field: [UInt8], ofHashNamed name: String) {
            self.name = name
            makeKey = { StateKey(name: name, element: $0) }
            (slotGroup, baseGroup) = (CounterSlot.group(ofField: field, base: false), CounterSlot.group(ofField: field, base: true))
            self.field = field
        }

        /// What an error says it is.
        var label: String {
            guard let field else { return "counter \(name)" }
            return "counter field \(String(decoding: field, as: UTF8.self)) of hash \(name)"
        }

        /// This process's slot's key, for incarnation `incarnation` of node `node`.
        func ownKey(incarnation: UInt64, node: String) -> StateKey {
            makeKey(CounterSlot.element(slotGroup, incarnation, node: node))
        }

        /// Whether `stored` says the table may hold slots (`bases` false) or base slots of it.
        func mayStore(_ stored: StoredKinds, bases: Bool) -> Bool {
            if field != nil { return stored.fieldCounterRecords > 0 }
            return bases ? stored.counterBases > 0 : stored.counterSlots > 0
        }
    }

    /// The total after the change (the total before, when the decision fails).
    @discardableResult
    private func apply(_ change: CounterChange, to counter: CounterName) -> Int64 {
        var ownKey = counter.ownKey(incarnation: core.incarnation, node: core.nodeID)
        var view = counterView(counter, own: ownKey)
        // A slot of this incarnation that this process never wrote means another process of
        // this node id took the same incarnation (started in the same millisecond of an HLC
        // that had not moved); building on it could lose that process's sums, so this process
        // takes a new incarnation first. Found by the view's walk: no lookup of its own.
        if view.ownExists, !core.counterSlotsWritten.contains(ownKey.stableHash) {
            core.renewIncarnation(logger: logger, state: counter.name)
            ownKey = counter.ownKey(incarnation: core.incarnation, node: core.nodeID)
            view = counterView(counter, own: ownKey)
        }
        // The change as an amount (Int64.min's magnitude fits UInt64).
        let (adds, magnitude): (Bool, UInt64) = switch change {
        case .increment(let amount): (amount >= 0, amount.magnitude)
        case .decrement(let amount): (amount < 0, amount.magnitude)
        case .reset: (view.total < 0, view.total.magnitude)
        }
        guard magnitude > 0 else { return view.total }
        let target = Int128(view.total) + (adds ? Int128(magnitude) : -Int128(magnitude))
        guard target >= Int128(Int64.min), target <= Int128(Int64.max) else {
            failure = failure ?? "\(counter.label): \(change) would take its total \(view.total) outside Int64"
            return view.total
        }
        var (increments, decrements) = view.own
        let limit = UInt64(Int64.max)
        if adds {
            guard increments <= limit - magnitude else {
                failure = failure ?? "\(counter.label): this node's increments would pass 2^63 in its slot"
                return view.total
            }
            increments += magnitude
        } else {
            guard decrements <= limit - magnitude else {
                failure = failure ?? "\(counter.label): this node's decrements would pass 2^63 in its slot"
                return view.total
            }
            decrements += magnitude
        }
        if !view.ownExists && view.slots >= core.maxCounterSlots {
            failure = failure ?? "\(counter.label) has \(view.slots) slots (one per node process that changed it), the most maxCounterSlots \(core.maxCounterSlots) allows"
            return view.total
        }
        core.counterSlotsWritten.insert(ownKey.stableHash)
        core.compoundPresence.noteWritten()
        // A counter with a lifetime: the slot expires with it (docs/design/0004-collection-lifetimes.md).
        let expiry = lifetime(ofCollectionNamed: counter.name, storedMarkers: view.lifetimeMarkers).map { WriteExpiry.at(milliseconds: $0) } ?? .never
        store(ownKey, CounterSlot.value(increments: increments, decrements: decrements), decoded: nil, options: WriteOptions(expiry: expiry))
        return Int64(target)
    }

    /// The counter's slots, this decision's writes applied, summed; and the sums of slot `own`.
    private func counterView(_ counter: CounterName, own ownKey: StateKey? = nil) -> CounterView {
        let name = counter.name
        var increments: UInt128 = 0
        var decrements: UInt128 = 0
        var own: (UInt64, UInt64) = (0, 0)
        var ownExists = false
        var slots = 0
        func add(_ key: StateKey, _ bytes: PackedBytes) {
            slots += 1
            let isOwn = key == ownKey
            if isOwn { ownExists = true }
            guard let sums = CounterSlot.sums(bytes) else { return }
            increments += UInt128(sums.increments)
            decrements += UInt128(sums.decrements)
            if isOwn { own = sums }
        }
        // A kind the table stores none of under this name, and this decision wrote none of,
        // costs no group lookup (most counters never had a base slot).
        let stored = core.storedKinds(ofCollectionNamed: name)
        let written = pending.containsElementWrite(ofCollectionNamed: name)
        if counter.mayStore(stored, bases: false) || written { forEachPresentElement(named: name, inGroupOf: counter.slotGroup, add) }
        if counter.mayStore(stored, bases: true) || written { forEachPresentElement(named: name, inGroupOf: counter.baseGroup, add) }
        // Concurrent changes elsewhere can pass the bounds together: the total saturates.
        let total = Int64(clamping: Int128(increments) - Int128(decrements))
        return CounterView(total: total, own: own, slots: slots, ownExists: ownExists, lifetimeMarkers: stored.lifetimeMarkers)
    }
}
