/// One member's SWIM failure detector and membership gossip, as a pure state machine: it
/// takes `now` and messages and returns directives (messages to send, members that changed);
/// the shell only performs them, so the simulator and the fuzzers run it unchanged
/// (docs/design/0019-swim-membership.md).
///
/// Guarantees:
/// - constant cost per member: one probe per (health-scaled) probe interval to one member,
///   round-robin over a shuffled list, so every member is probed within two rounds of the list;
///   indirect probes through `indirectProbes` others, a push-pull page exchange every
///   `syncIntervalMilliseconds`; no message ever exceeds `maxMessageBytes`;
/// - a suspicion is refuted by the suspect itself with a higher incarnation; news of a higher
///   incarnation always wins, and of the same incarnation `dead`/`left` beats `suspect` beats
///   `alive`, so every member that hears the same news ends with the same view;
/// - Lifeguard: a member that misses acks slows its own probing (local health) instead of
///   suspecting others, and a suspicion shortens as independent suspecters confirm it;
/// - bounded: at most `maxMembers` members, `maxRelays` relayed probes, one pending piece of
///   news per member, and dead members forgotten after `deadRetentionMilliseconds`.
package struct SWIMState: Sendable {
    /// What this member knows of another.
    package struct Member: Hashable, Sendable {
        package var address: String
        package var incarnation: UInt64
        package var status: SWIMStatus
        /// When the status last changed here.
        package var changedAt: UInt64
    }

    /// What one probe round waits for.
    struct Probe: Sendable {
        var sequence: UInt64
        var target: String
        var timeoutAt: UInt64
        var endsAt: UInt64
        var indirectSent = false
        var expectedNacks = 0
        var nacks = 0
    }

    /// A ping this member sends for another (an indirect probe it relays).
    struct Relay: Sendable {
        var requester: String
        var requesterAddress: String
        var sequence: UInt64
        var nackAt: UInt64
    }

    /// One piece of news waiting to be piggybacked.
    struct Gossip: Sendable {
        var update: SWIMUpdate
        var transmits: Int
        var stamp: UInt64
    }

    /// A running suspicion: Lifeguard's shrinking timeout.
    struct Suspicion: Sendable {
        var startedAt: UInt64
        var minimum: UInt64
        var maximum: UInt64
        var expected: Int
        var suspecters: Set<String>

        var deadline: UInt64 {
            startedAt + SWIMConfiguration.suspicionTimeoutMilliseconds(
                minimum: minimum, maximum: maximum, confirmations: suspecters.count - 1, expected: expected)
        }
    }

    /// Counts of what this member did and refused, for metrics and the simulator's figures.
    package struct Counters: Hashable, Sendable {
        package var messagesSent: UInt64 = 0
        package var probes: UInt64 = 0
        package var failedProbes: UInt64 = 0
        package var suspicionsRaised: UInt64 = 0
        package var deathsDeclared: UInt64 = 0
        package var refutations: UInt64 = 0
        /// News of new members ignored because `maxMembers` were known.
        package var membersRefusedOverLimit: UInt64 = 0
        /// Ping requests not relayed because `maxRelays` were pending.
        package var relaysRefused: UInt64 = 0
        /// Messages from this member's own id or about an impossible incarnation.
        package var messagesIgnored: UInt64 = 0
    }

    package let id: String
    package let address: String
    package let configuration: SWIMConfiguration
    package private(set) var incarnation: UInt64
    package private(set) var members: [String: Member] = [:]
    package private(set) var counters = Counters()
    /// Lifeguard's local health: 0 healthy, up to `maxLocalHealth − 1`; intervals and timeouts
    /// are multiplied by one more than it.
    package private(set) var localHealth = 0
    /// Whether `leave(now:)` was called.
    package private(set) var leaving = false

    private var seeds: [String]
    private var random: SplitMix64
    private var probeOrder: [String] = []
    private var probeIndex = 0
    private var probe: Probe?
    private var relays: [UInt64: Relay] = [:]
    private var suspicions: [String: Suspicion] = [:]
    private var gone: Set<String> = []
    /// The pending news, one per member, and how often each was sent.
    private var gossip: [String: Gossip] = [:]
    /// The news by how often it was sent (index), oldest first; a slot whose stamp no longer
    /// matches its news was superseded and is skipped. Taking news is O(news taken).
    private var gossipQueues: [[(member: String, stamp: UInt64)]] = [[]]
    private var gossipHeads: [Int] = [0]
    private var gossipStamp: UInt64 = 0
    private var nextSequence: UInt64 = 1
    /// Every member id and this member's, sorted: the order of sync pages. Nil after a member
    /// is added or forgotten, until the next page needs it.
    private var sortedIDs: [String]?
    private var nextProbeAt: UInt64
    private var nextSyncAt: UInt64
    private var nextReconnectAt: UInt64
    private var nextJoinAt: UInt64
    private let codecLimits = SWIMCodec()

    /// A member `id` reachable at `address`, at `incarnation` (raise it on every start: the
    /// start time in milliseconds), that joins through `seeds` (addresses).
    package init(id: String, address: String, incarnation: UInt64, seeds: [String], configuration: SWIMConfiguration = SWIMConfiguration(),
                 randomSeed: UInt64, now: UInt64) {
        self.id = id
        self.address = address
        self.incarnation = incarnation
        self.configuration = configuration
        self.seeds = seeds.filter { $0 != address }
        random = SplitMix64(seed: randomSeed)
        nextProbeAt = now + configuration.probeIntervalMilliseconds
        nextJoinAt = now
        nextReconnectAt = now + configuration.reconnectIntervalMilliseconds
        nextSyncAt = now   // every stored property set before `jittered` may use `random`
        nextSyncAt = now + jittered(configuration.syncIntervalMilliseconds)
    }

    // MARK: reading

    /// Members other than this one that are alive or suspect.
    package var liveMemberCount: Int { members.count - gone.count }

    /// The ids of the members this one believes are alive or suspect, sorted.
    package var liveMembers: [String] { members.filter { !$0.value.status.isGone }.keys.sorted() }

    /// The earliest instant `tick(now:)` has something to do.
    package var nextWakeAt: UInt64 {
        var wake = min(nextProbeAt, nextSyncAt, nextReconnectAt)
        if liveMemberCount == 0, !seeds.isEmpty { wake = min(wake, nextJoinAt) }
        if let probe { wake = min(wake, probe.indirectSent ? probe.endsAt : probe.timeoutAt) }
        for relay in relays.values { wake = min(wake, relay.nackAt) }
        for suspicion in suspicions.values { wake = min(wake, suspicion.deadline) }
        return wake
    }

    private var healthScale: UInt64 { UInt64(localHealth + 1) }

    /// How many pages a whole member list takes (at least 1). The push-pull exchange runs once
    /// every `syncIntervalMilliseconds` times this, so what it costs a member a second stays
    /// the same at any fleet size; gossip, not push-pull, is what spreads news fast.
    package var syncPages: Int {
        var bytes = SWIMCodec.encodedBytes(of: SWIMUpdate(member: id, address: address, incarnation: incarnation, status: .alive))
        for (member, known) in members { bytes += 11 + member.utf8.count + known.address.utf8.count + (known.status == .suspect ? 16 : 0) }
        let perPage = max(1, configuration.maxMessageBytes - 64)
        return max(1, (bytes + perPage - 1) / perPage)
    }

    // MARK: time

    /// What is due at `now`: the probe round, its indirect probes and its verdict, relays'
    /// nacks, suspicions that ran out, the push-pull exchange, the join and the reconnect.
    package mutating func tick(now: UInt64) -> [SWIMDirective] {
        var out: [SWIMDirective] = []
        guard !leaving else { return out }
        if liveMemberCount == 0, !seeds.isEmpty, now >= nextJoinAt {
            nextJoinAt = now + configuration.probeIntervalMilliseconds * 2
            for seed in seeds.prefix(5) { send(.syncRequest(after: ""), to: seed, member: nil, into: &out) }
        }
        for (sequence, relay) in relays where now >= relay.nackAt {
            relays[sequence] = nil
            send(.nack(sequence: relay.sequence), to: relay.requesterAddress, member: relay.requester, into: &out)
        }
        for (member, suspicion) in suspicions where now >= suspicion.deadline {
            guard let known = members[member], known.status == .suspect else { suspicions[member] = nil; continue }
            counters.deathsDeclared += 1
            apply(SWIMUpdate(member: member, address: known.address, incarnation: known.incarnation, status: .dead),
                      now: now, gossiped: true, into: &out)
        }
        if var running = probe {
            if !running.indirectSent, now >= running.timeoutAt {
                running.indirectSent = true
                let helpers = randomLiveMembers(count: configuration.indirectProbes, excluding: running.target)
                running.expectedNacks = helpers.count
                if let target = members[running.target] {
                    for helper in helpers {
                        send(.pingRequest(sequence: running.sequence, target: running.target, targetAddress: target.address),
                             to: members[helper]!.address, member: helper, into: &out)
                    }
                }
                probe = running
            }
            if now >= running.endsAt { finishFailedProbe(running, now: now, into: &out) }
        }
        if probe == nil, now >= nextProbeAt { startProbe(now: now, into: &out) }
        if now >= nextSyncAt {
            nextSyncAt = now + jittered(configuration.syncIntervalMilliseconds * UInt64(syncPages))
            if let partner = randomLiveMembers(count: 1, excluding: nil).first {
                send(.syncRequest(after: ""), to: members[partner]!.address, member: partner, into: &out)
            }
            forgetLongDead(now: now)
        }
        if now >= nextReconnectAt {
            nextReconnectAt = now + jittered(configuration.reconnectIntervalMilliseconds)
            let dead = gone.filter { members[$0]?.status == .dead }.sorted()
            if !dead.isEmpty {
                let member = dead[Int(random.next() % UInt64(dead.count))]
                send(.ping(sequence: takeSequence(), target: member), to: members[member]!.address, member: member, into: &out)
            }
        }
        return out
    }

    /// Says this member is leaving: its `left` news goes to `indirectProbes` members now and
    /// rides on its answers until the shell stops it; it probes no more.
    package mutating func leave(now: UInt64) -> [SWIMDirective] {
        var out: [SWIMDirective] = []
        guard !leaving else { return out }
        leaving = true
        probe = nil
        queue(SWIMUpdate(member: id, address: address, incarnation: incarnation, status: .left))
        for member in randomLiveMembers(count: max(1, configuration.indirectProbes), excluding: nil) {
            send(.ping(sequence: takeSequence(), target: member), to: members[member]!.address, member: member, into: &out)
        }
        return out
    }

    private mutating func startProbe(now: UInt64, into out: inout [SWIMDirective]) {
        nextProbeAt = now + configuration.probeIntervalMilliseconds * healthScale
        guard let target = nextProbeTarget() else { return }
        let sequence = takeSequence()
        probe = Probe(sequence: sequence, target: target,
                      timeoutAt: now + configuration.probeTimeoutMilliseconds * healthScale,
                      endsAt: now + configuration.probeIntervalMilliseconds * healthScale)
        counters.probes += 1
        send(.ping(sequence: sequence, target: target), to: members[target]!.address, member: target, into: &out)
    }

    private mutating func finishFailedProbe(_ failed: Probe, now: UInt64, into out: inout [SWIMDirective]) {
        probe = nil
        counters.failedProbes += 1
        // Lifeguard: every nack a helper owed and did not send says this member's own links
        // are the slow ones; with no helper to ask, the miss alone counts.
        adjustHealth(failed.expectedNacks > 0 ? max(0, failed.expectedNacks - failed.nacks) : 1)
        guard let target = members[failed.target], !target.status.isGone else { return }
        counters.suspicionsRaised += 1
        apply(SWIMUpdate(member: failed.target, address: target.address, incarnation: target.incarnation, status: .suspect, origin: id),
                  now: now, gossiped: true, into: &out)
    }

    private mutating func nextProbeTarget() -> String? {
        for _ in 0..<2 {
            while probeIndex < probeOrder.count {
                let candidate = probeOrder[probeIndex]
                probeIndex += 1
                if let member = members[candidate], !member.status.isGone { return candidate }
            }
            var order = members.filter { !$0.value.status.isGone }.keys.sorted()
            shuffle(&order)
            probeOrder = order
            probeIndex = 0
            if probeOrder.isEmpty { return nil }
        }
        return nil
    }

    // MARK: messages

    /// Takes one message: its sender is alive at the incarnation it sends, its piggybacked
    /// news is merged, and the message answered.
    package mutating func receive(_ envelope: SWIMEnvelope, now: UInt64) -> [SWIMDirective] {
        var out: [SWIMDirective] = []
        guard !envelope.from.isEmpty, envelope.from != id else {
            counters.messagesIgnored += 1
            return out
        }
        apply(SWIMUpdate(member: envelope.from, address: envelope.fromAddress, incarnation: envelope.fromIncarnation, status: .alive),
                  now: now, gossiped: true, into: &out)
        for update in envelope.updates { apply(update, now: now, gossiped: true, into: &out) }
        switch envelope.message {
        case let .ping(sequence, target):
            if target.isEmpty || target == id {
                send(.ack(sequence: sequence), to: envelope.fromAddress, member: envelope.from, into: &out)
            }
        case let .pingRequest(sequence, target, targetAddress):
            guard !leaving, target != id, target != envelope.from else { break }
            guard relays.count < configuration.maxRelays else {
                counters.relaysRefused += 1
                break
            }
            let mine = takeSequence()
            relays[mine] = Relay(requester: envelope.from, requesterAddress: envelope.fromAddress, sequence: sequence,
                                 nackAt: now + configuration.probeTimeoutMilliseconds * 4 / 5)
            send(.ping(sequence: mine, target: target), to: targetAddress, member: target, into: &out)
        case let .ack(sequence):
            if let running = probe, running.sequence == sequence {
                probe = nil
                adjustHealth(-1)
            } else if let relay = relays.removeValue(forKey: sequence) {
                send(.ack(sequence: relay.sequence), to: relay.requesterAddress, member: relay.requester, into: &out)
            }
        case let .nack(sequence):
            if probe?.sequence == sequence { probe?.nacks += 1 }
        case let .syncRequest(after):
            sendSyncPage(after: after, to: envelope.fromAddress, into: &out)
        case let .syncReply(after, page, complete):
            for update in page { apply(update, now: now, gossiped: false, into: &out) }
            if !complete, let last = page.last?.member, last > after {
                send(.syncRequest(after: last), to: envelope.fromAddress, member: envelope.from, into: &out)
            }
        }
        return out
    }

    private mutating func sendSyncPage(after: String, to address: String, into out: inout [SWIMDirective]) {
        if sortedIDs == nil { sortedIDs = (Array(members.keys) + [id]).sorted() }
        let ids = sortedIDs!
        // The first id after `after`: a binary search of the sorted ids.
        var low = 0, high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] <= after { low = middle + 1 } else { high = middle }
        }
        var envelope = SWIMEnvelope(from: id, fromAddress: self.address, fromIncarnation: incarnation,
                                    message: .syncReply(after: after, members: [], complete: false))
        var budget = configuration.maxMessageBytes - SWIMCodec.encodedBytes(ofEmpty: envelope) - 4
        var page: [SWIMUpdate] = []
        var index = low
        while index < ids.count, page.count < codecLimits.maxUpdates {
            let update = news(of: ids[index])
            let bytes = SWIMCodec.encodedBytes(of: update)
            guard bytes <= budget else { break }
            budget -= bytes
            page.append(update)
            index += 1
        }
        envelope.message = .syncReply(after: after, members: page, complete: index == ids.count)
        record(envelope, to: address, into: &out)
    }

    /// What this member would tell of `member` (itself included).
    private func news(of member: String) -> SWIMUpdate {
        guard member != id, let known = members[member] else {
            return SWIMUpdate(member: id, address: address, incarnation: incarnation, status: leaving ? .left : .alive)
        }
        return SWIMUpdate(member: member, address: known.address, incarnation: known.incarnation, status: known.status,
                          origin: known.status == .suspect ? (suspicions[member]?.suspecters.min() ?? id) : "")
    }

    // MARK: news

    /// Merges `update` by SWIM's rule, telling the shell of every change to this member's view.
    /// `gossiped`: news passed on by piggyback (and so passed on again); a sync page's news
    /// is not, since the peer that sent it is the one that had it.
    private mutating func apply(_ update: SWIMUpdate, now: UInt64, gossiped: Bool, into out: inout [SWIMDirective]) {
        guard !update.member.isEmpty else { return }
        if update.member == id {
            refuteIfNeeded(update)
            return
        }
        guard let known = members[update.member] else {
            guard update.status == .alive || update.status == .suspect else { return }
            guard members.count < configuration.maxMembers else {
                counters.membersRefusedOverLimit += 1
                return
            }
            members[update.member] = Member(address: update.address, incarnation: update.incarnation, status: update.status, changedAt: now)
            sortedIDs = nil
            insertIntoProbeOrder(update.member)
            if update.status == .suspect { startSuspicion(of: update.member, by: update.origin, now: now) }
            queue(update)
            out.append(.changed(update, previous: nil))
            return
        }
        guard supersedes(update, known) else {
            if update.status == .suspect, known.status == .suspect, update.incarnation == known.incarnation,
               !update.origin.isEmpty, var suspicion = suspicions[update.member],
               suspicion.suspecters.count <= suspicion.expected, !suspicion.suspecters.contains(update.origin) {
                // Lifeguard: an independent suspecter shortens the suspicion, and its news is
                // passed on so that others count it too.
                suspicion.suspecters.insert(update.origin)
                suspicions[update.member] = suspicion
                queue(update)
            }
            return
        }
        var member = known
        member.incarnation = update.incarnation
        if !update.address.isEmpty { member.address = update.address }
        if member.status != update.status { member.changedAt = now }
        member.status = update.status
        members[update.member] = member
        if update.status.isGone { gone.insert(update.member) } else { gone.remove(update.member) }
        if update.status == .suspect {
            startSuspicion(of: update.member, by: update.origin, now: now)
        } else {
            suspicions[update.member] = nil
        }
        if known.status.isGone, !update.status.isGone { insertIntoProbeOrder(update.member) }
        if gossiped || update.status != .alive { queue(update) }
        out.append(.changed(SWIMUpdate(member: update.member, address: member.address, incarnation: member.incarnation,
                                       status: member.status, origin: update.origin), previous: known.status))
        return
    }

    /// SWIM's order of news about one member.
    private func supersedes(_ update: SWIMUpdate, _ known: Member) -> Bool {
        if update.incarnation != known.incarnation { return update.incarnation > known.incarnation }
        switch update.status {
        case .alive: return false
        case .suspect: return known.status == .alive
        case .dead, .left: return !known.status.isGone
        }
    }

    /// News that this member is suspect, dead or left at its own incarnation or later is
    /// refuted with a higher incarnation (unless it is leaving). News at the highest possible
    /// incarnation cannot be outranked and is ignored: no arithmetic on a peer's number traps.
    private mutating func refuteIfNeeded(_ update: SWIMUpdate) {
        guard update.status != .alive, update.incarnation >= incarnation, !leaving else { return }
        guard update.incarnation < UInt64.max else {
            counters.messagesIgnored += 1
            return
        }
        incarnation = update.incarnation + 1
        counters.refutations += 1
        adjustHealth(1)
        queue(SWIMUpdate(member: id, address: address, incarnation: incarnation, status: .alive))
    }

    private mutating func startSuspicion(of member: String, by origin: String, now: UInt64) {
        let bounds = configuration.suspicionBoundsMilliseconds(members: liveMemberCount + 1)
        var expected = max(0, configuration.suspicionMultiplier - 2)
        if liveMemberCount - 1 < expected { expected = 0 }
        suspicions[member] = Suspicion(startedAt: now, minimum: bounds.minimum, maximum: bounds.maximum, expected: expected,
                                       suspecters: [origin.isEmpty ? id : origin])
    }

    private mutating func forgetLongDead(now: UInt64) {
        for member in gone.sorted() {
            guard let known = members[member], now >= known.changedAt &+ configuration.deadRetentionMilliseconds else { continue }
            members[member] = nil
            sortedIDs = nil
            gone.remove(member)
            gossip[member] = nil
        }
    }

    private mutating func adjustHealth(_ delta: Int) {
        localHealth = min(configuration.maxLocalHealth - 1, max(0, localHealth + delta))
    }

    // MARK: sending

    private mutating func queue(_ update: SWIMUpdate) {
        gossipStamp += 1
        gossip[update.member] = Gossip(update: update, transmits: 0, stamp: gossipStamp)
        gossipQueues[0].append((update.member, gossipStamp))
    }

    /// Counts one more sending of `member`'s news: it moves to the next queue, or is done
    /// after `limit` sendings.
    private mutating func sent(_ member: String, limit: Int) {
        guard var entry = gossip[member] else { return }
        entry.transmits += 1
        guard entry.transmits < limit else {
            gossip[member] = nil
            return
        }
        gossipStamp += 1
        entry.stamp = gossipStamp
        gossip[member] = entry
        while gossipQueues.count <= entry.transmits {
            gossipQueues.append([])
            gossipHeads.append(0)
        }
        gossipQueues[entry.transmits].append((member, gossipStamp))
    }

    /// Sends `message` to `address` with as much pending news as fits `maxMessageBytes`,
    /// fewest-sent first; the recipient's own bad news goes first, so a suspect refutes at once
    /// (Lifeguard's buddy system).
    private mutating func send(_ message: SWIMMessage, to address: String, member: String?, into out: inout [SWIMDirective]) {
        var envelope = SWIMEnvelope(from: id, fromAddress: self.address, fromIncarnation: incarnation, message: message)
        var budget = configuration.maxMessageBytes - SWIMCodec.encodedBytes(ofEmpty: envelope) - 2
        if let member, let known = members[member], known.status != .alive, gossip[member] == nil {
            let own = SWIMUpdate(member: member, address: known.address, incarnation: known.incarnation, status: known.status,
                                 origin: known.status == .suspect ? id : "")
            budget -= SWIMCodec.encodedBytes(of: own)
            envelope.updates.append(own)
        }
        if !gossip.isEmpty {
            let limit = configuration.retransmitLimit(members: liveMemberCount + 1)
            var taken = 0
            // Only news queued before this message: what it takes moves to a later queue and
            // must not be taken twice.
            let ends = gossipQueues.map(\.count)
            if let member, let entry = gossip[member] {
                budget -= SWIMCodec.encodedBytes(of: entry.update)
                envelope.updates.append(entry.update)
                sent(member, limit: limit)
                taken += 1
            }
            // Fewest-sent first, oldest first within a count.
            var queue = 0
            selecting: while queue < ends.count, taken < 64 {
                var head = gossipHeads[queue]
                while head < ends[queue], taken < 64 {
                    let slot = gossipQueues[queue][head]
                    guard let entry = gossip[slot.member], entry.stamp == slot.stamp else {
                        head += 1
                        continue
                    }
                    let bytes = SWIMCodec.encodedBytes(of: entry.update)
                    guard bytes <= budget else {
                        gossipHeads[queue] = head
                        break selecting
                    }
                    head += 1
                    budget -= bytes
                    envelope.updates.append(entry.update)
                    sent(slot.member, limit: limit)
                    taken += 1
                }
                gossipHeads[queue] = head
                if head > 256, head * 2 > gossipQueues[queue].count {
                    gossipQueues[queue].removeFirst(head)
                    gossipHeads[queue] = 0
                }
                queue += 1
            }
        }
        record(envelope, to: address, into: &out)
    }

    private mutating func record(_ envelope: SWIMEnvelope, to address: String, into out: inout [SWIMDirective]) {
        counters.messagesSent += 1
        out.append(.send(address: address, envelope))
    }

    // MARK: randomness

    private mutating func takeSequence() -> UInt64 {
        defer { nextSequence &+= 1 }
        return nextSequence
    }

    private mutating func jittered(_ interval: UInt64) -> UInt64 {
        guard interval > 1 else { return interval }
        return interval / 2 + random.next() % interval
    }

    /// Fisher–Yates over `random`, written here rather than `shuffle(using:)`: the standard
    /// library's algorithm may change between Swift versions, and a seed must replay the same.
    private mutating func shuffle(_ list: inout [String]) {
        guard list.count > 1 else { return }
        for index in stride(from: list.count - 1, to: 0, by: -1) {
            list.swapAt(index, Int(random.next() % UInt64(index + 1)))
        }
    }

    /// A new member goes at a random place among those not yet probed this round, so it is
    /// probed within this round or the next.
    private mutating func insertIntoProbeOrder(_ member: String) {
        let remaining = probeOrder.count - probeIndex
        let offset = remaining > 0 ? Int(random.next() % UInt64(remaining + 1)) : 0
        probeOrder.insert(member, at: probeIndex + offset)
    }

    /// Up to `count` distinct live members other than `excluded`, chosen at random.
    private mutating func randomLiveMembers(count: Int, excluding excluded: String?) -> [String] {
        guard count > 0, liveMemberCount > 0 else { return [] }
        var chosen: [String] = []
        var tries = 0
        // Probe order holds every live member (and some gone ones): sample it, then fall back.
        while chosen.count < count, tries < count * 4, !probeOrder.isEmpty {
            tries += 1
            let candidate = probeOrder[Int(random.next() % UInt64(probeOrder.count))]
            if candidate != excluded, !chosen.contains(candidate), let member = members[candidate], !member.status.isGone {
                chosen.append(candidate)
            }
        }
        if chosen.count < count, liveMemberCount <= count * 4 {
            for candidate in liveMembers where candidate != excluded && !chosen.contains(candidate) && chosen.count < count {
                chosen.append(candidate)
            }
        }
        return chosen
    }
}

/// What `SWIMState` asks its shell to do.
package enum SWIMDirective: Hashable, Sendable {
    /// Send `envelope` (encode it with `SWIMCodec`) to `address`. Loss is expected.
    case send(address: String, SWIMEnvelope)
    /// This member's view of `update.member` changed to `update` (from `previous`, nil for a
    /// member it did not know).
    case changed(SWIMUpdate, previous: SWIMStatus?)
}
