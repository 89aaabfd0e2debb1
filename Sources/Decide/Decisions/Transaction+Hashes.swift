import DecideCore

/// A front end's hashes inside a decision or snapshot read: the plain elements of the
/// collection a name names (not a counter's slots or a set's dots), each field replaced
/// last-writer-wins like any element, this decision's writes applied. A Swift service reads the
/// same fields as a `CollectionState` of that name.
extension Transaction {
    /// The live plain fields of the hash named `name` (not its counter fields:
    /// `counterFields(ofHashNamed:)`), each an element id (its JSON) and its value, in no order.
    /// O(elements of the collection).
    func fields(ofHashNamed name: String) -> [(field: StateKey, value: PackedBytes)] {
        guard mayHoldFields(name) else { return [] }
        return Self.plainFields(presentElements(named: name))
    }

    /// The plain elements among `elements` (a collection's present elements), as fields.
    private static func plainFields(_ elements: [(key: StateKey, bytes: PackedBytes, version: Version?, decoded: (any Sendable)?)])
        -> [(field: StateKey, value: PackedBytes)] {
        elements.compactMap { item in CompoundPresence.isCompound(item.key) ? nil : (item.key, item.bytes) }
    }

    /// The live fields of the hash named `name` as a front end reads them, each its element key
    /// and value, in no order: the plain ones, and each counter field (HINCRBY's) whose total is
    /// not 0 and that has no plain value, as its total (a JSON number). One walk of the
    /// collection, O(elements).
    func fieldsAsRead(ofHashNamed name: String) -> [(field: StateKey, value: PackedBytes)] {
        let counted = mayHoldCounterFields(name)
        guard counted || mayHoldFields(name) else { return [] }
        let elements = presentElements(named: name)
        var fields = Self.plainFields(elements)
        guard counted else { return fields }
        let plain = Set(fields.map(\.field))
        for (field, total) in Self.counterFieldTotals(elements.lazy.map { ($0.key, $0.bytes) }) {
            let key = StateKey(name: name, element: field)
            if !plain.contains(key) { fields.append((key, PackedBytes(Array(String(total).utf8)))) }
        }
        return fields
    }

    /// Whether the hash named `name` has a live field, a plain one or a counter field with a
    /// total other than 0 (HINCRBY's): O(1) when its collection stores neither and this
    /// decision wrote neither, else O(elements tried until a live field; all of them for a hash
    /// emptied but not yet collected, or one with counter fields only).
    func hasFields(ofHashNamed name: String) -> Bool {
        if mayHoldFields(name) {
            let writes = pending.writes
            if pending.writesElement(ofCollectionNamed: name, kind: nil, where: { writes[$0].value != nil }) {
                return true
            }
            if containsLiveElement(ofCollectionNamed: name, where: { !CompoundPresence.isCompound($0) }) { return true }
        }
        return !counterFields(ofHashNamed: name).isEmpty
    }

    /// Deletes every live field of the hash named `name`; how many there were.
    @discardableResult
    func deleteFields(ofHashNamed name: String) -> Int {
        let fields = fields(ofHashNamed: name)
        for field in fields { store(field.field, nil, decoded: nil) }
        return fields.count
    }

    /// False when no plain element of `name` is stored or written in this decision.
    private func mayHoldFields(_ name: String) -> Bool {
        core.plainElementCount(ofCollectionNamed: name) > 0
            || pending.writesElement(ofCollectionNamed: name, kind: nil)
    }
}
