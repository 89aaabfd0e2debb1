import Decide
import DecideSimulation
import Foundation
import Logging

/// `DecideBench anti-entropy`: two nodes hold the same 1,000,000 keys but for `diverged` of
/// them (as after a partition during which one side wrote them); they link, and one digest
/// walk repairs the difference. Prints the bytes the walk put on the wire (every frame, both
/// directions, 4-byte length prefixes included) beside a full-state transfer of the same keys
/// (one entry batch of all of them), measured in the same run. Runs over the seeded simulator,
/// so the byte count is exact and repeatable.
enum AntiEntropyBench {
    static func run(keys: Int = 1_000_000, diverged: Int = 100) {
        print("== anti-entropy: \(keys) keys, \(diverged) diverged, one walk (simulated network, exact bytes)")
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let scheduler = SimulatedScheduler(seed: 7)
        let network = SimulatedNetwork(scheduler: scheduler)
        func node(_ id: String) -> Node {
            var configuration = Node.Configuration(id: id)
            configuration.clock = SimulatedClock(scheduler: scheduler)
            configuration.logger = logger
            return try! Node(configuration: configuration)
        }
        let a = node("a"), b = node("b")
        let base = scheduler.nowMilliseconds - 60_000
        let value = Array("\"a 16-byte value\"".utf8)
        let entries = (0..<keys).map { index in
            KeyedEntry(key: StateKey(name: "bench.key", element: Array("\(index)".utf8)),
                       entry: Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: base, logical: UInt16(index % 60_000)), node: "origin"),
                                    value: value))
        }
        let fullTransferBytes = WireCodec().encode(entries).count
        let loadStart = DispatchTime.now().uptimeNanoseconds
        _ = try! a.apply(entries: entries)
        _ = try! b.apply(entries: entries)
        var random = SplitMix64(seed: 99)
        let changed = (0..<diverged).map { _ in
            let index = Int.random(in: 0..<keys, using: &random)
            return KeyedEntry(key: StateKey(name: "bench.key", element: Array("\(index)".utf8)),
                              entry: Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: base + 1, logical: 0), node: "origin"),
                                           value: Array("\"changed\"".utf8)))
        }
        _ = try! a.apply(entries: changed)
        let loadSeconds = Double(DispatchTime.now().uptimeNanoseconds - loadStart) / 1e9
        precondition(a.stateSummary.digest != b.stateSummary.digest, "the nodes must differ before the walk")

        var configuration = Replicator.Configuration()
        configuration.logger = logger
        configuration.gossipIntervalMilliseconds = 3_600_000
        configuration.heartbeatIntervalMilliseconds = 3_600_000
        configuration.failureTimeoutMilliseconds = 7_200_000
        configuration.antiEntropyIntervalMilliseconds = 3_600_000
        let rb = Replicator(node: b, transport: network.makeTransport(nodeID: "b", address: "sim://b"), configuration: configuration)
        try! rb.start(listeningOn: "sim://b")
        configuration.seeds = ["sim://b"]
        let ra = Replicator(node: a, transport: network.makeTransport(nodeID: "a", address: "sim://a"), configuration: configuration)
        try! ra.start(listeningOn: "sim://a")
        let walkStart = DispatchTime.now().uptimeNanoseconds
        var waited: UInt64 = 0
        while a.stateSummary.digest != b.stateSummary.digest && waited < 60_000 {
            _ = scheduler.run(forMilliseconds: 10)
            waited += 10
        }
        _ = scheduler.run(forMilliseconds: 100)   // let the walk's closing messages land
        let walkSeconds = Double(DispatchTime.now().uptimeNanoseconds - walkStart) / 1e9
        let converged = a.stateSummary.digest == b.stateSummary.digest
        let bytes = network.counters.bytesSent
        let fraction = Double(bytes) / Double(fullTransferBytes)
        BenchTable.print(rows: [
            ["walk after divergence (all frames, both ways)", converged ? "\(bytes)" : "DID NOT CONVERGE",
             "\(fullTransferBytes)", String(format: "%.4f %%", fraction * 100),
             BenchTable.verdict(converged && fraction <= 0.0039)],
        ], header: ["anti-entropy", "bytes", "full-state bytes", "fraction", "goal ≤ 0.39 % (must not regress)"])
        print(String(format: "   frames: %d; the walk ran %.3f s here (load of %d keys into two nodes: %.1f s); target ≤ 0.5 %%\n",
                     network.counters.framesSent, walkSeconds, keys, loadSeconds))
    }
}
