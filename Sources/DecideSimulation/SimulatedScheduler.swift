import DecideCore
import Synchronization

/// Virtual time and the one queue of everything that will happen in a simulation.
///
/// Guarantees:
/// - nothing runs by itself: events run only inside `run(untilMilliseconds:)`,
///   `run(forMilliseconds:)` or `runUntilIdle(maxEvents:)`, on the calling thread, one at a time;
/// - events run in (time, scheduling order): two events of the same instant run in the order
///   they were scheduled, so the same calls give the same run, on every machine;
/// - virtual time (`nowMilliseconds`) only moves forward, and only inside the run methods;
/// - every random choice of the simulation comes from one `SplitMix64` seeded with `seed`;
/// - at most `maxPendingEvents` events are pending (a precondition; a runaway feedback loop
///   stops with a message instead of eating memory).
///
/// Thread-safety: drive a simulation from one thread at a time (calls made from inside its own
/// callbacks are fine). Overlapping calls from two threads fail a precondition.
/// `nowMilliseconds` alone may be read from any thread.
public final class SimulatedScheduler: @unchecked Sendable {
    /// The default start of virtual time: 2023-11-14T22:13:20Z, so HLC timestamps look real.
    public static let defaultStartMilliseconds: UInt64 = 1_700_000_000_000
    /// The default bound on pending events.
    public static let defaultMaxPendingEvents = 1 << 20

    /// The seed every random choice derives from. Print it with a failing test; rerun with it.
    public let seed: UInt64
    /// Scheduling more than this many pending events is a precondition failure.
    public let maxPendingEvents: Int

    let confinement = ThreadConfinement()
    private let clock: Atomic<UInt64>
    private var queue = EventQueue()
    private var random: SplitMix64
    private var nextSequence: UInt64 = 0
    private var nextTimer: UInt64 = 1
    /// Timers scheduled and neither finished (one-shot) nor cancelled. Looked up, never iterated.
    private var liveTimers: Set<UInt64> = []
    private var running = false
    private var executed: UInt64 = 0

    /// Makes a scheduler at `startMilliseconds` of virtual time with an empty queue.
    public init(seed: UInt64, startMilliseconds: UInt64 = defaultStartMilliseconds,
                maxPendingEvents: Int = defaultMaxPendingEvents) {
        precondition(maxPendingEvents > 0, "maxPendingEvents must be positive")
        self.seed = seed
        self.maxPendingEvents = maxPendingEvents
        clock = Atomic(startMilliseconds)
        random = SplitMix64(seed: seed)
    }

    // MARK: Time

    /// Virtual milliseconds since the Unix epoch. During an event: that event's time.
    /// Readable from any thread.
    public var nowMilliseconds: UInt64 { clock.load(ordering: .acquiring) }

    /// Events waiting to run (cancelled timers may still be counted until their time comes).
    public var pendingEventCount: Int { confinement.run { queue.count } }

    /// Events run so far (cancelled timers that were skipped are not counted).
    public var executedEventCount: UInt64 { confinement.run { executed } }

    // MARK: Scheduling

    /// Runs `action` once, `afterMilliseconds` from now (0: later in this instant, after every
    /// event already scheduled for it). Never runs it synchronously.
    @discardableResult
    public func schedule(afterMilliseconds: UInt64, _ action: @escaping () -> Void) -> SimulatedTimerID {
        confinement.run {
            let timer = takeTimer()
            push(at: deadline(afterMilliseconds: afterMilliseconds), timer: timer, periodMilliseconds: 0, action)
            return SimulatedTimerID(rawValue: timer)
        }
    }

    /// Runs `action` every `milliseconds` (> 0), first after `firstAfterMilliseconds` (default:
    /// one period), until `cancel`. Timers due at the same instant run in registration order.
    @discardableResult
    public func every(milliseconds: UInt64, firstAfterMilliseconds: UInt64? = nil,
                      _ action: @escaping () -> Void) -> SimulatedTimerID {
        precondition(milliseconds > 0, "a periodic timer needs a positive period")
        return confinement.run {
            let timer = takeTimer()
            push(at: deadline(afterMilliseconds: firstAfterMilliseconds ?? milliseconds), timer: timer,
                 periodMilliseconds: milliseconds, action)
            return SimulatedTimerID(rawValue: timer)
        }
    }

    /// Stops a timer: its action does not run again (also when called from inside that action).
    /// Cancelling a finished or cancelled timer does nothing.
    public func cancel(_ timer: SimulatedTimerID) {
        confinement.run { _ = liveTimers.remove(timer.rawValue) }
    }

    /// Drops every pending event and timer without running it; virtual time stays where it is.
    /// Call it when a simulation ends: pending events hold what they act on (a link holds its
    /// transports, a transport its network and engine, the network this scheduler), so a
    /// scheduler left with events keeps the whole simulation alive after its last use.
    /// `TestCluster` calls it when it is released. Not from inside an event.
    public func discardPendingEvents() {
        confinement.run {
            precondition(!running, "discardPendingEvents is not callable from inside an event")
            queue.removeAll()
            liveTimers.removeAll()
        }
    }

