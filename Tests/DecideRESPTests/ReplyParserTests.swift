import DecideRESP
import Testing

@Suite struct ReplyParserTests {
    func values(_ stream: String, make: () -> RESPReplyParser = { RESPReplyParser() }) -> [RESPValue] {
        let outcome = parseReplies(bytes(stream), make: make)
        #expect(outcome.error == nil, "\(stream.debugDescription): \(String(describing: outcome.error))")
        // The same values arrive when the stream comes one byte at a time.
        #expect(parseReplies(bytes(stream), cuts: Array(0..<stream.utf8.count), make: make) == outcome)
        return outcome.values
    }

    func error(_ stream: [UInt8], make: () -> RESPReplyParser = { RESPReplyParser() }) -> RESPProtocolError? {
        let outcome = parseReplies(stream, make: make)
        #expect(parseReplies(stream, cuts: Array(0..<stream.count), make: make) == outcome)
        return outcome.error
    }

    func error(_ stream: String, make: () -> RESPReplyParser = { RESPReplyParser() }) -> RESPProtocolError? {
        error(bytes(stream), make: make)
    }

    @Test func resp2Types() {
        #expect(values("+OK\r\n-ERR no\r\n:-12\r\n$3\r\na\r\n\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n") == [
            .simple("OK"), .error("ERR no"), .integer(-12), .bulk([97, 13, 10]), .bulk([]), .null, .null, .array([]),
        ])
        #expect(values("*2\r\n*1\r\n:1\r\n$1\r\nx\r\n") == [.array([.array([.integer(1)]), .bulk([120])])])
        #expect(values(":9223372036854775807\r\n:-9223372036854775808\r\n:+5\r\n")
            == [.integer(.max), .integer(.min), .integer(5)])
    }

    @Test func resp3Types() {
        #expect(values("_\r\n#t\r\n#f\r\n,1.5\r\n,inf\r\n,-inf\r\n,3\r\n(3492890328409238509324850943850943825024385\r\n") == [
            .null, .boolean(true), .boolean(false), .double(1.5), .double(.infinity), .double(-.infinity), .double(3),
            .bigNumber("3492890328409238509324850943850943825024385"),
        ])
        #expect(values("!21\r\nSYNTAX invalid syntax\r\n=15\r\ntxt:Some string\r\n") == [
            .error("SYNTAX invalid syntax"), .verbatim(format: "txt", text: bytes("Some string")),
        ])
        #expect(values("%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n~2\r\n:1\r\n:2\r\n>2\r\n+message\r\n$1\r\nx\r\n") == [
            .map([.simple("a"), .integer(1), .simple("b"), .integer(2)]), .set([.integer(1), .integer(2)]),
            .push([.simple("message"), .bulk([120])]),
        ])
        #expect(values("%0\r\n~0\r\n>0\r\n") == [.map([]), .set([]), .push([])])
        guard case .double(let nan)? = parseReplies(bytes(",nan\r\n")).values.first else {
            Issue.record("nan is a double")
            return
        }
        #expect(nan.isNaN)
    }

    @Test func attributesAreDropped() {
        #expect(values("|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.1923\r\n*2\r\n:2039123\r\n:9543892\r\n")
            == [.array([.integer(2_039_123), .integer(9_543_892)])])
        #expect(values("*2\r\n|1\r\n+ttl\r\n:3\r\n:1\r\n|0\r\n:2\r\n") == [.array([.integer(1), .integer(2)])])
    }

    @Test func valueTextAndIsError() {
        #expect(RESPValue.bulk(bytes("héllo")).text == "héllo")
        #expect(RESPValue.bulk([0xFF]).text == nil)
        #expect(RESPValue.simple("OK").text == "OK")
        #expect(RESPValue.verbatim(format: "txt", text: bytes("v")).text == "v")
        #expect(RESPValue.integer(1).text == nil)
        #expect(RESPValue.error("ERR x").isError)
        #expect(!RESPValue.simple("ERR x").isError)
    }

    @Test func malformedRepliesThrow() {
        let cases: [(String, RESPProtocolError)] = [
            ("@x\r\n", .invalidReplyType(UInt8(ascii: "@"))),
            (":12a\r\n", .invalidReplyLine(type: UInt8(ascii: ":"))),
            (":\r\n", .invalidReplyLine(type: UInt8(ascii: ":"))),
            (":1\rx", .invalidReplyLine(type: UInt8(ascii: ":"))),
            ("#x\r\n", .invalidReplyLine(type: UInt8(ascii: "#"))),
            ("_x\r\n", .invalidReplyLine(type: UInt8(ascii: "_"))),
            (",1.5.5\r\n", .invalidReplyLine(type: UInt8(ascii: ","))),
            ("(12a\r\n", .invalidReplyLine(type: UInt8(ascii: "("))),
            ("$-2\r\n", .invalidReplyLine(type: UInt8(ascii: "$"))),
            ("$01\r\n", .invalidReplyLine(type: UInt8(ascii: "$"))),
            ("%-1\r\n", .invalidReplyLine(type: UInt8(ascii: "%"))),
            ("!-1\r\n", .invalidReplyLine(type: UInt8(ascii: "!"))),
            ("*-2\r\n", .invalidReplyLine(type: UInt8(ascii: "*"))),
            ("$3\r\nabcd\r\n", .expectedCRLFAfterBulkData),
            ("=3\r\ntxt\r\n", .invalidVerbatimString),
            ("=4\r\ntxtx\r\n", .invalidVerbatimString),
            ("*2\r\n:1\r\n?\r\n", .invalidReplyType(UInt8(ascii: "?"))),
        ]
        for (stream, expected) in cases {
            #expect(error(stream) == expected, "\(stream.debugDescription)")
        }
        #expect(RESPProtocolError.invalidReplyType(UInt8(ascii: "@")).description == "Protocol error: invalid reply type '@'")
    }

    @Test func boundsAreCheckedBeforeAllocating() {
        #expect(error("*16777217\r\n") == .replyLengthOverLimit(type: UInt8(ascii: "*"), limit: 1 << 24))
        #expect(error("%8388609\r\n") == .replyLengthOverLimit(type: UInt8(ascii: "%"), limit: 1 << 24))
        #expect(error("$536870913\r\n") == .replyLengthOverLimit(type: UInt8(ascii: "$"), limit: 512 << 20))
        #expect(error("*9223372036854775807\r\n") == .replyLengthOverLimit(type: UInt8(ascii: "*"), limit: 1 << 24))
        // At the limits, the parser just waits for the elements.
        #expect(parseReplies(bytes("*16777216\r\n$536870912\r\n")) == ReplyOutcome())

        let small = { RESPReplyParser(maxBulkBytes: 4, maxElements: 3, maxDepth: 2) }
        #expect(values("$4\r\nabcd\r\n*3\r\n:1\r\n:2\r\n:3\r\n%1\r\n:1\r\n:2\r\n*1\r\n*1\r\n:1\r\n", make: small).count == 4)
        #expect(error("$5\r\nabcde\r\n", make: small) == .replyLengthOverLimit(type: UInt8(ascii: "$"), limit: 4))
        #expect(error("*4\r\n", make: small) == .replyLengthOverLimit(type: UInt8(ascii: "*"), limit: 3))
        #expect(error("%2\r\n", make: small) == .replyLengthOverLimit(type: UInt8(ascii: "%"), limit: 3))
        #expect(error("*1\r\n*1\r\n*1\r\n:1\r\n", make: small) == .replyTooDeep(maxDepth: 2))
        #expect(error("*1\r\n*1\r\n*0\r\n", make: small) == .replyTooDeep(maxDepth: 2))
        // Lines are bounded too (at least 64 bytes, so numbers always fit).
        #expect(error("+" + String(repeating: "a", count: 65), make: small) == .replyLineTooLong(limit: 64))
        #expect(values("+" + String(repeating: "a", count: 64) + "\r\n", make: small).count == 1)
    }

    @Test func depthIsBoundedWithoutRecursion() {
        let nested = String(repeating: "*1\r\n", count: 64) + ":1\r\n"
        var expected = RESPValue.integer(1)
        for _ in 0..<64 { expected = .array([expected]) }
        #expect(values(nested) == [expected])
        #expect(error("*1\r\n" + nested) == .replyTooDeep(maxDepth: 64))
        // A deep stream of headers is refused, not recursed into.
        #expect(error(String(repeating: "*1\r\n", count: 100_000)) == .replyTooDeep(maxDepth: 64))
    }

    @Test func errorsPoisonTheParser() throws {
        var parser = RESPReplyParser()
        parser.append(contentsOf: bytes("+OK\r\n@\r\n+OK\r\n"))
        #expect(try parser.next() == .simple("OK"))
        for _ in 0..<3 {
            #expect(throws: RESPProtocolError.invalidReplyType(UInt8(ascii: "@"))) { try parser.next() }
        }
    }

    @Test func splitPositionsDoNotChangeTheOutcome() {
        let alphabet = bytes("+-:$*_,#(!=%~>|0123456789-tf.\r\nab")
        forEachSeed(0..<2_000) { seed, random in
            // Mostly-valid streams: valid replies with a few bytes changed.
            var stream = bytes(random.pick([
                "*2\r\n$1\r\na\r\n:12\r\n", "%1\r\n+k\r\n~2\r\n#t\r\n_\r\n", "|1\r\n+a\r\n:1\r\n,1.5\r\n",
                ">2\r\n=5\r\ntxt:x\r\n(123\r\n", "!3\r\nERR\r\n$-1\r\n*-1\r\n",
            ]))
            for _ in 0..<random.int(0...2) { stream[random.int(0...(stream.count - 1))] = random.pick(alphabet) }
            stream += random.bytes(maxCount: 6, from: alphabet)
            let makers: [() -> RESPReplyParser] = [
                { RESPReplyParser() }, { RESPReplyParser(maxBulkBytes: 3, maxElements: 2, maxDepth: 2) },
            ]
            for maker in makers {
                let whole = parseReplies(stream, make: maker)
                #expect(parseReplies(stream, cuts: Array(0..<stream.count), make: maker) == whole, "seed \(seed)")
                let cut = random.int(0...stream.count)
                #expect(parseReplies(stream, cuts: [cut], make: maker) == whole, "seed \(seed) cut \(cut)")
            }
        }
    }

    @Test func largeRepliesInSmallPiecesCompleteAndCompact() throws {
        var writer = RESPWriter()
        writer.arrayHeader(50_000)
        for index in 0..<50_000 { writer.bulk("value-\(index)") }
        var parser = RESPReplyParser()
        var result: RESPValue?
        var offset = 0
        while offset < writer.bytes.count {
            let end = min(offset + 1000, writer.bytes.count)
            parser.append(contentsOf: writer.bytes[offset..<end])
            #expect(result == nil)
            result = try parser.next()
            // Parsed elements are not kept as bytes.
            #expect(parser.bufferedBytes < 2000)
            offset = end
        }
        guard case .array(let elements)? = result else {
            Issue.record("expected an array")
            return
        }
        #expect(elements.count == 50_000)
        #expect(elements.last == .bulk(bytes("value-49999")))
    }
}
