@testable import DecideCore
import Synchronization
import Testing

@Suite struct GrowingArrayTests {
    /// Counts the instances alive, so a test sees every element released exactly once.
    final class Tracked: Sendable {
        static let alive = Atomic<Int>(0)
        let value: Int
        init(_ value: Int) {
            self.value = value
            Self.alive.add(1, ordering: .relaxed)
        }
        deinit { Self.alive.subtract(1, ordering: .relaxed) }
    }

    struct Element {
        var number: Int
        var tracked: Tracked
        var bytes: [UInt8]
    }

    /// Appends, writes, removals and copies, checked against a Swift array after every step;
    /// a copy taken midway keeps its elements while the original changes (value semantics).
    @Test func behavesAsAnArrayThroughGrowthWritesRemovalsAndCopies() {
        let before = Tracked.alive.load(ordering: .relaxed)
        forEachSeed(0..<4) { seed, gen in
            var growing = GrowingArray<Element>()
            var model: [Element] = []
            var snapshot: (GrowingArray<Element>, [Int])?
            for step in 0..<20_000 {
                switch gen.int(0...9) {
                case 0..<6:
                    let element = Element(number: step, tracked: Tracked(step), bytes: Array(repeating: UInt8(truncatingIfNeeded: step), count: step % 40))
                    growing.append(element)
                    model.append(element)
                case 6..<8 where !model.isEmpty:
                    let position = gen.int(0...(model.count - 1))
                    growing[position].number = -step
                    growing[position].bytes.append(7)
                    model[position].number = -step
                    model[position].bytes.append(7)
                case 8 where !model.isEmpty:
                    #expect(growing.removeLast().number == model.removeLast().number)
                default:
                    if snapshot == nil { snapshot = (growing, model.map(\.number)) }
                }
                #expect(growing.count == model.count, "seed \(seed)")
            }
            #expect(growing.map(\.number) == model.map(\.number), "seed \(seed)")
            #expect(growing.map(\.bytes) == model.map(\.bytes))
            #expect(growing.map(\.tracked.value) == model.map(\.tracked.value))
            if let (copy, numbers) = snapshot { #expect(copy.map(\.number) == numbers) }
            growing.withUnsafeMutableBufferPointer { buffer in
                for index in buffer.indices { buffer[index].number = index }
            }
            #expect(growing.withUnsafeBufferPointer { Array($0.map(\.number)) } == Array(0..<model.count))
        }
        #expect(Tracked.alive.load(ordering: .relaxed) == before, "elements leaked or were released twice")
    }

    /// A million small records, the size a node holds: every one reads back.
    @Test func holdsAMillionElements() {
        var growing = GrowingArray<(UInt64, UInt64)>()
        for index in 0..<1_000_000 { growing.append((UInt64(index), UInt64(index) &* 31)) }
        #expect(growing.count == 1_000_000)
        #expect(growing.indices.allSatisfy { growing[$0].0 == UInt64($0) && growing[$0].1 == UInt64($0) &* 31 })
    }
}
