import CoreMetrics
import DecideCore
import Synchronization

/// What a node and its replication engine report through swift-metrics (docs/operations.md,
/// "Metrics"), every metric labelled `node`:
/// - counters: `decide_decisions_total`, `decide_remote_deltas_applied_total`,
///   `decide_deltas_sent_total`, `decide_deltas_dropped_total`, `decide_deltas_received_total`,
///   `decide_incoming_deltas_dropped_total`, `decide_catchup_walks_total{outcome}`,
///   `decide_catchup_entries_total`, `decide_catchup_bytes_total`,
///   `decide_link_changes_total{change}`, `decide_protocol_violations_total`;
/// - gauges: `decide_entries`, `decide_tombstones`, `decide_expiring_entries`,
///   `decide_peers_connected`, `decide_peers_known`, `decide_peer_queued_bytes{peer}`;
/// - a timer: `decide_propagation_lag_seconds` (a delta's age when applied here, by the writer's
///   hybrid clock against this node's physical clock; skew shows in it).
///
/// Guarantees: the decision path is never touched; counts are kept as plain integers where they
/// happen and published as differences on the engine's tick, so a counter never goes backwards
/// and a slow backend costs the tick, not a decision. Without a bootstrapped backend every call
/// is swift-metrics' no-op.
final class ReplicationMetrics: Sendable {
    private let intervalMilliseconds: UInt64
    private let dimensions: [(String, String)]
    private struct Published {
        var at: UInt64 = 0
        var totals = ReplicatorState.Totals()
        var decisions: UInt64 = 0
        var remoteDeltas: UInt64 = 0
        var peerGauges: [String: Gauge] = [:]
    }
    private let published = Mutex(Published())

    /// The engine's counts, each with its metric: published as the differences between ticks.
    private static let engineCounts: [(label: String, extra: [(String, String)], count: @Sendable (ReplicatorState.Totals) -> UInt64)] = [
        ("decide_deltas_sent_total", [], { $0.deltasQueued }),
        ("decide_deltas_dropped_total", [], { $0.deltasDropped }),
        ("decide_deltas_received_total", [], { $0.deltasApplied }),
        ("decide_incoming_deltas_dropped_total", [], { $0.incomingDeltasDropped }),
        ("decide_catchup_walks_total", [("outcome", "finished")], { $0.walksFinished }),
        ("decide_catchup_walks_total", [("outcome", "abandoned")], { $0.walksAbandoned }),
        ("decide_catchup_entries_total", [], { $0.walkEntriesReceived }),
        ("decide_catchup_bytes_total", [], { $0.walkBytesReceived }),
        ("decide_link_changes_total", [("change", "up")], { $0.linksUp }),
        ("decide_link_changes_total", [("change", "down")], { $0.linksDown }),
        ("decide_protocol_violations_total", [], { $0.protocolViolations }),
    ]
    private let engineCounters: [Counter]
    private let decisions, remoteDeltas: Counter
    private let entries, tombstones, expiring, connected, known: Gauge
    private let lag: CoreMetrics.Timer

    init(nodeID: String, intervalMilliseconds: UInt64) {
        self.intervalMilliseconds = intervalMilliseconds
        let node = [("node", nodeID)]
        dimensions = node
        decisions = Counter(label: "decide_decisions_total", dimensions: node)
        remoteDeltas = Counter(label: "decide_remote_deltas_applied_total", dimensions: node)
        engineCounters = Self.engineCounts.map { Counter(label: $0.label, dimensions: node + $0.extra) }
        entries = Gauge(label: "decide_entries", dimensions: node)
        tombstones = Gauge(label: "decide_tombstones", dimensions: node)
        expiring = Gauge(label: "decide_expiring_entries", dimensions: node)
        connected = Gauge(label: "decide_peers_connected", dimensions: node)
        known = Gauge(label: "decide_peers_known", dimensions: node)
        lag = CoreMetrics.Timer(label: "decide_propagation_lag_seconds", dimensions: node, preferredDisplayUnit: .seconds)
    }

    /// Whether a publication is due at `now` (engine clock); claims it when so.
    func isDue(now: UInt64) -> Bool {
        published.withLock { published in
            guard published.at == 0 || now &- published.at >= intervalMilliseconds else { return false }
            published.at = max(now, 1)
            return true
        }
    }

    /// Records the age of each applied delta: this node's physical time minus the physical part
    /// of the delta's version (0 when the writer's clock is ahead).
    func propagated(_ timestamps: some Sequence<HLCTimestamp>, now: UInt64) {
        for timestamp in timestamps {
            let written = timestamp.physicalMilliseconds
            lag.recordMilliseconds(now > written ? Int64(clamping: now - written) : 0)
        }
    }

    func publish(totals: ReplicatorState.Totals, status: ReplicationStatus, summary: StateSummary) {
        let gauges = published.withLock { published -> [(Gauge, Int)] in
            let before = published.totals
            func add(_ counter: Counter, _ now: UInt64, _ then: UInt64) {
                if now > then { counter.increment(by: Int64(clamping: now - then)) }
            }
            for (counter, item) in zip(engineCounters, Self.engineCounts) { add(counter, item.count(totals), item.count(before)) }
            add(decisions, summary.committedDecisions, published.decisions)
            add(remoteDeltas, summary.appliedRemoteDeltas, published.remoteDeltas)
            published.totals = totals
            published.decisions = max(published.decisions, summary.committedDecisions)
            published.remoteDeltas = max(published.remoteDeltas, summary.appliedRemoteDeltas)
            var gauges: [(Gauge, Int)] = []
            for member in status.members where member.link != .removed {
                let gauge = published.peerGauges[member.nodeID] ?? Gauge(
                    label: "decide_peer_queued_bytes", dimensions: dimensions + [("peer", member.nodeID)])
                published.peerGauges[member.nodeID] = gauge
                gauges.append((gauge, member.outboundBytesQueued))
            }
            return gauges
        }
        for (gauge, bytes) in gauges { gauge.record(bytes) }
        entries.record(summary.entryCount)
        tombstones.record(summary.tombstoneCount)
        expiring.record(summary.expiringCount)
        connected.record(status.members.filter { $0.link == .connected }.count)
        known.record(status.members.filter { $0.link != .removed }.count)
    }
}
