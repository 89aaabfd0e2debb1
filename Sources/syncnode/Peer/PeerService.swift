import ServiceLifecycle

/// `syncnode run`'s peer as a swift-service-lifecycle `Service`: it runs from start, and the
/// group's graceful shutdown (SIGTERM, SIGINT) or cancellation makes it leave the cluster
/// (`PeerProcess.stop`), once.
struct PeerService: Service {
    let peer: PeerProcess

    func run() async throws {
        try? await gracefulShutdown()
        peer.logger.info("graceful shutdown: leaving the cluster")
        await peer.stop()
    }
}
