import DecideCore
import Testing

@Suite struct CodecTests {
    let codec = WireCodec()

    @Test func deltasAndEntryBatchesRoundTrip() throws {
        try forEachSeed(0..<1_000) { seed, gen in
            let delta = gen.delta()
            let decodedDelta = try codec.decodeDelta(codec.encode(delta))
            #expect(decodedDelta == delta, "seed \(seed)")
            let entries = (0..<gen.int(0...6)).map { _ in KeyedEntry(key: gen.key(), entry: gen.entry()) }
            let decodedEntries = try codec.decodeEntries(codec.encode(entries))
            #expect(decodedEntries == entries, "seed \(seed)")
        }
    }

    @Test func everyTruncationOfAValidEncodingIsRejected() {
        forEachSeed(0..<200) { seed, gen in
            let encodedDelta = codec.encode(gen.delta())
            for length in 0..<encodedDelta.count {
                #expect(throws: WireDecodeError.self, "seed \(seed) length \(length)") {
                    try codec.decodeDelta(Array(encodedDelta.prefix(length)))
                }
            }
            let encodedEntries = codec.encode([KeyedEntry(key: gen.key(), entry: gen.entry())])
            for length in 0..<encodedEntries.count {
                #expect(throws: WireDecodeError.self, "seed \(seed) length \(length)") {
                    try codec.decodeEntries(Array(encodedEntries.prefix(length)))
                }
            }
        }
    }

    @Test func garbageNeverCrashesAndNeverDecodesPartially() {
        forEachSeed(0..<20_000) { seed, gen in
            var bytes = gen.bytes(maxCount: 64)
            if gen.bool(), bytes.count >= 2 { bytes[0] = WireCodec.format; bytes[1] = WireCodec.deltaKind }
            if let delta = try? codec.decodeDelta(bytes) {
                // Whatever decodes must be exactly what the bytes say.
                #expect(codec.encode(delta) == bytes, "seed \(seed)")
            }
            if let entries = try? codec.decodeEntries(bytes) {
                #expect(codec.encode(entries) == bytes, "seed \(seed)")
            }
        }
    }

    @Test func trailingBytesFormatAndKindAreChecked() {
        let encoded = codec.encode(Delta(version: Version(timestamp: HLCTimestamp(rawValue: 1), node: "a"), writes: []))
        #expect(throws: WireDecodeError.trailingBytes(count: 1)) { try codec.decodeDelta(encoded + [0]) }
        var otherFormat = encoded
        otherFormat[0] = 9
        #expect(throws: WireDecodeError.unsupportedFormat(9)) { try codec.decodeDelta(otherFormat) }
        #expect(throws: WireDecodeError.unexpectedKind(expected: WireCodec.entryBatchKind, found: WireCodec.deltaKind)) {
            try codec.decodeEntries(encoded)
        }
    }

    @Test func oversizedLengthsAreRefusedBeforeAllocating() {
        var limits = WireCodec.Limits()
        limits.maxValueBytes = 4
        let small = WireCodec(limits: limits)
        let delta = Delta(version: Version(timestamp: HLCTimestamp(rawValue: 1), node: "a"),
                          writes: [Delta.Write(key: StateKey(name: "k"), value: [1, 2, 3, 4, 5])])
        #expect(throws: WireDecodeError.tooLarge(field: "value.bytes", length: 5, limit: 4)) {
            try small.decodeDelta(codec.encode(delta))
        }
        // A count of 2^60 entries in a few bytes: refused, not reserved.
        var writer = WireWriter()
        writer.writeUInt8(WireCodec.format)
        writer.writeUInt8(WireCodec.entryBatchKind)
        writer.writeVarint(1 << 60)
        #expect(throws: WireDecodeError.self) { try codec.decodeEntries(writer.bytes) }
    }

    @Test func malformedVarintsAreRejected() {
        var reader = WireReader([UInt8](repeating: 0xFF, count: 11))
        #expect(throws: WireDecodeError.malformedVarint(field: "n")) { try reader.readVarint("n") }
        var overflow = WireReader([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02])
        #expect(throws: WireDecodeError.malformedVarint(field: "n")) { try overflow.readVarint("n") }
        var overlong = WireReader([0x81, 0x00])
        #expect(throws: WireDecodeError.malformedVarint(field: "n")) { try overlong.readVarint("n") }
        var maximum = WireReader([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        let value = try? maximum.readVarint("n")
        #expect(value == .max)
    }

    @Test func invalidUTF8AndFlagsAreRejected() {
        var writer = WireWriter()
        writer.writeUInt8(WireCodec.format)
        writer.writeUInt8(WireCodec.deltaKind)
        writer.writeUInt64(1)
        writer.writeBytes([0xC3, 0x28])
        writer.writeVarint(0)
        #expect(throws: WireDecodeError.invalidUTF8(field: "version.node")) { try codec.decodeDelta(writer.bytes) }
        let encoded = codec.encode(Delta(version: Version(timestamp: HLCTimestamp(rawValue: 1), node: "a"),
                                         writes: [Delta.Write(key: StateKey(name: "k"), value: nil)]))
        var badFlag = encoded
        badFlag[badFlag.count - 1] = 2
        #expect(throws: WireDecodeError.invalidFlag(field: "value.present", value: 2)) { try codec.decodeDelta(badFlag) }
    }
}
