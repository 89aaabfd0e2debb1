import DecideRESP
import Testing

@Suite struct GlobTests {
    func matches(_ pattern: [UInt8], _ string: [UInt8]) -> Bool { RESPGlob.matches(pattern, string) }

    func matches(_ pattern: String, _ string: String) -> Bool { matches(bytes(pattern), bytes(string)) }

    @Test func redisSemantics() {
        let cases: [(pattern: String, string: String, matches: Bool)] = [
            ("", "", true), ("", "a", false), ("*", "anything", true), ("*", "", true), ("**", "", true),
            ("a*", "a", true), ("a*", "", false), ("*a", "ba", true), ("*a", "ab", false), ("a*b*c", "aXbYc", true),
            ("a?c", "abc", true), ("a?c", "ac", false), ("?", "", false),
            ("h[ae]llo", "hello", true), ("h[ae]llo", "hallo", true), ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true), ("h[^e]llo", "hello", false), ("h[a-b]llo", "hbllo", true),
            ("h[a-b]llo", "hcllo", false),
            // Reversed ranges are ranges.
            ("[z-a]", "m", true), ("[z-a]", "A", false),
            // A range end is taken even when it is ']': "[a-]" is ']'...'a'.
            ("[a-]", "]", true), ("[a-]", "^", true), ("[a-]", "a", true), ("[a-]", "-", false), ("[a-]", "b", false),
            // The first ']' closes: "[]" is empty, "[^]" is any byte.
            ("[]", "]", false), ("[]]", "]", false), ("[^]", "x", true), ("[^]", "", false),
            // Escapes, inside and outside sets.
            ("[\\]]", "]", true), ("[a\\-z]", "-", true), ("[a\\-z]", "b", false), ("[\\", "\\", true),
            ("\\*", "*", true), ("\\*", "a", false), ("\\?", "?", true), ("\\[a]", "[a]", true), ("\\a", "a", true),
            // A trailing backslash is a literal backslash.
            ("a\\", "a\\", true), ("a\\", "a", false),
            // An unterminated '[' takes the rest of the pattern as its set.
            ("[abc", "b", true), ("[abc", "d", false), ("x[ab", "xa", true), ("x[ab", "xab", false),
            ("a[", "a", false), ("a[", "a[", false), ("[^", "x", true), ("[^a", "a", false), ("[[]", "[", true),
            ("[-]", "-", true), ("[a-c-e]", "d", false), ("[a-c-e]", "-", true), ("[a-c-e]", "e", true),
        ]
        for (pattern, string, expected) in cases {
            #expect(matches(pattern, string) == expected, "\(pattern.debugDescription) ~ \(string.debugDescription)")
        }
        // Bytes compare unsigned: [a-\xff] holds 0xC0 and not 0x00.
        #expect(matches([91, 97, 45, 0xFF, 93], [0xC0]))
        #expect(!matches([91, 97, 45, 0xFF, 93], [0x00]))
        #expect(matches([0xE9, 42], [0xE9, 0, 1]))
    }

    @Test func hostilePatternsCostLinearWork() {
        // Backtracking over every `*` would take exponential time here; the last-star retry
        // takes about two steps a byte.
        let text = [UInt8](repeating: UInt8(ascii: "a"), count: 10_000)
        var steps = 0
        #expect(!RESPGlob(Array("*a*a*a*a*a*a*a*b".utf8)).matches(text, steps: &steps))
        #expect(steps < 4 * text.count, "\(steps) steps")
        // A pattern longer in fixed bytes than the string is refused in one step.
        steps = 0
        let long = RESPGlob(Array(("*" + String(repeating: "?*", count: 2_000)).utf8))
        #expect(long.minimumMatchBytes == 2_000 && long.hasStar)
        #expect(!long.matches(Array("short".utf8), steps: &steps))
        #expect(steps == 1)
        // The literal prefix is what comes before the first wildcard.
        #expect(RESPGlob(Array("__keyspace@0__:user:*".utf8)).literalPrefix == Array("__keyspace@0__:user:".utf8))
        #expect(RESPGlob(Array("a\\*b?c".utf8)).literalPrefix == Array("a*b".utf8))
        #expect(RESPGlob(Array("abc".utf8)).matches(Array("abc".utf8)) && !RESPGlob(Array("abc".utf8)).matches(Array("abcd".utf8)))
    }

    @Test func compiledPatternsAndBufferKindsAgree() {
        let glob = RESPGlob(bytes("user:*:[0-9]"))
        #expect(glob.matches(bytes("user:ann:7")))
        #expect(glob.matches(bytes("xuser:ann:7").dropFirst()))
        #expect(!glob.matches(bytes("user:ann:x")))
        let raw = bytes("user:b:1")
        #expect(raw.withUnsafeBytes { glob.matches($0) })
        #expect(glob.matches(AnySequenceCollection(raw)))
    }

    @Test func escapedTextMatchesItselfAndPrefixes() {
        #expect(RESPGlob.escape(bytes("a*b?c[d]e\\f")) == bytes("a\\*b\\?c\\[d\\]e\\\\f"))
        forEachSeed(0..<2_000) { seed, random in
            let text = random.bytes(maxCount: 8, from: bytes("ab*?[]^-\\"))
            let escaped = RESPGlob.escape(text)
            #expect(matches(escaped, text), "seed \(seed)")
            #expect(!matches(escaped, text + [97]), "seed \(seed)")
            #expect(matches(escaped + bytes("*"), text + random.bytes(maxCount: 3)), "seed \(seed)")
            if let last = text.last {
                #expect(!matches(escaped + bytes("*"), text.dropLast() + [last == 97 ? 98 : 97]), "seed \(seed)")
            }
        }
    }

    @Test func agreesWithRedisAlgorithmOnRandomInputs() {
        let patternAlphabet = bytes("ab*?[]^-\\")
        let stringAlphabet = bytes("ab-]^\\[")
        forEachSeed(0..<30_000) { seed, random in
            let pattern = random.bytes(maxCount: 8, from: patternAlphabet)
            let string = random.bytes(maxCount: 7, from: stringAlphabet)
            #expect(matches(pattern, string) == redisMatch(pattern, string),
                    "seed \(seed): \(String(decoding: pattern, as: UTF8.self)) ~ \(String(decoding: string, as: UTF8.self))")
        }
    }

    @Test func pathologicalPatternsFinish() {
        let pattern = Array(repeating: bytes("*a"), count: 30).joined() + bytes("b")
        let string = [UInt8](repeating: UInt8(ascii: "a"), count: 200)
        #expect(!matches(Array(pattern), string))
        #expect(matches(Array(pattern), string + bytes("b")))
        let stars = Array(repeating: bytes("*?"), count: 500).joined() + bytes("[^a]")
        #expect(!matches(Array(stars), [UInt8](repeating: UInt8(ascii: "a"), count: 2_000)))
    }

    /// Redis's `stringmatchlen` (src/util.c), control flow kept step by step, recursion and
    /// all (fine for short inputs), reading a 0 past the end of the pattern as C reads its
    /// terminator. One deliberate difference: stars also match the empty string
    /// (redis/redis#15643).
    func redisMatch(_ pattern: [UInt8], _ string: [UInt8]) -> Bool {
        if string.isEmpty { return pattern.allSatisfy { $0 == UInt8(ascii: "*") } }
        func at(_ index: Int) -> UInt8 { index >= 0 && index < pattern.count ? pattern[index] : 0 }
        func impl(_ patternStart: Int, _ stringStart: Int) -> Bool {
            var p = patternStart
            var patternLength = pattern.count - patternStart
            var s = stringStart
            var stringLength = string.count - stringStart
            while patternLength > 0 && stringLength > 0 {
                switch at(p) {
                case UInt8(ascii: "*"):
                    while patternLength > 0 && at(p + 1) == UInt8(ascii: "*") {
                        p += 1
                        patternLength -= 1
                    }
                    if patternLength == 1 { return true }
                    while stringLength > 0 {
                        if impl(p + 1, s) { return true }
                        s += 1
                        stringLength -= 1
                    }
                    return false
                case UInt8(ascii: "?"):
                    s += 1
                    stringLength -= 1
                case UInt8(ascii: "["):
                    p += 1
                    patternLength -= 1
                    let not = at(p) == UInt8(ascii: "^")
                    if not {
                        p += 1
                        patternLength -= 1
                    }
                    var match = false
                    while true {
                        if at(p) == UInt8(ascii: "\\") && patternLength >= 2 {
                            p += 1
                            patternLength -= 1
                            if at(p) == string[s] { match = true }
                        } else if at(p) == UInt8(ascii: "]") {
                            break
                        } else if patternLength == 0 {
                            p -= 1
                            patternLength += 1
                            break
                        } else if patternLength >= 3 && at(p + 1) == UInt8(ascii: "-") {
                            let start = min(at(p), at(p + 2))
                            let end = max(at(p), at(p + 2))
                            p += 2
                            patternLength -= 2
                            if string[s] >= start && string[s] <= end { match = true }
                        } else if at(p) == string[s] {
                            match = true
                        }
                        p += 1
                        patternLength -= 1
                    }
                    if not { match.toggle() }
                    if !match { return false }
                    s += 1
                    stringLength -= 1
                default:
                    if at(p) == UInt8(ascii: "\\") && patternLength >= 2 {
                        p += 1
                        patternLength -= 1
                    }
                    if at(p) != string[s] { return false }
                    s += 1
                    stringLength -= 1
                }
                p += 1
                patternLength -= 1
                if stringLength == 0 {
                    while at(p) == UInt8(ascii: "*") {
                        p += 1
                        patternLength -= 1
                    }
                    break
                }
            }
            return patternLength == 0 && stringLength == 0
        }
        return impl(0, 0)
    }
}

/// A collection without contiguous storage, to exercise the copying path.
struct AnySequenceCollection: Collection {
    let base: [UInt8]
    init(_ base: [UInt8]) { self.base = base }
    var startIndex: Int { base.startIndex }
    var endIndex: Int { base.endIndex }
    subscript(index: Int) -> UInt8 { base[index] }
    func index(after index: Int) -> Int { index + 1 }
}
