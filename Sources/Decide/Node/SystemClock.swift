import CDecideClock

/// Physical time from the operating system's real-time clock (`CLOCK_REALTIME`).
/// It may step backwards (NTP); the node's hybrid logical clock stays monotonic regardless.
///
/// The millisecond is the clock's own, not an approximation: on x86-64 each thread asks the
/// operating system a few times per millisecond and answers the calls in between from the
/// processor's time-stamp counter, which tells when the millisecond read last can have ended
/// (`CDecideClock`; a step of the clock is seen at most one millisecond late). Elsewhere every
/// call asks the operating system.
public struct SystemClock: PhysicalClock {
    /// The operating system's real-time clock.
    public init() {}

    public func nowMilliseconds() -> UInt64 {
        Self.milliseconds()
    }

    /// `nowMilliseconds()` without an instance: what a node whose clock is this one calls.
    @inline(__always)
    package static func milliseconds() -> UInt64 {
        decide_clock_realtime_ms()
    }

    /// The clock asked through `clock_gettime`, never from the counter (for tests that compare).
    package static func askedMilliseconds() -> UInt64 {
        decide_clock_realtime_ms_uncached()
    }

    /// Whether calls are answered from the processor's counter between clock reads: the rate is
    /// measured, on x86-64, with the kernel keeping time by the counter.
    package static var readsTheCounter: Bool {
        decide_clock_counter_in_use() != 0
    }
}
