// Pure: no libuv, no Crypto, no Foundation. Compiled into the fuzz target as well.

/// The constants of the Decide wire protocol (docs/protocol.md is the normative text).
///
/// Every frame on a link is `u32 little-endian payload length` followed by that many payload
/// bytes. The payload's first byte is its type: `0x00...0xEF` belong to the replication layer,
/// `0xF0...0xFF` to the transport (the handshake and the refusal).
package enum WireProtocol {
    /// Bytes of the length prefix in front of every frame payload.
    package static let frameHeaderBytes = 4
    /// The four bytes right after a hello's type byte: ASCII "DCDE".
    package static let magic: [UInt8] = [0x44, 0x43, 0x44, 0x45]
    /// The lowest protocol version this build speaks. Version 2 seals links that have a cluster
    /// secret (and hides the hello's identity); version 1, which only authenticated them, is no
    /// longer spoken, so no peer can talk a link down to it. Version 3 changes the digest's
    /// entry hash (`DigestHash`). Version 4 adds the coverage to the `applied` answer: a version
    /// 3 peer's answers could not count for acknowledged writes, so it is refused at the
    /// handshake instead (docs/protocol.md, "Versions").
    package static let minSupportedVersion: UInt16 = 4
    /// The highest protocol version this build speaks.
    package static let maxSupportedVersion: UInt16 = 4
    /// Before the handshake completes, no frame may be larger than this: a peer that has not
    /// proven anything cannot make the node buffer more.
    package static let maxHandshakeFrameBytes = 1024
    /// Bytes of a handshake nonce.
    package static let nonceBytes = 32
    /// Bytes of an HMAC-SHA256 proof.
    package static let proofBytes = 32
    /// Bytes a sealed identity may take in a proof: its three length bytes at least, three full
    /// text fields at most, plus the 16-byte tag.
    package static let minSealedIdentityBytes = 3 + 16
    package static let maxSealedIdentityBytes = 3 * (1 + 255) + 16
    /// Largest cluster name, node id, listen address or refusal reason, in UTF-8 bytes.
    package static let maxTextFieldBytes = 255
    /// The first type byte reserved for the transport; lower types pass through to the engine.
    package static let firstTransportType: UInt8 = 0xF0

    /// Frame types of the transport's own frames.
    package enum FrameType: UInt8, Sendable {
        /// First frame of each side: magic, versions, flags, nonce, cluster, node id, address.
        case hello = 0xF1
        /// Second frame of each side: the HMAC proof (empty without a cluster secret).
        case proof = 0xF2
        /// A reason code and text sent just before the sender closes the link.
        case refusal = 0xF3
    }

    /// Message types the replication layer defines (the transport passes them through).
    package enum ReplicationType: UInt8, Sendable, CaseIterable {
        case delta = 1, digest = 2, digestReply = 3, entriesRequest = 4, entries = 5
        case membershipGossip = 6, ping = 7, ack = 8, leave = 9
    }

    /// Appends the 4-byte little-endian length prefix of a payload of `payloadBytes` bytes.
    package static func appendHeader(payloadBytes: Int, to bytes: inout [UInt8]) {
        precondition(payloadBytes >= 0 && payloadBytes <= Int(UInt32.max), "frame length out of range")
        let length = UInt32(payloadBytes)
        bytes.append(UInt8(truncatingIfNeeded: length))
        bytes.append(UInt8(truncatingIfNeeded: length >> 8))
        bytes.append(UInt8(truncatingIfNeeded: length >> 16))
        bytes.append(UInt8(truncatingIfNeeded: length >> 24))
    }

    /// The whole frame (length prefix + payload) for `payload`.
    package static func frame(_ payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(frameHeaderBytes + payload.count)
        appendHeader(payloadBytes: payload.count, to: &bytes)
        bytes.append(contentsOf: payload)
        return bytes
    }
}
