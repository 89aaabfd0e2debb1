import DecideCore

/// Whole collections and ordered indexes inside a decision or snapshot read: the stored
/// elements of one name (O(that collection), from the table's per-name list) with the
/// decision's own writes applied.
extension Transaction {
    /// The elements of the collection or index named `name` that hold a value for a reader at
    /// `now`, with this decision's writes applied, each once: its key, its value bytes and the
    /// version it was decoded at (nil for this decision's own write, whose typed value is
    /// `decoded` when the write had one). In no particular order.
    func presentElements(named name: String) -> [(key: StateKey, bytes: PackedBytes, version: Version?, decoded: (any Sendable)?)] {
        var present: [(key: StateKey, bytes: PackedBytes, version: Version?, decoded: (any Sendable)?)] = []
        for (key, entry) in core.elements(ofCollectionNamed: name) where pending.position(of: key) == nil {
            guard let bytes = entry.packedValue, core.isVisible(entry, now: now) else { continue }
            present.append((key, bytes, entry.version, nil))
        }
        let writes = pending.writes
        pending.forEachElementWrite(ofCollectionNamed: name) { index in
            guard let bytes = writes[index].value else { return }
            present.append((writes[index].key, bytes, nil, writes[index].decoded))
        }
        return present
    }

    /// Which kinds laid out on collection `name` may hold a live element, this decision's
    /// writes applied, from one lookup of the name in the table and one in this decision's
    /// writes: the cheap first look a front end takes before `hasMembers`, `hasFields`,
    /// `hasScoredMembers` or a counter's total (each O(elements tried)).
    func mayHoldKinds(ofCollectionNamed name: String) -> (set: Bool, hash: Bool, sortedSet: Bool, counter: Bool) {
        let stored = core.storedKinds(ofCollectionNamed: name)
        // One lookup of the name among this decision's writes answers for every kind; an
        // inserted dot, like every element this decision wrote, is among them.
        let written = pending.writtenKinds(ofCollectionNamed: name)
        func wrote(_ kind: UInt8?) -> Bool { written?.mayHold(kind) ?? false }
        return (stored.setMembers > 0 || written != nil && !(insertedDots[name]?.isEmpty ?? true),
                stored.plain > 0 || stored.fieldCounterRecords > 0
                    || wrote(nil) || wrote(ElementGroup.fieldSlotKind) || wrote(ElementGroup.fieldBaseKind),
                stored.scoredMembers > 0 || wrote(ElementGroup.scoredMemberKind),
                stored.counterSlots > 0 || stored.counterBases > 0
                    || wrote(ElementGroup.counterSlotKind) || wrote(ElementGroup.counterBaseKind))
    }

    /// Whether a stored element of the collection named `name` whose key passes `isKind` holds
    /// a value now and this decision did not delete it, tried in no particular order until one
    /// does: what "does this set / hash / sorted set have a member" asks of the table once this
    /// decision's own writes were looked at. O(elements tried).
    func containsLiveElement(ofCollectionNamed name: String, where isKind: (StateKey) -> Bool) -> Bool {
        let now = now
        return core.containsElement(ofCollectionNamed: name) { key, entry in
            entry.packedValue != nil && isKind(key) && core.isVisible(entry, now: now)
                && pending.position(of: key).map { pending.writes[$0].value != nil } ?? true
        }
    }

