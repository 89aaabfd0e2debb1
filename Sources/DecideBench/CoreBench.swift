import Decide
import Foundation
import Synchronization

/// `DecideBench core`: one-write and ten-write decisions per second on one node in memory,
/// beside the same writes into a Swift dictionary behind a `Mutex`, measured in the same run.
enum CoreBench {
    struct Counter: AtomicState {
        static func defaultValue() -> Int { 0 }
        static var name: String { "bench.counter" }
    }

    /// Ten keys for the ten-write decision: elements 0...9 of one collection would also measure
    /// id encoding; separate keys measure the commit path alone.
    struct K0: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K1: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K2: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K3: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K4: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K5: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K6: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K7: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K8: AtomicState { static func defaultValue() -> Int { 0 } }
    struct K9: AtomicState { static func defaultValue() -> Int { 0 } }

    struct WriteOne: Decision {
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(value, into: Counter.self)
            return .none
        }
    }

    struct WriteTen: Decision {
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(value, into: K0.self); write(value, into: K1.self)
            write(value, into: K2.self); write(value, into: K3.self)
            write(value, into: K4.self); write(value, into: K5.self)
            write(value, into: K6.self); write(value, into: K7.self)
            write(value, into: K8.self); write(value, into: K9.self)
            return .none
        }
    }

    /// `BENCH_CORE_DECISIONS=one` or `ten`: only that row (and its baseline), so a callgrind
    /// count (`BENCH_CORE_OPERATIONS`) covers one kind of decision; both rows by default.
    static let onlyDecisions = ProcessInfo.processInfo.environment["BENCH_CORE_DECISIONS"]

    static func run(seconds: Double) {
        print("== core: decisions per second on one node, in memory (best of \(turns) runs of \(seconds) s each, alternating with the baseline's)")
        var rows: [[String]] = []
        for (label, writes) in [("one-write", 1), ("ten-write", 10)] where onlyDecisions == nil || label.hasPrefix(onlyDecisions!) {
            let (baseline, decide) = bestAlternating({ baselineRate(writesPerOperation: writes, seconds: seconds) }, {
                writes == 1 ? decideRate(seconds: seconds) { WriteOne(value: $0) } : decideRate(seconds: seconds) { WriteTen(value: $0) }
            })
            rows.append([label, format(decide), format(baseline), ratio(baseline, decide), BenchTable.verdict(baseline / decide <= 4)])
        }
        BenchTable.print(rows: rows, header: ["decision", "Decide /s", "Mutex<Dictionary> /s", "baseline ÷ Decide", "goal ≤ 4×"])
        if onlyDecisions == nil { runChangeFeed(seconds: seconds) }
    }

    /// What the change feed costs a one-write decision (the same decisions on a node that keeps
    /// no feed, in turns), and how fast one reader takes retained changes from it beside how
    /// fast one thread makes them (docs/operations.md, "The change feed").
    static func runChangeFeed(seconds: Double) {
        print("== core: the change feed (best of \(turns) runs of \(seconds) s each, in turns)")
        let (without, with) = bestAlternating({
            decideRate(seconds: seconds) { WriteOne(value: $0) }
        }, { decideRate(seconds: seconds, configure: { $0.changeFeed = ChangeFeedConfiguration() }) { WriteOne(value: $0) } })
        var rows = [["one-write decision", format(with), format(without), String(format: "%.3f×", without / with),
                     BenchTable.verdict(without / with <= 1.05)]]
        let (decisions, reads) = bestAlternating({
            decideRate(seconds: seconds, configure: { $0.changeFeed = ChangeFeedConfiguration() }) { WriteOne(value: $0) }
        }, { readRate(changes: 1_000_000) })
        rows.append(["one reader, retained changes", format(reads), format(decisions), String(format: "%.2f×", reads / decisions),
                     BenchTable.verdict(reads >= decisions)])
        BenchTable.print(rows: rows, header: ["measured", "with the feed /s", "baseline /s", "ratio", "goal"])
        print("   baselines: the same decisions on a node with no feed (goal: the feed costs at most 5 %); one thread's one-write decisions (goal: a reader keeps up, ≥ 1×)")
    }

    /// Changes per second one reader of `Node.changes(from: .oldestRetained)` takes, over the
    /// retained part (what the default 64 MiB holds) of `changes` one-write changes.
    static func readRate(changes: Int) -> Double {
        var configuration = Node.Configuration(id: "bench")
        configuration.changeFeed = ChangeFeedConfiguration()
        let node = try! Node(configuration: configuration)
        for iteration in 0..<changes { node.decide(WriteOne(value: iteration)) }
        let newest = node.changeFeedBounds!.newest
        let done = Mutex(0.0)
        let finished = DispatchSemaphore(value: 0)
        // Detached: the caller's task (the main actor, for top-level code) waits below.
        Task.detached {
            let start = DispatchTime.now().uptimeNanoseconds
            var read = 0
            do {
                for try await change in node.changes(from: .oldestRetained) {
                    read += 1
                    if change.position == newest { break }
                }
            } catch {
                print("   the reader failed: \(error)")
            }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            done.withLock { $0 = Double(read) / elapsed }
            finished.signal()
        }
        finished.wait()
        return done.withLock { $0 }
    }

    /// `BENCH_TURNS=N`: how many turns `bestAlternating` runs of each measurement (3 by default).
    static let turns = max(1, Int(ProcessInfo.processInfo.environment["BENCH_TURNS"] ?? "") ?? 3)

    /// The best of `turns` runs of `measure` (a rate without a baseline beside it).
    static func best(_ measure: () -> Double) -> Double {
        (0..<turns).map { _ in measure() }.max() ?? 0
    }

    /// The best of `turns` runs of each of two measurements, run in turns (first, second, first, ...),
    /// so a ratio of the two compares the same minutes of this machine. Best of 3 of one, then
    /// of the other, put a minute of drift (±6 % here) into the ratio (docs/performance.md,
    /// "Ratios measured in turns"). More turns do not escape a slow spell of the machine
    /// longer than all of them ("The machine's two speeds").
    static func bestAlternating(_ first: () -> Double, _ second: () -> Double) -> (first: Double, second: Double) {
        var best = (first: 0.0, second: 0.0)
        for _ in 0..<turns {
            best.first = max(best.first, first())
            best.second = max(best.second, second())
        }
        return best
    }

    static func decideRate<D: Decision>(seconds: Double, configure: (inout Node.Configuration) -> Void = { _ in }, make: (Int) -> D) -> Double {
        var configuration = Node.Configuration(id: "bench")
        configure(&configuration)
        let node = try! Node(configuration: configuration)
        return rate(seconds: seconds) { iteration in node.decide(make(iteration)) }
    }

    static func baselineRate(writesPerOperation: Int, seconds: Double) -> Double {
        let keys = (0..<writesPerOperation).map { "bench.key\($0)" }
        let table = Mutex<[String: Int]>([:])
        return rate(seconds: seconds) { iteration in
            table.withLock { table in
                for key in keys { table[key] = iteration }
            }
        }
    }

    /// `BENCH_CORE_OPERATIONS=N`: run exactly N operations per measurement instead of timing
    /// them, so `valgrind --tool=callgrind` counts instructions per decision repeatably
    /// (docs/performance.md, "Counting instructions").
    static let fixedOperations = Int(ProcessInfo.processInfo.environment["BENCH_CORE_OPERATIONS"] ?? "")

    /// Operations per second of `body`, timed in batches until `seconds` pass.
    static func rate(seconds: Double, _ body: (Int) -> Void) -> Double {
        let batch = 10_000
        var done = 0
        let start = DispatchTime.now().uptimeNanoseconds
        if let fixed = fixedOperations {
            for iteration in 0..<fixed { body(iteration) }
            return Double(fixed) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        let deadline = start + UInt64(seconds * 1e9)
        var now = start
        while now < deadline {
            for iteration in done..<done + batch { body(iteration) }
            done += batch
            now = DispatchTime.now().uptimeNanoseconds
        }
        return Double(done) / (Double(now - start) / 1e9)
    }

    static func format(_ rate: Double) -> String {
        rate >= 1e6 ? String(format: "%.2f M", rate / 1e6) : String(format: "%.0f k", rate / 1e3)
    }

    static func ratio(_ baseline: Double, _ measured: Double) -> String {
        String(format: "%.2f×", baseline / measured)
    }
}
