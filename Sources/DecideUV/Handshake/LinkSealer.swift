import Crypto
import DecideCore
import Foundation

/// The keys of one sealed link and the record counters of both directions (docs/protocol.md §4):
/// after the handshake, frames travel in sealed records. A record is the frames written together
/// (each as on a plain link: a u32 length and the payload), at most `maxRecordPlaintextBytes`
/// unless one frame alone is longer, sealed with ChaCha20-Poly1305 under the sending side's
/// traffic key with the record's number as the nonce. Sealing a batch of frames at once costs
/// one AEAD call per record, not per frame.
///
/// Guarantees:
/// - each direction of each link has its own key, derived (HKDF-SHA256) from the sender's cluster
///   secret and both sides' fresh handshake nonces, so no key is ever used on two links;
/// - a nonce is never used twice under one key: it is the record's number, which only grows;
/// - the receiver opens record n only with nonce n, so a record that is replayed, reordered,
///   dropped before another, cut or changed fails to open, and the link closes; so does a record
///   whose frames inside are malformed (it can only come from a peer holding the secret).
struct LinkSealer {
    /// Bytes sealing adds to each record: the Poly1305 tag.
    static let overheadBytes = 16
    /// Frames are packed into one record up to this many plaintext bytes.
    static let maxRecordPlaintextBytes = 64 * 1024

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

    /// The largest sealed record a peer may send on a link of `maxFrameBytes` frames.
    static func maxRecordBytes(maxFrameBytes: Int) -> Int {
        max(maxRecordPlaintextBytes, maxFrameBytes + WireProtocol.frameHeaderBytes) + overheadBytes
    }

    /// `frames` (payloads) sealed as the next records of this direction, in order.
    mutating func seal(_ frames: [[UInt8]]) -> [[UInt8]] {
        var wire: [UInt8] = []
        for frame in frames {
            WireProtocol.appendHeader(payloadBytes: frame.count, to: &wire)
            wire.append(contentsOf: frame)
        }
        return wire.withUnsafeBytes { seal(wire: $0) }
    }

    /// Frames as they go on a plain link (each a u32 length and its payload, one after another:
    /// an outbox's `FrameBuffer`) sealed as the next records of this direction, in order: each
    /// record the frames that fit in `maxRecordPlaintextBytes`, or one longer frame alone.
    mutating func seal(wire: UnsafeRawBufferPointer) -> [[UInt8]] {
        var records: [[UInt8]] = []
        var start = 0, end = 0
        while end < wire.count {
            let length = Int(UInt32(littleEndian: wire.loadUnaligned(fromByteOffset: end, as: UInt32.self)))
            let next = end + WireProtocol.frameHeaderBytes + length
            precondition(next <= wire.count, "LinkSealer: a frame runs past the bytes to seal")
            if end > start && next - start > Self.maxRecordPlaintextBytes {
                records.append(sealRecord(UnsafeRawBufferPointer(rebasing: wire[start..<end])))
                start = end
            }
            end = next
        }
        if end > start { records.append(sealRecord(UnsafeRawBufferPointer(rebasing: wire[start..<end]))) }
        return records
    }

    private mutating func sealRecord(_ plain: UnsafeRawBufferPointer) -> [UInt8] {
        defer { sent += 1 }
        return Self.sealed(plain, key: sendKey, number: sent)
    }

    /// `plain` sealed with ChaCha20-Poly1305 under `key`, nonce `number` (`nonce(_:)`) and
    /// additional data `aad`: the ciphertext, then the tag. The one sealing of the link layer: a
    /// record, or a handshake's identity.
    static func sealed(_ plain: some DataProtocol, key: SymmetricKey, number: UInt64, authenticating aad: [UInt8] = []) -> [UInt8] {
        // Sealing with a valid key and a 12-byte nonce cannot fail. Records carry no additional
        // data: sealing without it skips swift-crypto's generic handling of an empty one.
        let box = try! aad.isEmpty
            ? ChaChaPoly.seal(plain, using: key, nonce: nonce(number))
            : ChaChaPoly.seal(plain, using: key, nonce: nonce(number), authenticating: aad)
        // `combined` is the nonce, the ciphertext and the tag in one buffer: the record is all of
        // it but the nonce (which both sides count), copied out in one piece.
        return box.combined.withUnsafeBytes { combined in
            [UInt8](copying: UnsafeRawBufferPointer(rebasing: combined[nonceBytes...]))
        }
    }

