import DecideCore

/// Sorted sets inside a decision or snapshot read (`SortedSetState`): each member one element
/// (`SortedSetMember`) whose value is its score, replaced last-writer-wins, this decision's
/// writes applied.
extension Transaction {
    /// The score `member` (its JSON) has in the sorted set named `name`, nil when it is not in
    /// it. O(1).
    func score(of member: [UInt8], inSortedSetNamed name: String) -> Double? {
        let key = StateKey(name: name, element: SortedSetMember.element(member: member))
        let value: PackedBytes?
        if let index = pending.position(of: key) {
            value = pending.writes[index].value
        } else {
            value = entry(for: key)?.packedValue
        }
        return value.flatMap(SortedSetMember.score)
    }

    /// Every member (its JSON) of the sorted set named `name` with its score, by score, then by
    /// JSON bytes. O(n log n) in the elements of its collection.
    func scoredMembers(ofSortedSetNamed name: String) -> [(member: [UInt8], score: Double)] {
        guard mayHoldScoredMembers(name) else { return [] }
        var members: [(member: [UInt8], score: Double)] = []
        for item in presentElements(named: name) {
            guard let member = SortedSetMember.member(of: item.key), let score = SortedSetMember.score(item.bytes) else { continue }
            members.append((member, score))
        }
        members.sort(by: SortedSetMember.precedes)
        return members
    }

    /// Whether the sorted set named `name` has a member: O(1) when it never stored one and this
    /// decision wrote none, else O(elements tried; all of them for a set emptied but not yet
    /// collected).
    func hasScoredMembers(ofSortedSetNamed name: String) -> Bool {
        guard mayHoldScoredMembers(name) else { return false }
        let writes = pending.writes
        if pending.writesElement(ofCollectionNamed: name, kind: ElementGroup.scoredMemberKind, where: { writes[$0].value != nil }) {
            return true
        }
        return containsLiveElement(ofCollectionNamed: name) { SortedSetMember.member(of: $0) != nil }
    }

    func scoredMembers<Z: SortedSetState>(_ set: Z.Type) -> [ScoredMember<Z.Member>] {
        scoredMembers(ofSortedSetNamed: core.name(of: Z.self, named: Z.name)).compactMap { item in
            (try? ValueCoding.decode(Z.Member.self, from: item.member)).map { ScoredMember($0, score: item.score) }
        }
    }

    func score<Z: SortedSetState>(of member: Z.Member, in set: Z.Type) -> Double? {
        guard let bytes = try? ValueCoding.encode(member) else { return nil }
        return score(of: bytes, inSortedSetNamed: core.name(of: Z.self, named: Z.name))
    }

    func change<Z: SortedSetState>(_ change: SortedSetChange<Z.Member>, sortedSet: Z.Type) {
        let name = core.name(of: Z.self, named: Z.name)
        do throws(ValueCoding.Failure) {
            switch change {
            case .add(let member, let score): add(member: try ValueCoding.encode(member), score: score, intoSortedSetNamed: name)
            case .remove(let member): remove(member: try ValueCoding.encode(member), fromSortedSetNamed: name)
            case .removeAll: removeAll(fromSortedSetNamed: name)
            }
        } catch {
            failure = failure ?? "\(error)"
        }
    }

    /// Puts `member` (its JSON) in the sorted set named `name` with `score`, expiring as
    /// `expiry` says. Returns whether it
    /// was not in the set before; an infinite or NaN score, or a new member past
    /// `maxSetMembers`, fails the decision.
    @discardableResult
    func add(member: [UInt8], score: Double, intoSortedSetNamed name: String, expiry: WriteExpiry = .never) -> Bool {
        guard let value = SortedSetMember.value(score: score) else {
            failure = failure ?? "score \(score) of a member of sorted set \(name) is not a finite number"
            return false
        }
        let key = StateKey(name: name, element: SortedSetMember.element(member: member))
        let held = self.score(of: member, inSortedSetNamed: name) != nil
        if !held, pending.position(of: key) == nil, core.entry(for: key) == nil {
            let stored = core.scoredMemberCount(ofCollectionNamed: name)
            if stored >= core.maxSetMembers {
                failure = failure ?? "sorted set \(name) stores \(stored) members (removed ones count until their tombstones are collected), the most maxSetMembers \(core.maxSetMembers) allows"
                return false
            }
        }
        core.compoundPresence.noteWritten()
        store(key, value, decoded: nil, options: WriteOptions(expiry: expiry))
        return !held
    }

    /// Takes `member` (its JSON) out of the sorted set named `name`. Returns whether it was in it.
    @discardableResult
    func remove(member: [UInt8], fromSortedSetNamed name: String) -> Bool {
        guard score(of: member, inSortedSetNamed: name) != nil else { return false }
        store(StateKey(name: name, element: SortedSetMember.element(member: member)), nil, decoded: nil)
        return true
    }

    /// Takes every member this decision sees out of the sorted set named `name`; how many there were.
    @discardableResult
    func removeAll(fromSortedSetNamed name: String) -> Int {
        let members = scoredMembers(ofSortedSetNamed: name)
        for item in members { store(StateKey(name: name, element: SortedSetMember.element(member: item.member)), nil, decoded: nil) }
        return members.count
    }

    /// False when the collection `name` stores no sorted set member and this decision wrote none.
    private func mayHoldScoredMembers(_ name: String) -> Bool {
        core.scoredMemberCount(ofCollectionNamed: name) > 0
            || pending.writesElement(ofCollectionNamed: name, kind: ElementGroup.scoredMemberKind)
    }
}
