import Decide
import DecideUV
import Foundation
import Logging
import Synchronization

/// `DecideBench replication`: two nodes linked by DecideUV over 127.0.0.1.
/// - throughput: single-write decisions on A, updating 10,000 keys round-robin, until B holds
///   A's exact state (equal digests), beside the same decisions on a lone node (the in-memory
///   ceiling, measured in the same run);
/// - latency: A decides at a paced 10,000 decisions/s; for each, the time from `decide` on A to
///   the moment B has applied it (B's commit listener), p50 and p99.
enum ReplicationBench {
    struct Item: CollectionState {
        static func defaultValue(at id: Int) -> Int { 0 }
        static var name: String { "bench.item" }
    }

    /// One write of `value` into element `id` of `C`: the decision the replication and
    /// comparison rows make.
    struct Write<C: CollectionState>: Decision where C.ID == Int {
        let id: Int
        let value: C.Value
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(value, into: C.self, at: id)
            return .none
        }
    }

    typealias Put = Write<Item>

    /// B's own writes, for `BENCH_REPLICATION_LOCAL_WRITERS`.
    struct LocalItem: CollectionState {
        static func defaultValue(at id: Int) -> Int { 0 }
        static var name: String { "bench.local" }
    }

    final class Pair {
        let a: Node
        let b: Node
        let transports: [UVTransport]
        let replicators: [Replicator]

        init() throws {
            var logger = Logger(label: "bench")
            logger.logLevel = .error
            func node(_ id: String) throws -> Node {
                var configuration = Node.Configuration(id: id)
                configuration.logger = logger
                return try Node(configuration: configuration)
            }
            a = try node("a")
            b = try node("b")
            let ta = try UVTransport(configuration: .init(nodeID: "a", clusterName: "bench", logger: logger))
            let tb = try UVTransport(configuration: .init(nodeID: "b", clusterName: "bench", logger: logger))
            var configuration = Replicator.Configuration()
            configuration.logger = logger
            configuration.antiEntropyIntervalMilliseconds = 1_000
            configuration.failureTimeoutMilliseconds = 10_000
            let ra = Replicator(node: a, transport: ta, configuration: configuration)
            let address = try ra.start(listeningOn: "127.0.0.1:0")!
            configuration.seeds = [address]
            let rb = Replicator(node: b, transport: tb, configuration: configuration)
            try rb.start(listeningOn: "127.0.0.1:0")
            ra.startTimer(intervalMilliseconds: 10)
            rb.startTimer(intervalMilliseconds: 10)
            transports = [ta, tb]
            replicators = [ra, rb]
            let deadline = Date().addingTimeInterval(10)
            while ra.status.members.first?.link != .connected || rb.status.members.first?.link != .connected {
                precondition(Date() < deadline, "bench nodes did not connect within 10 s")
                usleep(1_000)
            }
        }

        func stop() {
            for replicator in replicators { replicator.stop() }
            for transport in transports { transport.shutdown() }
        }
    }

    static func run(seconds: Double) {
        print("== replication: two nodes over DecideUV on 127.0.0.1")
        let parts = ProcessInfo.processInfo.environment["BENCH_REPLICATION"] ?? "throughput,latency"
        if parts.contains("throughput") { throughput(count: Int(400_000 * max(0.25, min(seconds, 4)))) }
        if parts.contains("latency") { latency(ratePerSecond: 10_000, seconds: max(1, seconds * 2)) }
    }

    static func throughput(count: Int) {
        let lone = try! Node(configuration: .init(id: "lone"))
        let keys = 10_000
        let loneStart = DispatchTime.now().uptimeNanoseconds
        for index in 0..<count { lone.decide(Put(id: index % keys, value: index)) }
        let loneSeconds = Double(DispatchTime.now().uptimeNanoseconds - loneStart) / 1e9

        let pair = try! Pair()
        let start = DispatchTime.now().uptimeNanoseconds
        for index in 0..<count { pair.a.decide(Put(id: index % keys, value: index)) }
        let written = DispatchTime.now().uptimeNanoseconds
        let target = pair.a.stateSummary.digest
        let deadline = Date().addingTimeInterval(120)
        while pair.b.stateSummary.digest != target && Date() < deadline { usleep(200) }
        let end = DispatchTime.now().uptimeNanoseconds
        let complete = pair.b.stateSummary.digest == target
        let dropped = pair.replicators[0].status.members.first?.droppedDeltas ?? 0
        pair.stop()
        let replicatedRate = Double(count) / (Double(end - start) / 1e9)
        let loneRate = Double(count) / loneSeconds
        BenchTable.print(rows: [
            ["replicated (A decides → B holds all)", complete ? CoreBench.format(replicatedRate) : "INCOMPLETE",
             CoreBench.format(loneRate), String(format: "%.2f×", loneRate / replicatedRate)],
        ], header: ["\(count) single-write decisions, 10,000 keys", "updates/s", "lone node /s", "lone ÷ replicated"])
        print(String(format: "   A finished deciding after %.3f s; B held A's state after %.3f s; deltas dropped (repaired by catch-up): %d\n",
                     Double(written - start) / 1e9, Double(end - start) / 1e9, dropped))
    }

    static func latency(ratePerSecond: Int, seconds: Double) {
        let pair = try! Pair()
        let count = Int(Double(ratePerSecond) * seconds)
        let sentAt = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: count)
        let receivedAt = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: count)
        sentAt.initialize(repeating: 0)
        receivedAt.initialize(repeating: 0)
        defer { sentAt.deallocate(); receivedAt.deallocate() }
        let received = Atomic<Int>(0)
        let receiveBase = UInt(bitPattern: receivedAt.baseAddress!)
        _ = pair.b.addCommitListener { committed in
            guard committed.origin == .remote, let value = committed.delta.writes.first?.value,
                  let index = Int(String(decoding: value, as: UTF8.self)), index >= 0, index < count else { return }
            UnsafeMutablePointer<UInt64>(bitPattern: receiveBase)![index] = DispatchTime.now().uptimeNanoseconds
            received.add(1, ordering: .relaxed)
        }
        // `BENCH_REPLICATION_LOCAL_WRITERS=N`: N threads decide on B all along (elements of
        // another collection), so B applies A's deltas while its own decisions contend for its
        // lock: how long a peer's delta waits behind local writers.
        let localWriters = Int(ProcessInfo.processInfo.environment["BENCH_REPLICATION_LOCAL_WRITERS"] ?? "") ?? 0
        let writing = Atomic<Bool>(true)
        // How much the local writers got done: a lock that lets them decide more also gives the
        // node more to replicate, so a row's latency is read beside this rate.
        let localDecisions = Atomic<Int>(0)
        let writersDone = DispatchGroup()
        let b = pair.b
        for writer in 0..<localWriters {
            writersDone.enter()
            Thread {
                var index = writer
                var decided = 0
                while writing.load(ordering: .relaxed) {
                    b.decide(Write<LocalItem>(id: index % 10_000, value: index))
                    index += localWriters
                    decided += 1
                }
                localDecisions.add(decided, ordering: .relaxed)
                writersDone.leave()
            }.start()
        }
        let interval = 1e9 / Double(ratePerSecond)
        let start = DispatchTime.now().uptimeNanoseconds
        var lastSent = start
        // A's longest decision in the stream, and which: a growth inside a merge shows here
        // at the same count in every run (docs/design/0007-growing-without-stalls.md, "The last
        // copy out of malloc").
        var longestDecision: (nanoseconds: UInt64, index: Int) = (0, 0)
        for index in 0..<count {
            let due = start + UInt64(Double(index) * interval)
            // Sleep, never spin: a busy-waiting load generator would take one of the two cores
            // the nodes' threads need and measure the scheduler, not the delta path.
            let left = Int64(due) - Int64(DispatchTime.now().uptimeNanoseconds)
            if left > 1_000 { usleep(UInt32(left / 1_000)) }
            sentAt[index] = DispatchTime.now().uptimeNanoseconds
            lastSent = sentAt[index]
            pair.a.decide(Put(id: index, value: index))
            let took = DispatchTime.now().uptimeNanoseconds - sentAt[index]
            if took > longestDecision.nanoseconds { longestDecision = (took, index) }
        }
        let achieved = Double(count) / max(1e-9, Double(lastSent - start) / 1e9)
        let deadline = Date().addingTimeInterval(30)
        while received.load(ordering: .relaxed) < count && Date() < deadline { usleep(1_000) }
        writing.store(false, ordering: .relaxed)
        writersDone.wait()
        let localRate = Double(localDecisions.load(ordering: .relaxed)) / max(1e-9, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        pair.stop()
        var latencies: [Double] = []
        for index in 0..<count where receivedAt[index] > 0 {
            latencies.append(Double(receivedAt[index] &- sentAt[index]) / 1e6)
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double? {
            guard !latencies.isEmpty else { return nil }
            return latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
        func shown(_ value: Double?) -> String { value.map { String(format: "%.3f ms", $0) } ?? "n/a" }
        let complete = latencies.count == count
        let p99 = percentile(0.99), p999 = percentile(0.999)
        BenchTable.print(rows: [
            ["\(ratePerSecond)/s for \(String(format: "%.0f", seconds)) s (sent at \(CoreBench.format(achieved))/s)"
                + (localWriters > 0 ? ", \(localWriters) local writers on B (\(CoreBench.format(localRate)) decisions/s)" : ""),
             "\(latencies.count)/\(count)", shown(percentile(0.5)), shown(p99), shown(p999),
             "p99 ≤ 1 ms: \(BenchTable.verdict(complete && (p99 ?? .infinity) <= 1)); p99.9 ≤ 2 ms: \(BenchTable.verdict(complete && (p999 ?? .infinity) <= 2))"],
        ], header: ["propagation A → B", "delivered", "p50", "p99", "p99.9", "goal"])
        print(String(format: "   A's longest decision in the stream: %.3f ms (decision %d of %d, each a new key)", Double(longestDecision.nanoseconds) / 1e6, longestDecision.index + 1, count))
        if let floor = MachineBench.floorLine() { print(floor) }
        print("")
    }
}
