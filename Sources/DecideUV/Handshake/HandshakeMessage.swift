// Pure: no libuv, no Crypto, no Foundation. Compiled into the fuzz target as well.

/// Why a reason for refusing a link, as carried in a refusal frame.
package enum RefusalCode: UInt8, Sendable, CustomStringConvertible {
    case malformed = 1
    case unsupportedVersion = 2
    case clusterMismatch = 3
    case secretRequired = 4
    case secretNotConfigured = 5
    case badProof = 6
    case handshakeTimeout = 7
    case protocolViolation = 8
    case tooManyConnections = 9
    /// A code this build does not know (a newer peer); the reason text still says why.
    case other = 255

    package var description: String {
        switch self {
        case .malformed: return "malformed"
        case .unsupportedVersion: return "unsupported version"
        case .clusterMismatch: return "cluster mismatch"
        case .secretRequired: return "secret required"
        case .secretNotConfigured: return "secret not configured"
        case .badProof: return "bad proof"
        case .handshakeTimeout: return "handshake timeout"
        case .protocolViolation: return "protocol violation"
        case .tooManyConnections: return "too many connections"
        case .other: return "other"
        }
    }
}

/// The first frame each side sends.
package struct Hello: Equatable, Sendable {
    /// Lowest and highest protocol versions the sender speaks (`min <= max`).
    package var minVersion: UInt16
    package var maxVersion: UInt16
    /// The sender holds a cluster secret and will send (and demand) an HMAC proof.
    package var hasSecret: Bool
    /// 32 fresh random bytes.
    package var nonce: [UInt8]
    package var clusterName: String
    package var nodeID: String
    /// `HOST:PORT` the sender listens on, or "".
    package var listenAddress: String

    package init(minVersion: UInt16, maxVersion: UInt16, hasSecret: Bool, nonce: [UInt8],
                 clusterName: String, nodeID: String, listenAddress: String) {
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.hasSecret = hasSecret
        self.nonce = nonce
        self.clusterName = clusterName
        self.nodeID = nodeID
        self.listenAddress = listenAddress
    }
}

/// A refusal: a code and a human-readable reason (at most 255 UTF-8 bytes).
package struct Refusal: Equatable, Sendable {
    package var code: RefusalCode
    package var reason: String
    package init(code: RefusalCode, reason: String) {
        self.code = code
        self.reason = reason
    }
}

/// One transport frame of the handshake phase.
package enum HandshakeMessage: Equatable, Sendable {
    case hello(Hello)
    /// Empty without a cluster secret, else exactly 32 bytes of HMAC-SHA256.
    case proof([UInt8])
    case refusal(Refusal)
}

/// Why a payload is not a valid handshake frame.
package enum HandshakeParseError: Error, Equatable, Sendable, CustomStringConvertible {
    case empty
    /// The type byte is not a handshake type (a replication message before the handshake, or unknown).
    case notHandshakeType(UInt8)
    case badMagic
    case truncated(field: String)
    case trailingBytes(count: Int)
    case reservedFlags(UInt8)
    case invalidVersionRange(min: UInt16, max: UInt16)
    case emptyField(String)
    case invalidUTF8(field: String)
    case badProofLength(Int)

    package var description: String {
        switch self {
        case .empty: return "empty payload"
        case .notHandshakeType(let type): return "frame of type \(type) is not a handshake frame"
        case .badMagic: return "bad magic (not a Decide peer)"
        case .truncated(let field): return "truncated at \(field)"
        case .trailingBytes(let count): return "\(count) trailing bytes"
        case .reservedFlags(let flags): return "reserved flag bits set (\(flags))"
        case .invalidVersionRange(let min, let max): return "invalid version range \(min)...\(max)"
        case .emptyField(let field): return "empty \(field)"
        case .invalidUTF8(let field): return "\(field) is not UTF-8"
        case .badProofLength(let count): return "proof of \(count) bytes (expected 0, or 32 and a sealed identity)"
        }
    }
}

