import DecideCore
import Foundation
import Testing
@testable import DecideUV

@Suite("FrameDecoder and HandshakeMessage (pure)")
struct PureDecoderTests {
    @Test("frames split at every position decode the same")
    func splitEverywhere() throws {
        let frames: [[UInt8]] = [[1], [2, 3, 4], Array(repeating: 9, count: 70)]
        let stream = frames.flatMap { WireProtocol.frame($0) }
        for split in 0 ... stream.count {
            var decoder = FrameDecoder(maxFrameBytes: 100)
            let first = try decoder.frames(in: Array(stream[..<split]))
            let second = try decoder.frames(in: Array(stream[split...]))
            #expect(first + second == frames)
            #expect(!decoder.hasPartialFrame)
        }
    }

    @Test("a frame whole in one read is lent in place; one split across reads is gathered")
    func payloadsInPlaceOrGathered() throws {
        let stream = WireProtocol.frame([1, 2, 3]) + WireProtocol.frame([4, 5])
        var decoder = FrameDecoder(maxFrameBytes: 100)
        // Both whole in the first read: their ranges of it, nothing copied.
        try stream.withUnsafeBytes { input in
            var offset = 0
            guard case .inInput(let first)? = try decoder.nextPayload(from: input, offset: &offset) else {
                Issue.record("the first frame was not lent in place"); return
            }
            #expect(Array(UnsafeRawBufferPointer(rebasing: input[first])) == [1, 2, 3])
            guard case .inInput(let second)? = try decoder.nextPayload(from: input, offset: &offset) else {
                Issue.record("the second frame was not lent in place"); return
            }
            #expect(Array(UnsafeRawBufferPointer(rebasing: input[second])) == [4, 5])
            #expect(try decoder.nextPayload(from: input, offset: &offset) == nil && offset == input.count)
        }
        // Cut inside the second frame's payload: the rest arrives in the next read, and the
        // frame is handed over whole from the decoder's buffer.
        let cut = stream.count - 1
        try Array(stream[..<cut]).withUnsafeBytes { input in
            var offset = 0
            guard case .inInput? = try decoder.nextPayload(from: input, offset: &offset) else {
                Issue.record("the first frame was not lent in place"); return
            }
            #expect(try decoder.nextPayload(from: input, offset: &offset) == nil)
        }
        try Array(stream[cut...]).withUnsafeBytes { input in
            var offset = 0
            guard case .gathered(let bytes)? = try decoder.nextPayload(from: input, offset: &offset) else {
                Issue.record("the split frame was not gathered"); return
            }
            #expect(bytes == [4, 5])
        }
        #expect(!decoder.hasPartialFrame)
    }

    @Test("limits are typed errors")
    func limits() {
        var decoder = FrameDecoder(maxFrameBytes: 10)
        #expect(throws: FrameDecodingError.frameTooLarge(lengthBytes: 11, maxFrameBytes: 10)) {
            try decoder.frames(in: [11, 0, 0, 0])
        }
        var other = FrameDecoder(maxFrameBytes: 10)
        #expect(throws: FrameDecodingError.emptyFrame) { try other.frames(in: [0, 0, 0, 0]) }
    }

    @Test("hello, proof and refusal round-trip; damaged ones are typed errors")
    func handshakeMessages() throws {
        let hello = HandshakeMessage.hello(Hello(minVersion: 1, maxVersion: 2, hasSecret: false,
                                                 nonce: Array(0 ..< 32), clusterName: "c", nodeID: "n", listenAddress: "[::1]:1"))
        // With a secret the hello carries no names: they travel sealed in the proof.
        let sealedHello = HandshakeMessage.hello(Hello(minVersion: 2, maxVersion: 2, hasSecret: true,
                                                       nonce: Array(0 ..< 32), clusterName: "", nodeID: "", listenAddress: ""))
        let sealedProof = HandshakeMessage.proof(Array(repeating: 3, count: WireProtocol.proofBytes + WireProtocol.minSealedIdentityBytes))
        for message in [hello, sealedHello, .proof([]), sealedProof, .refusal(Refusal(code: .badProof, reason: "why"))] {
            #expect(try HandshakeMessage.parse(message.encoded()) == message)
        }
        #expect(throws: HandshakeParseError.badProofLength(32)) { try HandshakeMessage.parse([WireProtocol.FrameType.proof.rawValue] + Array(repeating: 1, count: 32)) }
        #expect(throws: HandshakeParseError.trailingBytes(count: 3)) { try HandshakeMessage.parse(sealedHello.encoded() + [1, 65, 0]) }
        let bytes = hello.encoded()
        for cut in 0 ..< bytes.count {
            #expect(throws: HandshakeParseError.self) { try HandshakeMessage.parse(Array(bytes[..<cut])) }
        }
        #expect(throws: HandshakeParseError.trailingBytes(count: 1)) { try HandshakeMessage.parse(bytes + [0]) }
        #expect(throws: HandshakeParseError.notHandshakeType(1)) { try HandshakeMessage.parse([1]) }
        #expect(throws: HandshakeParseError.badProofLength(5)) { try HandshakeMessage.parse([0xF2, 1, 2, 3, 4, 5]) }
        var flags = bytes
        flags[9] = 0x80
        #expect(throws: HandshakeParseError.reservedFlags(0x80)) { try HandshakeMessage.parse(flags) }
    }

    @Test("HOST:PORT parsing")
    func hostPort() {
        #expect(HostPort("127.0.0.1:7401") == HostPort(host: "127.0.0.1", port: 7401))
        #expect(HostPort("[::1]:7401") == HostPort(host: "::1", port: 7401))
        #expect(HostPort("node-a:1") == HostPort(host: "node-a", port: 1))
        for bad in ["", "x", ":1", "::1:80", "[::1]", "[::1]80", "a:99999", "a:-1"] { #expect(HostPort(bad) == nil, "\(bad)") }
    }
}

