/// Why a `HybridLogicalClock` refused to merge a remote timestamp.
public enum ClockError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The remote timestamp's physical part is more than `maxSkewMilliseconds` ahead of local
    /// physical time. Accepting it would let one bad clock win every key for as long as it
    /// runs ahead, so it is refused and nothing is applied.
    case remoteTooFarAhead(remote: HLCTimestamp, localPhysicalMilliseconds: UInt64, maxSkewMilliseconds: UInt64)

    public var description: String {
        switch self {
        case let .remoteTooFarAhead(remote, local, maxSkew):
            let ahead = remote.physicalMilliseconds &- local
            return "remote timestamp \(remote) is \(ahead) ms ahead of the local clock (limit \(maxSkew) ms)"
        }
    }
}
