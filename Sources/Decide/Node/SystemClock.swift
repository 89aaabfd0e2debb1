import Foundation

/// Physical time from the operating system's real-time clock (`CLOCK_REALTIME`).
/// It may step backwards (NTP); the node's hybrid logical clock stays monotonic regardless.
public struct SystemClock: PhysicalClock {
    /// The operating system's real-time clock.
    public init() {}

    public func nowMilliseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1000 + UInt64(spec.tv_nsec) / 1_000_000
    }
}
