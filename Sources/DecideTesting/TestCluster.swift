import Decide
import DecideSimulation
import Foundation
import Logging

/// A cluster for tests: real `Node`s and `Replicator`s (the production engine, unchanged) over
/// the seeded simulator's network and clock, so partitions, crashes, restarts and weeks of time
/// run in milliseconds and replay exactly from the seed.
///
/// Guarantees: everything runs on the calling thread, only inside `run`; the same seed and the
/// same calls give the same history, byte for byte (a failure message names the seed to replay
/// with `SIM_SEED`); nothing touches a real socket or the wall clock.
///
/// ```swift
/// let cluster = TestCluster(seed: 7, ids: ["a", "b"])
/// cluster.network.partition("a", from: "b")
/// cluster.node("a").decide(Post(id: 1, text: "hi"))
/// cluster.network.heal()
/// #expect(cluster.runUntilConverged())
/// ```
public final class TestCluster: @unchecked Sendable {
    /// One running member: its node, its simulated transport and engine, its clock.
    public struct Member {
        /// The member's node; a restart keeps it unless the restart is `empty`.
        public var node: Node
        /// The member's transport on the simulated network; each start makes a new one.
        public var transport: SimulatedTransport
        /// The member's replication engine; each start makes a new one.
        public var replicator: Replicator
        /// The member's physical clock, kept across restarts.
        public let clock: SimulatedClock
        /// Whether the member is running: false from `crash` until `restart`.
        public var alive: Bool
    }

    /// One committed local decision: its version and the keys it wrote (nil value = delete).
    public struct Committed: Sendable {
        /// The version of the decision.
        public let version: Version
        /// The decision's writes.
        public let writes: [Delta.Write]
    }

    /// The seed of every random choice in the simulation; `SIM_SEED` replays it.
    public let seed: UInt64
    /// The simulator's scheduler: virtual time, timers and the seeded random source.
    public let scheduler: SimulatedScheduler
    /// The simulated network: `partition`, `heal`, `isolate`, faults (see `SimulatedNetwork`).
    public let network: SimulatedNetwork
    /// Every member ever started, by id, crashed ones included (`alive` false).
    public private(set) var members: [String: Member] = [:]
    /// Every local decision committed on any node, in commit order (for lost-write checks).
    public private(set) var history: [Committed] = []
    /// Every node ever started, in start order (joiners are appended).
    public private(set) var ids: [String]
    /// The engine configuration every member starts with (short timeouts, scaled by `timeScale`).
    public var replicatorConfiguration: Replicator.Configuration
    var nodeConfigure: (inout Node.Configuration) -> Void
    /// Every node's `maxClockSkewMilliseconds`.
    public let maxClockSkewMilliseconds: UInt64 = 10_000
    private var restarts: UInt64 = 0
    /// Where each node keeps its member list, as a durable node does in its data directory.
    public let directory: URL

