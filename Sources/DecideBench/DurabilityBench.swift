import Decide
import Foundation
import Synchronization

/// `DecideBench durability`: decisions per second at each durability level (memory, batched,
/// strict) beside the in-memory figure of the same workload, measured in the same run. The
/// store lives in a fresh directory under the system's temporary directory. A durable run's
/// time includes the final flush, so commits still queued at the deadline are paid for.
enum DurabilityBench {
    struct Hot: AtomicState {
        static func defaultValue() -> Int { 0 }
        static var name: String { "bench.durability.hot" }
    }

    struct Keys: CollectionState {
        static func defaultValue(at id: Int) -> Int { 0 }
        static var name: String { "bench.durability.keys" }
    }

    /// One write to one key, every time: group commits coalesce it to one row.
    struct WriteHot: Decision {
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(value, into: Hot.self)
            return .none
        }
    }

    /// One write to a key no earlier decision wrote: every commit is a new row on disk.
    struct WriteNew: Decision {
        let id: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(id, into: Keys.self, at: id)
            return .none
        }
    }

    struct Workload: Sendable {
        let name: String
        let threads: Int
        /// Every decision writes the one `Hot` key (true) or a new element of `Keys` (false).
        let hotKey: Bool
    }

    /// `BENCH_DURABILITY_WORKLOAD=one|new`: only the workloads whose name starts so ("one key",
    /// "new key each"), for a profile of one (`valgrind --tool=callgrind`); all by default.
    static let onlyWorkload = ProcessInfo.processInfo.environment["BENCH_DURABILITY_WORKLOAD"]
    /// `BENCH_DURABILITY_LEVEL=memory|batched|strict`: only the levels whose description starts
    /// so, for a profile of one level; all by default (a ratio needs the memory level too).
    static let onlyLevel = ProcessInfo.processInfo.environment["BENCH_DURABILITY_LEVEL"]

    static func run(seconds: Double) {
        print("== durability: decisions per second by durability level (best of \(CoreBench.turns) runs of \(seconds) s, memory and batched in turns; strict one run; time includes the final flush)")
        let workloads = [
            Workload(name: "one key, 1 thread", threads: 1, hotKey: true),
            Workload(name: "new key each, 1 thread", threads: 1, hotKey: false),
            Workload(name: "new key each, 4 threads", threads: 4, hotKey: false),
        ].filter { onlyWorkload == nil || $0.name.hasPrefix(onlyWorkload!) }
        let levels: [Durability] = [.memory, .batched(intervalMilliseconds: 5), .strict]
            .filter { onlyLevel == nil || $0.description.hasPrefix(onlyLevel!) }
        var rows: [[String]] = []
        let batched = Durability.batched(intervalMilliseconds: 5)
        for workload in workloads {
            // Best of `CoreBench.turns` (3) where the CPU bounds the rate (this machine's noise is ±30 % per run),
            // memory and batched in turns so their ratio compares the same minutes; strict is
            // bound by fsync, and one run says it.
            var rates: [Durability: Double] = [:]
            if levels.contains(.memory) && levels.contains(batched) {
                (rates[.memory], rates[batched]) = CoreBench.bestAlternating(
                    { measure(.memory, workload, seconds: seconds) }, { measure(batched, workload, seconds: seconds) })
            }
            let memoryRate = rates[.memory] ?? (levels.contains(.memory) ? CoreBench.best { measure(.memory, workload, seconds: seconds) } : 0)
            for level in levels {
                let rate = level == .memory ? memoryRate
                    : rates[level] ?? (level == .strict ? measure(level, workload, seconds: seconds)
                        : CoreBench.best { measure(level, workload, seconds: seconds) })
                // The one tracked figure: batched durability on one key must not cost more than
                // it did when first measured (1.43× the memory rate).
                let tracked = workload.hotKey && workload.threads == 1 && level == batched
                let goal = !tracked ? ""
                    : memoryRate == 0 ? "≤ 1.43× (must not regress): no memory run to compare"
                    : "≤ 1.43× (must not regress): \(BenchTable.verdict(memoryRate / rate <= 1.43))"
                rows.append([workload.name, level.description, formatRate(rate), CoreBench.ratio(memoryRate, rate), goal])
            }
        }
        BenchTable.print(rows: rows, header: ["workload", "durability", "decisions /s", "memory ÷ level", "goal"])
    }

    /// Decisions per second of `workload` on a fresh node at `level`.
    static func measure(_ level: Durability, _ workload: Workload, seconds: Double) -> Double {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("decide-bench-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = Node.Configuration(id: "bench")
        configuration.durability = level
        if level != .memory { configuration.dataDirectory = directory }
        let node: Node
        do {
            node = try Node(configuration: configuration)
        } catch {
            print("durability bench: cannot open a node at \(level): \(error)")
            return 0
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(seconds * 1e9)
        let total = Atomic<Int>(0)
        let finished = DispatchGroup()
        for thread in 0..<workload.threads {
            finished.enter()
            Thread {
                // Each thread writes its own ids, so "new key" stays new across threads.
                var iteration = thread
                var done = 0
                while DispatchTime.now().uptimeNanoseconds < deadline {
                    for _ in 0..<100 {
                        if workload.hotKey {
                            node.decide(WriteHot(value: iteration))
                        } else {
                            node.decide(WriteNew(id: iteration))
                        }
                        iteration += workload.threads
                        done += 1
                    }
                }
                total.add(done, ordering: .relaxed)
                finished.leave()
            }.start()
        }
        finished.wait()
        do {
            try node.flush()
            try node.close()
        } catch {
            print("durability bench: flushing at \(level): \(error)")
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Double(total.load(ordering: .relaxed)) / elapsed
    }

    static func formatRate(_ rate: Double) -> String {
        rate >= 10_000 ? CoreBench.format(rate) : String(format: "%.0f", rate)
    }
}
