import DecideCore
import DecideSimulation
import Testing

@Suite struct SchedulerTests {
    @Test func eventsRunInTimeThenSchedulingOrder() {
        let scheduler = SimulatedScheduler(seed: 1)
        let start = scheduler.nowMilliseconds
        #expect(start == SimulatedScheduler.defaultStartMilliseconds)
        var order: [String] = []
        scheduler.schedule(afterMilliseconds: 10) { order.append("b@10") }
        scheduler.schedule(afterMilliseconds: 5) { order.append("a@5") }
        scheduler.schedule(afterMilliseconds: 10) { order.append("c@10") }
        scheduler.schedule(afterMilliseconds: 0) {
            order.append("now")
            scheduler.schedule(afterMilliseconds: 0) { order.append("now-later") }
        }
        #expect(order.isEmpty, "nothing runs outside the run methods")
        let ran = scheduler.run(untilMilliseconds: start + 9)
        #expect(order == ["now", "now-later", "a@5"])
        #expect(ran == 3)
        #expect(scheduler.nowMilliseconds == start + 9)
        scheduler.run(forMilliseconds: 1)
        #expect(order == ["now", "now-later", "a@5", "b@10", "c@10"])
        #expect(scheduler.pendingEventCount == 0)
        #expect(scheduler.executedEventCount == 5)
    }

    @Test func eventsSeeTheirOwnTime() {
        let scheduler = SimulatedScheduler(seed: 1, startMilliseconds: 1_000)
        var seen: [UInt64] = []
        for delay: UInt64 in [30, 10, 20] { scheduler.schedule(afterMilliseconds: delay) { seen.append(scheduler.nowMilliseconds) } }
        #expect(scheduler.runUntilIdle(maxEvents: 10))
        #expect(seen == [1_010, 1_020, 1_030])
        #expect(scheduler.nowMilliseconds == 1_030)
    }

    @Test func periodicTimersRepeatUntilCancelled() {
        let scheduler = SimulatedScheduler(seed: 1, startMilliseconds: 0)
        var ticks: [UInt64] = []
        var other = 0
        let timer = scheduler.every(milliseconds: 50) { ticks.append(scheduler.nowMilliseconds) }
        scheduler.every(milliseconds: 50, firstAfterMilliseconds: 0) { other += 1 }
        scheduler.run(untilMilliseconds: 200)
        #expect(ticks == [50, 100, 150, 200])
        #expect(other == 5)
        scheduler.cancel(timer)
        scheduler.run(untilMilliseconds: 400)
        #expect(ticks == [50, 100, 150, 200])
        #expect(other == 9)
        #expect(scheduler.runUntilIdle(maxEvents: 100) == false, "a live periodic timer never lets the queue go idle")
    }

    @Test func aTimerCanCancelItselfAndOneShotsCanBeCancelled() {
        let scheduler = SimulatedScheduler(seed: 1, startMilliseconds: 0)
        var count = 0
        var timer: SimulatedTimerID?
        timer = scheduler.every(milliseconds: 10) {
            count += 1
            if count == 3 { scheduler.cancel(timer!) }
        }
        var fired = false
        let oneShot = scheduler.schedule(afterMilliseconds: 15) { fired = true }
        scheduler.cancel(oneShot)
        #expect(scheduler.runUntilIdle(maxEvents: 100))
        #expect(count == 3)
        #expect(!fired)
    }

    @Test func discardedEventsNeverRunAndReleaseWhatTheyHold() {
        final class Held {}
        let scheduler = SimulatedScheduler(seed: 1)
        weak var held: Held?
        var ran = 0
        do {
            let object = Held()
            held = object
            scheduler.schedule(afterMilliseconds: 5) { _ = object; ran += 1 }
            scheduler.every(milliseconds: 10) { _ = object; ran += 1 }
        }
        #expect(held != nil)
        let now = scheduler.nowMilliseconds
        scheduler.discardPendingEvents()
        #expect(held == nil, "a discarded event still holds what it captured")
        #expect(scheduler.nowMilliseconds == now)
        #expect(scheduler.runUntilIdle(maxEvents: 10))
        scheduler.run(forMilliseconds: 100)
        #expect(ran == 0)
        // The scheduler goes on: new events run as before.
        scheduler.schedule(afterMilliseconds: 1) { ran += 1 }
        scheduler.run(forMilliseconds: 1)
        #expect(ran == 1)
    }

    @Test func randomnessIsSeededAndInRange() {
        let a = SimulatedScheduler(seed: 7)
        let b = SimulatedScheduler(seed: 7)
        let c = SimulatedScheduler(seed: 8)
        let drawsA = (0..<100).map { _ in a.randomUInt64(in: 3...9) }
        let drawsB = (0..<100).map { _ in b.randomUInt64(in: 3...9) }
        let drawsC = (0..<100).map { _ in c.randomUInt64(in: 3...9) }
        #expect(drawsA == drawsB)
        #expect(drawsA != drawsC)
        #expect(drawsA.allSatisfy { (3...9).contains($0) })
        #expect(Set(drawsA) == Set(3...9), "every value of a small range shows up in 100 draws")
        // The stream is SplitMix64's: the documented generator, so seeds replay anywhere.
        var reference = SplitMix64(seed: 99)
        let scheduler = SimulatedScheduler(seed: 99)
        #expect(scheduler.nextRandomUInt64() == reference.next())
        #expect(scheduler.randomUInt64(in: 0...UInt64.max) == reference.next())
        #expect(scheduler.randomUInt64(in: 5...5) == 5)
    }

    @Test func randomChanceMatchesItsProbability() {
        let scheduler = SimulatedScheduler(seed: 3)
        let hits = (0..<20_000).filter { _ in scheduler.randomChance(0.25) }.count
        #expect(abs(hits - 5_000) < 300)
        #expect(!(0..<1_000).contains { _ in scheduler.randomChance(0) })
        #expect((0..<1_000).allSatisfy { _ in scheduler.randomChance(1) })
    }

    @Test func clockFollowsVirtualTimePlusSkew() {
        let scheduler = SimulatedScheduler(seed: 1, startMilliseconds: 10_000)
        let ahead = SimulatedClock(scheduler: scheduler, skewMilliseconds: 250)
        let behind = SimulatedClock(scheduler: scheduler, skewMilliseconds: -400)
        #expect(ahead.nowMilliseconds() == 10_250)
        #expect(behind.nowMilliseconds() == 9_600)
        scheduler.run(forMilliseconds: 100)
        #expect(ahead.nowMilliseconds() == 10_350)
        #expect(behind.nowMilliseconds() == 9_700)
        ahead.skewMilliseconds = -1_000                   // an NTP step backwards
        #expect(ahead.nowMilliseconds() == 9_100)
        behind.skewMilliseconds = -20_000                 // never below the epoch
        #expect(behind.nowMilliseconds() == 0)
    }

    @Test func hybridClockStaysMonotonicOverASteppedSimulatedClock() {
        let scheduler = SimulatedScheduler(seed: 1)
        let clock = SimulatedClock(scheduler: scheduler)
        var hlc = HybridLogicalClock()
        var last = hlc.tick(physicalMilliseconds: clock.nowMilliseconds())
        for step in 0..<50 {
            scheduler.run(forMilliseconds: 7)
            if step % 10 == 5 { clock.skewMilliseconds -= 500 }
            let next = hlc.tick(physicalMilliseconds: clock.nowMilliseconds())
            #expect(next > last)
            last = next
        }
    }
}
