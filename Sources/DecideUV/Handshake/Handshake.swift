import Crypto

/// One side of the handshake of one link (docs/protocol.md §3). Pure apart from Crypto: no I/O.
///
/// Both sides send a hello at once. On the peer's hello a side checks versions and secret
/// presence, then sends its proof: without a secret an empty one (the names were in the hello);
/// with one, an HMAC over both hellos and its identity sealed, both under keys derived from its
/// secret and both nonces. A side is established when the peer's proof verified under a secret
/// of its keyring and the peer's identity opened and names this cluster; from then on the link
/// is sealed (`LinkSealer`). A refusal is decided here and sent by the connection.
struct Handshake {
    /// What the connection must do after a frame.
    enum Step {
        /// Send these payloads (in order) and keep waiting.
        case send([[UInt8]])
        /// Send these payloads, then the link is up with `peer`; with a cluster secret, every
        /// frame from now on goes through `sealer`.
        case established(send: [[UInt8]], peer: Hello, version: UInt16, sealer: LinkSealer?)
        /// Send a refusal with this code and reason, then close; `log` is the local log text.
        case refuse(Refusal, log: String)
        /// The peer refused us: close and log its reason.
        case refusedByPeer(Refusal)
    }

    /// The secrets this side accepts, the first being the one it proves and seals with. A
    /// rotation replaces it while the handshake runs (`updateKeyring`).
    private var keyring: [[UInt8]]
    /// The secret this side's proof was computed under, once it was sent: it derives the keys
    /// this side seals with, whatever the keyring became since.
    private var provedSecret: [UInt8]?
    private let outbound: Bool
    private let localHello: Hello
    private let localHelloBytes: [UInt8]
    private var peerHello: Hello?
    private var peerHelloBytes: [UInt8] = []
    private var version: UInt16 = 0

    /// Starts a handshake. `nonce` must be 32 fresh random bytes. `secrets` is the keyring: empty
    /// for a cluster without a secret; else the first is proved and sealed with, and a peer that
    /// proves any of them is accepted (so a secret can be rotated without downtime).
    init(clusterName: String, nodeID: String, listenAddress: String, secrets: [[UInt8]], outbound: Bool,
         nonce: [UInt8], versions: ClosedRange<UInt16>) {
        self.keyring = secrets
        self.outbound = outbound
        localHello = Hello(minVersion: versions.lowerBound, maxVersion: versions.upperBound, hasSecret: !secrets.isEmpty,
                           nonce: nonce, clusterName: clusterName, nodeID: nodeID, listenAddress: listenAddress)
        localHelloBytes = HandshakeMessage.hello(localHello).encoded()
    }

    /// Replaces the keyring of a handshake in progress (a rotation): the peer's proof, when it
    /// comes, is verified against `secrets` only, and a proof not yet sent proves `secrets[0]`.
    /// A proof already sent stays what it was; `Step.established`'s sealer names the secret it
    /// used (`sendSecret`), for the caller to check against the keyring of that moment.
    /// `secrets` is empty exactly when the keyring was (a transport keeps having a secret or not).
    mutating func updateKeyring(_ secrets: [[UInt8]]) {
        precondition(secrets.isEmpty == keyring.isEmpty, "a handshake cannot gain or lose its secret")
        keyring = secrets
    }

    /// The first payload to send: this side's hello (with a secret: versions, flags and nonce only).
    var helloPayload: [UInt8] { localHelloBytes }

    /// Feeds one payload received before the link was established.
    mutating func receive(_ payload: [UInt8]) -> Step {
        let message: HandshakeMessage
        do {
            message = try HandshakeMessage.parse(payload)
        } catch {
            if case .notHandshakeType(let type) = error, type < WireProtocol.firstTransportType {
                return .refuse(Refusal(code: .protocolViolation, reason: "message of type \(type) before the handshake"),
                               log: "message of type \(type) before the handshake")
            }
            return .refuse(Refusal(code: .malformed, reason: "malformed handshake frame: \(error)"),
                           log: "malformed handshake frame: \(error)")
        }
        switch message {
        case .refusal(let refusal):
            return .refusedByPeer(refusal)
        case .hello(let hello):
            guard peerHello == nil else {
                return .refuse(Refusal(code: .protocolViolation, reason: "second hello"), log: "peer sent a second hello")
            }
            return accept(hello, bytes: payload)
        case .proof(let proof):
            guard let peer = peerHello else {
                return .refuse(Refusal(code: .protocolViolation, reason: "proof before hello"), log: "peer sent a proof before its hello")
            }
            guard !keyring.isEmpty else {
                guard proof.isEmpty else {
                    return .refuse(Refusal(code: .malformed, reason: "proof sent without a secret"),
                                   log: "peer \(peer.nodeID) sent a proof though neither side has a secret")
                }
                return .established(send: [], peer: peer, version: version, sealer: nil)
            }
            return verify(proof, peer: peer)
        }
    }

