import Decide
import DecideCore
import DecideRESP
import DecideUV
import Dispatch

/// SUBSCRIBE / PSUBSCRIBE to keyspace notifications. Every change this node commits, applies
/// from a peer or takes in a catch-up, every value that expires here, and every owned value
/// that disappears or returns with its owner (as `del` / `set`), is published, once per key,
/// on three channels:
/// - `__keyspace@0__:KEY` with the event (`set`, `del`, `expired`, `incrby` for a counter's
///   change, `sadd` / `srem` for a dot of a set written / deleted, `zadd` / `zrem` for a
///   sorted set's member scored / removed), as Redis does;
/// - `__keyevent@0__:set` / `del` / `expired` / `incrby` / `sadd` / `srem` / `zadd` / `zrem`
///   with the key, as Redis does;
/// - `__decide@0__:KEY` with the entry as JSON (`{"key","value","deleted","version","origin"}`),
///   what `syncnode watch` prints.
/// PUBLISH is refused: these channels carry Decide's changes only.
extension RESPService {
    static let keyspacePrefix = Array("__keyspace@0__:".utf8)
    static let keyeventSet = Array("__keyevent@0__:set".utf8)
    static let keyeventDel = Array("__keyevent@0__:del".utf8)
    static let keyeventIncrby = Array("__keyevent@0__:incrby".utf8)
    static let keyeventHincrby = Array("__keyevent@0__:hincrby".utf8)
    static let keyeventSadd = Array("__keyevent@0__:sadd".utf8)
    static let keyeventSrem = Array("__keyevent@0__:srem".utf8)
    static let keyeventZadd = Array("__keyevent@0__:zadd".utf8)
    static let keyeventZrem = Array("__keyevent@0__:zrem".utf8)
    static let keyeventExpired = Array("__keyevent@0__:expired".utf8)
    static let decidePrefix = Array("__decide@0__:".utf8)
    /// Where a `__decide@0__` subscriber hears that notifications were dropped.
    static let decideGapChannel = Array("__decide@0__".utf8)

    func subscribe(_ arguments: [ArraySlice<UInt8>], patterns: Bool, session: RESPSession) {
        let kind = patterns ? "psubscribe" : "subscribe"
        subscribing: for argument in arguments.dropFirst() {
            guard argument.count <= configuration.maxSubscriptionNameBytes else {
                session.writer.error("ERR \(patterns ? "pattern" : "channel") of \(argument.count) bytes, more than maxSubscriptionNameBytes \(configuration.maxSubscriptionNameBytes)")
                break subscribing
            }
            let name = Array(argument)
            let known = patterns ? session.patternSet.contains(name) : session.channelSet.contains(name)
            if !known {
                guard session.subscriptionCount < configuration.maxSubscriptionsPerConnection else {
                    session.writer.error("ERR more than maxSubscriptionsPerConnection \(configuration.maxSubscriptionsPerConnection) subscriptions on one connection")
                    break subscribing  // the subscriptions made so far must still be registered below
                }
                // Charged before it is kept: a client past its memory share is refused here,
                // and `charge` closes one that passes it otherwise.
                let cost = Self.subscriptionCost(name, pattern: patterns)
                guard session.heldBytes + cost <= memoryShare(of: session) else {
                    session.writer.error("ERR subscriptions past this client's memory share (\(memoryShare(of: session)) bytes, maxClientMemoryBytes): subscribe to fewer or shorter names")
                    break subscribing
                }
                session.subscriptionBytes += cost
                if patterns {
                    let glob = RESPGlob(name)
                    session.patterns.append(name)
                    session.compiledPatterns.append(glob)
                    session.patternSet.insert(name)
                    subscriptionIndex.addPattern(name, glob, session)
                } else {
                    session.channels.append(name)
                    session.channelSet.insert(name)
                    subscriptionIndex.addChannel(name, session)
                }
            }
            session.writer.pushHeader(3)
            session.writer.bulk(kind)
            session.writer.bulk(name)
            session.writer.integer(session.subscriptionCount)
        }
        if session.isSubscribed, subscribers.updateValue(session, forKey: session.connection.id) == nil { subscribersChanged() }
    }

