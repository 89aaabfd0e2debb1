import DecideCore

/// Removals a node remembers after it dropped their full records: a 64-bit hash of each
/// removed member's id, the newest `capacity` of them, oldest dropped first.
///
/// A node keeps full removal records (id, address, incarnation, gossiped to every peer) for at
/// most `maxMembers` members. Past that it drops the oldest, and without this memory a peer
/// that still listed such a member as alive would gossip it back in: a member that never
/// reports, holding back tombstone collection on every node until an operator forgot it again.
/// With it, gossip naming a forgotten id brings the removal back instead, and the next gossip
/// round teaches it to the peer that still listed the member.
///
/// Guarantees: at most `capacity` hashes (about 24 bytes each: the ring and the set's table),
/// whatever peers send; inserting an id already held changes nothing; the order is the order of
/// removal, so a restart that reads `oldestFirst` back keeps the same eviction order.
/// A hash collision would make a new member with an unlucky id read as removed: with 64-bit
/// hashes and the default capacity full, about one chance in 2.8 × 10^14 per new id.
package struct ForgottenMembers: Sendable {
    /// The most hashes kept (`Replicator.Configuration.maxForgottenMemberIDs`).
    let capacity: Int
    private var ring: [UInt64] = []
    /// Where the oldest hash sits in `ring` once it is full.
    private var oldest = 0
    private var hashes: Set<UInt64> = []
    /// Counts insertions: equal generations hold equal hashes (compared instead of the sets).
    private(set) var generation = 0

    package init(capacity: Int, oldestFirst: [UInt64] = []) {
        self.capacity = max(0, capacity)
        for hash in oldestFirst { insert(hash: hash) }
    }

    /// The hash every node computes for `nodeID` (the same on every node and run).
    static func hash(_ nodeID: String) -> UInt64 {
        var hash = StableHash(seed: 0x666F_7267_6F74_7465)
        hash.combine(bytes: nodeID.utf8)
        return hash.value
    }

    var count: Int { hashes.count }

    /// Whether `nodeID` was removed and is remembered here (the engine's handshake and gossip,
    /// and the node's collection of owned values, all ask this).
    package func contains(_ nodeID: String) -> Bool {
        !hashes.isEmpty && hashes.contains(Self.hash(nodeID))
    }

    package mutating func insert(_ nodeID: String) { insert(hash: Self.hash(nodeID)) }

    private mutating func insert(hash: UInt64) {
        guard capacity > 0, !hashes.contains(hash) else { return }
        if ring.count < capacity {
            ring.append(hash)
        } else {
            hashes.remove(ring[oldest])
            ring[oldest] = hash
            oldest = (oldest + 1) % capacity
        }
        hashes.insert(hash)
        generation += 1
    }

    /// Every hash held, the oldest removal first (what `MembershipFile` keeps).
    var oldestFirst: [UInt64] { Array(ring[oldest...] + ring[..<oldest]) }
}