    private mutating func accept(_ hello: Hello, bytes: [UInt8]) -> Step {
        let low = max(hello.minVersion, localHello.minVersion)
        let high = min(hello.maxVersion, localHello.maxVersion)
        guard low <= high else {
            let text = "unsupported protocol version: peer speaks \(hello.minVersion)...\(hello.maxVersion), "
                + "this node \(localHello.minVersion)...\(localHello.maxVersion)"
            return .refuse(Refusal(code: .unsupportedVersion, reason: text), log: text)
        }
        if !keyring.isEmpty && !hello.hasSecret {
            let text = "peer \(hello.nodeID) has no cluster secret; this node requires one"
            return .refuse(Refusal(code: .secretRequired, reason: "this node requires a cluster secret"), log: text)
        }
        if keyring.isEmpty && hello.hasSecret {
            let text = "a peer uses a cluster secret; this node has none"
            return .refuse(Refusal(code: .secretNotConfigured, reason: "this node has no cluster secret"), log: text)
        }
        // Without a secret the names are in the hello; with one they are checked once the peer
        // proved the secret (a stranger learns nothing, not even whether the names match).
        if keyring.isEmpty, hello.clusterName != localHello.clusterName {
            let text = "cluster name mismatch: peer is in '\(hello.clusterName)', this node in '\(localHello.clusterName)'"
            return .refuse(Refusal(code: .clusterMismatch, reason: text), log: text)
        }
        peerHello = hello
        peerHelloBytes = bytes
        version = high
        guard let secret = keyring.first else { return .send([HandshakeMessage.proof([]).encoded()]) }
        provedSecret = secret
        let mac = HMAC<SHA256>.authenticationCode(for: transcript(senderIsDialer: outbound),
                                                  using: key(.proof, secret: secret, senderIsDialer: outbound))
        let identity = HandshakeMessage.encodeIdentity(clusterName: localHello.clusterName, nodeID: localHello.nodeID,
                                                       listenAddress: localHello.listenAddress)
        // A fresh key per link and direction: nonce 0 is used once under it.
        let sealed = LinkSealer.sealed(identity, key: key(.identity, secret: secret, senderIsDialer: outbound), number: 0,
                                     authenticating: transcript(senderIsDialer: outbound))
        return .send([HandshakeMessage.proof(Array(mac) + sealed).encoded()])
    }

    /// The peer's proof under any secret of the keyring, then its sealed identity.
    private func verify(_ proof: [UInt8], peer: Hello) -> Step {
        let senderIsDialer = !outbound
        let transcript = transcript(senderIsDialer: senderIsDialer)
        guard proof.count > WireProtocol.proofBytes + LinkSealer.overheadBytes,
              let secret = keyring.first(where: { secret in
                  HMAC<SHA256>.isValidAuthenticationCode(proof[..<WireProtocol.proofBytes], authenticating: transcript,
                                                        using: key(.proof, secret: secret, senderIsDialer: senderIsDialer))
              }) else {
            return .refuse(Refusal(code: .badProof, reason: "wrong cluster secret (proof did not verify)"),
                           log: "wrong cluster secret: a peer's proof did not verify under any secret of the keyring")
        }
        guard let plain = LinkSealer.opened(proof[WireProtocol.proofBytes...], key: key(.identity, secret: secret, senderIsDialer: senderIsDialer),
                                          number: 0, authenticating: transcript) else {
            return .refuse(Refusal(code: .malformed, reason: "sealed identity did not open"),
                           log: "a peer proved the secret but its sealed identity did not open")
        }
        let identity: (String, String, String)
        do {
            identity = try HandshakeMessage.parseIdentity(plain)
        } catch {
            return .refuse(Refusal(code: .malformed, reason: "malformed identity: \(error)"), log: "malformed sealed identity: \(error)")
        }
        guard identity.0 == localHello.clusterName else {
            let text = "cluster name mismatch: peer \(identity.1) is in '\(identity.0)', this node in '\(localHello.clusterName)'"
            return .refuse(Refusal(code: .clusterMismatch, reason: text), log: text)
        }
        var known = peer
        (known.clusterName, known.nodeID, known.listenAddress) = identity
        // The secret the peer verified this side's proof under: proof before verification on
        // every stream (a proof comes only after the hello it answers, §4.5).
        guard let mine = provedSecret else {
            return .refuse(Refusal(code: .protocolViolation, reason: "proof before hello"), log: "peer sent a proof before this side proved")
        }
        let sealer = LinkSealer(
            sendKey: key(.traffic, secret: mine, senderIsDialer: outbound),
            receiveKey: key(.traffic, secret: secret, senderIsDialer: senderIsDialer),
            sendSecret: SecretFingerprint(mine), receiveSecret: SecretFingerprint(secret))
        return .established(send: [], peer: known, version: version, sealer: sealer)
    }

    private func key(_ purpose: LinkKeySchedule.Purpose, secret: [UInt8], senderIsDialer: Bool) -> SymmetricKey {
        LinkKeySchedule.key(purpose, secret: secret, senderIsDialer: senderIsDialer,
                            dialerNonce: outbound ? localHello.nonce : peerHello?.nonce ?? [],
                            listenerNonce: outbound ? peerHello?.nonce ?? [] : localHello.nonce)
    }

    /// What a proof authenticates: a label, the sender's role, and both hellos (with both nonces).
    private func transcript(senderIsDialer: Bool) -> [UInt8] {
        let dialerHello = outbound ? localHelloBytes : peerHelloBytes
        let listenerHello = outbound ? peerHelloBytes : localHelloBytes
        var bytes = Array("decide-proof-v2".utf8)
        bytes.append(senderIsDialer ? 1 : 2)
        for hello in [dialerHello, listenerHello] {
            bytes.append(UInt8(truncatingIfNeeded: hello.count))
            bytes.append(UInt8(truncatingIfNeeded: hello.count >> 8))
            bytes.append(contentsOf: hello)
        }
        return bytes
    }
}
