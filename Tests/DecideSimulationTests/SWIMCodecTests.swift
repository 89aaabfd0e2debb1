@testable import DecideCore
import Testing

@Suite struct SWIMCodecTests {
    static let codec = SWIMCodec()

    static let samples: [SWIMEnvelope] = {
        let updates = [
            SWIMUpdate(member: "a", address: "10.0.0.1:7946", incarnation: 7, status: .alive),
            SWIMUpdate(member: "b", address: "[::1]:7946", incarnation: UInt64.max, status: .suspect, origin: "c"),
            SWIMUpdate(member: "ü", address: "", incarnation: 0, status: .dead),
            SWIMUpdate(member: "d", address: "h:1", incarnation: 1 << 40, status: .left),
        ]
        let messages: [SWIMMessage] = [
            .ping(sequence: 1, target: ""), .ping(sequence: UInt64.max, target: "b"),
            .pingRequest(sequence: 9, target: "b", targetAddress: "[::1]:7946"),
            .ack(sequence: 3), .nack(sequence: 0), .syncRequest(after: ""), .syncRequest(after: "m42"),
            .syncReply(after: "", members: updates, complete: true), .syncReply(after: "z", members: [], complete: false),
        ]
        return messages.flatMap { message in
            [SWIMEnvelope(from: "n1", fromAddress: "127.0.0.1:1", fromIncarnation: 1_700_000_000_000, message: message),
             SWIMEnvelope(from: "n2", fromAddress: "x", fromIncarnation: 0, message: message, updates: updates)]
        }
    }()

    @Test func everyMessageRoundTripsAtItsComputedSize() throws {
        for envelope in Self.samples {
            let bytes = Self.codec.encode(envelope)
            #expect(try Self.codec.decode(bytes) == envelope)
            let expected = SWIMCodec.encodedBytes(ofEmpty: envelope) - 1 + WireCursor.varintBytes(UInt64(envelope.updates.count))
                + envelope.updates.reduce(0) { $0 + SWIMCodec.encodedBytes(of: $1) }
            #expect(bytes.count == expected)
        }
    }

    @Test func everyTruncationAndTrailingByteIsATypedError() {
        for envelope in Self.samples {
            let bytes = Self.codec.encode(envelope)
            for length in 0..<bytes.count {
                #expect(throws: WireDecodeError.self) { try Self.codec.decode(Array(bytes[..<length])) }
            }
            #expect(throws: WireDecodeError.trailingBytes(count: 1)) { try Self.codec.decode(bytes + [0]) }
        }
    }

    @Test func badTypesStatusesAndOverLimitLengthsAreRefused() throws {
        var bytes = Self.codec.encode(Self.samples[1])
        bytes[1] = 7
        #expect(throws: WireDecodeError.unknownMessageType(7)) { try Self.codec.decode(bytes) }
        bytes[0] = 2
        #expect(throws: WireDecodeError.unsupportedFormat(2)) { try Self.codec.decode(bytes) }
        let long = SWIMEnvelope(from: String(repeating: "x", count: 256), fromAddress: "a", fromIncarnation: 1, message: .ack(sequence: 1))
        #expect(throws: WireDecodeError.tooLarge(field: "from", length: 256, limit: 255)) { try Self.codec.decode(Self.codec.encode(long)) }
        let tight = SWIMCodec(maxUpdates: 3)
        #expect(throws: WireDecodeError.tooLarge(field: "updates", length: 4, limit: 3)) { try tight.decode(Self.codec.encode(Self.samples[1])) }
        // An update whose status byte is not one of the four.
        let one = SWIMEnvelope(from: "n", fromAddress: "a", fromIncarnation: 1, message: .ack(sequence: 1),
                               updates: [SWIMUpdate(member: "a", address: "b", incarnation: 1, status: .alive)])
        var encoded = Self.codec.encode(one)
        let statusAt = encoded.count - 1 - 8 - 2 - 2
        #expect(encoded[statusAt] == 0)
        encoded[statusAt] = 4
        #expect(throws: WireDecodeError.invalidFlag(field: "status", value: 4)) { try Self.codec.decode(encoded) }
    }

    /// Seeded random corruption of valid messages: every outcome is a message or a typed
    /// error, never a trap; a decoded message encodes back to the same bytes.
    @Test func corruptedMessagesDecodeOrThrowButNeverTrap() throws {
        var random = SplitMix64(seed: 59_060)
        var decoded = 0
        for _ in 0..<20_000 {
            var bytes = Self.codec.encode(Self.samples[Int(random.next() % UInt64(Self.samples.count))])
            for _ in 0...(random.next() % 4) {
                bytes[Int(random.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: random.next())
            }
            if let envelope = try? Self.codec.decode(bytes) {
                decoded += 1
                #expect(Self.codec.encode(envelope) == bytes)
            }
        }
        #expect(decoded > 0)
    }
}
