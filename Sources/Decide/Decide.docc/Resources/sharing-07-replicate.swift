import DecideUV

var configuration = ReplicatedNode.Configuration(id: "a", listen: "127.0.0.1:7401", peers: ["127.0.0.1:7402"])
configuration.clusterSecret = Array(try String(contentsOfFile: "/etc/myservice/cluster-secret", encoding: .utf8).utf8)
                                                     // peers prove it before any message; every link is sealed (ChaCha20-Poly1305)
configuration.node.dataDirectory = "/var/lib/myservice/decide"   // optional: durable on SQLite
let peer = try ReplicatedNode(configuration: configuration)
peer.node.decide(EnterMaintenance(reason: "deploy")) // applied on every peer as one unit
let held = await peer.decide(EnterMaintenance(reason: "again"), acknowledgedBy: .peers(2), timeout: .seconds(5))
print(held.acknowledgedBy)                           // the peers that hold it (on disk, if they run strict)
if case .acquired(let lease, _) = await peer.replicator.acquireLease("nightly-job", for: .seconds(30), acknowledgedBy: .peers(1)) {
    print(lease.fencingToken)                        // pass it to what the job writes: it refuses older tokens
}
print(peer.status.members)                           // links, last heard, queued bytes, catch-up
await peer.leave()                                   // peers stop redialling it (or put `peer` in a ServiceGroup: SIGTERM leaves)
