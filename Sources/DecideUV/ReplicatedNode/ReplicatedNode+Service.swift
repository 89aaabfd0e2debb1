import ServiceLifecycle

/// A replicated node as a swift-service-lifecycle `Service`: put it in the embedding
/// service's `ServiceGroup`, and SIGTERM or SIGINT (whatever the group's
/// `gracefulShutdownSignals` are) makes it leave the cluster gracefully, through the same path
/// as every other service of the process.
///
/// ```swift
/// let peer = try ReplicatedNode(configuration: configuration)
/// let group = ServiceGroup(services: [peer, httpServer], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
///
/// Guarantees: the node runs from `init` (decisions and replication do not wait for `run`);
/// `run` returns once the node has left (peers told, queued frames flushed for up to 2 s,
/// links closed, observations ended), whether the group shut down gracefully or its task was
/// cancelled.
extension ReplicatedNode: Service {
    public func run() async throws {
        // Either way out of this wait ends in the same graceful leave.
        try? await gracefulShutdown()
        await leave()
    }
}
