@testable import Decide
import DecideCore
import Testing

/// The small tables the commit path uses instead of `Dictionary`, checked against one.
@Suite struct HotPathTableTests {
    final class Token {}

    /// Every identifier inserted is found with its key, none other is, across growth.
    @Test func typeTableAnswersLikeADictionary() {
        let tokens = (0..<300).map { _ in Token() }
        var table = TypeTable<StateKey>()
        var model: [ObjectIdentifier: StateKey] = [:]
        for (index, token) in tokens.enumerated() {
            let id = ObjectIdentifier(token)
            #expect(table.value(for: id) == nil)
            let key = StateKey(name: "type.\(index)")
            table.insert(key, for: id)
            model[id] = key
            if index % 37 == 0 {
                for other in tokens { #expect(table.value(for: ObjectIdentifier(other)) == model[ObjectIdentifier(other)]) }
            }
        }
        #expect(table.count == 300)
        for token in tokens { #expect(table.value(for: ObjectIdentifier(token)) == model[ObjectIdentifier(token)]) }
    }

    /// Writes in any order, with keys rewritten, past the linear-search size: one write per key
    /// in first-write order, the last value kept, and `decisionBytes` equal to `Node`'s count.
    @Test func pendingWritesKeepTheLastWriteOfEachKeyAndTheirExactSize() {
        for seed in 0..<40 {
            var random = SplitMix64(seed: UInt64(seed))
            var pending = PendingWrites(nodeID: "node-\(seed)")
            var order: [StateKey] = []
            var latest: [StateKey: [UInt8]?] = [:]
            let distinctKeys = 1 + Int(random.next() % 60)
            for _ in 0..<(Int(random.next() % 120)) {
                let key = StateKey(name: "k", element: Array("\(random.next() % UInt64(distinctKeys))".utf8))
                let value: [UInt8]? = random.next() % 5 == 0 ? nil : [UInt8](repeating: 7, count: Int(random.next() % 40))
                let existing = pending.position(of: key)
                #expect((existing != nil) == (latest[key] != nil))
                pending.set(key, value: value, decoded: nil, at: existing)
                if latest[key] == nil { order.append(key) }
                latest[key] = .some(value)
            }
            #expect(pending.keys == order)
            #expect(pending.values == order.map { latest[$0]! })
            let expected = Node.decisionBytes(nodeID: "node-\(seed)", writes: order.map { ($0, latest[$0]!) })
            #expect(pending.decisionBytes == expected)
            pending.removeAll()
            #expect(pending.isEmpty && pending.decisionBytes == Node.decisionBytes(nodeID: "node-\(seed)", writes: []))
        }
    }
}
