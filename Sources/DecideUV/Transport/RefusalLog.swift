// Pure: no libuv, no Foundation, no clock (times are the caller's monotonic milliseconds).

/// The inbound connections the transport turned away before they authenticated, and which of
/// them get a log line of their own.
///
/// Guarantees, for each kind of refusal: at most one line per `intervalMilliseconds`. The first
/// refusal of a kind that logged nothing for an interval is logged in full at once (`note`
/// answers `.log`); the ones after it within the interval are only counted, and their count
/// goes out in one line once the interval has passed (`due`), or in the next full line of that
/// kind (`earlier`). So a flood of connections costs a line an interval per kind, and every
/// refusal is in some line, its own or a count. Memory is fixed: a few words per kind.
struct RefusalLog {
    /// Why an inbound connection was turned away; each kind has its own line budget.
    enum Kind: Int, CaseIterable, Sendable, CustomStringConvertible {
        /// The kernel's accept failed (out of file descriptors, say).
        case acceptFailed
        /// Inbound connections held every slot but those reserved for this node's dials.
        case tooManyConnections
        /// `maxInboundHandshakes` handshakes were in progress.
        case tooManyHandshakes
        /// `maxInboundHandshakesPerAddress` handshakes were in progress from its address.
        case tooManyFromAddress
        /// Its handshake did not complete within `handshakeTimeoutMilliseconds`.
        case handshakeTimeout
        /// Its proof did not verify under any secret this node accepts.
        case wrongSecret
        /// Another handshake check failed: version, cluster name, secret presence.
        case refusedHandshake
        /// A malformed frame, or a frame out of order, before the handshake completed.
        case malformed
        /// It closed, reset or failed before its handshake completed.
        case closedDuringHandshake

        /// The `reason` of the summary line.
        var description: String {
            switch self {
            case .acceptFailed: return "accept failed"
            case .tooManyConnections: return "too many connections"
            case .tooManyHandshakes: return "too many handshakes in progress"
            case .tooManyFromAddress: return "too many handshakes in progress from one address"
            case .handshakeTimeout: return "handshake timeout"
            case .wrongSecret: return "wrong cluster secret"
            case .refusedHandshake: return "handshake refused"
            case .malformed: return "malformed or out-of-order handshake"
            case .closedDuringHandshake: return "closed during the handshake"
            }
        }
    }

    /// What to do with one refusal.
    enum Decision: Equatable {
        /// Log it in full now; `earlier` refusals of its kind were only counted since the last
        /// line, over the last `windowMilliseconds` (0 and 0 when none).
        case log(earlier: UInt64, windowMilliseconds: UInt64)
        /// Only count it: its kind logged a line less than an interval ago.
        case count
    }

    /// One line for the refusals of `kind` that were only counted.
    struct Summary: Equatable {
        var kind: Kind
        var count: UInt64
        /// Since the kind's previous line.
        var windowMilliseconds: UInt64
    }

    let intervalMilliseconds: UInt64
    /// When each kind last logged a line (nil: never).
    private var lastLine = [UInt64?](repeating: nil, count: Kind.allCases.count)
    /// Refusals of each kind counted since its last line.
    private var counted = [UInt64](repeating: 0, count: Kind.allCases.count)
    /// Every refusal of each kind so far, logged or counted.
    private(set) var totals = [UInt64](repeating: 0, count: Kind.allCases.count)

    init(intervalMilliseconds: UInt64) {
        precondition(intervalMilliseconds >= 1)
        self.intervalMilliseconds = intervalMilliseconds
    }

    /// Takes one refusal of `kind` at `now`.
    mutating func note(_ kind: Kind, atMilliseconds now: UInt64) -> Decision {
        let index = kind.rawValue
        totals[index] &+= 1
        if let last = lastLine[index], now &- last < intervalMilliseconds {
            counted[index] += 1
            return .count
        }
        let earlier = counted[index]
        let window = earlier == 0 ? 0 : now &- (lastLine[index] ?? now)
        counted[index] = 0
        lastLine[index] = now
        return .log(earlier: earlier, windowMilliseconds: window)
    }

    /// The counts whose interval has passed by `now`, one line each; those kinds' intervals
    /// start again at `now`.
    mutating func due(atMilliseconds now: UInt64) -> [Summary] {
        takeCounts(atMilliseconds: now, onlyDue: true)
    }

    /// Every count not yet logged, whether its interval passed or not (at shutdown).
    mutating func remaining(atMilliseconds now: UInt64) -> [Summary] {
        takeCounts(atMilliseconds: now, onlyDue: false)
    }

    /// One line for each kind with counts (whose interval passed by `now`, with `onlyDue`);
    /// their intervals start again at `now`.
    private mutating func takeCounts(atMilliseconds now: UInt64, onlyDue: Bool) -> [Summary] {
        var lines: [Summary] = []
        for kind in Kind.allCases {
            let index = kind.rawValue
            guard counted[index] > 0 else { continue }
            // A counted kind always has a line: the refusal that started its interval.
            let last = lastLine[index] ?? now
            guard !onlyDue || now &- last >= intervalMilliseconds else { continue }
            lines.append(Summary(kind: kind, count: counted[index], windowMilliseconds: now &- last))
            counted[index] = 0
            lastLine[index] = now
        }
        return lines
    }

    /// When the next count falls due (nil: nothing is only counted).
    var nextDueMilliseconds: UInt64? {
        Kind.allCases.compactMap { kind -> UInt64? in
            guard counted[kind.rawValue] > 0, let last = lastLine[kind.rawValue] else { return nil }
            return last &+ intervalMilliseconds
        }.min()
    }

    /// Every refusal of `kind` so far.
    func total(_ kind: Kind) -> UInt64 { totals[kind.rawValue] }
}
