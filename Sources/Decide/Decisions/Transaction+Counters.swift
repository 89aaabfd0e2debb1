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

    /// Writes the base slot of counter `name` that takes over the whole number `value` a plain
    /// key held at `version` (a front end's INCR of a string): every node that converts that same
    /// value writes the same slot, so it counts once however many do (docs/design/0001-counters.md).
    func writeCounterBase(named name: String, from version: Version, value: Int64) {
        let key = StateKey(name: name, element: CounterSlot.baseElement(timestamp: version.timestamp.rawValue, node: version.node))
        core.compoundPresence.noteWritten()
        store(key, CounterSlot.value(increments: value >= 0 ? value.magnitude : 0, decrements: value < 0 ? value.magnitude : 0),
              decoded: nil)
    }

    /// A counter's wire name, and its slot keys for this process, from its type (name computed
    /// once per type) or a front end's name.
    struct CounterName {
        let name: String
        let makeKey: (_ element: [UInt8]) -> StateKey

        init<C: CounterState>(_ type: C.Type, core: NodeCore) {
            name = core.name(of: C.self, named: C.name)
            makeKey = { core.key(of: C.self, named: C.name, element: $0) }
        }

        init(_ name: String) {
            self.name = name
            makeKey = { StateKey(name: name, element: $0) }
        }
    }

    /// The total after the change (the total before, when the decision fails).
    @discardableResult
    private func apply(_ change: CounterChange, to counter: CounterName) -> Int64 {
        var ownKey = counter.makeKey(CounterSlot.element(incarnation: core.incarnation, node: core.nodeID))
        var view = counterView(counter, own: ownKey)
        // A slot of this incarnation that this process never wrote means another process of
        // this node id took the same incarnation (started in the same millisecond of an HLC
        // that had not moved); building on it could lose that process's sums, so this process
        // takes a new incarnation first. Found by the view's walk: no lookup of its own.
        if view.ownExists, !core.counterSlotsWritten.contains(ownKey.stableHash) {
            core.renewIncarnation(logger: logger, state: counter.name)
            ownKey = counter.makeKey(CounterSlot.element(incarnation: core.incarnation, node: core.nodeID))
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
            failure = failure ?? "counter \(counter.name): \(change) would take its total \(view.total) outside Int64"
            return view.total
        }
        var (increments, decrements) = view.own
        let limit = UInt64(Int64.max)
        if adds {
            guard increments <= limit - magnitude else {
                failure = failure ?? "counter \(counter.name): this node's increments would pass 2^63 in its slot"
                return view.total
            }
            increments += magnitude
        } else {
            guard decrements <= limit - magnitude else {
                failure = failure ?? "counter \(counter.name): this node's decrements would pass 2^63 in its slot"
                return view.total
            }
            decrements += magnitude
        }
        if !view.ownExists && view.slots >= core.maxCounterSlots {
            failure = failure ?? "counter \(counter.name) has \(view.slots) slots (one per node process that changed it), the most maxCounterSlots \(core.maxCounterSlots) allows"
            return view.total
        }
        core.counterSlotsWritten.insert(ownKey.stableHash)
        core.compoundPresence.noteWritten()
        store(ownKey, CounterSlot.value(increments: increments, decrements: decrements), decoded: nil)
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
        if stored.counterSlots > 0 || written { forEachPresentElement(named: name, inGroupOf: CounterSlot.tag, add) }
        if stored.counterBases > 0 || written { forEachPresentElement(named: name, inGroupOf: CounterSlot.baseTag, add) }
        // Concurrent changes elsewhere can pass the bounds together: the total saturates.
        let total = Int64(clamping: Int128(increments) - Int128(decrements))
        return CounterView(total: total, own: own, slots: slots, ownExists: ownExists)
    }
}
