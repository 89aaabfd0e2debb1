import DecideCore

/// A front end's hashes inside a decision or snapshot read: the plain elements of the
/// collection a name names (not a counter's slots or a set's dots), each field replaced
/// last-writer-wins like any element, this decision's writes applied. A Swift service reads the
/// same fields as a `CollectionState` of that name.
extension Transaction {
    /// The live fields of the hash named `name`, each an element id (its JSON) and its value, in
    /// no order. O(elements of the collection).
    func fields(ofHashNamed name: String) -> [(field: StateKey, value: PackedBytes)] {
        guard mayHoldFields(name) else { return [] }
        return presentElements(named: name).compactMap { item in
            CompoundPresence.isCompound(item.key) ? nil : (item.key, item.bytes)
        }
    }

    /// Whether the hash named `name` has a live field: O(1) when its collection stores no plain
    /// element and this decision wrote none, else O(elements tried until a live field; all of
    /// them for a hash emptied but not yet collected).
    func hasFields(ofHashNamed name: String) -> Bool {
        guard mayHoldFields(name) else { return false }
        let writes = pending.writes
        if pending.writesElement(ofCollectionNamed: name, kind: nil, where: { writes[$0].value != nil }) {
            return true
        }
        let now = now
        return core.containsElement(ofCollectionNamed: name) { key, entry in
            entry.packedValue != nil && !CompoundPresence.isCompound(key) && core.isVisible(entry, now: now)
                && pending.position(of: key).map { pending.writes[$0].value != nil } ?? true
        }
    }

    /// Deletes every live field of the hash named `name`; how many there were.
    @discardableResult
    func deleteFields(ofHashNamed name: String) -> Int {
        let fields = fields(ofHashNamed: name)
        for field in fields { store(field.field, nil, decoded: nil) }
        return fields.count
    }

    /// Which kinds laid out on collection `name` may hold a live element, this decision's
    /// writes applied, from one lookup of the name: the cheap first look a front end takes
    /// before `hasMembers`, `hasFields` or `hasScoredMembers` (each O(elements tried)).
    func mayHoldKinds(ofCollectionNamed name: String) -> (set: Bool, hash: Bool, sortedSet: Bool) {
        let stored = core.storedKinds(ofCollectionNamed: name)
        return (stored.setMembers > 0 || !(insertedDots[name]?.isEmpty ?? true),
                stored.plain > 0 || pending.writesElement(ofCollectionNamed: name, kind: nil),
                stored.scoredMembers > 0 || pending.writesElement(ofCollectionNamed: name, kind: ElementGroup.scoredMemberKind))
    }

    /// False when no plain element of `name` is stored or written in this decision.
    private func mayHoldFields(_ name: String) -> Bool {
        core.plainElementCount(ofCollectionNamed: name) > 0
            || pending.writesElement(ofCollectionNamed: name, kind: nil)
    }
}
