import CustomDump
import Decide
import DecideCore

/// Every value a node holds, as a test states it: each key that holds a value with its JSON
/// text, and each ordered index as its ids in order. `TestNode` compares the state a decision
/// left with the one the test expects, and shows the difference line by line.
///
/// Guarantees: two states are equal exactly when the same keys hold the same JSON values and the
/// same indexes list the same ids in the same order; keys that hold no value (never written,
/// deleted, expired) are absent, so "unchanged" and "deleted" can be told apart. The typed
/// subscripts encode and decode as the node does, so `state[Counter.self] = 2` is what a
/// decision writing 2 leaves.
public struct TestState: Equatable, Sendable, CustomDumpReflectable {
    /// Keys holding a value (`name`, or `name[element]` for a collection element) and the value's
    /// JSON text. Index elements are not here; they are in `indexes`.
    public var values: [String: String]
    /// Ordered indexes by name: the JSON text of each id, in order.
    public var indexes: [String: [String]]
    /// Counters by name (`CounterState`), each with its total, and a hash's counter fields
    /// (HINCRBY's) as `name[field]`; a counter whose slots sum to 0 and one never changed are
    /// both absent. Their slots are not in `values`.
    public var counters: [String: Int64]
    /// Sets by name (`SetState`): the JSON text of each element, sorted; an empty set is absent.
    /// Their dots are not in `values`.
    public var sets: [String: [String]]
    /// Sorted sets by name (`SortedSetState`): the JSON text of each member with its score; an
    /// empty one is absent. Their members are not in `values`.
    public var sortedSets: [String: [String: Double]]

    /// A state with these `values`, `indexes`, `counters`, `sets` and `sortedSets` (all empty
    /// by default: no key holds a value).
    public init(values: [String: String] = [:], indexes: [String: [String]] = [:], counters: [String: Int64] = [:],
                sets: [String: [String]] = [:], sortedSets: [String: [String: Double]] = [:]) {
        self.values = values
        self.indexes = indexes
        self.counters = counters
        self.sets = sets
        self.sortedSets = sortedSets
    }