    // MARK: Running

    /// Runs every event due at or before `untilMilliseconds` (≥ now), in order, then sets the
    /// clock to `untilMilliseconds`. Returns the number of events run. Not re-entrant.
    @discardableResult
    public func run(untilMilliseconds: UInt64) -> Int {
        confinement.run {
            precondition(untilMilliseconds >= nowMilliseconds, "virtual time only moves forward")
            let count = runEvents(maxEvents: Int.max, until: untilMilliseconds)
            clock.store(untilMilliseconds, ordering: .releasing)
            return count
        }
    }

    /// `run(untilMilliseconds: now + milliseconds)`.
    @discardableResult
    public func run(forMilliseconds milliseconds: UInt64) -> Int {
        confinement.run { run(untilMilliseconds: deadline(afterMilliseconds: milliseconds)) }
    }

    /// Runs events in order, whatever their time, until none is pending or `maxEvents` ran.
    /// Returns true when the queue ran empty. A periodic timer keeps the queue busy forever, so
    /// with one registered this returns false after `maxEvents`.
    @discardableResult
    public func runUntilIdle(maxEvents: Int) -> Bool {
        precondition(maxEvents > 0, "maxEvents must be positive")
        return confinement.run {
            _ = runEvents(maxEvents: maxEvents, until: UInt64.max)
            return queue.isEmpty
        }
    }

    // MARK: Randomness

    /// The next 64 random bits of the simulation's generator.
    public func nextRandomUInt64() -> UInt64 {
        confinement.run { random.next() }
    }

    /// A uniformly distributed value in `range` (rejection sampling, no modulo bias). The
    /// algorithm is part of this module, so a seed replays the same on every Swift version.
    public func randomUInt64(in range: ClosedRange<UInt64>) -> UInt64 {
        confinement.run {
            let span = range.upperBound - range.lowerBound
            if span == UInt64.max { return random.next() }
            let count = span + 1
            let threshold = (0 &- count) % count        // 2^64 mod count: the biased low values
            while true {
                let value = random.next()
                if value >= threshold { return range.lowerBound + value % count }
            }
        }
    }

    /// True with `probability` (0...1). Always takes exactly one draw.
    public func randomChance(_ probability: Double) -> Bool {
        precondition(probability >= 0 && probability <= 1, "probability must be in 0...1")
        return confinement.run {
            let unit = Double(random.next() >> 11) * 0x1p-53   // uniform in [0, 1)
            return unit < probability
        }
    }

    /// A generator of its own, seeded from this one: hand it to code that takes a
    /// `RandomNumberGenerator` (backoff jitter, say) and its choices replay with the seed too.
    public func makeGenerator() -> some RandomNumberGenerator & Sendable {
        SplitMix64(seed: nextRandomUInt64())
    }

    // MARK: Internal

    /// Schedules an internal (uncancellable) event at an absolute time ≥ now.
    func schedule(atMilliseconds time: UInt64, _ action: @escaping () -> Void) {
        confinement.run {
            precondition(time >= nowMilliseconds, "events cannot be scheduled in the past")
            push(at: time, timer: 0, periodMilliseconds: 0, action)
        }
    }

    /// now + milliseconds; a precondition fails on overflow.
    func deadline(afterMilliseconds milliseconds: UInt64) -> UInt64 {
        let (time, overflow) = nowMilliseconds.addingReportingOverflow(milliseconds)
        precondition(!overflow, "virtual time overflow")
        return time
    }

    private func takeTimer() -> UInt64 {
        let timer = nextTimer
        nextTimer += 1
        liveTimers.insert(timer)
        return timer
    }

    private func push(at time: UInt64, timer: UInt64, periodMilliseconds: UInt64, _ action: @escaping () -> Void) {
        precondition(queue.count < maxPendingEvents,
                     "more than maxPendingEvents (\(maxPendingEvents)) pending simulation events")
        queue.push(ScheduledEvent(timeMilliseconds: time, sequence: nextSequence, timer: timer,
                                  periodMilliseconds: periodMilliseconds, action: action))
        nextSequence += 1
    }

    private func runEvents(maxEvents: Int, until limit: UInt64) -> Int {
        precondition(!running, "run methods are not re-entrant: do not call them from inside an event")
        running = true
        defer { running = false }
        var count = 0
        while count < maxEvents, let next = queue.first, next.timeMilliseconds <= limit {
            let event = queue.pop()!
            if event.timer != 0 {
                guard liveTimers.contains(event.timer) else { continue }      // cancelled
                if event.periodMilliseconds == 0 {
                    liveTimers.remove(event.timer)
                } else {
                    let (time, overflow) = event.timeMilliseconds.addingReportingOverflow(event.periodMilliseconds)
                    precondition(!overflow, "virtual time overflow")
                    push(at: time, timer: event.timer, periodMilliseconds: event.periodMilliseconds, event.action)
                }
            }
            clock.store(event.timeMilliseconds, ordering: .releasing)
            executed += 1
            count += 1
            event.action()
        }
        return count
    }
}
