@testable import DecideSimulation
import Testing

@Suite struct SimulationSeedTests {
    @Test func parsesDecimalAndHex() {
        #expect(SimulationSeed.parse("42") == 42)
        #expect(SimulationSeed.parse(" 0x2a\n") == 42)
        #expect(SimulationSeed.parse("0XFF") == 255)
        #expect(SimulationSeed.parse("18446744073709551615") == UInt64.max)
        #expect(SimulationSeed.parse("-1") == nil)
        #expect(SimulationSeed.parse("seed 4") == nil)
        #expect(SimulationSeed.parse("") == nil)
    }

    @Test func defaultsApplyWhenNoSeedIsPinned() {
        let pinned = SimulationSeed.fromEnvironment
        let seeds = SimulationSeed.seeds(default: [5, 6])
        if let pinned { #expect(seeds == [pinned]) } else { #expect(seeds == [5, 6]) }
    }
}
