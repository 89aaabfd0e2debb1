/// Names one action registered with `SimulatedScheduler.schedule` or `every`, so it can be
/// cancelled. Never reused within one scheduler.
public struct SimulatedTimerID: Hashable, Sendable, CustomStringConvertible {
    /// The scheduler's number for it, from 1 upwards in registration order.
    public let rawValue: UInt64

    init(rawValue: UInt64) { self.rawValue = rawValue }

    /// "timer#N", for logs.
    public var description: String { "timer#\(rawValue)" }
}