@Suite("docs/protocol.md")
struct ProtocolDocTests {
    static func document() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
    }

    @Test("the example hello of §8 is what the encoder writes, at the versions this build speaks")
    func exampleHello() {
        let versions = WireProtocol.minSupportedVersion ... WireProtocol.maxSupportedVersion
        #expect(versions == 4 ... 4, "§8's example shows versions 4..4")
        let hello = HandshakeMessage.hello(Hello(minVersion: versions.lowerBound, maxVersion: versions.upperBound, hasSecret: false,
                                                 nonce: Array(0 ..< 32), clusterName: "test", nodeID: "b", listenAddress: ""))
        let expected: [UInt8] = [0x32, 0, 0, 0, 0xF1, 0x44, 0x43, 0x44, 0x45, 4, 0, 4, 0, 0] + Array(0 ..< 32)
            + [4, 0x74, 0x65, 0x73, 0x74, 1, 0x62, 0]
        #expect(WireProtocol.frame(hello.encoded()) == expected)
        #expect(WireProtocol.frame(HandshakeMessage.proof([]).encoded()) == [1, 0, 0, 0, 0xF2])
    }

    @Test("§4.5 names the versions this build speaks")
    func versions() throws {
        let text = try Self.document()
        #expect(text.contains("This build speaks \(WireProtocol.minSupportedVersion)…\(WireProtocol.maxSupportedVersion)."))
    }

    @Test("the example ping of §8 is what the engine's codec writes, plain and sealed")
    func examplePing() throws {
        let text = try Self.document()
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined(separator: " ") }
        let ping = WireProtocol.frame(ReplicationCodec().encode(.ping(nonce: 1)))
        #expect(text.contains("a ping with nonce 1, `\(hex(ping))`"))
        // Sealed: that frame is the plaintext of one record, then the tag.
        let record = ping.count + LinkSealer.overheadBytes
        #expect(text.contains("one record of \(record) bytes of payload (`\(hex(Array(WireProtocol.frame([UInt8](repeating: 0, count: record)).prefix(4))))`"))
    }

    @Test("§3's table of replication message types lists exactly the types the codec decodes")
    func messageTypes() throws {
        let codec = ReplicationCodec()
        let types: [Int] = Array(1 ..< Int(WireProtocol.firstTransportType))
        let decoded = types.filter { (type: Int) -> Bool in
            do {
                _ = try codec.decode([UInt8(truncatingIfNeeded: type)] + [UInt8](repeating: 0, count: 64))
                return true
            } catch {
                if let wireError = error as? WireDecodeError, case .unknownMessageType = wireError { return false }
                return true   // known, only not these bytes
            }
        }
        let lines = try Self.document().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = try #require(lines.firstIndex(of: "| type | message |"))
        let documented = lines[(header + 2)...].prefix { $0.hasPrefix("| ") }.compactMap { line in
            Int(line.dropFirst(2).prefix { $0 != " " })
        }
        #expect(documented == decoded)
    }
}