    /// `seeds[id]` are the nodes `id` dials at start (default: the first other node; `[]` for
    /// none). Every engine ticks every 50 ms × `timeScale`; its intervals, timeouts and metrics
    /// interval scale by the same factor (a weeks-long run at 1,000 ticks every 50 s).
    public init(seed: UInt64, ids: [String], seeds: [String: [String]] = [:],
         networkConfiguration: SimulatedNetwork.Configuration = .init(),
         timeScale: UInt64 = 1,
         configureNode: @escaping (inout Node.Configuration) -> Void = { _ in },
         configure: (inout Replicator.Configuration) -> Void = { _ in }) {
        self.seed = seed
        self.ids = ids
        self.nodeConfigure = configureNode
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("decide-sim-\(seed)-\(UInt64.random(in: 0...UInt64.max))")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        scheduler = SimulatedScheduler(seed: seed)
        network = SimulatedNetwork(scheduler: scheduler, configuration: networkConfiguration)
        var configuration = Replicator.Configuration()
        configuration.heartbeatIntervalMilliseconds = 200
        configuration.failureTimeoutMilliseconds = 1_000
        configuration.gossipIntervalMilliseconds = 500
        configuration.antiEntropyIntervalMilliseconds = 1_000
        configuration.antiEntropyTimeoutMilliseconds = 1_000
        configuration.reconnectBaseMilliseconds = 50
        configuration.reconnectMaxMilliseconds = 1_000
        configuration.tombstoneCollectionIntervalMilliseconds = 500
        configuration.heartbeatIntervalMilliseconds *= timeScale
        configuration.failureTimeoutMilliseconds *= timeScale
        configuration.gossipIntervalMilliseconds *= timeScale
        configuration.antiEntropyIntervalMilliseconds *= timeScale
        configuration.antiEntropyTimeoutMilliseconds *= timeScale
        configuration.reconnectBaseMilliseconds *= timeScale
        configuration.reconnectMaxMilliseconds *= timeScale
        configuration.tombstoneCollectionIntervalMilliseconds *= timeScale
        configuration.metricsIntervalMilliseconds = configuration.metricsIntervalMilliseconds.map { $0 * timeScale }
        configuration.logger = TestCluster.quietLogger
        configure(&configuration)
        replicatorConfiguration = configuration
        for id in ids {
            let clock = SimulatedClock(scheduler: scheduler)
            members[id] = makeMember(id: id, node: makeNode(id: id, clock: clock), clock: clock,
                                     seeds: seeds[id]?.map(TestCluster.address))
        }
        _ = scheduler.every(milliseconds: 50 * timeScale) { [unowned self] in
            for id in self.ids where self.members[id]?.alive == true { self.members[id]!.replicator.tick() }
        }
    }

    /// The logger every member uses: critical messages only.
    public static let quietLogger: Logger = {
        var logger = Logger(label: "sim")
        logger.logLevel = .critical
        return logger
    }()

    /// The simulated address member `id` listens on.
    public static func address(_ id: String) -> String { "sim://\(id)" }

    private func makeNode(id: String, clock: SimulatedClock) -> Node {
        var configuration = Node.Configuration(id: id)
        configuration.clock = clock
        configuration.digestFanoutBits = 2
        configuration.digestDepth = 3
        configuration.maxClockSkewMilliseconds = maxClockSkewMilliseconds
        configuration.logger = TestCluster.quietLogger
        nodeConfigure(&configuration)
        let node = try! Node(configuration: configuration)
        _ = node.addCommitListener { [unowned self] committed in
            if committed.origin == .local { self.history.append(Committed(version: committed.delta.version, writes: committed.delta.writes)) }
        }
        return node
    }

