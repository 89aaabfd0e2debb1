import Logging

/// Membership: gossip, removal, dial targets, and the coverage watermarks that decide when a
/// tombstone may go (docs/consistency.md, "Deletes and tombstones").
extension ReplicatorState {
    /// Members not removed, this node not included.
    var activeMemberCount: Int { members.values.filter { !$0.removed }.count }

    /// Which members' owned values read as present here (docs/consistency.md, "Node-owned
    /// keys"): those alive with an open, handshaken link to this node now; and the members
    /// removed for good, by id and, past `maxMembers` records, by id hash (`forgotten`). Nil
    /// when it is what the node was last told. A member that crashes
    /// leaves `present` when its link closes: at once when its socket closes, after
    /// `failureTimeoutMilliseconds` of silence when the host or the network fails.
    mutating func ownerViewIfChanged() -> (present: Set<String>, removed: Set<String>, forgotten: ForgottenMembers)? {
        var present = Set<String>(), removed = Set<String>()
        for member in members.values {
            if member.removed {
                removed.insert(member.nodeID)
            } else if member.status == .alive, let connection = member.connection, let link = peers[connection], !link.closing {
                present.insert(member.nodeID)
            }
        }
        if let reported = reportedOwners, reported.present == present, reported.removed == removed,
           reported.forgottenGeneration == forgotten.generation { return nil }
        reportedOwners = (present, removed, forgotten.generation)
        return (present, removed, forgotten)
    }

    /// A hash of the ids of every member not removed, this node included, in byte order: two
    /// nodes with equal hashes count the same members.
    var membersHash: UInt64 {
        var ids = members.values.filter { !$0.removed }.map(\.nodeID)
        ids.append(selfID)
        ids.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var hash = StableHash(seed: 0x6D65_6D62_6572_7321)
        for id in ids { hash.combine(bytes: id.utf8) }
        return hash.value
    }

    /// The counted members changed: the coverage this node reports falls to what it has proven
    /// of the members it counts now (a new member counts from nothing until a clean walk with
    /// it), and the new report outranks the old one.
    mutating func membershipDidChange(into actions: inout ReplicatorActions) {
        let others = members.values.filter { !$0.removed }
        if !others.isEmpty { advertisedCoverage = min(advertisedCoverage, others.map(\.covered).min() ?? 0) }
        heartbeat &+= 1
        actions.membershipChanged = true
    }

    /// This node's record first, then every member (removed ones as `.removed`), by id.
    func gossipRecords() -> [ReplicationMessage.MemberRecord] {
        var records = [ReplicationMessage.MemberRecord(
            nodeID: selfID, address: advertisedAddress, status: .alive, incarnation: incarnation,
            heartbeat: heartbeat, coverage: advertisedCoverage, membersHash: membersHash)]
        for member in members.values.sorted(by: { $0.nodeID < $1.nodeID }) {
            let status: ReplicationMessage.MemberRecord.Status =
                member.removed ? .removed : member.status == .alive ? .alive : .left
            records.append(.init(nodeID: member.nodeID, address: member.address, status: status,
                                 incarnation: member.incarnation, heartbeat: member.heartbeat,
                                 coverage: member.coverage, membersHash: member.membersHash))
        }
        return records
    }

    mutating func gossip(_ records: [ReplicationMessage.MemberRecord], from connection: ConnectionID,
                         now: UInt64) -> ReplicatorActions {
        var actions = ReplicatorActions()
        let peer = peers[connection]?.nodeID ?? "?"
        guard records.count <= 2 * configuration.maxMembers + 1 else {
            brokeRule(on: connection, rule: "gossip of \(records.count) records is over twice maxMembers \(configuration.maxMembers)", into: &actions)
            return actions
        }
        for record in records {
            if record.nodeID == selfID {
                newsAboutSelf(record, from: peer, into: &actions)
                continue
            }
            if record.status == .removed {
                markRemoved(record.nodeID, address: record.address, incarnation: record.incarnation, now: now,
                            why: "learnt from \(peer)", into: &actions)
                continue
            }
            if members[record.nodeID] == nil && forgotten.contains(record.nodeID) {
                // A peer still lists a member this node removed and dropped the record of: the
                // removal comes back as a full record, and the next gossip teaches it to the peer.
                markRemoved(record.nodeID, address: record.address, incarnation: record.incarnation, now: now,
                            why: "\(peer) still listed it after this node had dropped its removal record (remembered by id hash)",
                            restoring: true, into: &actions)
                continue
            }
            guard var member = members[record.nodeID] else {
                guard activeMemberCount < configuration.maxMembers else {
                    brokeRule(on: connection, rule: "gossip would pass maxMembers \(configuration.maxMembers)", into: &actions)
                    return actions
                }
                var member = Member(nodeID: record.nodeID, address: record.address,
                                    status: record.status == .alive ? .alive : .left,
                                    incarnation: record.incarnation, lastSeen: now)
                member.heartbeat = record.heartbeat
                member.coverage = record.coverage
                member.membersHash = record.membersHash
                members[record.nodeID] = member
                membershipDidChange(into: &actions)
                if record.status == .alive {
                    actions.log(.info, "learnt of member", ["peer": "\(record.nodeID)", "address": "\(record.address)"])
                }
                continue
            }
            guard !member.removed else { continue }   // removal is final
            if record.nodeID == peer {
                // A member is the authority on itself: what it says on its own link replaces
                // whatever relays said of it (a relay may be wrong, stale or forged).
                member.incarnation = record.incarnation
                member.heartbeat = record.heartbeat
                member.coverage = record.coverage
                member.membersHash = record.membersHash
                if !record.address.isEmpty { member.address = record.address }
                members[record.nodeID] = member
                continue
            }
            let status: Member.Status = record.status == .alive ? .alive : .left
            if (record.incarnation, record.heartbeat) > (member.incarnation, member.heartbeat) {
                member.coverage = record.coverage
                member.membersHash = record.membersHash
                if record.incarnation > member.incarnation {
                    if !record.address.isEmpty { member.address = record.address }
                    if member.connection == nil || status == .alive { member.status = status }
                }
                member.incarnation = record.incarnation
                member.heartbeat = record.heartbeat
            } else if record.incarnation == member.incarnation && status == .left && member.connection == nil
                        && member.status != .left {
                member.status = .left
                actions.membershipChanged = true
            }
            members[record.nodeID] = member
        }
        return actions
    }

