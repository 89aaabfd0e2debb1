import DecideCore
import Testing

@Suite struct ReplicationMessageTests {
    let codec = ReplicationCodec()

    static func randomMessage(_ gen: inout Generators) -> ReplicationMessage {
        switch gen.int(0...13) {
        case 0: return .delta(gen.delta())
        case 1:
            let level = UInt8(gen.int(0...3))
            let width = 1 << (4 * Int(level))
            return .digest(round: UInt64(gen.int(0...1_000_000)), seq: UInt64(gen.int(0...Int.max)), clock: UInt64(gen.int(0...Int.max)),
                           shape: .init(fanoutBits: 4, depth: 4), level: level,
                           nodes: (0..<gen.int(0...20)).map { _ in .init(index: UInt32(gen.int(0...(width - 1))), hash: UInt64(gen.int(0...Int.max))) })
        case 2: return .digestDone(round: UInt64(gen.int(0...Int.max)), seq: 1, clock: UInt64(gen.int(0...Int.max)), synced: gen.bool())
        case 3: return .keysRequest(round: 9, seq: UInt64(gen.int(0...300)), last: gen.bool(), keys: (0..<gen.int(0...20)).map { _ in
            .init(bucket: UInt32(gen.int(0...65_535)), keyHash: UInt64(gen.int(0...Int.max))) })
        case 4: return .entries(round: 3, seq: 2, last: gen.bool(), batch: (0..<gen.int(0...5)).map { _ in KeyedEntry(key: gen.key(), entry: gen.entry()) })
        case 5: return .gossip((0..<gen.int(0...4)).map { _ in
            .init(nodeID: gen.node(), address: "127.0.0.1:\(gen.int(1...65_535))",
                  status: [.alive, .left, .removed][gen.int(0...2)],
                  incarnation: UInt64(gen.int(0...Int.max)), heartbeat: UInt64(gen.int(0...Int.max)),
                  coverage: UInt64(gen.int(0...Int.max)), membersHash: UInt64(gen.int(0...Int.max))) })
        case 6: return .ping(nonce: UInt64(gen.int(0...Int.max)))
        case 7: return .ack(nonce: UInt64(gen.int(0...Int.max)), physicalMilliseconds: UInt64(gen.int(0...Int.max)))
        case 8: return .summary(round: UInt64(gen.int(0...Int.max)), seq: 5, clock: 7, last: gen.bool(), groups: (0..<gen.int(0...4)).map { _ in
            .init(bucket: UInt32(gen.int(0...65_535)), items: (0..<gen.int(0...4)).map { _ in
                .init(keyHash: UInt64(gen.int(0...Int.max)), timestamp: UInt64(gen.int(0...Int.max)), entryHash: UInt64(gen.int(0...Int.max))) }) })
        case 9: return .streamAck(round: UInt64(gen.int(0...Int.max)), seq: UInt64(gen.int(0...Int.max)))
        case 10: return .refusal(reason: "removed \(gen.int(0...1_000))")
        case 11: return .ackRequest(timestamp: UInt64(gen.int(0...Int.max)), deltas: UInt64(gen.int(0...Int.max)))
        case 12: return .applied(timestamp: UInt64(gen.int(0...Int.max)), covered: UInt64(gen.int(0...Int.max)))
        default: return .leave
        }
    }

    @Test func everyMessageRoundTripsAndEveryTruncationIsRejected() throws {
        try forEachSeed(0..<2_000) { seed, gen in
            let message = Self.randomMessage(&gen)
            let bytes = codec.encode(message)
            let decoded = try codec.decode(bytes)
            #expect(decoded == message, "seed \(seed)")
            for length in 0..<bytes.count {
                #expect(throws: WireDecodeError.self, "seed \(seed) length \(length)") {
                    try codec.decode(Array(bytes.prefix(length)))
                }
            }
        }
    }

    @Test func garbageIsRejectedOrDecodedExactly() {
        forEachSeed(0..<20_000) { seed, gen in
            var bytes = gen.bytes(maxCount: 48)
            if !bytes.isEmpty && gen.bool() { bytes[0] = UInt8(gen.int(1...12)) }
            if let message = try? codec.decode(bytes) {
                #expect(codec.encode(message) == bytes, "seed \(seed)")
            }
        }
    }

    @Test func unknownTypesAndImpossibleDigestsAreRefused() {
        #expect(throws: WireDecodeError.unknownMessageType(0x42)) { try codec.decode([0x42]) }
        // level 1 of a fanout-16 tree has 16 nodes: index 16 does not exist.
        var writer = WireWriter()
        writer.writeUInt8(ReplicationMessage.digestType)
        writer.writeUInt64(1)
        writer.writeVarint(1)
        writer.writeUInt64(0)
        writer.writeUInt8(4); writer.writeUInt8(4); writer.writeUInt8(1)
        writer.writeVarint(1); writer.writeVarint(16); writer.writeUInt64(0)
        #expect(throws: WireDecodeError.self) { try codec.decode(writer.bytes) }
        // a level deeper than the tree
        var deep = WireWriter()
        deep.writeUInt8(ReplicationMessage.digestType)
        deep.writeUInt64(1)
        deep.writeVarint(1)
        deep.writeUInt64(0)
        deep.writeUInt8(4); deep.writeUInt8(2); deep.writeUInt8(3)
        deep.writeVarint(0)
        #expect(throws: WireDecodeError.invalidFlag(field: "digest.level", value: 3)) { try codec.decode(deep.bytes) }
    }
}
