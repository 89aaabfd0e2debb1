import DecideRESP

/// A seeded generator (SplitMix64), so a failing property test can be replayed from its seed.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed &* 0x2545_F491_4F6C_DD1D &+ 1 }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }

    mutating func bool() -> Bool { Bool.random(using: &self) }

    mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }

    mutating func bytes(maxCount: Int, from alphabet: [UInt8]? = nil) -> [UInt8] {
        (0..<int(0...maxCount)).map { _ in
            if let alphabet { return pick(alphabet) }
            return UInt8.random(in: 0...255, using: &self)
        }
    }
}

/// Runs `body` for every seed; failure messages name the seed.
func forEachSeed(_ seeds: Range<UInt64>, _ body: (UInt64, inout SeededRandom) throws -> Void) rethrows {
    for seed in seeds {
        var random = SeededRandom(seed: seed)
        try body(seed, &random)
    }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// What a request parser made of a stream: the commands (copied out) and the error, if any.
struct RequestOutcome: Equatable, CustomStringConvertible {
    var commands: [[[UInt8]]] = []
    var error: RESPProtocolError?

    var description: String {
        let rendered = commands.map { $0.map { String(decoding: $0, as: UTF8.self) } }
        return "\(rendered) error: \(error.map { "\($0)" } ?? "none")"
    }
}

/// Reads every command the parser has whole; records an error and stops at it.
func drain(_ parser: inout RESPRequestParser, into outcome: inout RequestOutcome) {
    guard outcome.error == nil else { return }
    do {
        while let command = try parser.next() { outcome.commands.append(command.map { Array($0) }) }
    } catch {
        outcome.error = error
    }
}

/// Feeds `stream` to a fresh request parser cut at `cuts` (sorted offsets), draining after
/// every piece.
func parseRequests(_ stream: [UInt8], cuts: [Int] = [], limits: RESPLimits = RESPLimits()) -> RequestOutcome {
    var parser = RESPRequestParser(limits: limits)
    var outcome = RequestOutcome()
    var from = 0
    for cut in cuts + [stream.count] where cut >= from {
        parser.append(contentsOf: stream[from..<cut])
        drain(&parser, into: &outcome)
        from = cut
    }
    return outcome
}

/// Feeds `stream` one byte at a time.
func parseRequestsByteByByte(_ stream: [UInt8], limits: RESPLimits = RESPLimits()) -> RequestOutcome {
    parseRequests(stream, cuts: Array(0..<stream.count), limits: limits)
}

/// `arguments` as a multibulk command.
func multibulk(_ arguments: [[UInt8]]) -> [UInt8] {
    var out = bytes("*\(arguments.count)\r\n")
    for argument in arguments { out += bytes("$\(argument.count)\r\n") + argument + bytes("\r\n") }
    return out
}

func multibulk(_ arguments: String...) -> [UInt8] { multibulk(arguments.map(bytes)) }

/// What a reply parser made of a stream.
struct ReplyOutcome: Equatable {
    var values: [RESPValue] = []
    var error: RESPProtocolError?
}

func parseReplies(_ stream: [UInt8], cuts: [Int] = [], make: () -> RESPReplyParser = { RESPReplyParser() }) -> ReplyOutcome {
    var parser = make()
    var outcome = ReplyOutcome()
    var from = 0
    for cut in cuts + [stream.count] where cut >= from {
        parser.append(contentsOf: stream[from..<cut])
        from = cut
        guard outcome.error == nil else { continue }
        do {
            while let value = try parser.next() { outcome.values.append(value) }
        } catch {
            outcome.error = error
        }
    }
    return outcome
}