    deinit {
        // A live transport and the network hold each other (and the transport its engine and
        // node), and pending events hold links, transports and the network: every member is
        // crashed and the events dropped, or every cluster outlives its test.
        for id in ids { crash(id) }
        scheduler.discardPendingEvents()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Where member `id` keeps its member list.
    public func membershipPath(_ id: String) -> String { directory.appendingPathComponent("\(id).members.json").path }

    private func makeMember(id: String, node: Node, clock: SimulatedClock, seeds: [String]? = nil) -> Member {
        let transport = network.makeTransport(nodeID: id, address: TestCluster.address(id))
        var configuration = replicatorConfiguration
        configuration.seeds = seeds ?? ids.filter { $0 != id }.prefix(1).map(TestCluster.address)
        configuration.incarnation = scheduler.nowMilliseconds + restarts
        configuration.randomSeed = scheduler.nextRandomUInt64()
        configuration.membershipPath = membershipPath(id)
        let replicator = Replicator(node: node, transport: transport, configuration: configuration)
        try! replicator.start(listeningOn: TestCluster.address(id))
        return Member(node: node, transport: transport, replicator: replicator, clock: clock, alive: true)
    }

    /// Member `id`'s node.
    public func node(_ id: String) -> Node { members[id]!.node }
    /// Member `id`'s replication engine.
    public func replicator(_ id: String) -> Replicator { members[id]!.replicator }
    /// The members running now.
    public var aliveIDs: [String] { ids.filter { members[$0]!.alive } }

    /// Kills the process: its links vanish, nothing it had queued is sent.
    public func crash(_ id: String) {
        guard var member = members[id], member.alive else { return }
        network.crash(id)
        member.replicator.stop()
        member.alive = false
        members[id] = member
    }

    /// Starts the node again with the same id: with its state (as a durable node would) or empty.
    public func restart(_ id: String, empty: Bool, seeds: [String]? = nil) {
        guard let member = members[id], !member.alive else { return }
        restarts += 1
        let node = empty ? makeNode(id: id, clock: member.clock) : member.node
        // A node restarted with its state also keeps its member list (as a durable node does).
        if empty { try? FileManager.default.removeItem(atPath: membershipPath(id)) }
        members[id] = makeMember(id: id, node: node, clock: member.clock, seeds: seeds)
    }

    /// Adds a node that was not there at the start (a late joiner with one seed).
    public func join(_ id: String, seed: String) {
        precondition(members[id] == nil, "\(id) is already a member")
        ids.append(id)
        let clock = SimulatedClock(scheduler: scheduler)
        members[id] = makeMember(id: id, node: makeNode(id: id, clock: clock), clock: clock, seeds: [TestCluster.address(seed)])
    }

    /// Runs virtual time forward `milliseconds`: every timer, frame and tick due in that time.
    public func run(milliseconds: UInt64) {
        _ = scheduler.run(forMilliseconds: milliseconds)
    }

    /// Runs virtual time forward by `duration` (whole milliseconds).
    public func run(for duration: Duration) {
        let (seconds, attoseconds) = duration.components
        run(milliseconds: UInt64(max(0, seconds)) * 1_000 + UInt64(max(0, attoseconds)) / 1_000_000_000_000_000)
    }

    /// The seed and a short account of the state, for failure messages.
    public func describe(_ ids: [String]? = nil) -> String {
        let shown = (ids ?? aliveIDs).map { id -> String in
            let summary = node(id).stateSummary
            let links = members[id]!.replicator.status.members.map { "\($0.nodeID):\($0.link.rawValue)" }.joined(separator: ",")
            return "\(id)[entries \(summary.entryCount) digest \(String(summary.digest, radix: 16)) links \(links)]"
        }
        return "seed \(seed) (replay: SIM_SEED=\(seed)) at t=\(scheduler.nowMilliseconds): " + shown.joined(separator: " ")
    }

    /// Whether every given node holds exactly the same entries.
    public func converged(_ ids: [String]? = nil) -> Bool {
        let chosen = ids ?? aliveIDs
        guard let first = chosen.first else { return true }
        let reference = node(first).entries()
        return chosen.dropFirst().allSatisfy { node($0).entries() == reference }
    }

    /// Runs until `ids` converge or `maxMilliseconds` pass; returns whether they did.
    public func runUntilConverged(_ ids: [String]? = nil, maxMilliseconds: UInt64 = 60_000, stepMilliseconds: UInt64 = 250) -> Bool {
        var waited: UInt64 = 0
        while waited < maxMilliseconds {
            if converged(ids) { return true }
            run(milliseconds: stepMilliseconds)
            waited += stepMilliseconds
        }
        return converged(ids)
    }

    /// Keys whose entry on `id` is not the highest version ever committed for them (lost writes).
    public func lostWrites(on id: String) -> [String] {
        var highest: [StateKey: (Version, [UInt8]?)] = [:]
        for committed in history {
            for write in committed.writes where highest[write.key].map({ $0.0 < committed.version }) ?? true {
                highest[write.key] = (committed.version, write.value)
            }
        }
        let node = self.node(id)
        return highest.compactMap { key, expected in
            let entry = node.entry(for: key)
            // A delete every member holds may have been collected since.
            if entry == nil && expected.1 == nil { return nil }
            return entry?.version == expected.0 && entry?.value == expected.1 ? nil : "\(key): has \(entry?.version.description ?? "nothing"), expected \(expected.0)"
        }.sorted()
    }
}
