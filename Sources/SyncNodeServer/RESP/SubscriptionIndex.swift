import DecideRESP

/// Who listens to a channel, found without looking at every subscription: exact channels in a
/// table (channel → subscribers), patterns in buckets keyed by their literal prefix (at most
/// `bucketPrefixBytes` of it). A channel is looked up once per prefix length, 0 through
/// `bucketPrefixBytes`: only patterns whose literal prefix the channel starts with are matched,
/// each compiled once at PSUBSCRIBE. Patterns that start with a wildcard share the empty
/// bucket, so they are matched against every channel: their work is what `steps` counts and the
/// service bounds per loop turn.
///
/// Loop thread only (the service's subscriptions).
struct SubscriptionIndex {
    /// One PSUBSCRIBE of one session.
    struct PatternEntry {
        let session: RESPSession
        let pattern: [UInt8]
        let glob: RESPGlob
    }

    /// How much of a pattern's literal prefix keys its bucket.
    static let bucketPrefixBytes = 16

    private var channels: [[UInt8]: [RESPSession]] = [:]
    private var buckets: [[UInt8]: [PatternEntry]] = [:]

    /// No channel and no pattern is subscribed.
    var isEmpty: Bool { channels.isEmpty && buckets.isEmpty }

    static func bucketKey(_ glob: RESPGlob) -> [UInt8] { Array(glob.literalPrefix.prefix(bucketPrefixBytes)) }

    mutating func addChannel(_ name: [UInt8], _ session: RESPSession) {
        channels[name, default: []].append(session)
    }

    mutating func removeChannel(_ name: [UInt8], _ session: RESPSession) {
        guard var listeners = channels[name] else { return }
        listeners.removeAll { $0 === session }
        channels[name] = listeners.isEmpty ? nil : listeners
    }

    mutating func addPattern(_ name: [UInt8], _ glob: RESPGlob, _ session: RESPSession) {
        buckets[Self.bucketKey(glob), default: []].append(PatternEntry(session: session, pattern: name, glob: glob))
    }

    mutating func removePattern(_ name: [UInt8], _ glob: RESPGlob, _ session: RESPSession) {
        let key = Self.bucketKey(glob)
        guard var entries = buckets[key], let index = entries.firstIndex(where: { $0.session === session && $0.pattern == name })
        else { return }
        entries.remove(at: index)
        buckets[key] = entries.isEmpty ? nil : entries
    }

    /// Removes every subscription of `session`: one pass over each bucket and channel it used.
    mutating func removeAll(of session: RESPSession) {
        for name in session.channels { removeChannel(name, session) }
        removeAllPatterns(of: session)
    }

    /// Removes every pattern subscription of `session` (PUNSUBSCRIBE without names).
    mutating func removeAllPatterns(of session: RESPSession) {
        var keys = Set<[UInt8]>()
        for glob in session.compiledPatterns { keys.insert(Self.bucketKey(glob)) }
        for key in keys {
            guard var entries = buckets[key] else { continue }
            entries.removeAll { $0.session === session }
            buckets[key] = entries.isEmpty ? nil : entries
        }
    }

    /// A subscription that may want a channel's message: an exact subscriber (no glob), or a
    /// pattern to match first.
    struct Candidate {
        let session: RESPSession
        let pattern: [UInt8]?
        let glob: RESPGlob?
        /// Which of the change's channels it is a candidate for.
        let channel: Int
    }

    /// Appends `channel`'s exact subscribers and the patterns of the buckets its prefixes name
    /// (not matched yet: the caller matches them and can stop between any two). Adds one step
    /// per bucket looked up and per candidate.
    func appendCandidates(of channel: [UInt8], index: Int, steps: inout Int, into candidates: inout [Candidate]) {
        if let listeners = channels[channel] {
            for session in listeners { candidates.append(Candidate(session: session, pattern: nil, glob: nil, channel: index)) }
        }
        guard !buckets.isEmpty else { return }
        for length in 0 ... min(Self.bucketPrefixBytes, channel.count) {
            steps += 1
            guard let entries = buckets[Array(channel[0 ..< length])] else { continue }
            steps += entries.count
            for entry in entries {
                candidates.append(Candidate(session: entry.session, pattern: entry.pattern, glob: entry.glob, channel: index))
            }
        }
    }
}