    func unsubscribe(_ arguments: [ArraySlice<UInt8>], patterns: Bool, session: RESPSession) {
        let kind = patterns ? "punsubscribe" : "unsubscribe"
        var names = arguments.dropFirst().map { Array($0) }
        let allPatterns = names.isEmpty && patterns
        if names.isEmpty {
            names = patterns ? session.patterns : session.channels
            // All of them: one pass over each bucket they are in, not one per pattern.
            if patterns { subscriptionIndex.removeAllPatterns(of: session) }
        }
        if names.isEmpty {
            session.writer.pushHeader(3)
            session.writer.bulk(kind)
            session.writer.null()
            session.writer.integer(session.subscriptionCount)
        }
        for name in names {
            if patterns {
                if session.patternSet.remove(name) != nil, let index = session.patterns.firstIndex(of: name) {
                    if !allPatterns { subscriptionIndex.removePattern(name, session.compiledPatterns[index], session) }
                    session.patterns.remove(at: index)
                    session.compiledPatterns.remove(at: index)
                    session.subscriptionBytes -= Self.subscriptionCost(name, pattern: true)
                }
            } else if session.channelSet.remove(name) != nil {
                subscriptionIndex.removeChannel(name, session)
                session.channels.removeAll { $0 == name }
                session.subscriptionBytes -= Self.subscriptionCost(name, pattern: false)
            }
            session.writer.pushHeader(3)
            session.writer.bulk(kind)
            session.writer.bulk(name)
            session.writer.integer(session.subscriptionCount)
        }
        if !session.isSubscribed, subscribers.removeValue(forKey: session.connection.id) != nil { subscribersChanged() }
    }

    /// What keeping one subscription costs its client: the name (twice: the list and the set),
    /// a pattern's compiled form (at most 16 bytes a pattern byte: a token each, a set's 32 bytes
    /// from at least two), and
    /// `subscriptionOverheadBytes`.
    static func subscriptionCost(_ name: [UInt8], pattern: Bool) -> Int {
        2 * name.count + (pattern ? 16 * name.count : 0) + subscriptionOverheadBytes
    }

    func dropSubscriptions(_ session: RESPSession) {
        subscriptionIndex.removeAll(of: session)
        session.channels = []
        session.channelSet = []
        session.patterns = []
        session.compiledPatterns = []
        session.patternSet = []
        session.subscriptionBytes = 0
        if subscribers.removeValue(forKey: session.connection.id) != nil { subscribersChanged() }
    }

    /// Registers the node listener when the first subscriber came, removes it when the last
    /// left: without subscribers, commits pay nothing for notifications.
    func subscribersChanged() {
        if subscribers.isEmpty, let listener = notificationListener {
            node.removeCommitListener(listener)
            notificationListener = nil
            _ = notifications.takeAll()
        } else if !subscribers.isEmpty, notificationListener == nil, let server = server {
            let queue = notifications
            let service = LoopBound(value: self)
            notificationListener = node.addCommitListener { delta in
                if queue.push(delta) {
                    server.execute { service.value.drainNotifications(server) }
                }
            }
        }
    }

    /// Glob steps of notification matching one loop turn may take before the rest of the
    /// changes wait for the next turn (other clients are served in between). One key's change
    /// is never split: a turn ends after the change that passed the bound.
    static let notificationStepsPerTurn = 1_000_000
    /// Time one loop turn's notification matching may take (checked between two candidates)
    /// before the rest waits for the next turn, whichever of this and the steps comes first.
    static let notificationNanosecondsPerTurn: UInt64 = 5_000_000

