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
        func varint(_ bytes: [UInt8]) throws(WireDecodeError) -> UInt64 {
            try withWireBytes(bytes) { raw throws(WireDecodeError) in
                var reader = WireReader(raw)
                return try reader.readVarint("n")
            }
        }
        #expect(throws: WireDecodeError.malformedVarint(field: "n")) { try varint([UInt8](repeating: 0xFF, count: 11)) }
        #expect(throws: WireDecodeError.malformedVarint(field: "n")) { try varint([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]) }
        #expect(throws: WireDecodeError.malformedVarint(field: "n")) { try varint([0x81, 0x00]) }
        let value = try? varint([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        #expect(value == .max)
    }

    /// The reader's one-byte fast path and its general path agree with the format's definition
    /// (little-endian groups of seven bits, minimal, at most 64 bits) on every input of up to
    /// two bytes, on random longer ones, and at every offset and truncation: the same value,
    /// the same position after it, or the same error.
    @Test func varintsReadAsTheFormatDefinesThemAtEveryOffset() throws {
        enum Expected: Equatable { case value(UInt64, end: Int), error(WireDecodeError) }
        func reference(_ bytes: [UInt8], from start: Int) -> Expected {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            var position = start
            while true {
                guard position < bytes.count else { return .error(.truncated(field: "n", needed: 1)) }
                let byte = bytes[position]
                position += 1
                if shift == 63 && byte > 1 { return .error(.malformedVarint(field: "n")) }
                result |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 {
                    return byte == 0 && shift > 0 ? .error(.malformedVarint(field: "n")) : .value(result, end: position)
                }
                shift += 7
                if shift > 63 { return .error(.malformedVarint(field: "n")) }
            }
        }
        func read(_ bytes: [UInt8], from start: Int) -> Expected {
            bytes.withUnsafeBytes { raw in
                var reader = WireReader(raw, position: start)
                do throws(WireDecodeError) {
                    let value = try reader.readVarint("n")
                    return .value(value, end: reader.position)
                } catch {
                    return .error(error)
                }
            }
        }
        var inputs: [[UInt8]] = [[]]
        for first in 0...255 {
            inputs.append([UInt8(first)])
            for second in 0...255 { inputs.append([UInt8(first), UInt8(second)]) }
        }
        var gen = SplitMix64(seed: 77)
        for _ in 0..<5_000 {
            let count = Int(gen.next() % 13)
            inputs.append((0..<count).map { _ in
                // Mostly continuation bytes, so long and overlong encodings are common.
                gen.next() % 4 == 0 ? UInt8(truncatingIfNeeded: gen.next() & 0x7F) : UInt8(truncatingIfNeeded: gen.next() | 0x80)
            })
        }
        var checked = 0
        for input in inputs {
            for start in 0...input.count {
                let expected = reference(input, from: start)
                let got = read(input, from: start)
                #expect(got == expected, "\(input) from \(start)")
                if got != expected { return }
                checked += 1
            }
        }
        #expect(checked > 200_000)
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

    /// A delta written field by field with `WireWriter`, as the format says (the oracle for the
    /// exact-size encoder).
    private func fieldByField(_ delta: Delta) -> [UInt8] {
        var writer = WireWriter()
        writer.writeUInt8(WireCodec.format)
        writer.writeUInt8(WireCodec.deltaKind)
        writer.writeUInt64(delta.version.timestamp.rawValue)
        writer.writeString(delta.version.node)
        writer.writeVarint(UInt64(delta.writes.count))
        for write in delta.writes {
            writer.writeString(write.key.name)
            writer.writeBytes(write.key.element)
            guard let value = write.value else {
                writer.writeUInt8(0)
                continue
            }
            writer.writeUInt8(1 | (write.expiresAtMilliseconds == nil ? 0 : 2) | (write.ownedByWriter ? 4 : 0))
            writer.writeBytes(value)
            if let expiresAt = write.expiresAtMilliseconds { writer.writeUInt64(expiresAt) }
        }
        return writer.bytes
    }

    @Test func theExactSizeEncoderWritesWhatTheFormatSays() throws {
        let messages = ReplicationCodec()
        try forEachSeed(0..<600) { seed, gen in
            // Lengths on both sides of every varint width up to three bytes, large expiry
            // instants and timestamps, names of every length up to the limit.
            let sizes = [0, 1, 15, 16, 127, 128, 129, 16_383, 16_384, 70_000]
            let writes = (0..<gen.int(0...4)).map { _ in
                Delta.Write(key: StateKey(name: String(repeating: "n", count: gen.int(0...300)),
                                          element: [UInt8](repeating: 7, count: sizes[gen.int(0...8)])),
                            value: gen.int(0...4) == 0 ? nil : [UInt8](repeating: 9, count: sizes[gen.int(0...9)]),
                            expiresAtMilliseconds: gen.bool() ? nil : UInt64(gen.int(1...Int(HLCTimestamp.maxPhysicalMilliseconds))),
                            ownedByWriter: gen.bool())
            }
            let delta = Delta(version: Version(timestamp: HLCTimestamp(rawValue: UInt64.random(in: 0...UInt64.max, using: &gen.random)),
                                               node: String(repeating: "ü", count: gen.int(0...100))),
                              writes: writes)
            let bytes = codec.encode(delta)
            #expect(bytes == fieldByField(delta), "seed \(seed)")
            #expect(messages.encode(.delta(delta)) == [ReplicationMessage.deltaType] + bytes, "seed \(seed)")
            let decoded = try codec.decodeDelta(bytes)
            #expect(decoded == delta, "seed \(seed)")
        }
    }

    @Test func varintWidthsAreCountedExactly() {
        var values: [UInt64] = [0, .max]
        for bits in 1...63 { values += [(1 << UInt64(bits)) - 1, 1 << UInt64(bits), (1 << UInt64(bits)) + 1] }
        var random = SplitMix64(seed: 5)
        for _ in 0..<1_000 { values.append(UInt64.random(in: 0...UInt64.max, using: &random) >> UInt64.random(in: 0...63, using: &random)) }
        for value in values {
            var writer = WireWriter()
            writer.writeVarint(value)
            #expect(WireCursor.varintBytes(value) == writer.bytes.count, "\(value)")
            let written = [UInt8](unsafeUninitializedCapacity: writer.bytes.count) { buffer, count in
                var cursor = WireCursor(UnsafeMutableRawBufferPointer(buffer))
                cursor.writeVarint(value)
                count = buffer.count - cursor.remaining
            }
            #expect(written == writer.bytes, "\(value)")
        }
    }

    @Test func recentStringsAreReusedOnlyForTheSameBytes() throws {
        // The next string is read as `reusing` says only when its bytes are the known one's.
        func read(_ text: [UInt8], knowing known: String?, limit: Int = 64) throws(WireDecodeError) -> (text: String, reused: Bool) {
            var writer = WireWriter()
            writer.writeBytes(text)
            writer.writeUInt8(0xEE)
            return try withWireBytes(writer.bytes) { raw throws(WireDecodeError) in
                var reader = WireReader(raw)
                let answer = try reader.readString("s", limit: limit, reusing: known)
                #expect(try reader.readUInt8("after") == 0xEE)
                return answer
            }
        }
        #expect(try read(Array("flags".utf8), knowing: "flags") == ("flags", true))
        #expect(try read(Array("flagz".utf8), knowing: "flags") == ("flagz", false))
        #expect(try read(Array("flag".utf8), knowing: "flags") == ("flag", false))
        #expect(try read(Array("flags!".utf8), knowing: "flags") == ("flags!", false))
        #expect(try read(Array("node-ü".utf8), knowing: "node-ü") == ("node-ü", true))
        #expect(try read([], knowing: "") == ("", true))
        #expect(try read(Array("a much longer name than sixteen bytes".utf8), knowing: "a much longer name than sixteen bytes").reused)
        #expect(throws: WireDecodeError.invalidUTF8(field: "s")) { try read([0xC3, 0x28], knowing: "ab") }
        #expect(throws: WireDecodeError.tooLarge(field: "s", length: 5, limit: 4)) { try read(Array("flags".utf8), knowing: "flags", limit: 4) }
        #expect(throws: WireDecodeError.truncated(field: "s", needed: 3)) {
            try withWireBytes([5, UInt8(ascii: "f"), UInt8(ascii: "l")]) { raw throws(WireDecodeError) in
                var cut = WireReader(raw)
                return try cut.readString("s", limit: 64, reusing: "flags")
            }
        }

        // Node ids and names read from bytes (the held-delta path) come back as those bytes, with
        // their own hashes, whatever was read or remembered before: short ones held in place and
        // long ones, equal lengths, shared prefixes, the empty name.
        var fromBytes = RecentWireStrings()
        var random = SplitMix64(seed: 31)
        let pieces = ["a", "b", "node-1", "node-2", "é", "a-rather-long-node-identifier-", ""]
        for round in 0..<3_000 {
            let text = (0..<Int(random.next() % 4)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
            let utf8 = Array(text.utf8)
            let stamp = HLCTimestamp(rawValue: UInt64(round))
            switch random.next() % 3 {
            case 0:
                let version = utf8.withUnsafeBytes { fromBytes.version(timestamp: stamp, node: $0) }
                #expect(version.node == text && version.nodeHash == Version(timestamp: stamp, node: text).nodeHash, "\(round): \(text)")
            case 1:
                let name = utf8.withUnsafeBytes { fromBytes.name(utf8: $0) }
                #expect(name.text == text && name.hash.value == StateKey.nameHash(text).value, "\(round): \(text)")
            default:
                // The decoder's path remembers what it read (`sameNode` only when it was the recent one).
                fromBytes.remember(Version(timestamp: stamp, node: text), sameNode: fromBytes.version?.node == text)
                fromBytes.remember(name: text, hash: StateKey.nameHash(text), sameName: fromBytes.name?.text == text)
            }
        }

        // A stream of deltas decoded with one `RecentWireStrings`: the same deltas, versions and
        // key hashes as decoded alone, whatever came before (a failed decode included).
        let messages = ReplicationCodec()
        var recent = RecentWireStrings()
        forEachSeed(0..<2_000) { seed, gen in
            let delta = gen.delta()
            var frame = messages.encode(.delta(delta))
            if gen.int(0...9) == 0 { frame.removeLast(gen.int(1...frame.count - 1)) }
            let alone = Result { () throws(WireDecodeError) in try messages.decode(frame) }
            let streamed = Result { () throws(WireDecodeError) in try messages.decode(frame, recent: &recent) }
            switch (alone, streamed) {
            case (.success(.delta(let one)), .success(.delta(let other))):
                #expect(one == other && one == delta, "seed \(seed)")
                #expect(one.version.nodeHash == other.version.nodeHash, "seed \(seed)")
                #expect(one.writes.map(\.key.stableHash) == other.writes.map(\.key.stableHash), "seed \(seed)")
            case (.failure(let one), .failure(let other)):
                #expect(one == other, "seed \(seed)")
            default:
                Issue.record("seed \(seed): alone \(alone), streamed \(streamed)")
            }
        }
    }
}