    /// `presentElements(named:)` of the elements in `group`'s group only (`ElementGroup`: one
    /// member's dots, or a counter's slots of one kind), handed to `body` one by one with no
    /// array built: the stored live elements first, then this decision's writes. O(live
    /// elements of the group, and of this decision's writes).
    func forEachPresentElement(named name: String, inGroupOf group: [UInt8], _ body: (StateKey, PackedBytes) -> Void) {
        let now = now
        core.forEachElement(ofCollectionNamed: name, inGroupOf: group) { key, entry in
            guard let bytes = entry.packedValue, core.isVisible(entry, now: now), pending.position(of: key) == nil else { return }
            body(key, bytes)
        }
        // A large decision that wrote no element of this group's kind (a run of SADDs, read for
        // a counter of the set's name): its writes need no look.
        guard group.count < 2 || !pending.writesNoElement(ofCollectionNamed: name, kind: group[1]) else { return }
        let writes = pending.writes
        pending.forEachElementWrite(ofCollectionNamed: name) { index in
            guard writes[index].key.elementCount >= group.count, let bytes = writes[index].value,
                  writes[index].key.packedElement.withUnsafeBytes({ $0.starts(with: group) }) else { return }
            // Written to expire by now (a counter expired in this decision): absent, as stored.
            if writes[index].options.expiry != .never, let instant = writes[index].options.expiry.instant(atMilliseconds: now),
               instant <= now { return }
            body(writes[index].key, bytes)
        }
    }

    func elements<C: CollectionState>(_ collection: C.Type) -> CollectionSnapshot<C> {
        // A counter or set of the same name keeps its slots or dots in the collection too; they are not elements.
        var present = presentElements(named: core.name(of: C.self, named: C.name)).filter { !CompoundPresence.isCompound($0.key) }
        present.sort { $0.key < $1.key }
        var ids: [C.ID] = []
        var values: [C.Value] = []
        ids.reserveCapacity(present.count)
        values.reserveCapacity(present.count)
        for item in present {
            guard let id = decode(C.ID.self, item.key.packedElement, key: item.key) else { continue }
            ids.append(id)
            values.append(typedValue(C.Value.self, of: item) ?? C.defaultValue(at: id))
        }
        return CollectionSnapshot(ids: ids, values: values)
    }

    /// Deletes every element of `collection` that holds a value now.
    func deleteAll<C: CollectionState>(_ collection: C.Type) {
        for item in presentElements(named: core.name(of: C.self, named: C.name)) where !CompoundPresence.isCompound(item.key) {
            store(item.key, nil, decoded: nil)
        }
    }

    private func typedValue<Value: Decodable & Sendable>(
        _ type: Value.Type, of item: (key: StateKey, bytes: PackedBytes, version: Version?, decoded: (any Sendable)?)
    ) -> Value? {
        if let decoded = item.decoded as? Value { return decoded }
        if let version = item.version, let kept = core.decoded.value(of: item.key, at: version) as? Value { return kept }
        guard let value = decode(type, item.bytes, key: item.key) else { return nil }
        if let version = item.version { core.decoded.keep(value, of: item.key, at: version) }
        return value
    }

    // MARK: ordered indexes

    /// The elements of index `I` in order: by position, then by element bytes. A stored value
    /// that is not a position (a peer's or a tool's bad write) sorts first, as the empty
    /// position, on every replica alike.
    private func orderedIndex<I: IndexState>(_ index: I.Type) -> [(key: StateKey, position: IndexPosition)] {
        let name = core.name(of: I.self, named: I.name)
        if let kept = pending.indexOrders[name] { return kept }
        var invalid = 0
        var items = presentElements(named: name).filter { !CompoundPresence.isCompound($0.key) }.map { item -> (key: StateKey, position: IndexPosition) in
            if let position = item.decoded as? IndexPosition { return (item.key, position) }
            if let version = item.version, let kept = core.decoded.value(of: item.key, at: version) as? IndexPosition {
                return (item.key, kept)
            }
            guard let text = try? ValueCoding.decode(String.self, from: item.bytes), let position = IndexPosition(encoded: text) else {
                invalid += 1
                return (item.key, IndexPosition(digits: []))
            }
            // Positions are parsed once per entry version, as typed values are.
            if let version = item.version { core.decoded.keep(position, of: item.key, at: version) }
            return (item.key, position)
        }
        if invalid > 0 {
            logger.warning("index \(I.name): \(invalid) element(s) hold no valid position; they sort first")
        }
        items.sort(by: Self.ordered)
        return items
    }

