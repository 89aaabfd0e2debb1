/// Upper bounds `RESPRequestParser` enforces on what one client may send. Every count and
/// length a peer declares is compared with these before anything is allocated for it, so a
/// client costs at most about `maxRequestBytes` of buffer plus the bytes it actually sent.
public struct RESPLimits: Hashable, Sendable {
    /// Most arguments in one multibulk command (`*N`); a larger N is refused as
    /// "invalid multibulk length". Redis's historical limit.
    public var maxArguments = 1_048_576
    /// Most bytes in one argument (`$N`); a larger N is refused as "invalid bulk length".
    public var maxBulkBytes = 64 << 20
    /// Most bytes in one inline command line (before its `\n`) and in one `*N` / `$N` header
    /// line (before its `\r`); a longer line is refused as "too big inline request" /
    /// "too big mbulk count string" / "too big bulk count string".
    public var maxInlineBytes = 64 * 1024
    /// Most bytes in one whole multibulk command, headers and arguments with their CRLFs.
    public var maxRequestBytes = 128 << 20

    /// Redis's defaults (but a 64 MB argument, not 512 MB).
    public init() {}

    /// What a client that has not authenticated may send, as Redis has bounded it since its fix
    /// for CVE-2021-32675: at most 10 arguments of at most 16 KiB each, and inline lines of at
    /// most 16 KiB, so that a stranger costs at most about 170 KiB of request buffer whatever
    /// it declares. A larger count or length is refused from its header, before its bytes
    /// arrive.
    public static let unauthenticated: RESPLimits = {
        var limits = RESPLimits()
        limits.maxArguments = 10
        limits.maxBulkBytes = 16 * 1024
        limits.maxInlineBytes = 16 * 1024
        limits.maxRequestBytes = 256 * 1024
        return limits
    }()
}