    /// Turns the queued changes into messages for their subscribers (loop thread): each of a
    /// change's three channels is looked up in `subscriptionIndex`, and once a turn's matching
    /// passed `notificationStepsPerTurn` the remaining changes go on in a later turn, in order.
    func drainNotifications(_ server: UVStreamServer) {
        var deltas: [CommittedDelta] = []
        swap(&deltas, &deferredDeltas)
        var firstItem = deferredItem
        deferredItem = 0
        let (fresh, dropped) = notifications.takeAll()
        if deltas.isEmpty { firstItem = 0 }
        deltas += fresh
        guard !subscribers.isEmpty else {
            deferredWork = nil
            return
        }
        let sessions = subscribers.values.sorted { $0.connection.id < $1.connection.id }
        if dropped > 0 {
            logger.warning("notifications dropped: changes came faster than subscribers were sent them", metadata: [
                "dropped": "\(dropped)", "maxQueuedNotificationBytes": "\(configuration.maxQueuedNotificationBytes)"])
            let note = ReplyJSON.object([
                ("gap", .number(String(dropped))),
                ("note", .string("this watcher missed \(dropped) changes; re-read with get or dump")),
            ])
            for session in sessions where listensToDecide(session) {
                deliver(session, channel: Self.decideGapChannel, pattern: nil, payload: note)
            }
            // The keyspace channels have no gap message: a subscriber that cannot be told is
            // disconnected rather than left silently missing changes.
            for session in sessions where !session.finished && !listensToDecide(session) {
                logger.warning("subscriber disconnected: it missed dropped notifications", metadata: [
                    "client": "\(session.connection.id)", "peer": "\(session.connection.peer)"])
                session.finished = true
                server.closeWhenWritten(session.connection)
            }
        }
        var steps = 0
        let turnDeadline = DispatchTime.now().uptimeNanoseconds + Self.notificationNanosecondsPerTurn
        var work: NotificationWork?
        swap(&work, &deferredWork)
        var deltaIndex = 0
        var itemIndex = firstItem
        while true {
            if work == nil {
                // The next key's change, its candidates gathered (nothing matched yet).
                while deltaIndex < deltas.count && itemIndex >= deltas[deltaIndex].delta.entries.count {
                    deltaIndex += 1
                    itemIndex = 0
                }
                guard deltaIndex < deltas.count else { break }
                work = NotificationWork(deltas[deltaIndex], item: itemIndex, index: subscriptionIndex, steps: &steps)
                itemIndex += 1
            }
            if work!.run(deliver: { deliver($0, channel: $1, pattern: $2, payload: $3) }, steps: &steps, until: Self.notificationStepsPerTurn,
                            orUptimeNanoseconds: turnDeadline) {
                work = nil
                continue
            }
            // Past the turn's bound: the rest waits for the next turn, in order.
            deferredWork = work
            deferredDeltas = Array(deltas[min(deltaIndex, deltas.count)...])
            deferredItem = itemIndex
            let service = LoopBound(value: self)
            server.execute { service.value.drainNotifications(server) }
            break
        }
        notificationMatchSteps += UInt64(steps)
        busiestNotificationTurnSteps = max(busiestNotificationTurnSteps, steps)
        for session in sessions where !session.finished {
            let connection = session.connection
            if connection.unwrittenBytes > configuration.maxSubscriberOutputBytes {
                logger.warning("subscriber disconnected: it stopped reading its notifications", metadata: [
                    "client": "\(connection.id)", "peer": "\(connection.peer)",
                    "unwrittenBytes": "\(connection.unwrittenBytes)",
                    "maxSubscriberOutputBytes": "\(configuration.maxSubscriberOutputBytes)"])
                session.finished = true
                server.close(connection)
            } else {
                server.flush(connection)
                charge(session, server: server)
            }
        }
    }

    /// Whether `session` subscribed to a `__decide@0__` channel or to a pattern that names them.
    private func listensToDecide(_ session: RESPSession) -> Bool {
        session.channels.contains { $0.starts(with: Self.decidePrefix) }
            || session.patterns.indices.contains { session.compiledPatterns[$0].matches(Self.decidePrefix) || session.patterns[$0].starts(with: Self.decidePrefix) }
    }

    func deliver(_ session: RESPSession, channel: [UInt8], pattern: [UInt8]?, payload: [UInt8]) {
        var writer = RESPWriter(protocolVersion: session.protocolVersion)
        swap(&writer.bytes, &session.connection.output)
        if let pattern {
            writer.pushHeader(4)
            writer.bulk("pmessage")
            writer.bulk(pattern)
        } else {
            writer.pushHeader(3)
            writer.bulk("message")
        }
        writer.bulk(channel)
        writer.bulk(payload)
        swap(&writer.bytes, &session.connection.output)
    }
}