    /// The bytes of a ChaCha20-Poly1305 nonce, at the front of `SealedBox.combined`.
    private static let nonceBytes = 12

    /// What `sealed` sealed with the same key, number and additional data; nil when `sealed` is
    /// shorter than a tag or does not open.
    static func opened(_ sealed: ArraySlice<UInt8>, key: SymmetricKey, number: UInt64, authenticating aad: [UInt8] = []) -> [UInt8]? {
        sealed.withUnsafeBytes { opened($0, key: key, number: number, authenticating: aad) }.map { Array($0) }
    }

    /// `opened`, reading `sealed` in place and answering the plaintext as ChaChaPoly gives it.
    static func opened(_ sealed: UnsafeRawBufferPointer, key: SymmetricKey, number: UInt64, authenticating aad: [UInt8] = []) -> Data? {
        guard sealed.count >= overheadBytes else { return nil }
        let split = sealed.count - overheadBytes
        guard let box = try? ChaChaPoly.SealedBox(nonce: nonce(number), ciphertext: UnsafeRawBufferPointer(rebasing: sealed[..<split]),
                                                  tag: UnsafeRawBufferPointer(rebasing: sealed[split...])) else {
            return nil
        }
        // Records carry no additional data: opening without it skips swift-crypto's generic
        // handling of an empty one (about 4 % of opening a record, callgrind).
        return try? aad.isEmpty ? ChaChaPoly.open(box, using: key) : ChaChaPoly.open(box, using: key, authenticating: aad)
    }

    /// The frames of the next record received, or nil when it does not open (not the next
    /// record, or not sealed by the peer's key) or its frames are malformed (an empty frame, or
    /// one longer than `maxFrameBytes`).
    mutating func open(_ record: [UInt8], maxFrameBytes: Int) -> [[UInt8]]? {
        guard let opened = record.withUnsafeBytes({ openFrames($0, maxFrameBytes: maxFrameBytes) }) else { return nil }
        return opened.plain.withUnsafeBytes { plain in
            opened.frames.map { Array(UnsafeRawBufferPointer(rebasing: plain[$0])) }
        }
    }

    /// A record opened: its plaintext, and where each of its frames lies in it (the bytes of
    /// `plain.withUnsafeBytes`), every one checked before any is handed on.
    struct OpenedRecord {
        let plain: Data
        let frames: [Range<Int>]
    }

    /// `open`, reading the record in place and copying no frame out of the plaintext.
    mutating func openFrames(_ record: UnsafeRawBufferPointer, maxFrameBytes: Int) -> OpenedRecord? {
        guard record.count > Self.overheadBytes,
              let plain = Self.opened(record, key: receiveKey, number: received) else { return nil }
        received += 1
        var decoder = FrameDecoder(maxFrameBytes: maxFrameBytes)
        var frames: [Range<Int>] = []
        let complete: Bool = plain.withUnsafeBytes { bytes in
            var offset = 0
            do {
                while let payload = try decoder.nextPayload(from: bytes, offset: &offset) {
                    // One input holds the whole plaintext, so every frame lies in it.
                    guard case .inInput(let range) = payload else { return false }
                    frames.append(range)
                }
            } catch {
                return false
            }
            return !decoder.hasPartialFrame
        }
        guard complete, !frames.isEmpty else { return nil }
        return OpenedRecord(plain: plain, frames: frames)
    }

    /// 4 zero bytes, then the record number little-endian.
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
