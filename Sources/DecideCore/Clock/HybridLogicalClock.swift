/// A hybrid logical clock (Kulkarni et al., 2014) over an injected physical clock.
///
/// Guarantees:
/// - every timestamp it returns is strictly greater than every timestamp it returned or merged
///   before, even when the physical clock goes backwards;
/// - `merge` refuses a remote timestamp more than `maxSkewMilliseconds` ahead of local physical
///   time, and then leaves the clock unchanged;
/// - its physical part stays close to physical time: it runs ahead only by the accepted skew,
///   or by one millisecond per 65,536 events within one millisecond (the logical counter's
///   capacity; the clock then borrows the next millisecond).
package struct HybridLogicalClock: Sendable {
    /// The largest lead, in milliseconds, a remote timestamp may have over local physical time.
    public let maxSkewMilliseconds: UInt64
    /// The last timestamp returned or merged.
    public private(set) var last: HLCTimestamp

    public init(maxSkewMilliseconds: UInt64 = 60_000, last: HLCTimestamp = .zero) {
        self.maxSkewMilliseconds = maxSkewMilliseconds
        self.last = last
    }

    /// Moves the clock past `timestamp` without a skew check: used on start-up to put the clock
    /// past every stored version, so a restarted node never reuses a version.
    public mutating func advance(pastOrTo timestamp: HLCTimestamp) {
        if timestamp > last { last = timestamp }
    }

    /// A new timestamp for a local event (a commit), greater than every earlier one.
    public mutating func tick(physicalMilliseconds: UInt64) -> HLCTimestamp {
        let physical = min(physicalMilliseconds, HLCTimestamp.maxPhysicalMilliseconds)
        let previous = last
        if physical > last.physicalMilliseconds {
            last = HLCTimestamp(physicalMilliseconds: physical, logical: 0)
        } else {
            last = Self.successor(of: last)
        }
        assert(last > previous && last.physicalMilliseconds >= physical,
               "HybridLogicalClock: tick gave \(last) after \(previous) at physical \(physical)")
        return last
    }

    /// Merges a timestamp received from another node and returns a timestamp greater than both
    /// it and every earlier local one. Throws, leaving the clock unchanged, when `remote` is too
    /// far ahead of `physicalMilliseconds`.
    @discardableResult
    public mutating func merge(
        remote: HLCTimestamp, physicalMilliseconds: UInt64
    ) throws(ClockError) -> HLCTimestamp {
        try check(remote: remote, physicalMilliseconds: physicalMilliseconds)
        let physical = min(physicalMilliseconds, HLCTimestamp.maxPhysicalMilliseconds)
        let top = max(last, remote)
        if physical > top.physicalMilliseconds {
            last = HLCTimestamp(physicalMilliseconds: physical, logical: 0)
        } else {
            last = Self.successor(of: top)
        }
        assert(last > top && last.physicalMilliseconds >= physical,
               "HybridLogicalClock: merge gave \(last) after \(top) at physical \(physical)")
        return last
    }

    /// Whether `remote` is acceptable under the skew bound, without changing the clock.
    public func check(remote: HLCTimestamp, physicalMilliseconds: UInt64) throws(ClockError) {
        let limit = physicalMilliseconds.addingReportingOverflow(maxSkewMilliseconds)
        if !limit.overflow && remote.physicalMilliseconds > limit.partialValue {
            throw .remoteTooFarAhead(
                remote: remote, localPhysicalMilliseconds: physicalMilliseconds,
                maxSkewMilliseconds: maxSkewMilliseconds)
        }
    }

    private static func successor(of timestamp: HLCTimestamp) -> HLCTimestamp {
        if timestamp.logical == HLCTimestamp.maxLogical {
            return HLCTimestamp(physicalMilliseconds: timestamp.physicalMilliseconds + 1, logical: 0)
        }
        return HLCTimestamp(rawValue: timestamp.rawValue + 1)
    }
}
