import DecideRESP
import Testing

@Suite struct RequestParserTests {
    func commands(_ stream: [UInt8], limits: RESPLimits = RESPLimits()) -> [[String]] {
        let outcome = parseRequests(stream, limits: limits)
        #expect(outcome.error == nil, "\(outcome)")
        return outcome.commands.map { $0.map { String(decoding: $0, as: UTF8.self) } }
    }

    func error(_ stream: [UInt8], limits: RESPLimits = RESPLimits()) -> RESPProtocolError? {
        let outcome = parseRequests(stream, limits: limits)
        // Every error is also the one reached byte by byte.
        #expect(parseRequestsByteByByte(stream, limits: limits) == outcome)
        return outcome.error
    }

    // MARK: - Limits that change between commands

    @Test func limitsSetBetweenCommandsJudgeTheNextHeader() throws {
        var parser = RESPRequestParser(limits: .unauthenticated)
        let big = [UInt8](repeating: UInt8(ascii: "p"), count: 20_000)
        // A stranger's AUTH of 16 KiB passes; then the limits widen, as after a good AUTH, and
        // the same parser takes a larger argument; narrowed again (RESET), it refuses one.
        parser.append(contentsOf: multibulk([bytes("AUTH"), [UInt8](repeating: 1, count: 16 * 1024)]))
        #expect(try parser.next()?.count == 2)
        parser.setLimits(RESPLimits())
        parser.append(contentsOf: multibulk([bytes("SET"), bytes("k"), big]))
        #expect(try parser.next()?.count == 3)
        parser.setLimits(.unauthenticated)
        parser.append(contentsOf: bytes("*2\r\n$4\r\nAUTH\r\n$67108864\r\n"))
        #expect(throws: RESPProtocolError.invalidBulkLength) { try parser.next() }
        #expect(error(bytes("*11\r\n"), limits: .unauthenticated) == .invalidMultibulkLength)
        #expect(error(bytes("*10\r\n$16385\r\n"), limits: .unauthenticated) == .invalidBulkLength)
    }

    // MARK: - Basics