    func ids<I: IndexState>(_ index: I.Type) -> [I.ID] {
        orderedIndex(index).compactMap { decode(I.ID.self, $0.key.packedElement, key: $0.key) }
    }

    /// Puts `id` at `placement` in index `I` (moving it if it is there already).
    func place<I: IndexState>(_ id: I.ID, into index: I.Type, _ placement: IndexPlacement<I.ID>) {
        let element: [UInt8]
        do {
            element = try ValueCoding.encode(id)
        } catch {
            failure = failure ?? "\(error)"
            return
        }
        let key = core.key(of: I.self, named: I.name, element: element)
        var others = orderedIndex(index)
        if let at = others.firstIndex(where: { $0.key == key }) { others.remove(at: at) }
        let tag = IndexPosition.tag(ofNodeHash: Version(timestamp: .zero, node: core.nodeID).nodeHash)
        func slot(of anchor: I.ID) -> Int? {
            guard let bytes = try? ValueCoding.encode(anchor) else { return nil }
            return others.firstIndex { $0.key.packedElement.equals(bytes) }
        }
        let position: IndexPosition
        switch placement {
        case .append:
            position = others.last.map { IndexPosition.appending(after: $0.position, writer: tag) } ?? .first(writer: tag)
        case .prepend:
            position = others.first.map { IndexPosition.between(nil, $0.position, writer: tag) } ?? .first(writer: tag)
        case .after(let anchor):
            guard let at = slot(of: anchor) else {
                failure = failure ?? "cannot place \(id) after \(anchor) in \(I.name): \(anchor) is not in the index"
                return
            }
            position = at + 1 < others.count
                ? IndexPosition.between(others[at].position, others[at + 1].position, writer: tag)
                : IndexPosition.appending(after: others[at].position, writer: tag)
        case .before(let anchor):
            guard let at = slot(of: anchor) else {
                failure = failure ?? "cannot place \(id) before \(anchor) in \(I.name): \(anchor) is not in the index"
                return
            }
            position = IndexPosition.between(at > 0 ? others[at - 1].position : nil, others[at].position, writer: tag)
        }
        guard position.digits.count <= IndexPosition.maxDigits else {
            failure = failure ?? "cannot place \(id) in \(I.name): its position would need more than \(IndexPosition.maxDigits) digits (too many inserts at one place); move the neighbours apart first"
            return
        }
        do {
            store(key, try ValueCoding.encodePacked(position.encoded), decoded: position)
        } catch {
            failure = failure ?? "\(error)"
            return
        }
        // Keep this decision's order current: the new position goes where it sorts.
        let item = (key: key, position: position)
        var low = 0, high = others.count
        while low < high {
            let middle = (low + high) / 2
            if Self.ordered(item, before: others[middle]) { high = middle } else { low = middle + 1 }
        }
        others.insert(item, at: low)
        pending.indexOrders[key.name] = others
    }

    private static func ordered(_ lhs: (key: StateKey, position: IndexPosition), before rhs: (key: StateKey, position: IndexPosition)) -> Bool {
        IndexPosition.orders(lhs.position, lhs.key.element, before: rhs.position, rhs.key.element)
    }

    /// Removes `id` from index `I` (nothing when it is not there).
    func remove<I: IndexState>(_ id: I.ID, from index: I.Type) {
        guard let element = try? ValueCoding.encode(id) else { return }  // an id that cannot be encoded is in no index
        let key = core.key(of: I.self, named: I.name, element: element)
        let present = pending.position(of: key).map { pending.writes[$0].value != nil } ?? (entry(for: key)?.packedValue != nil)
        guard present else { return }
        var order = pending.indexOrders[key.name]
        store(key, nil, decoded: nil)
        if let at = order?.firstIndex(where: { $0.key == key }) {
            order!.remove(at: at)
            pending.indexOrders[key.name] = order
        }
    }
}
