import Decide
import Synchronization

/// A physical clock a test moves by hand: it stands still unless told, so expiry and leases are
/// tested without waiting.
///
/// Guarantees: `nowMilliseconds` changes only through `advance` or `set`, and never goes
/// backwards through `advance`.
public final class TestClock: PhysicalClock {
    private let milliseconds: Atomic<UInt64>

    /// A clock at `startMilliseconds` (Unix time; 2023-11-14 by default).
    public init(startMilliseconds: UInt64 = 1_700_000_000_000) {
        milliseconds = Atomic(startMilliseconds)
    }

    public func nowMilliseconds() -> UInt64 { milliseconds.load(ordering: .acquiring) }

    /// Moves the clock forward by `duration` (whole milliseconds; a negative one is ignored).
    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return }
        let step = UInt64(seconds) * 1_000 + UInt64(attoseconds) / 1_000_000_000_000_000
        milliseconds.wrappingAdd(step, ordering: .acquiringAndReleasing)
    }

    /// Sets the clock to `milliseconds` (it may go backwards: a node's hybrid clock does not).
    public func set(milliseconds value: UInt64) {
        milliseconds.store(value, ordering: .releasing)
    }
}
