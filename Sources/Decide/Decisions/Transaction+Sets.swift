import DecideCore

/// Sets inside a decision or snapshot read (`SetState`): the members whose dots are live, this
/// decision's writes applied; an insert as a fresh dot that replaces the dots of the member this
/// node sees, a remove as the deletion of those dots (docs/design/0002-sets.md).
extension Transaction {
    /// The live dots of the set named `name`, by member JSON.
    private func dots(named name: String) -> [[UInt8]: [StateKey]] {
        var byMember: [[UInt8]: [StateKey]] = [:]
        for item in presentElements(named: name) {
            guard let member = SetDot.member(of: item.key) else { continue }
            byMember[member, default: []].append(item.key)
        }
        return byMember
    }

    /// The JSON of every member of the set named `name`.
    func members(ofSetNamed name: String) -> [[UInt8]] {
        Array(dots(named: name).keys)
    }

    func members<S: SetState>(_ set: S.Type) -> Set<S.Element> {
        var members = Set<S.Element>()
        for bytes in members(ofSetNamed: core.name(of: S.self, named: S.name)) {
            if let element = try? ValueCoding.decode(S.Element.self, from: bytes) { members.insert(element) }
        }
        return members
    }

    func change<S: SetState>(_ change: SetChange<S.Element>, set: S.Type) {
        let name = core.name(of: S.self, named: S.name)
        do throws(ValueCoding.Failure) {
            switch change {
            case .insert(let element): insert(member: try ValueCoding.encode(element), intoSetNamed: name)
            case .remove(let element): remove(member: try ValueCoding.encode(element), fromSetNamed: name)
            case .removeAll: for member in members(ofSetNamed: name) { remove(member: member, fromSetNamed: name) }
            }
        } catch {
            failure = failure ?? "\(error)"
        }
    }

    /// Puts `member` (its JSON) in the set named `name`: one fresh dot, and the dots of it this
    /// decision sees deleted. Returns whether it was not in the set before.
    @discardableResult
    func insert(member: [UInt8], intoSetNamed name: String) -> Bool {
        let seen = dots(named: name)[member] ?? []
        for key in seen { store(key, nil, decoded: nil) }
        core.setDotSequence += 1
        let element = SetDot.element(member: member, incarnation: core.counterIncarnation, sequence: core.setDotSequence, node: core.nodeID)
        store(StateKey(name: name, element: element), SetDot.value, decoded: nil)
        return seen.isEmpty
    }

    /// Takes `member` (its JSON) out of the set named `name`: the dots of it this decision sees
    /// deleted. Returns whether it was in the set.
    @discardableResult
    func remove(member: [UInt8], fromSetNamed name: String) -> Bool {
        let seen = dots(named: name)[member] ?? []
        for key in seen { store(key, nil, decoded: nil) }
        return !seen.isEmpty
    }
}