extension HandshakeMessage {
    /// Parses one frame payload (the length prefix already removed). Never traps on any input.
    package static func parse(_ payload: [UInt8]) throws(HandshakeParseError) -> HandshakeMessage {
        var reader = Reader(bytes: payload)
        guard let typeByte = reader.byte() else { throw .empty }
        guard let type = WireProtocol.FrameType(rawValue: typeByte) else { throw .notHandshakeType(typeByte) }
        let message: HandshakeMessage
        switch type {
        case .hello:
            guard let magic = reader.bytes(WireProtocol.magic.count) else { throw .truncated(field: "magic") }
            guard magic == WireProtocol.magic else { throw .badMagic }
            guard let minVersion = reader.u16() else { throw .truncated(field: "min version") }
            guard let maxVersion = reader.u16() else { throw .truncated(field: "max version") }
            guard minVersion >= 1, minVersion <= maxVersion else {
                throw .invalidVersionRange(min: minVersion, max: maxVersion)
            }
            guard let flags = reader.byte() else { throw .truncated(field: "flags") }
            guard flags & ~1 == 0 else { throw .reservedFlags(flags) }
            guard let nonce = reader.bytes(WireProtocol.nonceBytes) else { throw .truncated(field: "nonce") }
            let sealed = flags & 1 == 1
            // A side with a cluster secret says nothing about itself here: its identity travels
            // sealed in its proof, readable only by a peer holding the secret.
            let identity = sealed ? ("", "", "") : try Self.identity(&reader)
            message = .hello(Hello(minVersion: minVersion, maxVersion: maxVersion, hasSecret: sealed,
                                   nonce: nonce, clusterName: identity.0, nodeID: identity.1, listenAddress: identity.2))
        case .proof:
            let rest = reader.remaining
            guard rest == 0 || (rest >= WireProtocol.proofBytes + WireProtocol.minSealedIdentityBytes
                                && rest <= WireProtocol.proofBytes + WireProtocol.maxSealedIdentityBytes) else {
                throw .badProofLength(rest)
            }
            message = .proof(reader.bytes(rest) ?? [])
        case .refusal:
            guard let code = reader.byte() else { throw .truncated(field: "refusal code") }
            let reason = try reader.text("refusal reason")
            message = .refusal(Refusal(code: RefusalCode(rawValue: code) ?? .other, reason: reason))
        }
        guard reader.remaining == 0 else { throw .trailingBytes(count: reader.remaining) }
        return message
    }

    /// A side's identity as its sealed proof carries it (the plaintext): cluster name, node id and
    /// listen address, each a u8 length and UTF-8 bytes.
    package static func encodeIdentity(clusterName: String, nodeID: String, listenAddress: String) -> [UInt8] {
        var out: [UInt8] = []
        for text in [clusterName, nodeID, listenAddress] {
            precondition(text.utf8.count <= WireProtocol.maxTextFieldBytes, "identity text field longer than 255 bytes")
            out.append(UInt8(text.utf8.count))
            out.append(contentsOf: text.utf8)
        }
        return out
    }

    /// The (cluster name, node id, listen address) `encodeIdentity` wrote. Never traps.
    package static func parseIdentity(_ bytes: [UInt8]) throws(HandshakeParseError) -> (String, String, String) {
        var reader = Reader(bytes: bytes)
        let identity = try identity(&reader)
        guard reader.remaining == 0 else { throw .trailingBytes(count: reader.remaining) }
        return identity
    }

    private static func identity(_ reader: inout Reader) throws(HandshakeParseError) -> (String, String, String) {
        let cluster = try reader.text("cluster name")
        let node = try reader.text("node id")
        let address = try reader.text("listen address")
        guard !cluster.isEmpty else { throw .emptyField("cluster name") }
        guard !node.isEmpty else { throw .emptyField("node id") }
        return (cluster, node, address)
    }

    /// The payload bytes of this message (without the length prefix). Text fields longer than 255
    /// UTF-8 bytes are a programming error for hello and are cut (at a character) for refusals.
    package func encoded() -> [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .hello(let hello):
            precondition(hello.nonce.count == WireProtocol.nonceBytes, "nonce must be 32 bytes")
            out.reserveCapacity(48 + hello.clusterName.utf8.count + hello.nodeID.utf8.count + hello.listenAddress.utf8.count)
            out.append(WireProtocol.FrameType.hello.rawValue)
            out.append(contentsOf: WireProtocol.magic)
            Self.appendU16(hello.minVersion, to: &out)
            Self.appendU16(hello.maxVersion, to: &out)
            out.append(hello.hasSecret ? 1 : 0)
            out.append(contentsOf: hello.nonce)
            if !hello.hasSecret {
                out.append(contentsOf: Self.encodeIdentity(clusterName: hello.clusterName, nodeID: hello.nodeID,
                                                           listenAddress: hello.listenAddress))
            }
        case .proof(let proof):
            out.append(WireProtocol.FrameType.proof.rawValue)
            out.append(contentsOf: proof)
        case .refusal(let refusal):
            out.append(WireProtocol.FrameType.refusal.rawValue)
            out.append(refusal.code.rawValue)
            var reason = Substring(refusal.reason)
            while reason.utf8.count > WireProtocol.maxTextFieldBytes { reason = reason.dropLast() }
            out.append(UInt8(reason.utf8.count))
            out.append(contentsOf: reason.utf8)
        }
        return out
    }

    private static func appendU16(_ value: UInt16, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: value))
        out.append(UInt8(truncatingIfNeeded: value >> 8))
    }
}

/// A bounds-checked cursor over a payload.
private struct Reader {
    let bytes: [UInt8]
    var offset = 0
    var remaining: Int { bytes.count - offset }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset ..< offset + count])
    }

    /// A u8 length followed by that many UTF-8 bytes.
    mutating func text(_ field: String) throws(HandshakeParseError) -> String {
        guard let length = byte() else { throw .truncated(field: field) }
        guard let raw = bytes(Int(length)) else { throw .truncated(field: field) }
        guard let text = String(validating: raw, as: UTF8.self) else { throw .invalidUTF8(field: field) }
        return text
    }
}
