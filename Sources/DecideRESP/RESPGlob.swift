/// Redis's glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE), byte for byte as Redis's
/// `stringmatchlen` reads them, matched in O(pattern × string) time at worst.
///
/// - `*` matches any run of bytes, `?` any one byte, `\c` the byte c (a trailing `\` is a
///   literal backslash).
/// - `[…]` matches one byte of a set, `[^…]` one byte outside it. Inside: `\c` is the byte c,
///   `a-z` a range whose ends may come in either order (`[z-a]` is `[a-z]`), bytes compared
///   unsigned; anything else, `-` and `[` included, is itself. The first `]` closes the set, so
///   `[]` is empty and `[^]` matches any byte; a range end is taken even when it is `]`
///   (`[a-]` is the range `]`…`a`). A `[` never closed takes the rest of the pattern as its set.
/// - Unlike Redis's backtracking matcher, the run time is bounded by pattern × string length
///   (`*a*a*a…b` is fast); and a pattern of only `*`s also matches the empty string, which
///   Redis's loop misses (redis/redis#15643; KEYS and SCAN special-case `*` around it).
public struct RESPGlob: Sendable {
    private enum Token {
        case star
        case any
        case byte(UInt8)
        /// A set of bytes: words `4 × index ..< 4 × index + 4` of `sets`, negation applied.
        case set(Int)
    }

    private let tokens: [Token]
    private let sets: [UInt64]
    /// The fewest bytes a matching string has: one per token other than `*`. A shorter string
    /// is refused in one step, so a long pattern costs nothing against short names.
    public let minimumMatchBytes: Int
    /// Whether the pattern has a `*`; without one a match is exactly `minimumMatchBytes` long.
    public let hasStar: Bool
    /// The literal bytes before the pattern's first `*`, `?` or set: every match starts with
    /// them (an index of patterns by prefix looks a channel up by its own prefixes).
    public let literalPrefix: [UInt8]

    /// Compiles `pattern`, so that matching many strings reads it once.
    public init(_ pattern: some Collection<UInt8>) {
        let pattern = Array(pattern)
        var tokens: [Token] = []
        var sets: [UInt64] = []
        var i = 0
        let n = pattern.count
        while i < n {
            switch pattern[i] {
            case UInt8(ascii: "*"):
                if case .star? = tokens.last {} else { tokens.append(.star) }
                i += 1
            case UInt8(ascii: "?"):
                tokens.append(.any)
                i += 1
            case UInt8(ascii: "["):
                i += 1
                let negated = i < n && pattern[i] == UInt8(ascii: "^")
                if negated { i += 1 }
                var words: [UInt64] = [0, 0, 0, 0]
                func insert(_ low: UInt8, _ high: UInt8) {
                    for byte in Int(low)...Int(high) { words[byte >> 6] |= 1 << UInt64(byte & 63) }
                }
                while i < n {
                    let byte = pattern[i]
                    if byte == UInt8(ascii: "\\") && n - i >= 2 {
                        insert(pattern[i + 1], pattern[i + 1])
                        i += 2
                    } else if byte == UInt8(ascii: "]") {
                        i += 1
                        break
                    } else if n - i >= 3 && pattern[i + 1] == UInt8(ascii: "-") {
                        insert(min(byte, pattern[i + 2]), max(byte, pattern[i + 2]))
                        i += 3
                    } else {
                        insert(byte, byte)
                        i += 1
                    }
                }
                if negated { words = words.map { ~$0 } }
                tokens.append(.set(sets.count / 4))
                sets.append(contentsOf: words)
            case UInt8(ascii: "\\") where n - i >= 2:
                tokens.append(.byte(pattern[i + 1]))
                i += 2
            default:
                tokens.append(.byte(pattern[i]))
                i += 1
            }
        }
        self.tokens = tokens
        self.sets = sets
        var minimum = 0
        var star = false
        var prefix: [UInt8] = []
        var inPrefix = true
        for token in tokens {
            switch token {
            case .star:
                star = true
                inPrefix = false
            case .byte(let byte):
                minimum += 1
                if inPrefix { prefix.append(byte) }
            case .any, .set:
                minimum += 1
                inPrefix = false
            }
        }
        minimumMatchBytes = minimum
        hasStar = star
        literalPrefix = prefix
    }

    /// Whether `string` matches the pattern, in O(pattern × string) steps at worst.
    public func matches(_ string: UnsafeRawBufferPointer) -> Bool {
        var steps = 0
        return matches(string, steps: &steps)
    }

    /// Whether `string` matches the pattern; adds to `steps` the work it took (one per byte
    /// compared, one for a refusal by length), so a caller can bound the work of many matches.
    ///
    /// Never exponential, and within O(string × longest run of the pattern between two `*`s):
    /// only the last `*` is retried, and a retry re-reads only the tokens after it. A string
    /// shorter than `minimumMatchBytes` (or, without a `*`, of another length) is refused at once.
    public func matches(_ string: UnsafeRawBufferPointer, steps: inout Int) -> Bool {
        steps += 1
        guard string.count >= minimumMatchBytes, hasStar || string.count == minimumMatchBytes else { return false }
        var t = 0
        var s = 0
        var lastStar = -1
        var lastStarString = 0
        let tokenCount = tokens.count
        while s < string.count {
            steps += 1
            if t < tokenCount {
                let byte = string[s]
                let matched: Bool
                switch tokens[t] {
                case .star:
                    // Try the star empty first; on a later mismatch, it takes one more byte.
                    lastStar = t
                    lastStarString = s
                    t += 1
                    continue
                case .any: matched = true
                case .byte(let expected): matched = byte == expected
                case .set(let index): matched = sets[4 * index + Int(byte >> 6)] & (1 << UInt64(byte & 63)) != 0
                }
                if matched {
                    t += 1
                    s += 1
                    continue
                }
            }
            // Only the last star needs retrying: earlier stars can only stretch into what
            // the last one would cover.
            guard lastStar >= 0 else { return false }
            lastStarString += 1
            s = lastStarString
            t = lastStar + 1
        }
        while t < tokenCount, case .star = tokens[t] { t += 1 }
        return t == tokenCount
    }

    /// Whether `string` matches the pattern; adds its work to `steps` (see the raw-buffer one).
    public func matches(_ string: some Collection<UInt8>, steps: inout Int) -> Bool {
        var counted = 0
        defer { steps += counted }
        if let result = string.withContiguousStorageIfAvailable({ matches(UnsafeRawBufferPointer($0), steps: &counted) }) {
            return result
        }
        return Array(string).withUnsafeBytes { matches($0, steps: &counted) }
    }

    /// Whether `string` matches the pattern.
    public func matches(_ string: some Collection<UInt8>) -> Bool {
        if let result = string.withContiguousStorageIfAvailable({ matches(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(string).withUnsafeBytes { matches($0) }
    }

    /// Whether `string` matches `pattern` (compiles the pattern for this one call).
    public static func matches(_ pattern: some Collection<UInt8>, _ string: some Collection<UInt8>) -> Bool {
        RESPGlob(pattern).matches(string)
    }

    /// `text` with `*`, `?`, `[`, `]` and `\` escaped by a backslash: a pattern matching
    /// exactly `text`, so `escape(prefix) + "*"` matches the strings starting with `prefix`.
    public static func escape(_ text: some Collection<UInt8>) -> [UInt8] {
        var escaped: [UInt8] = []
        escaped.reserveCapacity(text.count)
        for byte in text {
            switch byte {
            case UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "\\"):
                escaped.append(UInt8(ascii: "\\"))
            default: break
            }
            escaped.append(byte)
        }
        return escaped
    }
}
