import Decide
import Testing
@testable import DecideUV

/// Retiring a secret reaches the handshakes in flight (docs/operations.md, "Rotating the cluster
/// secret", step 3): a connection whose handshake began before the rotation and completes after
/// it with a retired secret never becomes a link.
@Suite("Retiring a secret while a handshake runs")
struct RetiredSecretTests {
    /// A raw dialler holding the secrets `secrets` that sent its hello, read the node's hello and
    /// proof (so the node's handshake has begun and waits for the dialler's proof), and holds its
    /// own proof back. Nil when the node refused it first.
    static func handshakeUpToOwnProof(to address: String, secrets: [[UInt8]]) throws -> (client: RawClient, proof: [UInt8])? {
        let client = try RawClient(connectTo: address)
        var handshake = Handshake(clusterName: "test", nodeID: "raw", listenAddress: "", secrets: secrets, outbound: true,
                                  nonce: (0 ..< 32).map { _ in UInt8.random(in: 0 ... 255) },
                                  versions: WireProtocol.minSupportedVersion ... WireProtocol.maxSupportedVersion)
        client.writeFrame(handshake.helloPayload)
        var proof: [UInt8]?
        while client.sealer == nil || proof == nil {
            guard let frame = client.readFrame() else { return nil }
            switch handshake.receive(frame) {
            case .send(let payloads): proof = payloads.first      // the node's hello: our proof, held back
            case .established(_, _, _, let sealer): client.sealer = sealer   // the node's proof verified
            case .refuse, .refusedByPeer: return nil
            }
        }
        return (client, proof!)
    }

    static func connections(_ events: [TransportEvent]) -> Int {
        events.filter { if case .connected = $0 { return true }; return false }.count
    }

    @Test("a dialler that proves the retired secret after the rotation is refused, not linked")
    func peerProvesRetiredSecret() throws {
        let node = try makeNode("node", secret: secretA)
        defer { node.transport.shutdown() }
        let address = try node.transport.listen(on: "127.0.0.1:0")
        let (client, proof) = try #require(try Self.handshakeUpToOwnProof(to: address, secrets: [secretA]))
        // The handshake is in progress under [A]; A retires before the dialler's proof arrives.
        try node.transport.updateClusterSecrets([secretB])
        client.writeFrame(proof)
        #expect(client.waitForClose(), "the node kept a link proved under the retired secret")
        #expect(Self.connections(node.delegate.events) == 0)
        #expect(node.transport.sealedLinks().isEmpty)
        #expect(node.logs.linkEndLines.contains { $0.text.contains("wrong cluster secret") })
        // The node is not wedged: a dialler with the current secret links, sealed under it.
        let current = try RawClient(connectTo: address)
        #expect(current.handshake(secret: secretB))
        #expect(node.delegate.waitForConnection() != nil)
        let fingerprint = UVTransport.fingerprint(ofSecret: secretB)
        #expect(node.transport.sealedLinks().map { [$0.sendsUnder, $0.receivesUnder] } == [[fingerprint, fingerprint]])
    }

    @Test("a handshake whose own proof went out under the retired secret is refused when it completes")
    func ownProofUnderRetiredSecret() throws {
        // Mid-rotation: the node proves A and accepts B; the dialler proves B and accepts A.
        let node = try makeNode("node", secret: secretA) { $0.acceptedClusterSecrets = [secretB] }
        defer { node.transport.shutdown() }
        let address = try node.transport.listen(on: "127.0.0.1:0")
        let (client, proof) = try #require(try Self.handshakeUpToOwnProof(to: address, secrets: [secretB, secretA]))
        // The node's proof went out under A. A retires; the dialler's proof (under B) still verifies.
        try node.transport.updateClusterSecrets([secretB])
        client.writeFrame(proof)
        // The refusal is sealed (it follows the node's proof, which the dialler accepted).
        let refusal = client.readPayloads()?.compactMap { payload -> Refusal? in
            if case .refusal(let refusal)? = try? HandshakeMessage.parse(payload) { return refusal }
            return nil
        }.first
        #expect(refusal?.code == .badProof, "the node sent \(String(describing: refusal)) instead of a refusal")
        #expect(client.waitForClose(), "the node kept a link sealed under the retired secret")
        #expect(Self.connections(node.delegate.events) == 0)
        #expect(node.transport.sealedLinks().isEmpty)
        #expect(node.logs.linkEndLines.contains { $0.text.contains("retired meanwhile") })
    }
}
