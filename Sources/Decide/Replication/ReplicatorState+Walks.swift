import Logging

/// Anti-entropy walks: which messages belong to a live walk, stream credit, and what a walk
/// that ended proves (docs/replication.md, "Anti-entropy").
extension ReplicatorState {
    /// Starts this side's walk `round` on `connection`; false when the link is gone.
    mutating func beginWalk(_ round: UInt64, on connection: ConnectionID, start: (sequence: UInt64, clock: UInt64),
                            now: UInt64) -> Bool {
        guard var link = peers[connection], !link.closing else { return false }
        for (other, walk) in link.walks where walk.mine {
            link.walks[other] = nil
            remember(other, in: &link)
        }
        link.walks[round] = Walk(round: round, mine: true, now: now, startSequence: start.sequence, startClock: start.clock)
        peers[connection] = link
        return true
    }

    enum DigestVerdict {
        /// A message of a walk that ended here, or of none: ignore it.
        case ignore
        /// Compare it; the walk is (now) live with this start.
        case compare(startClock: UInt64)
    }

    /// A digest arrived: a level-0 digest of an unknown round starts the peer's walk (replacing
    /// its previous one); any other must belong to a live walk in its comparing phase.
    mutating func digestArrived(round: UInt64, seq: UInt64, level: UInt8, peerClock: UInt64, on connection: ConnectionID,
                                start: (sequence: UInt64, clock: UInt64), now: UInt64) -> DigestVerdict {
        guard var link = peers[connection], !link.closing, !link.finishedRounds.contains(round) else { return .ignore }
        if link.walks[round] == nil {
            guard level == 0, seq == 1 else { return .ignore }
            for (other, walk) in link.walks where !walk.mine {
                link.walks[other] = nil
                remember(other, in: &link)
            }
            link.walks[round] = Walk(round: round, mine: false, now: now, startSequence: start.sequence, startClock: start.clock)
        }
        peers[connection] = link
        guard arrival(round, seq: seq, on: connection) == .process else { return .ignore }
        link = peers[connection]!
        guard var walk = link.walks[round], walk.phase == .comparing else { return .ignore }
        if walk.peerClock == nil { walk.peerClock = peerClock }
        walk.lastActivity = now
        link.walks[round] = walk
        peers[connection] = link
        return .compare(startClock: walk.startClock)
    }

    enum Arrival {
        /// The next message of a live walk: process it.
        case process
        /// A number already seen (a duplicated frame): ignore it.
        case duplicate
        /// A number was skipped (a frame lost or reordered): the walk is abandoned here.
        case gap
        /// No live walk has this round: ignore it.
        case unknown
    }

    /// Checks a walk message's sequence number and, for the next one, counts it.
    mutating func arrival(_ round: UInt64, seq: UInt64, on connection: ConnectionID) -> Arrival {
        let arrival = withWalk(round, on: connection) { walk -> Arrival in
            if seq < walk.expectedSeq { return .duplicate }
            if seq > walk.expectedSeq { return .gap }
            walk.expectedSeq += 1
            return .process
        } ?? .unknown
        if arrival == .gap { abandonWalk(round, on: connection) }
        return arrival
    }

    /// The sequence number for this side's next message of `round`; nil when the walk is gone.
    mutating func takeSeq(_ round: UInt64, on connection: ConnectionID) -> UInt64? {
        withWalk(round, on: connection) { walk in
            walk.sentSeq += 1
            return walk.sentSeq
        }
    }

    /// Runs `body` on walk `round` in place (no copy of its collections); nil when it is gone.
    mutating func withWalk<T>(_ round: UInt64, on connection: ConnectionID, _ body: (inout Walk) -> T) -> T? {
        guard peers[connection]?.walks[round] != nil else { return nil }
        return body(&peers[connection]!.walks[round]!)
    }

    func walk(_ round: UInt64, on connection: ConnectionID) -> Walk? {
        peers[connection]?.walks[round]
    }

