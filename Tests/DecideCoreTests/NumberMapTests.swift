@_spi(Engine) @testable import DecideCore
import Testing

/// `NumberMap` answers exactly as a `Dictionary` would, through growth and through removals that
/// shift clustered cells back.
@Suite struct NumberMapTests {
    /// Keys drawn from a small range (so inserts, overwrites and removals of the same keys mix),
    /// from consecutive numbers (as connection numbers are) and from multiples of a large power
    /// of two (which a weak hash would pile into one cell).
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func agreesWithADictionary(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var map = NumberMap<Int>()
        var reference: [UInt64: Int] = [:]
        for step in 0..<20_000 {
            let key: UInt64 = switch random.next() % 3 {
            case 0: random.next() % 64
            case 1: 1_000 + random.next() % 512
            default: (random.next() % 128) << 40
            }
            switch random.next() % 5 {
            case 0, 1:
                map[key] = step
                reference[key] = step
            case 2:
                #expect(map.removeValue(forKey: key) == reference.removeValue(forKey: key))
            case 3:
                map[key, default: 0] += 1
                reference[key, default: 0] += 1
            default:
                map[key] = nil
                reference[key] = nil
            }
            #expect(map.count == reference.count)
            if step % 97 == 0 {
                for (known, value) in reference { #expect(map[known] == value, "key \(known) at step \(step)") }
            }
            #expect(map[key] == reference[key])
        }
        for known in reference.keys { map.removeValue(forKey: known) }
        #expect(map.isEmpty)
        #expect(map[0] == nil && map[1_000] == nil)
    }

    @Test func holdsThousandsOfKeysAndForgetsEachRemovedOne() {
        var map = NumberMap<UInt64>()
        for key in 0..<5_000 as Range<UInt64> { map[key * 7] = key }
        #expect(map.count == 5_000)
        for key in stride(from: 0, to: 5_000, by: 2) as StrideTo<UInt64> { #expect(map.removeValue(forKey: key * 7) == key) }
        for key in 0..<5_000 as Range<UInt64> {
            #expect(map[key * 7] == (key % 2 == 0 ? nil : key))
        }
        #expect(map.count == 2_500)
    }
}
