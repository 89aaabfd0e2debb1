@testable import Decide
import Foundation
import Synchronization
import Testing

/// `SystemClock` answers from the processor's counter between clock reads (`CDecideClock`):
/// what it answers is the clock's own millisecond, on every thread.
@Suite struct SystemClockTests {
    /// Bracketed by two direct clock reads, every answer lies between them: never a millisecond
    /// that had already ended before the call (a stale cache), never one ahead of the clock.
    /// Four threads for 300 ms each, so every thread crosses hundreds of millisecond boundaries
    /// with its cache in use.
    @Test func everyAnswerIsTheClocksMillisecond() {
        let clock = SystemClock()
        let failures = Mutex<[String]>([])
        let checked = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            let end = SystemClock.askedMilliseconds() + 300
            var count = 0
            while true {
                let before = SystemClock.askedMilliseconds()
                let answer = clock.nowMilliseconds()
                let after = SystemClock.askedMilliseconds()
                count += 1
                if answer < before || answer > after {
                    failures.withLock { $0.append("thread \(thread): \(answer) outside \(before)...\(after)") }
                    break
                }
                if after >= end { break }
            }
            checked.add(count, ordering: .relaxed)
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0.prefix(3) })")
        #expect(checked.load(ordering: .relaxed) > 10_000)
    }

    /// Where the kernel keeps time by the counter on x86-64, the counter is in use once its rate
    /// is measured (20 ms after the first calls): otherwise every call would quietly pay for
    /// `clock_gettime` again. Elsewhere it is never used.
    @Test func theCounterIsUsedWhereTheKernelKeepsTimeByIt() throws {
        let source = (try? String(contentsOfFile: "/sys/devices/system/clocksource/clocksource0/current_clocksource", encoding: .utf8)) ?? ""
        #if arch(x86_64)
        let expected = source == "tsc\n"
        #else
        let expected = false
        #endif
        let clock = SystemClock()
        let end = Date().addingTimeInterval(expected ? 5 : 0.1)
        while Date() < end, !SystemClock.readsTheCounter {
            _ = clock.nowMilliseconds()
            usleep(1_000)
        }
        #expect(SystemClock.readsTheCounter == expected, "clock source \(source.debugDescription)")
    }
}
