/// Errors `SimulatedTransport.start` and `listen` throw. Each says what to fix.
public enum SimulatedTransportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `start` was called twice.
    case alreadyStarted
    /// `listen` before `start`, or any call after `shutdown` or a crash.
    case notRunning
    /// `listen(on:)` was given an address other than the one the network assigned this node.
    case addressNotOwned(requested: String, owned: String)

    /// One line saying what went wrong and what to do.
    public var description: String {
        switch self {
        case .alreadyStarted: return "simulated transport already started"
        case .notRunning: return "simulated transport not running (not started, shut down or crashed)"
        case .addressNotOwned(let requested, let owned):
            return "simulated transport owns \(owned), cannot listen on \(requested)"
        }
    }
}
