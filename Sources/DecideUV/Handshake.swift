import Crypto

/// One side of the handshake of one link (docs/protocol.md §3). Pure apart from Crypto: no I/O.
///
/// Both sides send a hello at once. On the peer's hello a side checks version, cluster and
/// secret presence, then sends its proof. A side is established when it accepted the peer's
/// hello and the peer's proof verified. A refusal is decided here and sent by the connection.
struct Handshake {
    /// What the connection must do after a frame.
    enum Step: Equatable {
        /// Send these payloads (in order) and keep waiting.
        case send([[UInt8]])
        /// Send these payloads, then the link is up with `peer`.
        case established(send: [[UInt8]], peer: Hello, version: UInt16)
        /// Send a refusal with this code and reason, then close; `log` is the local log text.
        case refuse(Refusal, log: String)
        /// The peer refused us: close and log its reason.
        case refusedByPeer(Refusal)
    }

    private let secret: SymmetricKey?
    private let outbound: Bool
    private let localHello: Hello
    private let localHelloBytes: [UInt8]
    private var peerHello: Hello?
    private var peerHelloBytes: [UInt8] = []
    private var version: UInt16 = 0

    /// Starts a handshake. `nonce` must be 32 fresh random bytes.
    init(clusterName: String, nodeID: String, listenAddress: String, secret: [UInt8]?, outbound: Bool,
         nonce: [UInt8], versions: ClosedRange<UInt16>) {
        self.secret = secret.map { SymmetricKey(data: $0) }
        self.outbound = outbound
        localHello = Hello(minVersion: versions.lowerBound, maxVersion: versions.upperBound, hasSecret: secret != nil,
                           nonce: nonce, clusterName: clusterName, nodeID: nodeID, listenAddress: listenAddress)
        localHelloBytes = HandshakeMessage.hello(localHello).encoded()
    }

    /// The first payload to send: this side's hello.
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
            if let secret {
                guard proof.count == WireProtocol.proofBytes,
                      HMAC<SHA256>.isValidAuthenticationCode(proof, authenticating: transcript(senderIsDialer: !outbound),
                                                            using: secret) else {
                    return .refuse(Refusal(code: .badProof, reason: "wrong cluster secret (proof did not verify)"),
                                   log: "wrong cluster secret: the proof of node \(peer.nodeID) did not verify")
                }
            } else if !proof.isEmpty {
                return .refuse(Refusal(code: .malformed, reason: "proof sent without a secret"),
                               log: "peer \(peer.nodeID) sent a proof though neither side has a secret")
            }
            return .established(send: [], peer: peer, version: version)
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
        guard hello.clusterName == localHello.clusterName else {
            let text = "cluster name mismatch: peer is in '\(hello.clusterName)', this node in '\(localHello.clusterName)'"
            return .refuse(Refusal(code: .clusterMismatch, reason: text), log: text)
        }
        if secret != nil && !hello.hasSecret {
            let text = "peer \(hello.nodeID) has no cluster secret; this node requires one"
            return .refuse(Refusal(code: .secretRequired, reason: "this node requires a cluster secret"), log: text)
        }
        if secret == nil && hello.hasSecret {
            let text = "peer \(hello.nodeID) uses a cluster secret; this node has none"
            return .refuse(Refusal(code: .secretNotConfigured, reason: "this node has no cluster secret"), log: text)
        }
        peerHello = hello
        peerHelloBytes = bytes
        version = high
        var proof: [UInt8] = []
        if let secret {
            proof = Array(HMAC<SHA256>.authenticationCode(for: transcript(senderIsDialer: outbound), using: secret))
        }
        return .send([HandshakeMessage.proof(proof).encoded()])
    }

    /// What a proof authenticates: a label, the sender's role, and both hellos (with both nonces).
    private func transcript(senderIsDialer: Bool) -> [UInt8] {
        let dialerHello = outbound ? localHelloBytes : peerHelloBytes
        let listenerHello = outbound ? peerHelloBytes : localHelloBytes
        var bytes = Array("decide-proof-v1".utf8)
        bytes.append(senderIsDialer ? 1 : 2)
        for hello in [dialerHello, listenerHello] {
            bytes.append(UInt8(truncatingIfNeeded: hello.count))
            bytes.append(UInt8(truncatingIfNeeded: hello.count >> 8))
            bytes.append(contentsOf: hello)
        }
        return bytes
    }
}
