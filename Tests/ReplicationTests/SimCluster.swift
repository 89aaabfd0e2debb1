import Decide
import DecideSimulation
import Foundation
import Logging

/// A cluster of real `Node`s and `Replicator`s over the seeded simulator: the production
/// engine, a simulated network and clock. Everything runs on the test's thread.
final class SimCluster: @unchecked Sendable {
    struct Member {
        var node: Node
        var transport: SimulatedTransport
        var replicator: Replicator
        let clock: SimulatedClock
        var alive: Bool
    }

    /// One committed local decision: its version and the keys it wrote (nil value = delete).
    struct Committed {
        let version: Version
        let writes: [Delta.Write]
    }

    let seed: UInt64
    let scheduler: SimulatedScheduler
    let network: SimulatedNetwork
    private(set) var members: [String: Member] = [:]
    private(set) var history: [Committed] = []
    /// Every node ever started, in start order (joiners are appended).
    private(set) var ids: [String]
    var replicatorConfiguration: Replicator.Configuration
    var nodeConfigure: (inout Node.Configuration) -> Void
    let maxClockSkewMilliseconds: UInt64 = 10_000
    private var restarts: UInt64 = 0
    /// Where each node keeps its member list, as a durable node does in its data directory.
    let directory: URL

    /// `seeds[id]` are the nodes `id` dials at start (default: the first other node; `[]` for
    /// none). `tickMilliseconds` is how often every engine ticks (timeouts scale with it when
    /// `timeScale` is above 1: a weeks-long run ticks every few seconds).
    init(seed: UInt64, ids: [String], seeds: [String: [String]] = [:],
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
        configuration.logger = SimCluster.quietLogger
        configure(&configuration)
        replicatorConfiguration = configuration
        for id in ids {
            let clock = SimulatedClock(scheduler: scheduler)
            members[id] = makeMember(id: id, node: makeNode(id: id, clock: clock), clock: clock,
                                     seeds: seeds[id]?.map(SimCluster.address))
        }
        _ = scheduler.every(milliseconds: 50 * timeScale) { [unowned self] in
            for id in self.ids where self.members[id]?.alive == true { self.members[id]!.replicator.tick() }
        }
    }

    static let quietLogger: Logger = {
        var logger = Logger(label: "sim")
        logger.logLevel = .critical
        return logger
    }()

    static func address(_ id: String) -> String { "sim://\(id)" }

    private func makeNode(id: String, clock: SimulatedClock) -> Node {
        var configuration = Node.Configuration(id: id)
        configuration.clock = clock
        configuration.digestFanoutBits = 2
        configuration.digestDepth = 3
        configuration.maxClockSkewMilliseconds = maxClockSkewMilliseconds
        configuration.logger = SimCluster.quietLogger
        nodeConfigure(&configuration)
        let node = try! Node(configuration: configuration)
        _ = node.addCommitListener { [unowned self] committed in
            if committed.origin == .local { self.history.append(Committed(version: committed.delta.version, writes: committed.delta.writes)) }
        }
        return node
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func membershipPath(_ id: String) -> String { directory.appendingPathComponent("\(id).members.json").path }

    private func makeMember(id: String, node: Node, clock: SimulatedClock, seeds: [String]? = nil) -> Member {
        let transport = network.makeTransport(nodeID: id, address: SimCluster.address(id))
        var configuration = replicatorConfiguration
        configuration.seeds = seeds ?? ids.filter { $0 != id }.prefix(1).map(SimCluster.address)
        configuration.incarnation = scheduler.nowMilliseconds + restarts
        configuration.randomSeed = scheduler.nextRandomUInt64()
        configuration.membershipPath = membershipPath(id)
        let replicator = Replicator(node: node, transport: transport, configuration: configuration)
        try! replicator.start(listeningOn: SimCluster.address(id))
        return Member(node: node, transport: transport, replicator: replicator, clock: clock, alive: true)
    }

    func node(_ id: String) -> Node { members[id]!.node }
    var aliveIDs: [String] { ids.filter { members[$0]!.alive } }

    /// Kills the process: its links vanish, nothing it had queued is sent.
    func crash(_ id: String) {
        guard var member = members[id], member.alive else { return }
        network.crash(id)
        member.replicator.stop()
        member.alive = false
        members[id] = member
    }

    /// Starts the node again with the same id: with its state (as a durable node would) or empty.
    func restart(_ id: String, empty: Bool, seeds: [String]? = nil) {
        guard let member = members[id], !member.alive else { return }
        restarts += 1
        let node = empty ? makeNode(id: id, clock: member.clock) : member.node
        // A node restarted with its state also keeps its member list (as a durable node does).
        if empty { try? FileManager.default.removeItem(atPath: membershipPath(id)) }
        members[id] = makeMember(id: id, node: node, clock: member.clock, seeds: seeds)
    }

    /// Adds a node that was not there at the start (a late joiner with one seed).
    func join(_ id: String, seed: String) {
        precondition(members[id] == nil, "\(id) is already a member")
        ids.append(id)
        let clock = SimulatedClock(scheduler: scheduler)
        members[id] = makeMember(id: id, node: makeNode(id: id, clock: clock), clock: clock, seeds: [SimCluster.address(seed)])
    }

    func run(milliseconds: UInt64) {
        _ = scheduler.run(forMilliseconds: milliseconds)
    }

    /// The seed and a short account of the state, for failure messages.
    func describe(_ ids: [String]? = nil) -> String {
        let shown = (ids ?? aliveIDs).map { id -> String in
            let summary = node(id).stateSummary
            let links = members[id]!.replicator.status.members.map { "\($0.nodeID):\($0.link.rawValue)" }.joined(separator: ",")
            return "\(id)[entries \(summary.entryCount) digest \(String(summary.digest, radix: 16)) links \(links)]"
        }
        return "seed \(seed) (replay: SIM_SEED=\(seed)) at t=\(scheduler.nowMilliseconds): " + shown.joined(separator: " ")
    }

    /// Whether every given node holds exactly the same entries.
    func converged(_ ids: [String]? = nil) -> Bool {
        let chosen = ids ?? aliveIDs
        guard let first = chosen.first else { return true }
        let reference = node(first).entries()
        return chosen.dropFirst().allSatisfy { node($0).entries() == reference }
    }

    /// Runs until `ids` converge or `maxMilliseconds` pass; returns whether they did.
    func runUntilConverged(_ ids: [String]? = nil, maxMilliseconds: UInt64 = 60_000, stepMilliseconds: UInt64 = 250) -> Bool {
        var waited: UInt64 = 0
        while waited < maxMilliseconds {
            if converged(ids) { return true }
            run(milliseconds: stepMilliseconds)
            waited += stepMilliseconds
        }
        return converged(ids)
    }

    /// Keys whose entry on `id` is not the highest version ever committed for them (lost writes).
    func lostWrites(on id: String) -> [String] {
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
