/// A lease on a named resource: one holder at a time as far as last-writer-wins allows, for a
/// limited time, with a fence the holder passes to the resource it guards (docs/consistency.md,
/// "Leases").
///
/// Guarantees: a lease is an expiring key (`decide.lease[RESOURCE]`, the holder's node id as a
/// JSON string); every acquisition, renewal included, is a decision with a version above every
/// version its node had seen, so a lease acquired after another was seen has a higher fence.
/// Two holders at once are possible (see the docs): the fence is what keeps the resource safe.
public struct Lease: Hashable, Sendable {
    /// What the lease is for.
    public let resource: String
    /// The id of the node holding it.
    public let holder: String
    /// The version of the decision that acquired (or last renewed) it: unique, and ordered
    /// above every lease its acquirer had seen.
    public let fence: Version
    /// When it ends unless renewed (hybrid-clock Unix milliseconds).
    public let expiresAtMilliseconds: UInt64

    /// `fence` as one number for a resource to compare (its raw hybrid timestamp). Two leases
    /// share a token only if two nodes that had not heard of each other acquired them in the
    /// same millisecond and logical tick; a resource that refuses a token below the highest it
    /// accepted, and an equal one from another holder, is safe even then (docs/consistency.md,
    /// "The fencing token").
    public var fencingToken: UInt64 { fence.timestamp.rawValue }

    /// The key a lease on `resource` is stored under.
    public static func key(for resource: String) -> StateKey {
        StateKey(name: "decide.lease", element: (try? ValueCoding.encode(resource)) ?? Array(resource.utf8))
    }
}

/// What became of `Replicator.acquireLease`.
public enum LeaseOutcome: Hashable, Sendable {
    /// This node holds it, acknowledged by these peers (at least the number asked for).
    case acquired(Lease, acknowledgedBy: [String])
    /// Another node holds a lease this node sees as live.
    case heldByOther(Lease)
    /// Written here, but fewer peers than asked for acknowledged it in time: treat it as not
    /// held (another node may acquire it), release it or try again.
    case notAcknowledged(Lease, acknowledgedBy: [String], required: Int)
    /// The decision was aborted (e.g. this node refuses decisions while its clock is suspect).
    case refused(reason: String)
}

/// The decision behind `acquireLease`: takes the lease unless another node holds a live one.
struct AcquireLease: Decision {
    let resource: String
    let holder: String
    let lifetime: Duration
    let ownedByHolder: Bool

    final class Seen: @unchecked Sendable {  // written inside decide, read after it returned on the same thread
        var other: Lease?
    }
    let seen = Seen()

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        let key = Lease.key(for: resource)
        if let entry = read.entry(key), let lease = Lease(resource: resource, entry: entry), lease.holder != holder {
            seen.other = lease
            return .none
        }
        guard let value = try? ValueCoding.encode(holder) else { return .none }
        write.raw(value, into: key, expiringAfter: lifetime, ownedByThisNode: ownedByHolder)
        return .none
    }
}

/// The decision behind `releaseLease`: deletes the lease if it is still the one released.
struct ReleaseLease: Decision {
    let lease: Lease

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        let key = Lease.key(for: lease.resource)
        guard let entry = read.entry(key), !entry.isTombstone, entry.version == lease.fence else { return .none }
        write.raw(nil, into: key)
        return .none
    }
}

extension Lease {
    /// The lease a stored entry holds, nil for a tombstone or a value that is not one.
    init?(resource: String, entry: Entry) {
        guard let bytes = entry.packedValue, let holder = try? ValueCoding.decode(String.self, from: bytes),
              let expiresAt = entry.expiresAtMilliseconds else { return nil }
        self.init(resource: resource, holder: holder, fence: entry.version, expiresAtMilliseconds: expiresAt)
    }
}

extension Node {
    /// The live lease on `resource` as this node sees it (nil: none, or expired).
    public func lease(on resource: String) -> Lease? {
        read { read in read.entry(Lease.key(for: resource)).flatMap { Lease(resource: resource, entry: $0) } }
    }
}

extension Replicator {
    /// Takes the lease on `resource` for `lifetime` unless another node holds a live one (a
    /// renewal, when this node holds it: a new lease with a higher fence), then waits until
    /// `acknowledgedBy` peers hold it or `timeout` passes. In a cluster of n nodes, ask for
    /// `.peers(n / 2)`: with this node, a majority, so a side of a partition without one cannot
    /// acquire it. That still cannot stop a holder cut off from the others from believing it
    /// holds the lease until it expires, which is why `Lease.fencingToken` exists.
    /// `ownedByHolder` frees the lease as soon as the others stop seeing this node (faster
    /// failover, and more chances of two holders during a partition).
    public func acquireLease(_ resource: String, for lifetime: Duration, ownedByHolder: Bool = false,
                             acknowledgedBy target: AcknowledgementTarget = .peers(0), timeout: Duration = .seconds(2)) async -> LeaseOutcome {
        await withCheckedContinuation { continuation in
            acquireLease(resource, for: lifetime, ownedByHolder: ownedByHolder, acknowledgedBy: target,
                         timeoutMilliseconds: Transaction.milliseconds(of: timeout) ?? 0) { continuation.resume(returning: $0) }
        }
    }

    /// `acquireLease(_:for:ownedByHolder:acknowledgedBy:timeout:)` with a completion handler,
    /// called once, outside every lock.
    public func acquireLease(_ resource: String, for lifetime: Duration, ownedByHolder: Bool = false,
                             acknowledgedBy target: AcknowledgementTarget = .peers(0), timeoutMilliseconds: UInt64,
                             completion: @escaping @Sendable (LeaseOutcome) -> Void) {
        let decision = AcquireLease(resource: resource, holder: node.id, lifetime: lifetime, ownedByHolder: ownedByHolder)
        let node = self.node
        decide(decision, acknowledgedBy: target, timeoutMilliseconds: timeoutMilliseconds) { acknowledged in
            if let other = decision.seen.other { return completion(.heldByOther(other)) }
            switch acknowledged.commit {
            case .aborted(let reason):
                completion(.refused(reason: reason))
            case .unchanged:
                completion(.refused(reason: "the lease could not be encoded"))
            case .committed(let version):
                // The instant the commit stored: the same rule, from the same timestamp.
                let expiry = WriteExpiry.after(milliseconds: Transaction.milliseconds(of: lifetime) ?? 0)
                let lease = Lease(resource: resource, holder: node.id, fence: version,
                                  expiresAtMilliseconds: expiry.instant(committedAt: version.timestamp) ?? 0)
                // Read again after the wait: a rival acquisition with a higher version that
                // reached this node meanwhile (from the peer that acknowledged, whose answer
                // follows its own delta on the link) wins, and this one is not held.
                let stored = node.lease(on: resource)
                guard stored?.fence == version else {
                    return completion(stored.map { .heldByOther($0) }
                        ?? .notAcknowledged(lease, acknowledgedBy: acknowledged.acknowledgedBy, required: acknowledged.required))
                }
                completion(acknowledged.isComplete
                    ? .acquired(lease, acknowledgedBy: acknowledged.acknowledgedBy)
                    : .notAcknowledged(lease, acknowledgedBy: acknowledged.acknowledgedBy, required: acknowledged.required))
            }
        }
    }

    /// Ends `lease` early, if it is still the one stored here (a later acquisition, by anyone,
    /// is left alone). Returns whether it was released.
    @discardableResult
    public func releaseLease(_ lease: Lease) -> Bool {
        node.decide(ReleaseLease(lease: lease)).version != nil
    }
}