/// One key's change being turned into notifications: its three channels, their payloads, and
/// the subscriptions that may want them, gone through in order and resumable between loop
/// turns (`RESPService.drainNotifications`).
struct NotificationWork {
    private var channels: [[UInt8]]
    private var payloads: [[UInt8]?]
    private let item: KeyedEntry
    private let origin: String
    private var candidates: [SubscriptionIndex.Candidate] = []
    private var next = 0

    /// Item `item` of `committed`, with its candidates from `index` (a step per bucket looked up).
    init(_ committed: CommittedDelta, item: Int, index: SubscriptionIndex, steps: inout Int) {
        switch committed.origin {
        case .local: origin = "local"
        case .remote: origin = "remote"
        case .catchUp: origin = "catch-up"
        case .expired: origin = "expired"
        case .ownerGone: origin = "owner-gone"
        case .ownerBack: origin = "owner-back"
        }
        let expired = committed.origin == .expired
        self.item = committed.delta.entries[item]
        // A counter's slot changed: Redis's event for INCR, INCRBY, DECR and DECRBY, on the key;
        // a hash's counter field's: HINCRBY's, on the hash;
        // a set's dot: SADD's (a dot written) or SREM's (one deleted); a sorted set's member:
        // ZADD's or ZREM's.
        let name = RESPService.redisName(of: self.item.key)
        let deleted = self.item.entry.isTombstone
        let event: String
        let keyevent: [UInt8]
        if expired {
            (event, keyevent) = ("expired", RESPService.keyeventExpired)
        } else if CounterSlot.field(of: self.item.key) != nil {
            (event, keyevent) = deleted ? ("del", RESPService.keyeventDel) : ("hincrby", RESPService.keyeventHincrby)
        } else if CounterSlot.counts(self.item.key) {
            (event, keyevent) = deleted ? ("del", RESPService.keyeventDel) : ("incrby", RESPService.keyeventIncrby)
        } else if SetDot.member(of: self.item.key) != nil {
            (event, keyevent) = deleted ? ("srem", RESPService.keyeventSrem) : ("sadd", RESPService.keyeventSadd)
        } else if SortedSetMember.member(of: self.item.key) != nil {
            (event, keyevent) = deleted ? ("zrem", RESPService.keyeventZrem) : ("zadd", RESPService.keyeventZadd)
        } else {
            (event, keyevent) = deleted ? ("del", RESPService.keyeventDel) : ("set", RESPService.keyeventSet)
        }
        channels = [RESPService.keyspacePrefix + name, keyevent, RESPService.decidePrefix + name]
        payloads = [Array(event.utf8), name, nil]
        for (position, channel) in channels.enumerated() {
            index.appendCandidates(of: channel, index: position, steps: &steps, into: &candidates)
        }
    }

    /// Matches and delivers to the candidates left, in order, until done (true) or `steps`
    /// reached `maxSteps` or the uptime clock `deadline` (false: call again later to go on).
    mutating func run(deliver: (RESPSession, [UInt8], [UInt8]?, [UInt8]) -> Void, steps: inout Int, until maxSteps: Int,
                      orUptimeNanoseconds deadline: UInt64) -> Bool {
        while next < candidates.count {
            if steps >= maxSteps || DispatchTime.now().uptimeNanoseconds >= deadline { return false }
            let candidate = candidates[next]
            next += 1
            guard !candidate.session.finished, !candidate.session.closed else { continue }
            let channel = channels[candidate.channel]
            if let glob = candidate.glob, !glob.matches(channel, steps: &steps) { continue }
            if payloads[candidate.channel] == nil {
                payloads[candidate.channel] = Array(ReplyJSON.entry(key: item.key, entry: item.entry,
                                                                    extra: [("origin", .string(origin))]).compact().utf8)
            }
            deliver(candidate.session, channel, candidate.pattern, payloads[candidate.channel]!)
        }
        return true
    }
}
