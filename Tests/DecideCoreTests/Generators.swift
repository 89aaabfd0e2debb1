import DecideCore

/// Random values for property tests, all drawn from one seeded generator.
struct Generators {
    var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    mutating func bool() -> Bool { Bool.random(using: &random) }

    mutating func bytes(maxCount: Int) -> [UInt8] {
        (0..<int(0...maxCount)).map { _ in UInt8.random(in: 0...255, using: &random) }
    }

    mutating func node() -> String { ["a", "b", "c", "node-ü"][int(0...3)] }

    /// Versions drawn from a small space, so ties on timestamp (and on whole versions) happen.
    mutating func version() -> Version {
        Version(
            timestamp: HLCTimestamp(physicalMilliseconds: UInt64(int(0...3)), logical: UInt16(int(0...2))),
            node: node())
    }

    /// Some values expire, at instants from a small space (ties happen), and some are owned by
    /// their writer; tombstones are neither. Most values are short (held in place, and equal
    /// often); one in five may be longer than `PackedBytes.inlineCapacity` (held in an array).
    mutating func entry() -> Entry {
        Entry(version: version(), value: int(0...4) == 0 ? nil : bytes(maxCount: int(0...4) == 0 ? 20 : 3), expiresAtMilliseconds: expiry(),
              ownedByWriter: int(0...3) == 0)
    }

    /// Nil two times in three, else an instant from 1 to 3 ms.
    mutating func expiry() -> UInt64? {
        int(0...2) == 0 ? UInt64(int(1...3)) : nil
    }

    mutating func key() -> StateKey {
        StateKey(name: ["flags", "quota", "lease"][int(0...2)], element: int(0...1) == 0 ? [] : bytes(maxCount: 2))
    }

    mutating func delta() -> Delta {
        Delta(version: version(), writes: (0..<int(0...5)).map { _ in
            Delta.Write(key: key(), value: bool() ? nil : bytes(maxCount: 40), expiresAtMilliseconds: expiry(), ownedByWriter: bool())
        })
    }

    mutating func shuffled<T>(_ items: [T]) -> [T] { items.shuffled(using: &random) }
}

/// Runs `body` for every seed in `seeds`; a failure message names the seed to replay.
func forEachSeed(_ seeds: Range<UInt64>, _ body: (UInt64, inout Generators) throws -> Void) rethrows {
    for seed in seeds {
        var generators = Generators(seed: seed)
        try body(seed, &generators)
    }
}
