import DecideCore
import Synchronization

/// One node's physical clock in a simulation: the scheduler's virtual time plus a skew.
///
/// Guarantees: `nowMilliseconds()` is `scheduler.nowMilliseconds + skewMilliseconds`, clamped
/// at 0; it changes only when virtual time moves or the skew is set. Setting the skew models an
/// NTP step: the clock may jump backwards (the hybrid logical clock must cope). Safe to read and
/// set from any thread (it is two atomics).
public final class SimulatedClock: PhysicalClock {
    /// The scheduler whose virtual time this clock follows.
    public let scheduler: SimulatedScheduler
    private let skew: Atomic<Int64>

    /// A clock `skewMilliseconds` ahead of virtual time (negative: behind).
    public init(scheduler: SimulatedScheduler, skewMilliseconds: Int64 = 0) {
        self.scheduler = scheduler
        skew = Atomic(skewMilliseconds)
    }

    /// How far this clock is ahead of virtual time (negative: behind). Settable at run time.
    public var skewMilliseconds: Int64 {
        get { skew.load(ordering: .acquiring) }
        set { skew.store(newValue, ordering: .releasing) }
    }

    /// Virtual time plus the skew, in milliseconds since the Unix epoch (never below 0).
    public func nowMilliseconds() -> UInt64 {
        let base = scheduler.nowMilliseconds
        let offset = skewMilliseconds
        if offset >= 0 {
            let (sum, overflow) = base.addingReportingOverflow(UInt64(offset))
            return overflow ? UInt64.max : sum
        }
        let behind = offset.magnitude
        return base > behind ? base - behind : 0
    }
}
