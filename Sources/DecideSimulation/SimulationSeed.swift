#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The replay convention for seeded simulation tests: a test prints `seed N` when it fails, and
/// `SIM_SEED=N swift test --filter TheTest` runs exactly that seed again (docs/simulation.md).
public enum SimulationSeed {
    /// The environment variable that pins the seed: decimal (`42`) or hex (`0x2a`).
    public static let environmentVariable = "SIM_SEED"

    /// The seed in `SIM_SEED`, or nil when it is unset or empty. A value that is not a seed
    /// fails a precondition (a typo must not silently run other seeds).
    public static var fromEnvironment: UInt64? {
        guard let raw = getenv(environmentVariable) else { return nil }
        let text = String(cString: raw)
        if text.isEmpty { return nil }
        guard let seed = parse(text) else {
            preconditionFailure("\(environmentVariable)=\(text) is not a UInt64 (decimal, or hex with 0x)")
        }
        return seed
    }

    /// `[SIM_SEED]` when it is set, else `defaults`: loop over this in a simulation test.
    public static func seeds(default defaults: [UInt64]) -> [UInt64] {
        if let pinned = fromEnvironment { return [pinned] }
        return defaults
    }

    /// Parses a decimal or `0x`-prefixed hexadecimal UInt64, ignoring surrounding spaces.
    static func parse(_ text: String) -> UInt64? {
        let trimmed = text.trimmingSpaces()
        if trimmed.hasPrefix("0x") || trimmed.hasPrefix("0X") {
            return UInt64(trimmed.dropFirst(2), radix: 16)
        }
        return UInt64(trimmed, radix: 10)
    }
}

extension String {
    fileprivate func trimmingSpaces() -> Substring {
        var slice = Substring(self)
        while slice.first == " " || slice.first == "\t" { slice.removeFirst() }
        while slice.last == " " || slice.last == "\t" || slice.last == "\n" { slice.removeLast() }
        return slice
    }
}