    /// The state of `entries` as a reader at `nowMilliseconds` sees it. A collection whose every
    /// element holds an index position is shown as an index.
    init(entries: [StateKey: Entry], nowMilliseconds now: UInt64) {
        var values: [String: String] = [:]
        var byName: [String: [(element: [UInt8], text: String, position: IndexPosition?)]] = [:]
        var sums: [String: Int128] = [:]
        var members: [String: Set<String>] = [:]
        var scored: [String: [String: Double]] = [:]
        for (key, entry) in entries {
            guard let bytes = entry.value, !entry.isExpired(atMilliseconds: now) else { continue }
            if let member = SortedSetMember.member(of: key) {
                if let score = SortedSetMember.score(PackedBytes(bytes)) { scored[key.name, default: [:]][String(decoding: member, as: UTF8.self)] = score }
                continue
            }
            if let member = SetDot.member(of: key) {
                members[key.name, default: []].insert(String(decoding: member, as: UTF8.self))
                continue
            }
            if CounterSlot.counts(key) {
                // A hash's counter field (HINCRBY's) is a counter of its own, `name[field]`.
                let counter = CounterSlot.field(of: key).map { StateKey(name: key.name, element: $0).description } ?? key.name
                if let slot = CounterSlot.sums(PackedBytes(bytes)) {
                    sums[counter, default: 0] += Int128(slot.increments) - Int128(slot.decrements)
                }
                continue
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if key.element.isEmpty {
                values[key.description] = text
            } else {
                let position = (try? ValueCoding.decode(String.self, from: bytes)).flatMap { IndexPosition(encoded: $0) }
                byName[key.name, default: []].append((key.element, text, position))
            }
        }
        var indexes: [String: [String]] = [:]
        for (name, elements) in byName {
            if elements.allSatisfy({ $0.position != nil }) {
                let ordered = elements.sorted { lhs, rhs in
                    IndexPosition.orders(lhs.position!, lhs.element, before: rhs.position!, rhs.element)
                }
                indexes[name] = ordered.map { String(decoding: $0.element, as: UTF8.self) }
            } else {
                for element in elements {
                    values[StateKey(name: name, element: element.element).description] = element.text
                }
            }
        }
        self.values = values
        self.indexes = indexes
        self.counters = sums.filter { $0.value != 0 }.mapValues { Int64(clamping: $0) }
        self.sets = members.mapValues { $0.sorted() }
        self.sortedSets = scored
    }

    /// The members of `sortedSet` in order (empty when it holds none); setting states them.
    public subscript<Z: SortedSetState>(sortedSet: Z.Type) -> [ScoredMember<Z.Member>] {
        get {
            (sortedSets[Z.name] ?? [:])
                .map { (member: Array($0.key.utf8), score: $0.value) }
                .sorted(by: SortedSetMember.precedes)
                .compactMap { item in (try? ValueCoding.decode(Z.Member.self, from: item.member)).map { ScoredMember($0, score: item.score) } }
        }
        set {
            sortedSets[Z.name] = newValue.isEmpty ? nil : Dictionary(newValue.map { (Self.text(of: $0.member), $0.score) }, uniquingKeysWith: { $1 })
        }
    }

    /// The elements of `set` (empty when it holds none); setting states them.
    public subscript<S: SetState>(set: S.Type) -> Set<S.Element> {
        get {
            Set((sets[S.name] ?? []).compactMap { try? ValueCoding.decode(S.Element.self, from: Array($0.utf8)) })
        }
        set { sets[S.name] = newValue.isEmpty ? nil : newValue.map(Self.text).sorted() }
    }

    /// The total of `counter` (0 when never changed); setting 0 states that its slots sum to 0.
    public subscript<C: CounterState>(counter: C.Type) -> Int64 {
        get { counters[C.name] ?? 0 }
        set { counters[C.name] = newValue == 0 ? nil : newValue }
    }

    /// The value of `key` (its default when it holds none).
    public subscript<K: AtomicState>(key: K.Type) -> K.Value {
        get {
            values[K.name].flatMap { try? ValueCoding.decode(K.Value.self, from: Array($0.utf8)) } ?? K.defaultValue()
        }
        set { values[K.name] = Self.text(of: newValue) }
    }

    /// The value of element `id` of `collection`, nil when it holds none; setting nil states that
    /// it holds none (deleted, or never written).
    public subscript<C: CollectionState>(collection: C.Type, at id: C.ID) -> C.Value? {
        get {
            values[Self.name(of: C.name, id)].flatMap { try? ValueCoding.decode(C.Value.self, from: Array($0.utf8)) }
        }
        set { values[Self.name(of: C.name, id)] = newValue.map(Self.text) }
    }

    /// The ids of `index` in order (empty when it holds none).
    public subscript<I: IndexState>(index: I.Type) -> [I.ID] {
        get {
            (indexes[I.name] ?? []).compactMap { try? ValueCoding.decode(I.ID.self, from: Array($0.utf8)) }
        }
        set { indexes[I.name] = newValue.isEmpty ? nil : newValue.map(Self.text) }
    }

    /// States that `key` holds no value (deleted, or never written).
    public mutating func delete<K: AtomicState>(_ key: K.Type) {
        values[K.name] = nil
    }

    /// States that no element of `collection` holds a value.
    public mutating func deleteAll<C: CollectionState>(_ collection: C.Type) {
        let prefix = C.name + "["
        values = values.filter { !$0.key.hasPrefix(prefix) }
    }

    private static func text<Value: Encodable>(of value: Value) -> String {
        guard let bytes = try? ValueCoding.encode(value) else { return "<not encodable as JSON: \(value)>" }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func name<ID: Encodable>(of collection: String, _ id: ID) -> String {
        guard let bytes = try? ValueCoding.encode(id) else { return "\(collection)[<not encodable: \(id)>]" }
        return StateKey(name: collection, element: bytes).description
    }

    /// One line per key (sorted), JSON shown as it is stored, and each index as its list.
    public var customDumpMirror: Mirror {
        var children: [(label: String?, value: Any)] = []
        for (key, text) in values.sorted(by: { $0.key < $1.key }) { children.append((key, JSONText(text: text))) }
        for (name, ids) in indexes.sorted(by: { $0.key < $1.key }) { children.append((name, ids.map(JSONText.init(text:)))) }
        for (name, total) in counters.sorted(by: { $0.key < $1.key }) { children.append((name, total)) }
        for (name, elements) in sets.sorted(by: { $0.key < $1.key }) { children.append((name, elements.map(JSONText.init(text:)))) }
        for (name, members) in sortedSets.sorted(by: { $0.key < $1.key }) {
            let ordered = members.map { (member: Array($0.key.utf8), score: $0.value) }.sorted(by: SortedSetMember.precedes)
            children.append((name, ordered.map { "\(String(decoding: $0.member, as: UTF8.self)) \($0.score)" }))
        }
        return Mirror(self, children: children, displayStyle: .struct)
    }
}

/// JSON text as a diff shows it: as it is, not as a quoted Swift string.
struct JSONText: CustomDumpStringConvertible, Equatable {
    let text: String
    var customDumpDescription: String { text }
}
