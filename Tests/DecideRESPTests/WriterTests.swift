import DecideRESP
import Testing

@Suite struct WriterTests {
    func written(_ version: Int, _ write: (inout RESPWriter) -> Void) -> String {
        var writer = RESPWriter(protocolVersion: version)
        write(&writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Writes with each protocol version and expects the given bytes.
    func expectBytes(resp2: String, resp3: String, _ write: (inout RESPWriter) -> Void,
                     sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(written(2, write) == resp2, sourceLocation: sourceLocation)
        #expect(written(3, write) == resp3, sourceLocation: sourceLocation)
    }

    /// The contiguous `bulk` forms write exactly what the generic one writes, after whatever the
    /// writer already holds (a slice with a non-zero start, empty values, long ones).
    @Test func contiguousBulkFormsMatchTheGenericOne() {
        forEachSeed(0 ..< 50) { seed, random in
            let prefix = random.bytes(maxCount: 20)
            let value = random.bytes(maxCount: random.int(0 ... 3) == 0 ? 5_000 : 80)
            let slice = value[random.int(0 ... value.count)...]
            func writing(_ write: (inout RESPWriter) -> Void) -> [UInt8] {
                var writer = RESPWriter()
                writer.bytes = prefix
                write(&writer)
                return writer.bytes
            }
            let generic = writing { $0.bulk(AnyCollection(slice)) }
            #expect(generic == prefix + Array("$\(slice.count)\r\n".utf8) + Array(slice) + [13, 10], "seed \(seed)")
            #expect(writing { $0.bulk(slice) } == generic, "seed \(seed)")
            #expect(writing { $0.bulk(Array(slice)) } == generic, "seed \(seed)")
            #expect(writing { w in slice.withUnsafeBytes { w.bulk($0) } } == generic, "seed \(seed)")
        }
    }

    @Test func everyMethodInBothVersions() {
        expectBytes(resp2: "+OK\r\n", resp3: "+OK\r\n") { $0.simpleString("OK") }
        expectBytes(resp2: "+a  b\r\n", resp3: "+a  b\r\n") { $0.simpleString("a\r\nb") }
        expectBytes(resp2: "-ERR x\r\n", resp3: "-ERR x\r\n") { $0.error("ERR x") }
        expectBytes(resp2: "-WRONGPASS a  b c\r\n", resp3: "-WRONGPASS a  b c\r\n") { $0.error("WRONGPASS a\r\nb\nc") }
        expectBytes(resp2: ":42\r\n", resp3: ":42\r\n") { $0.integer(42) }
        expectBytes(resp2: "$3\r\na\r\n\r\n", resp3: "$3\r\na\r\n\r\n") { $0.bulk([97, 13, 10]) }
        expectBytes(resp2: "$0\r\n\r\n", resp3: "$0\r\n\r\n") { $0.bulk([UInt8]()) }
        expectBytes(resp2: "$5\r\nnaïv\r\n", resp3: "$5\r\nnaïv\r\n") { $0.bulk("naïv") }
        expectBytes(resp2: "$2\r\nbc\r\n", resp3: "$2\r\nbc\r\n") { $0.bulk([97, 98, 99].dropFirst()) }
        expectBytes(resp2: "$2\r\nbc\r\n", resp3: "$2\r\nbc\r\n") { w in [UInt8]([97, 98, 99]).withUnsafeBytes { w.bulk(UnsafeRawBufferPointer(rebasing: $0[1...])) } }
        expectBytes(resp2: "$2\r\nbc\r\n", resp3: "$2\r\nbc\r\n") { $0.bulk(AnyCollection<UInt8>([98, 99])) }
        expectBytes(resp2: "$-1\r\n", resp3: "_\r\n") { $0.null() }
        expectBytes(resp2: "*-1\r\n", resp3: "_\r\n") { $0.nullArray() }
        expectBytes(resp2: "*3\r\n", resp3: "*3\r\n") { $0.arrayHeader(3) }
        expectBytes(resp2: "*0\r\n", resp3: "*0\r\n") { $0.arrayHeader(0) }
        expectBytes(resp2: "*4\r\n", resp3: "%2\r\n") { $0.mapHeader(2) }
        expectBytes(resp2: "*5\r\n", resp3: "~5\r\n") { $0.setHeader(5) }
        expectBytes(resp2: "*3\r\n", resp3: ">3\r\n") { $0.pushHeader(3) }
        expectBytes(resp2: ":1\r\n", resp3: "#t\r\n") { $0.boolean(true) }
        expectBytes(resp2: ":0\r\n", resp3: "#f\r\n") { $0.boolean(false) }
        expectBytes(resp2: "$3\r\n1.5\r\n", resp3: ",1.5\r\n") { $0.double(1.5) }
        expectBytes(resp2: "$3\r\ninf\r\n", resp3: ",inf\r\n") { $0.double(.infinity) }
        expectBytes(resp2: "$4\r\n-inf\r\n", resp3: ",-inf\r\n") { $0.double(-.infinity) }
        expectBytes(resp2: "$3\r\nnan\r\n", resp3: ",nan\r\n") { $0.double(.nan) }
        expectBytes(resp2: "$11\r\nSome string\r\n", resp3: "=15\r\ntxt:Some string\r\n") { $0.verbatim("Some string") }
        expectBytes(resp2: "$2\r\n# \r\n", resp3: "=6\r\nmkd:# \r\n") { $0.verbatim("# ", format: "mkd") }
        expectBytes(resp2: "$1\r\nx\r\n", resp3: "=5\r\nab :x\r\n") { $0.verbatim("x", format: "ab") }
    }

    @Test func writesAppendAndRemoveAllEmpties() {
        var writer = RESPWriter()
        writer.arrayHeader(2)
        writer.bulk("GET")
        writer.integer(-1)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "*2\r\n$3\r\nGET\r\n:-1\r\n")
        let capacity = writer.bytes.capacity
        writer.removeAll()
        #expect(writer.bytes.isEmpty)
        #expect(writer.bytes.capacity == capacity)
        writer.protocolVersion = 3
        writer.null()
        #expect(writer.bytes == bytes("_\r\n"))
    }

    @Test func integersAreExact() {
        let cases: [(Int, String)] = [
            (0, "0"), (1, "1"), (-1, "-1"), (9, "9"), (10, "10"), (-10, "-10"), (99, "99"), (100, "100"),
            (1_234_567_890, "1234567890"), (Int.max, "9223372036854775807"), (Int.min, "-9223372036854775808"),
            (Int.min + 1, "-9223372036854775807"),
        ]
        for (value, text) in cases {
            #expect(written(2, { $0.integer(value) }) == ":\(text)\r\n")
            #expect(written(2, { $0.arrayHeader(value) }) == "*\(text)\r\n")
        }
        forEachSeed(0..<2_000) { seed, random in
            let value = Int(bitPattern: UInt(random.next())) >> random.int(0...63)
            #expect(written(3, { $0.integer(value) }) == ":\(value)\r\n", "seed \(seed)")
        }
    }

    @Test func doublesAreSpelledAsRedisSpellsThem() {
        let cases: [(Double, String)] = [
            (0, "0"), (-0.0, "-0"), (3, "3"), (-3, "-3"), (1.5, "1.5"), (-2.25, "-2.25"), (0.1, "0.1"),
            (0.00012, "0.00012"), (1e-5, "0.00001"), (1e-7, "1e-7"), (1.2345e-7, "1.2345e-7"), (0.0001234, "1.234e-4"),
            (1e20, "1e+20"), (1.5e300, "1.5e+300"), (5e-324, "5e-324"), (-1e-300, "-1e-300"),
            (4_611_686_018_427_387_904, "4611686018427387904"),  // 2^62: still printed as an integer
            (9_223_372_036_854_775_808, "9223372036854776000"),  // 2^63: shortest digits, plain
            (1.2345678901234568e+20, "123456789012345680000"), (1.7976931348623157e308, "1.7976931348623157e+308"),
            (123456.789, "123456.789"),
        ]
        for (value, text) in cases {
            #expect(written(3, { $0.double(value) }) == ",\(text)\r\n", "\(value)")
        }
        // Whatever the spelling, it reads back as the same double.
        forEachSeed(0..<5_000) { seed, random in
            let value = Double(bitPattern: random.next())
            guard value.isFinite else { return }
            let text = written(3, { $0.double(value) }).dropFirst().dropLast()  // "\r\n" is one Character
            #expect(Double(String(text)) == value, "seed \(seed) \(value) \(text)")
        }
    }

    // MARK: - Round trip through the reply parser

    /// A random reply tree of at most `depth` levels, made only of values the writer can write.
    func randomValue(_ random: inout SeededRandom, depth: Int) -> RESPValue {
        let text = bytes("ab é\r\n\u{0}")
        switch random.int(0...(depth > 0 ? 13 : 9)) {
        case 0: return .simple(String(decoding: random.bytes(maxCount: 5, from: bytes("ab OK-:")), as: UTF8.self))
        case 1: return .error("ERR " + String(decoding: random.bytes(maxCount: 5, from: bytes("xyz ")), as: UTF8.self))
        case 2: return .integer(Int64(Int(bitPattern: UInt(random.next())) >> random.int(0...63)))
        case 3: return .bulk(random.bytes(maxCount: 8))
        case 4: return .null
        case 5:
            let value = random.bool() ? Double(random.int(-1000...1000)) / 8 : Double(bitPattern: random.next())
            return .double(value.isNaN ? 0.5 : value)
        case 6: return .boolean(random.bool())
        case 7:
            let body = String(decoding: random.bytes(maxCount: 6, from: text), as: UTF8.self)
            return .verbatim(format: random.pick(["txt", "mkd"]), text: Array(body.utf8))
        case 8: return .double(random.pick([.infinity, -.infinity, 0, -0.0, 1e300, 1e-300]))
        case 9: return .bulk(Array(String(decoding: random.bytes(maxCount: 8, from: text), as: UTF8.self).utf8))
        default:
            let elements = (0..<random.int(0...4)).map { _ in randomValue(&random, depth: depth - 1) }
            switch random.int(0...3) {
            case 0: return .array(elements)
            case 1: return .map(elements + (elements.count % 2 == 1 ? [.null] : []))
            case 2: return .set(elements)
            default: return .push(elements)
            }
        }
    }

    func write(_ value: RESPValue, _ writer: inout RESPWriter) {
        switch value {
        case .simple(let text): writer.simpleString(text)
        case .error(let text): writer.error(text)
        case .integer(let value): writer.integer(Int(value))
        case .bulk(let bytes): writer.bulk(bytes)
        case .null: writer.null()
        case .double(let value): writer.double(value)
        case .boolean(let value): writer.boolean(value)
        case .verbatim(let format, let text): writer.verbatim(String(decoding: text, as: UTF8.self), format: format)
        case .bigNumber: Issue.record("the writer has no big numbers")
        case .array(let elements):
            writer.arrayHeader(elements.count)
            for element in elements { write(element, &writer) }
        case .map(let elements):
            writer.mapHeader(elements.count / 2)
            for element in elements { write(element, &writer) }
        case .set(let elements):
            writer.setHeader(elements.count)
            for element in elements { write(element, &writer) }
        case .push(let elements):
            writer.pushHeader(elements.count)
            for element in elements { write(element, &writer) }
        }
    }

    /// What a RESP2 client reads for `value`: RESP3 types in their RESP2 forms.
    func resp2Image(_ value: RESPValue) -> RESPValue {
        switch value {
        case .array(let elements), .map(let elements), .set(let elements), .push(let elements):
            return .array(elements.map(resp2Image))
        case .boolean(let value): return .integer(value ? 1 : 0)
        case .double(let value):
            var writer = RESPWriter(protocolVersion: 3)
            writer.double(value)
            return .bulk(Array(writer.bytes.dropFirst().dropLast(2)))
        case .verbatim(_, let text): return .bulk(text)
        default: return value
        }
    }

    @Test func writerToReplyParserRoundTrip() {
        forEachSeed(0..<1_000) { seed, random in
            let values = (0..<random.int(1...4)).map { _ in randomValue(&random, depth: 4) }
            for version in [2, 3] {
                var writer = RESPWriter(protocolVersion: version)
                for value in values { write(value, &writer) }
                let expected = version == 3 ? values : values.map(resp2Image)
                let whole = parseReplies(writer.bytes)
                #expect(whole == ReplyOutcome(values: expected), "seed \(seed) RESP\(version)")
                let cut = random.int(0...writer.bytes.count)
                #expect(parseReplies(writer.bytes, cuts: [cut]) == whole, "seed \(seed) cut \(cut)")
                if seed < 100 {
                    #expect(parseReplies(writer.bytes, cuts: Array(0..<writer.bytes.count)) == whole, "seed \(seed)")
                }
            }
        }
    }
}