    @Test func multibulkCommands() throws {
        #expect(commands(multibulk("SET", "key", "value")) == [["SET", "key", "value"]])
        #expect(commands(bytes("*1\r\n$0\r\n\r\n")) == [[""]])
        // Bulk data is binary: CR, LF, NUL and '*' inside it are data.
        let binary: [UInt8] = [0, 13, 10, 42, 36, 255]
        #expect(parseRequests(multibulk([bytes("SET"), binary])).commands == [[bytes("SET"), binary]])

        var parser = RESPRequestParser()
        parser.append(contentsOf: bytes("*2\r\n$4\r\nECHO\r\n$2\r\nh"))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedBytes == 19)
        parser.append(contentsOf: bytes("i\r\n"))
        let command = try #require(try parser.next())
        #expect(command.map { Array($0) } == [bytes("ECHO"), bytes("hi")])
        #expect(parser.bufferedBytes == 0)
        #expect(try parser.next() == nil)
    }

    @Test func appendTakesRawBuffers() throws {
        var parser = RESPRequestParser()
        multibulk("PING").withUnsafeBytes { parser.append($0) }
        #expect(try parser.next()?.map { Array($0) } == [bytes("PING")])
    }

    @Test func inlineCommands() {
        #expect(commands(bytes("PING\r\n")) == [["PING"]])
        #expect(commands(bytes("SET a b\n")) == [["SET", "a", "b"]])
        #expect(commands(bytes("  GET \t  k  \r\n")) == [["GET", "k"]])
        // Only one trailing CR is the line's; another is whitespace, inside quotes it is data.
        #expect(commands(bytes("a\r\r\n")) == [["a"]])
        #expect(commands(bytes("GET \"x\r\"\r\n")) == [["GET", "x\r"]])
        // \v and \f separate arguments but do not end an unquoted one (as sdssplitargs).
        #expect(commands(bytes("\u{0B}a\u{0B}b c\u{0C}\n")) == [["a\u{0B}b", "c\u{0C}"]])
        // An incomplete line waits for its newline.
        #expect(parseRequests(bytes("PING")) == RequestOutcome())
    }

    @Test func pipelinedCommandsInOneBuffer() {
        let stream = multibulk("SET", "a", "1") + bytes("PING\r\n") + multibulk("GET", "a") + bytes("ECHO \"x y\"\n")
            + multibulk("DEL", "a")
        #expect(commands(stream) == [["SET", "a", "1"], ["PING"], ["GET", "a"], ["ECHO", "x y"], ["DEL", "a"]])
    }

    @Test func emptyCommandsAreSkipped() throws {
        let stream = bytes("\r\n\n   \t\r\n*0\r\n*-1\r\n*-7\r\n") + bytes("PING\r\n") + bytes("*0\r\n")
        #expect(commands(stream) == [["PING"]])
        var parser = RESPRequestParser()
        parser.append(contentsOf: bytes("\r\n*0\r\n"))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedBytes == 0)
    }

    // MARK: - Inline quoting (sdssplitargs)

    @Test func inlineQuotesAndEscapes() {
        let cases: [(String, [[UInt8]])] = [
            (#"SET k "hello world""#, [bytes("SET"), bytes("k"), bytes("hello world")]),
            (#"a "" b"#, [bytes("a"), [], bytes("b")]),
            (#""\n\r\t\b\a\\\"\q""#, [[10, 13, 9, 8, 7, 92, 34, 113]]),
            (#""\x41\x7a\xff\xAb""#, [[0x41, 0x7A, 0xFF, 0xAB]]),
            // \x without two hex digits is just an escaped 'x'.
            (#""\xg1" "\x4""#, [bytes("xg1"), bytes("x4")]),
            (#"'it\'s' 'a\nb' '"'"#, [bytes("it's"), bytes("a\\nb"), bytes("\"")]),
            // A quote may open inside an argument.
            (#"ab"c d"e"#, []),  // closing quote followed by 'e': unbalanced (checked below)
            (#"ab"c d" e"#, [bytes("abc d"), bytes("e")]),
            (#"x'y z'"#, [bytes("xy z")]),
            // A NUL byte is an ordinary byte.
            ("a\u{0}b \"c\u{0}\"", [[97, 0, 98], [99, 0]]),
        ]
        for (line, expected) in cases where !expected.isEmpty {
            let outcome = parseRequests(bytes(line + "\r\n"))
            #expect(outcome == RequestOutcome(commands: [expected]), "\(line)")
        }
        for line in [#"ab"c d"e"#, #""unterminated"#, #"'unterminated"#, #""a"b"#, #"'a'b"#, #""trailing backslash\"#,
                     #"x "y\""#, #""\x4"#] {
            #expect(error(bytes(line + "\n")) == .unbalancedQuotes, "\(line)")
        }
        // A closing quote followed by a tab, \v, or the end of the line is fine.
        #expect(commands(bytes("\"a\"\t\"b\"\u{0B}'c'\n")) == [["a", "b", "c"]])
    }

    // MARK: - Errors, with Redis's texts

    @Test func errorsHaveRedisTexts() {
        let cases: [(String, RESPProtocolError, String)] = [
            ("*abc\r\n", .invalidMultibulkLength, "Protocol error: invalid multibulk length"),
            ("*1\r\n$x\r\n", .invalidBulkLength, "Protocol error: invalid bulk length"),
            ("*1\r\n:3\r\n", .expectedDollar(got: UInt8(ascii: ":")), "Protocol error: expected '$', got ':'"),
            ("*1\r\n\r\n", .expectedDollar(got: 13), "Protocol error: expected '$', got ' '"),
            ("\"open\r\n", .unbalancedQuotes, "Protocol error: unbalanced quotes in request"),
            ("*1\r\n$3\r\nabcXY", .expectedCRLFAfterBulkData, "Protocol error: expected CRLF after bulk data"),
            ("*1\r\n$3\r\nabc\rX", .expectedCRLFAfterBulkData, "Protocol error: expected CRLF after bulk data"),
        ]
        for (stream, expected, text) in cases {
            let found = error(bytes(stream))
            #expect(found == expected, "\(stream.debugDescription)")
            #expect(found?.description == text)
        }
        #expect(RESPProtocolError.tooBigInlineRequest.description == "Protocol error: too big inline request")
        #expect(RESPProtocolError.tooBigMultibulkCountString.description == "Protocol error: too big mbulk count string")
        #expect(RESPProtocolError.tooBigBulkCountString.description == "Protocol error: too big bulk count string")
        #expect(RESPProtocolError.requestTooLarge(maxRequestBytes: 100).description
            == "Protocol error: request of more than 100 bytes (maxRequestBytes)")
    }

    @Test func countsMustBeStrictIntegers() {
        for count in ["", "+1", "01", "-0", "1 ", " 1", "1x", "99999999999999999999", "--1", "0x10"] {
            #expect(error(bytes("*\(count)\r\n")) == .invalidMultibulkLength, "\(count)")
            #expect(error(bytes("*1\r\n$\(count)\r\n")) == .invalidBulkLength, "\(count)")
        }
        // Negative argument lengths are refused; negative argument counts are empty commands.
        #expect(error(bytes("*1\r\n$-1\r\n")) == .invalidBulkLength)
        #expect(error(bytes("*2\r\n$1\r\na\r\n$-5\r\n")) == .invalidBulkLength)
        #expect(commands(bytes("*-5\r\nPING\n")) == [["PING"]])
        // A CR in a header must be followed by LF (Redis would skip any byte there).
        #expect(error(bytes("*1\rX$1\r\na\r\n")) == .invalidMultibulkLength)
        #expect(error(bytes("*1\r\n$1\rXa\r\n")) == .invalidBulkLength)
    }

    @Test func limitsAreRefusedBeforeTheDataArrives() {
        // Redis's argument count limit is inclusive.
        #expect(error(bytes("*1048577\r\n")) == .invalidMultibulkLength)
        #expect(parseRequests(bytes("*1048576\r\n")) == RequestOutcome())
        #expect(error(bytes("*9223372036854775807\r\n")) == .invalidMultibulkLength)
        #expect(error(bytes("*1\r\n$99999999999\r\n")) == .invalidBulkLength)
        #expect(error(bytes("*1\r\n$67108865\r\n")) == .invalidBulkLength)
        #expect(parseRequests(bytes("*1\r\n$67108864\r\n")) == RequestOutcome())

        // A 70 KB inline line without a newline; exactly 64 KB still waits for its newline.
        #expect(parseRequests([UInt8](repeating: UInt8(ascii: "a"), count: 70_000)).error == .tooBigInlineRequest)
        let limit = [UInt8](repeating: UInt8(ascii: "a"), count: 64 * 1024)
        #expect(parseRequests(limit) == RequestOutcome())
        #expect(parseRequests(limit + bytes("\n")).commands == [[limit]])
        #expect(parseRequests(limit + bytes("a\n")).error == .tooBigInlineRequest)

        // Header lines are bounded the same way.
        let digits = [UInt8](repeating: UInt8(ascii: "1"), count: 70_000)
        #expect(parseRequests(bytes("*") + digits).error == .tooBigMultibulkCountString)
        #expect(parseRequests(bytes("*1\r\n$") + digits).error == .tooBigBulkCountString)
        #expect(parseRequests(bytes("*1\r\n") + digits).error == .tooBigBulkCountString)

        var small = RESPLimits()
        small.maxArguments = 2
        small.maxBulkBytes = 3
        small.maxInlineBytes = 8
        small.maxRequestBytes = 30
        #expect(error(multibulk("a", "b", "c"), limits: small) == .invalidMultibulkLength)
        #expect(error(multibulk("abcd"), limits: small) == .invalidBulkLength)
        #expect(error(bytes("123456789\n"), limits: small) == .tooBigInlineRequest)
        #expect(commands(bytes("12345678\n"), limits: small) == [["12345678"]])
        #expect(error(bytes("*000000001\r\n"), limits: small) == .tooBigMultibulkCountString)
        // "*2\r\n$3\r\nabc\r\n$3\r\ndef\r\n" is 22 bytes, refused as soon as "$3\r\n" says so.
        #expect(commands(multibulk("abc", "def"), limits: small) == [["abc", "def"]])
        small.maxRequestBytes = 21
        #expect(error(multibulk("abc", "def"), limits: small) == .requestTooLarge(maxRequestBytes: 21))
        #expect(parseRequests(Array(multibulk("abc", "def").prefix(17)), limits: small).error
            == .requestTooLarge(maxRequestBytes: 21))
        // The limit applies per command, not to the stream.
        small.maxRequestBytes = 22
        #expect(commands(multibulk("abc", "def") + multibulk("abc", "def"), limits: small).count == 2)
    }

    @Test func errorsPoisonTheParser() throws {
        var parser = RESPRequestParser()
        parser.append(contentsOf: multibulk("PING") + bytes("*x\r\n") + multibulk("PING"))
        #expect(try parser.next()?.count == 1)
        #expect(throws: RESPProtocolError.invalidMultibulkLength) { try parser.next() }
        parser.append(contentsOf: multibulk("GET", "k"))
        for _ in 0..<3 {
            #expect(throws: RESPProtocolError.invalidMultibulkLength) { try parser.next() }
        }
    }

    // MARK: - Split invariance

    /// Streams of random commands (multibulk and inline, some broken), generated from a seed.
    func randomStream(_ random: inout SeededRandom) -> [UInt8] {
        var stream: [UInt8] = []
        let alphabet = bytes("ab \"'\\x0\r\n*$") + [0, 9, 11, 255]
        for _ in 0..<random.int(1...6) {
            switch random.int(0...9) {
            case 0...4:
                let arguments = (0..<random.int(1...4)).map { _ in random.bytes(maxCount: 6) }
                stream += multibulk(arguments)
            case 5...6:
                stream += random.bytes(maxCount: 12, from: alphabet) + bytes(random.bool() ? "\r\n" : "\n")
            case 7:
                stream += bytes(random.pick(["*0\r\n", "*-1\r\n", "\r\n", "*1\r\n$2\r\nab\r\n"]))
            case 8:
                // Corrupt a well-formed command at one byte.
                var command = multibulk((0..<random.int(1...3)).map { _ in random.bytes(maxCount: 4) })
                command[random.int(0...(command.count - 1))] = random.pick(alphabet)
                stream += command
            default:
                stream += random.bytes(maxCount: 8, from: alphabet)
            }
        }
        return stream
    }

    /// Limits the random streams reach: three arguments, 5-byte bulks, 10-byte inline lines,
    /// 40-byte requests.
    static var smallLimits: RESPLimits {
        var small = RESPLimits()
        small.maxArguments = 3
        small.maxBulkBytes = 5
        small.maxInlineBytes = 10
        small.maxRequestBytes = 40
        return small
    }

    @Test func everySplitPositionGivesTheSameCommands() {
        forEachSeed(0..<300) { seed, random in
            let stream = randomStream(&random)
            for limits in [RESPLimits(), Self.smallLimits] {
                let whole = parseRequests(stream, limits: limits)
                #expect(parseRequestsByteByByte(stream, limits: limits) == whole, "seed \(seed)")
                for first in 0...stream.count {
                    #expect(parseRequests(stream, cuts: [first], limits: limits) == whole, "seed \(seed) cut \(first)")
                }
                let cuts = (0..<3).map { _ in random.int(0...stream.count) }.sorted()
                #expect(parseRequests(stream, cuts: cuts, limits: limits) == whole, "seed \(seed) cuts \(cuts)")
            }
        }
    }

    @Test func reencodedCommandsParseToThemselves() {
        forEachSeed(0..<300) { seed, random in
            let outcome = parseRequests(randomStream(&random))
            for command in outcome.commands {
                #expect(parseRequests(multibulk(command)).commands == [command], "seed \(seed)")
            }
        }
    }

    // MARK: - Linear work

    @Test func aMillionArgumentsInFourKilobytePiecesAreScannedOnce() throws {
        let count = 1_000_000
        var stream = bytes("*\(count)\r\n")
        stream.reserveCapacity(count * 7 + 16)
        for _ in 0..<count { stream += [36, 49, 13, 10, 120, 13, 10] }  // "$1\r\nx\r\n"
        var parser = RESPRequestParser()
        var command: [ArraySlice<UInt8>]?
        var offset = 0
        while offset < stream.count {
            let end = min(offset + 4096, stream.count)
            #expect(command == nil)
            parser.append(contentsOf: stream[offset..<end])
            command = try parser.next()
            offset = end
        }
        let arguments = try #require(command)
        #expect(arguments.count == count)
        #expect(arguments.allSatisfy { $0.elementsEqual([120]) })
        // Each header byte was examined at most once; bulk data not at all.
        #expect(parser.scannedByteCount <= stream.count)
        #expect(parser.bufferedBytes == 0)
    }

    @Test func byteByByteWorkIsLinear() throws {
        let count = 20_000
        var stream = bytes("*\(count)\r\n")
        for index in 0..<count { stream += bytes("$7\r\nv\(100_000 + index)\r\n") }
        let inline = [UInt8](repeating: UInt8(ascii: "a"), count: 60_000) + bytes("\n")
        stream += inline
        var parser = RESPRequestParser()
        var results: [[ArraySlice<UInt8>]] = []
        for byte in stream {
            parser.append(contentsOf: CollectionOfOne(byte))
            while let command = try parser.next() { results.append(command) }
        }
        #expect(results.count == 2)
        #expect(results.first?.count == count)
        #expect(results.last?.first.map(Array.init) == Array(inline.dropLast()))
        // Inline lines are scanned for the newline once and split once.
        #expect(parser.scannedByteCount <= stream.count + inline.count)
    }

    @Test func longHeaderLinesTrickledInAreScannedOnce() throws {
        // A header line just under the limit, one byte at a time: each byte examined once.
        let stream = bytes("*1\r\n$") + [UInt8](repeating: UInt8(ascii: "0"), count: 60_000) + bytes("\r\n")
        var parser = RESPRequestParser()
        for byte in stream {
            parser.append(contentsOf: CollectionOfOne(byte))
            if byte == UInt8(ascii: "\n") && parser.bufferedBytes == stream.count {
                #expect(throws: RESPProtocolError.invalidBulkLength) { try parser.next() }
            } else {
                #expect(try parser.next() == nil)
            }
        }
        #expect(parser.scannedByteCount <= stream.count)
    }

    @Test func consumedBytesAreCompactedAway() throws {
        var stream: [UInt8] = []
        for index in 0..<20_000 { stream += multibulk("SET", "key:\(index)", "value-\(index)") }
        var parser = RESPRequestParser()
        var count = 0
        var largestStore = 0
        // Pieces of 1000 bytes end inside commands, so the buffer is never simply emptied.
        for start in stride(from: 0, to: stream.count, by: 1000) {
            parser.append(contentsOf: stream[start..<min(start + 1000, stream.count)])
            while try parser.next() != nil { count += 1 }
            largestStore = max(largestStore, parser.storedByteCount)
        }
        #expect(count == 20_000)
        #expect(largestStore <= 4096 + 2 * 1000)
        #expect(stream.count > 100 * largestStore)
    }

    @Test func slicesStayValidAcrossAppends() throws {
        var parser = RESPRequestParser()
        parser.append(contentsOf: multibulk("SET", "key", "value"))
        let command = try #require(try parser.next())
        // Enough appends to compact and regrow the buffer many times.
        for _ in 0..<2_000 { parser.append(contentsOf: multibulk("GET", "other-key-\(String(repeating: "z", count: 40))")) }
        while try parser.next() != nil {}
        #expect(command.map { Array($0) } == [bytes("SET"), bytes("key"), bytes("value")])
    }

    /// `next(into:)` with one array kept for every command (emptied before each append, as
    /// syncnode's request loop does) gives exactly what `next()` gives, commands and fault,
    /// over random streams in random cuts; and it keeps the array's storage: a second command
    /// of no more arguments lands in the same buffer.
    @Test func argumentsParsedIntoOneKeptArrayMatchNext() throws {
        forEachSeed(0..<300) { seed, random in
            let stream = randomStream(&random)
            let cuts = (0..<3).map { _ in random.int(0...stream.count) }.sorted()
            var parser = RESPRequestParser(limits: Self.smallLimits)
            var arguments: [ArraySlice<UInt8>] = []
            var outcome = RequestOutcome()
            var from = 0
            for cut in cuts + [stream.count] where cut >= from {
                arguments.removeAll(keepingCapacity: true)
                parser.append(contentsOf: stream[from..<cut])
                from = cut
                guard outcome.error == nil else { continue }
                do throws(RESPProtocolError) {
                    while try parser.next(into: &arguments) { outcome.commands.append(arguments.map { Array($0) }) }
                    #expect(arguments.isEmpty, "seed \(seed): more bytes needed leaves the array empty")
                } catch {
                    outcome.error = error
                }
            }
            #expect(outcome == parseRequests(stream, cuts: cuts, limits: Self.smallLimits), "seed \(seed)")
        }
        var parser = RESPRequestParser()
        parser.append(contentsOf: multibulk("SET", "key", "value") + multibulk("GET", "key"))
        var arguments: [ArraySlice<UInt8>] = []
        #expect(try parser.next(into: &arguments))
        let first = arguments.withUnsafeBufferPointer { $0.baseAddress }
        #expect(try parser.next(into: &arguments))
        #expect(arguments.map { Array($0) } == [bytes("GET"), bytes("key")])
        #expect(arguments.withUnsafeBufferPointer { $0.baseAddress } == first)
        // One huge command's storage is released when the array is emptied, not kept for the
        // session's life (5,000 slices of 32 bytes); a usual one's is kept.
        let huge = 5_000
        parser.append(contentsOf: multibulk((0..<huge).map { _ in bytes("x") }))
        #expect(try parser.next(into: &arguments))
        #expect(arguments.count == huge)
        arguments.removeAllKeepingStorage()
        #expect(arguments.isEmpty && arguments.capacity <= [ArraySlice<UInt8>].maxKeptCount)
        parser.append(contentsOf: multibulk("GET", "key"))
        #expect(try parser.next(into: &arguments))
        let kept = arguments.capacity
        arguments.removeAllKeepingStorage()
        #expect(arguments.isEmpty && arguments.capacity == kept)
    }

    // MARK: - Looking ahead

    /// `peekCommands` hands over, in order, exactly the multibulk commands `next()` then
    /// returns, up to its limit, stopping at the first inline command, partial command or fault;
    /// it consumes nothing (`bufferedBytes` unchanged) and what `next()` returns (or throws)
    /// afterwards is the same as without it. Random streams, some broken, fed in random cuts,
    /// peeking after every command.
    @Test func peekingAheadSeesTheNextMulticommandsAndChangesNothing() throws {
        forEachSeed(0..<400) { seed, random in
            let stream = randomStream(&random)
            for limits in [RESPLimits(), Self.smallLimits] {
                var plain = RESPRequestParser(limits: limits)
                var peeking = RESPRequestParser(limits: limits)
                var offset = 0
                var failed = false
                while offset <= stream.count && !failed {
                    let cut = min(stream.count, offset + random.int(0...12))
                    plain.append(contentsOf: stream[offset..<cut])
                    peeking.append(contentsOf: stream[offset..<cut])
                    offset = cut == stream.count ? stream.count + 1 : cut
                    while true {
                        let limit = random.int(0...4)
                        var seen: [[[UInt8]]] = []
                        let buffered = peeking.bufferedBytes
                        peeking.peekCommands(maxCommands: limit) { command in
                            seen.append((0..<command.count).map { Array(command[$0]) })
                            return true
                        }
                        #expect(peeking.bufferedBytes == buffered, "seed \(seed)")
                        #expect(seen.count <= limit, "seed \(seed)")
                        // What the plain parser returns next: the peeked commands first, in order.
                        var ahead = plain
                        for expected in seen {
                            let next = try? ahead.next()
                            #expect(next.map { $0.map { Array($0) } } == expected, "seed \(seed)")
                        }
                        let a = Result { () throws(RESPProtocolError) in try plain.next() }
                        let b = Result { () throws(RESPProtocolError) in try peeking.next() }
                        switch (a, b) {
                        case (.success(let x), .success(let y)):
                            #expect(x.map { $0.map { Array($0) } } == y.map { $0.map { Array($0) } }, "seed \(seed)")
                            if x == nil { break }
                            continue
                        case (.failure(let x), .failure(let y)):
                            #expect(x == y, "seed \(seed)")
                            failed = true
                        default:
                            Issue.record("seed \(seed): \(a) vs \(b)")
                            failed = true
                        }
                        break
                    }
                }
            }
        }
    }

    /// A peek stops where `next()` could not return a multibulk command: at an inline command,
    /// at a command not wholly received, and before a fault, which `next()` still throws; and
    /// `body` returning false stops it too.
    @Test func peekingStopsAtInlinePartialFaultAndWhenAsked() throws {
        func peeked(_ parser: RESPRequestParser, _ limit: Int = 10, stopAfter: Int = .max) -> [String] {
            var names: [String] = []
            parser.peekCommands(maxCommands: limit) { command in
                names.append(String(decoding: command[0], as: UTF8.self) + (command.count > 1 ? " " + String(decoding: command[1], as: UTF8.self) : ""))
                return names.count < stopAfter
            }
            return names
        }
        var parser = RESPRequestParser()
        parser.append(contentsOf: multibulk("GET", "a") + multibulk("GET", "b") + bytes("PING\r\n") + multibulk("GET", "c"))
        #expect(peeked(parser) == ["GET a", "GET b"])
        #expect(peeked(parser, 1) == ["GET a"])
        #expect(peeked(parser, stopAfter: 1) == ["GET a"])
        #expect(peeked(parser, 0) == [])
        _ = try parser.next()
        #expect(peeked(parser) == ["GET b"])
        _ = try parser.next()
        #expect(peeked(parser) == [])
        #expect(try parser.next()?.map { Array($0) } == [bytes("PING")])
        #expect(peeked(parser) == ["GET c"])

        var partial = RESPRequestParser()
        partial.append(contentsOf: multibulk("GET", "a") + Array(multibulk("GET", "b").dropLast()))
        #expect(peeked(partial) == ["GET a"])

        var broken = RESPRequestParser()
        broken.append(contentsOf: multibulk("GET", "a") + bytes("*1\r\n?3\r\n"))
        #expect(peeked(broken) == ["GET a"])
        #expect(try broken.next()?.map { Array($0) } == [bytes("GET"), bytes("a")])
        #expect(peeked(broken) == [])
        #expect(throws: RESPProtocolError.self) { try broken.next() }
        #expect(peeked(broken) == [])
    }
}
