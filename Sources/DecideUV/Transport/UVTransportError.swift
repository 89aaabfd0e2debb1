/// Errors `UVTransport.start` and `UVTransport.listen` throw. Each says what to fix.
public enum UVTransportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `start` was called twice, or `listen`/`connect` before `start`, or after `shutdown`.
    case notRunning(String)
    /// The address is not `HOST:PORT` (IPv6 literals in brackets: `[::1]:7401`).
    case invalidAddress(String)
    /// The host name did not resolve (the text is the resolver's error).
    case cannotResolve(String, String)
    /// Without a cluster secret only loopback addresses may be listened on (set `insecure` to override).
    case insecureListenRefused(String)
    /// The configuration is unusable (the text says which field).
    case invalidConfiguration(String)
    /// libuv refused an operation (the text is its error).
    case system(String)

    public var description: String {
        switch self {
        case .notRunning(let text): return "transport not running: \(text)"
        case .invalidAddress(let text): return "invalid address '\(text)': expected HOST:PORT ([v6]:PORT for IPv6)"
        case .cannotResolve(let address, let error): return "cannot resolve \(address): \(error)"
        case .insecureListenRefused(let address):
            return "refusing to listen on non-loopback \(address) without a cluster secret (set insecure to override)"
        case .invalidConfiguration(let text): return "invalid configuration: \(text)"
        case .system(let text): return "libuv error: \(text)"
        }
    }
}
