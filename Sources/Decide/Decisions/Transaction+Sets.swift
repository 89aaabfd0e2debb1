import DecideCore

/// Sets inside a decision or snapshot read (`SetState`): the members whose dots are live, this
/// decision's writes applied; an insert as a fresh dot that replaces the dots of the member this
/// node sees, a remove as the deletion of those dots (docs/design/0002-sets.md).
extension Transaction {
    /// The live dots of `member` (its JSON) in the set named `name`, this decision's writes
    /// applied. O(dots of the member): the table lists them by group (`ElementGroup`).
    private func dots(of member: [UInt8], inSetNamed name: String) -> [StateKey] {
        storedDots(of: member, inSetNamed: name).live
    }

    /// `dots(of:inSetNamed:)`, and whether the table stores any dot of `member` at all (live or
    /// a tombstone: a member the table already counts).
    private func storedDots(of member: [UInt8], inSetNamed name: String) -> (live: [StateKey], stored: Bool) {
        var live: [StateKey] = []
        let now = now
        let stored = core.forEachElement(ofCollectionNamed: name, inGroupOf: SetDot.group(of: member)) { key, entry in
            if core.isVisible(entry, now: now), pending.position(of: key) == nil { live.append(key) }
        }
        if let fresh = insertedDots[name]?[MemberBytes(member)], let index = pending.position(of: fresh), pending.writes[index].value != nil {
            live.append(fresh)
        }
        return (live, stored)
    }

    /// The JSON of every member of the set named `name`. O(dots of the set).
    func members(ofSetNamed name: String) -> [[UInt8]] {
        var members = Set<[UInt8]>()
        for item in presentElements(named: name) {
            if let member = SetDot.member(of: item.key) { members.insert(member) }
        }
        return Array(members)
    }

    func members<S: SetState>(_ set: S.Type) -> Set<S.Element> {
        var elements = Set<S.Element>()
        for bytes in members(ofSetNamed: core.name(of: S.self, named: S.name)) {
            if let element = try? ValueCoding.decode(S.Element.self, from: bytes) { elements.insert(element) }
        }
        return elements
    }

    /// Whether the set named `name` has a member: O(1) when it never stored one, else
    /// O(dots tried until a live one; all of them for a set emptied but not yet collected).
    func hasMembers(ofSetNamed name: String) -> Bool {
        if let fresh = insertedDots[name]?.values, fresh.contains(where: { key in pending.position(of: key).map { pending.writes[$0].value != nil } ?? false }) {
            return true
        }
        guard core.groupCount(ofCollectionNamed: name) > 0 else { return false }
        return containsLiveElement(ofCollectionNamed: name) { SetDot.member(of: $0) != nil }
    }

    /// Whether `member` (its JSON) is in the set named `name`. O(dots of the member).
    func contains(member: [UInt8], inSetNamed name: String) -> Bool {
        !dots(of: member, inSetNamed: name).isEmpty
    }

    func change<S: SetState>(_ change: SetChange<S.Element>, set: S.Type) {
        let name = core.name(of: S.self, named: S.name)
        do throws(ValueCoding.Failure) {
            switch change {
            case .insert(let element): insert(member: try ValueCoding.encode(element), intoSetNamed: name)
            case .remove(let element): remove(member: try ValueCoding.encode(element), fromSetNamed: name)
            case .removeAll: removeAll(fromSetNamed: name)
            }
        } catch {
            failure = failure ?? "\(error)"
        }
    }

    /// Puts `member` (its JSON) in the set named `name`: one fresh dot, expiring as `expiry`
    /// says, and the dots of it this decision sees deleted (one insert per decision: a second
    /// finds the first's dot and leaves it, unless it gives the dot another expiry). Returns
    /// whether it was not in the set before.
    @discardableResult
    func insert(member: [UInt8], intoSetNamed name: String, expiry: WriteExpiry = .never) -> Bool {
        let (seen, stored) = storedDots(of: member, inSetNamed: name)
        if let fresh = insertedDots[name]?[MemberBytes(member)], seen.contains(fresh) {
            if let index = pending.position(of: fresh), pending.writes[index].options.expiry != expiry {
                store(fresh, SetDot.value, decoded: nil, options: WriteOptions(expiry: expiry))
            }
            return false
        }
        if seen.isEmpty, !stored {
            let members = core.groupCount(ofCollectionNamed: name) + (insertedDots[name]?.count ?? 0)
            if members >= core.maxSetMembers {
                failure = failure ?? "set \(name) stores \(members) members (removed ones count until their tombstones are collected), the most maxSetMembers \(core.maxSetMembers) allows"
                return false
            }
        }
        for key in seen { store(key, nil, decoded: nil) }
        let key = freshDot(of: member, inSetNamed: name)
        core.compoundPresence.noteWritten()
        store(key, SetDot.value, decoded: nil, options: WriteOptions(expiry: expiry))
        insertedDots[name, default: [:]][MemberBytes(member)] = key
        return seen.isEmpty
    }

    /// Takes `member` (its JSON) out of the set named `name`: the dots of it this decision sees
    /// deleted. Returns whether it was in the set.
    @discardableResult
    func remove(member: [UInt8], fromSetNamed name: String) -> Bool {
        let seen = dots(of: member, inSetNamed: name)
        for key in seen { store(key, nil, decoded: nil) }
        return !seen.isEmpty
    }

    /// Takes every member this decision sees out of the set named `name`; how many there were.
    @discardableResult
    func removeAll(fromSetNamed name: String) -> Int {
        let members = members(ofSetNamed: name)
        for member in members { remove(member: member, fromSetNamed: name) }
        return members.count
    }

    /// The key of this process's next dot of `member`. A dot of this incarnation and sequence
    /// already stored means another process of this node id took the same incarnation (as
    /// `ownSlot` in Transaction+Counters says); reusing it could let a remove that saw the other
    /// process's insert take out this one, so this process takes a new incarnation.
    private func freshDot(of member: [UInt8], inSetNamed name: String) -> StateKey {
        while true {
            core.setDotSequence += 1
            let key = StateKey(name: name, element: SetDot.element(member: member, incarnation: core.incarnation,
                                                                   sequence: core.setDotSequence, node: core.nodeID))
            guard core.entry(for: key) != nil else { return key }
            core.renewIncarnation(logger: logger, state: name)
        }
    }
}