    /// This node is the authority on itself: news of its leaving in this incarnation is
    /// refuted by a higher one; news of an incarnation it never had is forged and ignored.
    private mutating func newsAboutSelf(_ record: ReplicationMessage.MemberRecord, from peer: String,
                                        into actions: inout ReplicatorActions) {
        if record.status == .removed {
            guard !removedFromCluster else { return }
            removedFromCluster = true
            actions.membershipChanged = true
            actions.log(.critical, "this node was removed from the cluster: it links with nobody now",
                        ["learntFrom": "\(peer)", "howToRejoin": "start it with an empty data directory and a new node id"])
            for (connection, link) in peers where !link.closing {
                peers[connection]?.closing = true
                actions.close.append((connection, "this node was removed from the cluster"))
            }
            return
        }
        if record.incarnation > incarnation {
            if loggedForgedIncarnation != record.incarnation {
                loggedForgedIncarnation = record.incarnation
                actions.log(.warning, "ignored gossip about this node with an incarnation it never had",
                            ["from": "\(peer)", "claimed": "\(record.incarnation)", "mine": "\(incarnation)"])
            }
            return
        }
        if record.status == .left && record.incarnation == incarnation && incarnation < UInt64.max {
            incarnation += 1   // refute stale news of our leaving
            heartbeat &+= 1
        }
    }

    /// Removes `nodeID` from the cluster for good (operator `forget`, the dead-member timeout,
    /// or gossip saying another node did): it no longer counts for tombstones, is not dialled,
    /// and is refused if it comes back. News of the removal of a member this node does not know
    /// is kept as a full record while there are fewer than `maxMembers` of them, and by id hash
    /// only past that; `restoring` brings back the full record of a removal kept by hash.
    mutating func markRemoved(_ nodeID: String, address: String, incarnation: UInt64, now: UInt64, why: String,
                              restoring: Bool = false, into actions: inout ReplicatorActions) {
        guard nodeID != selfID else { return }
        var member = members[nodeID]
            ?? Member(nodeID: nodeID, address: address, status: .left, incarnation: incarnation, lastSeen: now)
        guard !member.removed else { return }
        if members[nodeID] == nil && !restoring {
            guard !forgotten.contains(nodeID) else { return }
            guard removedCount < configuration.maxMembers else {
                forgotten.insert(nodeID)
                actions.membershipChanged = true
                return
            }
        }
        member.removed = true
        member.lastSeen = now
        if let connection = member.connection, peers[connection] != nil {
            peers[connection]?.closing = true
            actions.refuse.append((connection, Self.removedReason(nodeID)))
        }
        member.connection = nil
        members[nodeID] = member
        dials[member.address] = nil
        membershipDidChange(into: &actions)
        actions.log(.warning, "member removed from the cluster", ["peer": "\(nodeID)", "why": "\(why)"])
        pruneRemoved()
    }

    private var removedCount: Int { members.values.filter(\.removed).count }

    /// Keeps at most `maxMembers` removed records, dropping the oldest removals first; a dropped
    /// removal is still remembered by the hash of its id (`forgotten`).
    private mutating func pruneRemoved() {
        let removed = members.values.filter(\.removed).sorted { ($0.lastSeen, $0.nodeID) < ($1.lastSeen, $1.nodeID) }
        for member in removed.prefix(max(0, removed.count - configuration.maxMembers)) {
            members[member.nodeID] = nil
            forgotten.insert(member.nodeID)
        }
    }

    enum ForgetOutcome: Equatable { case removed, unknown, isSelf, alreadyRemoved }

