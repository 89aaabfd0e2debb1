/// The transport's delegate for one `Replicator`: hands every link event to the engine. A
/// separate object so that the callbacks, which only a transport makes, stay out of the
/// engine's public API. The transport holds it (and so the engine) until it shuts down, as it
/// held the engine itself before.
final class ReplicatorEvents: TransportDelegate, @unchecked Sendable {
    let replicator: Replicator

    init(replicator: Replicator) { self.replicator = replicator }

    func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
        replicator.transport(transport, didConnect: connection, peer: peer)
    }

    func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID) {
        replicator.transport(transport, didReceive: frame, from: connection)
    }

    func transport(_ transport: any Transport, didFinishReading connection: ConnectionID) {
        replicator.transport(transport, didFinishReading: connection)
    }

    func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {
        replicator.transport(transport, outboundLimitExceeded: connection)
    }

    func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {
        replicator.transport(transport, didDisconnect: connection, reason: reason)
    }

    func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {
        replicator.transport(transport, didFailToConnect: address, reason: reason)
    }
}
