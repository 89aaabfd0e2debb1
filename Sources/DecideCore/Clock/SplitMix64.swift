/// A seeded random number generator (SplitMix64): the same seed gives the same sequence on
/// every machine, so a failing test or simulation can be replayed from the seed it prints.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return StableHash.mix(state &- 0x9E37_79B9_7F4A_7C15)
    }
}
