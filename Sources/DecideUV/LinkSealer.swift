import Crypto

/// The keys of one sealed link and the frame counters of both directions (docs/protocol.md §4):
/// every frame after the handshake is sealed with ChaCha20-Poly1305 under the sending side's
/// traffic key, with the frame's number in its direction as the nonce.
///
/// Guarantees:
/// - each direction of each link has its own key, derived (HKDF-SHA256) from the sender's cluster
///   secret and both sides' fresh handshake nonces, so no key is ever used on two links;
/// - a nonce is never used twice under one key: it is the frame's number, which only grows;
/// - the receiver opens frame n only with nonce n, so a frame that is replayed, reordered,
///   dropped before another, cut or changed fails to open, and the link closes.
struct LinkSealer {
    /// Bytes a sealed frame adds to its payload: the Poly1305 tag.
    static let overheadBytes = 16

    private let sendKey: SymmetricKey
    private let receiveKey: SymmetricKey
    private var sent: UInt64 = 0
    private var received: UInt64 = 0
    /// Local fingerprints of the secrets the two directions were derived from (never sent), so a
    /// secret taken out of the keyring can close the links that still use it.
    let sendSecret: SecretFingerprint
    let receiveSecret: SecretFingerprint

    init(sendKey: SymmetricKey, receiveKey: SymmetricKey, sendSecret: SecretFingerprint, receiveSecret: SecretFingerprint) {
        self.sendKey = sendKey
        self.receiveKey = receiveKey
        self.sendSecret = sendSecret
        self.receiveSecret = receiveSecret
    }

    /// `payload` sealed as the next frame of this direction: ciphertext then tag.
    mutating func seal(_ payload: [UInt8]) -> [UInt8] {
        let nonce = Self.nonce(sent)
        sent += 1
        // Sealing with a valid key and a 12-byte nonce cannot fail.
        let box = try! ChaChaPoly.seal(payload, using: sendKey, nonce: nonce)
        var out = [UInt8]()
        out.reserveCapacity(payload.count + Self.overheadBytes)
        out.append(contentsOf: box.ciphertext)
        out.append(contentsOf: box.tag)
        return out
    }

    /// The payload of the next frame received, or nil when it does not open (not the next frame,
    /// or not sealed by the peer's key).
    mutating func open(_ frame: [UInt8]) -> [UInt8]? {
        guard frame.count >= Self.overheadBytes else { return nil }
        let split = frame.count - Self.overheadBytes
        guard let box = try? ChaChaPoly.SealedBox(nonce: Self.nonce(received), ciphertext: frame[..<split], tag: frame[split...]),
              let plain = try? ChaChaPoly.open(box, using: receiveKey) else { return nil }
        received += 1
        return Array(plain)
    }

    /// 4 zero bytes, then the frame number little-endian.
    private static func nonce(_ number: UInt64) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for index in 0..<8 { bytes[4 + index] = UInt8(truncatingIfNeeded: number >> (8 * index)) }
        return try! ChaChaPoly.Nonce(data: bytes)
    }
}

/// A cluster secret as this node names it locally: the first 8 bytes of its SHA-256. Never sent.
struct SecretFingerprint: Hashable, Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    init(_ secret: [UInt8]) {
        bytes = Array(SHA256.hash(data: secret).prefix(8))
    }

    var description: String {
        bytes.map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined()
    }
}

/// The key schedule of a sealed handshake: every key of a link comes from one cluster secret,
/// the two nonces (dialer's then listener's) and a label naming its purpose and direction.
enum LinkKeySchedule {
    enum Purpose: String {
        /// HMAC key of the sender's proof.
        case proof
        /// ChaCha20-Poly1305 key of the sender's identity (cluster, node id, address).
        case identity
        /// ChaCha20-Poly1305 key of the sender's frames after the handshake.
        case traffic
    }

    static func key(_ purpose: Purpose, secret: [UInt8], senderIsDialer: Bool,
                    dialerNonce: [UInt8], listenerNonce: [UInt8]) -> SymmetricKey {
        let info = Array("decide-link-v2 \(purpose.rawValue) \(senderIsDialer ? "dialer" : "listener")".utf8)
        return HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: secret), salt: dialerNonce + listenerNonce,
                                      info: info, outputByteCount: 32)
    }
}
