/// The source of physical time a `HybridLogicalClock` is driven by. DecideCore has no clock of
/// its own: the node injects the system clock, tests and the simulator inject their own.
///
/// An implementation may go backwards (NTP steps); the hybrid clock stays monotonic anyway.
public protocol PhysicalClock: Sendable {
    /// Milliseconds since the Unix epoch.
    func nowMilliseconds() -> UInt64
}