    /// Ends walk `round` here. With `synced`, a clean walk proves this node holds everything
    /// the peer held when its clock read its start clock: the peer's coverage is raised.
    mutating func endWalk(_ round: UInt64, on connection: ConnectionID, synced: Bool, now: UInt64) -> ReplicatorActions {
        var actions = ReplicatorActions()
        guard var link = peers[connection], let walk = link.walks.removeValue(forKey: round) else { return actions }
        remember(round, in: &link)
        totals.walksFinished &+= 1
        totals.walkEntriesReceived &+= UInt64(walk.receivedEntries)
        if walk.mine { link.nextWalkAt = now + configuration.antiEntropyIntervalMilliseconds }
        if synced && walk.clean, let clock = walk.peerClock {
            covered(link.nodeID, clock: clock)
        } else if walk.mine {
            link.needsWalk = link.needsWalk || !walk.clean
        }
        peers[connection] = link
        let level: Logger.Level = walk.changedKeys > 0 ? .info : .debug
        actions.log(level, "catch-up finished", [
            "peer": "\(link.nodeID)", "receivedEntries": "\(walk.receivedEntries)", "changedKeys": "\(walk.changedKeys)",
            "ms": "\(elapsed(since: walk.startedAt, now: now))", "synced": "\(synced && walk.clean)", "startedHere": "\(walk.mine)",
        ])
        return actions
    }

    /// Abandons a walk whose stream could not be sent (queue full, change log overflowed);
    /// the link is marked for a new walk.
    mutating func abandonWalk(_ round: UInt64, on connection: ConnectionID) {
        guard var link = peers[connection], link.walks.removeValue(forKey: round) != nil else { return }
        remember(round, in: &link)
        totals.walksAbandoned &+= 1
        link.needsWalk = true
        peers[connection] = link
    }

    // MARK: streams

    /// Claims the right to produce `round`'s next stream message, when there is credit and
    /// something left to send: what to send, its sequence number and this side's walk-start
    /// clock. Nil when another thread pumps, or nothing can go now.
    mutating func claimPump(_ round: UInt64, on connection: ConnectionID, window: Int)
        -> (outgoing: Walk.Outgoing, seq: UInt64, startClock: UInt64)? {
        withWalk(round, on: connection) { walk -> (outgoing: Walk.Outgoing, seq: UInt64, startClock: UInt64)? in
            guard !walk.pumping, walk.unacked < window, let outgoing = walk.outgoing else { return nil }
            walk.pumping = true
            walk.sentSeq += 1
            return (outgoing, walk.sentSeq, walk.startClock)
        } ?? nil
    }

    /// The claimer sent one message (or none, `sent == false`) and moved the stream to `next`
    /// (nil when it ended). Returns whether the walk ended on this side (both streams done).
    mutating func pumped(_ round: UInt64, on connection: ConnectionID, next: Walk.Outgoing?, seq: UInt64?, now: UInt64) -> Bool {
        withWalk(round, on: connection) { walk -> Bool in
            walk.pumping = false
            walk.outgoing = next
            if let seq {
                walk.unackedSeqs.append(seq)
                walk.lastActivity = now
            }
            walk.noteOutgoingDone()
            return walk.streamsDone
        } ?? false
    }

    /// A cumulative `streamAck` arrived; returns whether the walk ended here, or nil for an ack
    /// of a message never sent (a protocol violation). Repeated acks change nothing.
    mutating func acked(_ round: UInt64, seq: UInt64, on connection: ConnectionID, now: UInt64) -> Bool? {
        guard let link = peers[connection] else { return false }
        guard link.walks[round] != nil else {
            // Acks of a walk that ended here (abandoned or timed out) are late, not wrong.
            return link.finishedRounds.contains(round) ? false : nil
        }
        return withWalk(round, on: connection) { walk -> Bool? in
            guard seq <= walk.sentSeq else { return nil }
            walk.unackedSeqs.removeAll { $0 <= seq }
            walk.lastActivity = now
            walk.noteOutgoingDone()
            return walk.streamsDone
        } ?? false
    }

    /// Cuts the next entries batch from `entries`: at most `budgetBytes` and `maxEntries`,
    /// cut only between versions (one decision's entries travel together), except that a group
    /// of one version larger than `hardLimitBytes` (what a frame carries) is cut too: no real
    /// decision is that large (`maxDecisionBytes` fits a frame), but entries that share a version
    /// from several deltas of a peer can be, and a walk must still be able to finish.
    /// Returns how many entries.
    static func batchLength(_ entries: ArraySlice<KeyedEntry>, budgetBytes: Int, hardLimitBytes: Int, maxEntries: Int) -> Int {
        var count = 0
        var bytes = 0
        var index = entries.startIndex
        while index < entries.endIndex {
            let item = entries[index]
            let size = item.maxEncodedBytes
            let full = count >= maxEntries || bytes + size > budgetBytes
            if full, count > 0, entries[index - 1].entry.version != item.entry.version { break }
            if count > 0, bytes + size > hardLimitBytes || count >= maxEntries { break }
            count += 1
            bytes += size
            index += 1
        }
        return count
    }
}