    mutating func forget(_ nodeID: String, now: UInt64) -> (ForgetOutcome, ReplicatorActions) {
        var actions = ReplicatorActions()
        if nodeID == selfID { return (.isSelf, actions) }
        guard let member = members[nodeID] else { return (forgotten.contains(nodeID) ? .alreadyRemoved : .unknown, actions) }
        if member.removed { return (.alreadyRemoved, actions) }
        markRemoved(nodeID, address: member.address, incarnation: member.incarnation, now: now,
                    why: "forgotten by the operator", into: &actions)
        actions.gossipTo = liveConnections()
        return (.removed, actions)
    }

    /// With `deadMemberTimeoutMilliseconds` set, removes members unheard of for that long.
    mutating func forgetDeadMembers(now: UInt64, into actions: inout ReplicatorActions) {
        guard let timeout = configuration.deadMemberTimeoutMilliseconds else { return }
        for member in members.values.sorted(by: { $0.nodeID < $1.nodeID })
        where !member.removed && member.connection == nil && now > member.lastSeen && now - member.lastSeen > timeout {
            markRemoved(member.nodeID, address: member.address, incarnation: member.incarnation, now: now,
                        why: "unheard of for \(now - member.lastSeen) ms (deadMemberTimeoutMilliseconds \(timeout))",
                        into: &actions)
        }
    }

    /// Alive members not connected (by their address) and seeds not known to reach anyone connected.
    func dialTargets() -> [String] {
        // Runs every tick: the members are sorted only once filtered (usually to none).
        var connectedIDs = Set<String>()
        for link in peers.values where !link.closing { connectedIDs.insert(link.nodeID) }
        var unlinked: [(nodeID: String, address: String)] = []
        for member in members.values
        where member.status == .alive && !member.removed && !member.address.isEmpty && !connectedIDs.contains(member.nodeID) {
            unlinked.append((member.nodeID, member.address))
        }
        unlinked.sort { $0.nodeID < $1.nodeID }
        var targets = unlinked.map(\.address)
        for seed in configuration.seeds where !targets.contains(seed) {
            if let owner = addressOwners[seed], owner == selfID || connectedIDs.contains(owner) { continue }
            if let owner = addressOwners[seed], members[owner]?.status == .left || members[owner]?.removed == true { continue }
            if members.values.contains(where: { $0.address == seed && connectedIDs.contains($0.nodeID) }) { continue }
            targets.append(seed)
        }
        return targets.filter { addressOwners[$0] != selfID && $0 != advertisedAddress }
    }

    /// Keeps the dial and address tables to current members and seeds: a peer cannot grow them.
    mutating func pruneAddresses() {
        guard dials.count > configuration.maxMembers || addressOwners.count > 2 * configuration.maxMembers + configuration.seeds.count else { return }
        var keep = Set(configuration.seeds)
        for member in members.values where !member.removed { keep.insert(member.address) }
        dials = dials.filter { keep.contains($0.key) || $0.value.inFlight }
        addressOwners = addressOwners.filter { keep.contains($0.key) || $0.value == selfID }
    }

    // MARK: coverage

    /// What this node covers now: the oldest of its proven coverage of every member; with no
    /// member and no seed (a lone node), everything up to its own clock; with seeds but no
    /// member yet, nothing.
    func coverageNow(clock: UInt64) -> UInt64 {
        var oldest: UInt64?
        for member in members.values where !member.removed { oldest = min(oldest ?? .max, member.covered) }
        guard let oldest else { return configuration.seeds.isEmpty ? clock : 0 }
        return oldest
    }

    /// Raises the coverage this node reports (the caller made sure the store holds it).
    mutating func advertise(coverage: UInt64) {
        guard coverage > advertisedCoverage else { return }
        advertisedCoverage = coverage
        heartbeat &+= 1
    }

    /// The timestamp (raw HLC) below which every member, reachable or not, is known to hold
    /// every tombstone: the lowest coverage reported by any member, provided every member
    /// reported counting exactly the members this node counts. Nil when not known.
    func collectionBound() -> UInt64? {
        guard advertisedCoverage > 0 else { return nil }
        let hash = membersHash
        var bound = advertisedCoverage
        for member in members.values where !member.removed {
            guard member.heartbeat > 0, member.membersHash == hash else { return nil }
            bound = min(bound, member.coverage)
        }
        return bound > 0 ? bound : nil
    }

    /// A clean walk proved this node holds everything `nodeID` held when its clock read `clock`.
    mutating func covered(_ nodeID: String, clock: UInt64) {
        guard var member = members[nodeID], !member.removed else { return }
        member.covered = max(member.covered, clock)
        members[nodeID] = member
    }

    /// The member list to keep across restarts: this node first, then every member.
    func rememberedRecords() -> [ReplicationMessage.MemberRecord] {
        var records = gossipRecords()
        if removedFromCluster {
            records[0] = .init(nodeID: selfID, address: advertisedAddress, status: .removed, incarnation: incarnation)
        }
        return records
    }
}
