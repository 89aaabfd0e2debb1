import DecideCore
import Testing

@Suite struct ClockTests {
    @Test func ticksAreStrictlyMonotonicWhilePhysicalTimeJumpsAround() {
        forEachSeed(0..<200) { seed, gen in
            var clock = HybridLogicalClock(maxSkewMilliseconds: 1_000)
            var physical: UInt64 = 1_000_000
            var previous = HLCTimestamp.zero
            for _ in 0..<500 {
                // Steps forward, stalls, and steps backwards (an NTP correction).
                physical = UInt64(max(0, Int(physical) + gen.int(-50...50)))
                let next: HLCTimestamp
                if gen.int(0...3) == 0 {
                    let remote = HLCTimestamp(physicalMilliseconds: physical + UInt64(gen.int(0...900)), logical: UInt16(gen.int(0...9)))
                    next = try! clock.merge(remote: remote, physicalMilliseconds: physical)
                    #expect(next > remote, "seed \(seed)")
                } else {
                    next = clock.tick(physicalMilliseconds: physical)
                }
                #expect(next > previous, "seed \(seed)")
                previous = next
            }
        }
    }

    @Test func followsPhysicalTimeWhenItMovesForward() {
        var clock = HybridLogicalClock()
        #expect(clock.tick(physicalMilliseconds: 100) == HLCTimestamp(physicalMilliseconds: 100, logical: 0))
        #expect(clock.tick(physicalMilliseconds: 100) == HLCTimestamp(physicalMilliseconds: 100, logical: 1))
        #expect(clock.tick(physicalMilliseconds: 90) == HLCTimestamp(physicalMilliseconds: 100, logical: 2))
        #expect(clock.tick(physicalMilliseconds: 101) == HLCTimestamp(physicalMilliseconds: 101, logical: 0))
    }

    @Test func logicalOverflowBorrowsTheNextMillisecond() {
        var clock = HybridLogicalClock(last: HLCTimestamp(physicalMilliseconds: 5, logical: .max))
        #expect(clock.tick(physicalMilliseconds: 5) == HLCTimestamp(physicalMilliseconds: 6, logical: 0))
    }

    @Test func refusesARemoteTimestampTooFarAheadAndStaysUnchanged() {
        var clock = HybridLogicalClock(maxSkewMilliseconds: 500)
        _ = clock.tick(physicalMilliseconds: 10_000)
        let before = clock.last
        let tooFar = HLCTimestamp(physicalMilliseconds: 10_501, logical: 0)
        #expect(throws: ClockError.remoteTooFarAhead(remote: tooFar, localPhysicalMilliseconds: 10_000, maxSkewMilliseconds: 500)) {
            try clock.merge(remote: tooFar, physicalMilliseconds: 10_000)
        }
        #expect(clock.last == before)
        let atLimit = HLCTimestamp(physicalMilliseconds: 10_500, logical: 7)
        let merged = try? clock.merge(remote: atLimit, physicalMilliseconds: 10_000)
        #expect(merged == HLCTimestamp(physicalMilliseconds: 10_500, logical: 8))
    }

    @Test func advanceMovesPastStoredVersionsWithoutASkewCheck() {
        var clock = HybridLogicalClock(maxSkewMilliseconds: 1)
        clock.advance(pastOrTo: HLCTimestamp(physicalMilliseconds: 99_999, logical: 3))
        #expect(clock.tick(physicalMilliseconds: 10) == HLCTimestamp(physicalMilliseconds: 99_999, logical: 4))
    }
}
