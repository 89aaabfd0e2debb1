import Dispatch

/// Calls a closure at a fixed interval on a private dispatch queue until cancelled: the
/// production driver of `Replicator.tick()` (the simulator calls `tick` itself).
final class ReplicatorTimer: @unchecked Sendable {
    private let source: DispatchSourceTimer

    init(intervalMilliseconds: UInt64, _ body: @escaping @Sendable () -> Void) {
        precondition(intervalMilliseconds >= 1, "timer interval must be at least 1 ms")
        source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "decide.replicator.timer"))
        source.schedule(deadline: .now() + .milliseconds(Int(intervalMilliseconds)),
                        repeating: .milliseconds(Int(intervalMilliseconds)))
        source.setEventHandler(handler: body)
        source.resume()
    }

    func cancel() { source.cancel() }
}
