import Decide
import DecideUV
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// `DecideBench join`: an empty node joins one holding `BENCH_JOIN_KEYS` keys (default
/// 1,000,000) of `BENCH_JOIN_VALUE_BYTES` bytes (default 1,024: about 1 GiB) over loopback
/// TCP. The joiner is a child process (this binary, `join-child`), so its memory is its own:
/// it reports how long it took to reach the holder's digest, its peak RSS (VmHWM) and its RSS
/// once settled (after `malloc_trim`). The baseline is the size of what it copied.
enum JoinBench {
    static func run() {
        // The holder's gigabyte is freed by whichever thread lets go of it last, possibly after
        // this section returns; freeing it (unmapping, under the process's memory-map lock)
        // stalled the next section's decisions for up to 25 ms. Wait until it is gone.
        let holder = Released()
        measure(holder)
        let began = DispatchTime.now().uptimeNanoseconds
        while holder.node != nil, DispatchTime.now().uptimeNanoseconds - began < 30_000_000_000 { usleep(10_000) }
        ProcessMemory.settleHeap()
        let waited = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        print(String(format: "   holder %@ %.2f s after the join\n", holder.node == nil ? "released" : "NOT released", waited))
    }

    /// The holder's node, held weakly: nil once nothing holds it.
    final class Released {
        weak var node: Node?
    }

    private static func measure(_ released: Released) {
        let environment = ProcessInfo.processInfo.environment
        let keys = Int(environment["BENCH_JOIN_KEYS"] ?? "") ?? 1_000_000
        let valueBytes = Int(environment["BENCH_JOIN_VALUE_BYTES"] ?? "") ?? 1_024
        print("== join: an empty node joins one holding \(keys) keys of \(valueBytes) B (loopback TCP, joiner in its own process)")
        var logger = Logger(label: "bench")
        logger.logLevel = Logger.Level(rawValue: environment["BENCH_JOIN_LOG"] ?? "") ?? .error
        var configuration = ReplicatedNode.Configuration(id: "holder", listen: "127.0.0.1:0")
        configuration.node.logger = logger
        configuration.replication.logger = logger
        let holder: ReplicatedNode
        do {
            holder = try ReplicatedNode(configuration: configuration)
        } catch {
            print("   cannot start the holder: \(error)\n")
            return
        }
        let loadStart = DispatchTime.now().uptimeNanoseconds
        var copiedBytes = 0
        var start = 0
        while start < keys {
            let end = min(keys, start + 2_000)
            let fill = Fill(range: start..<end, valueBytes: valueBytes)
            precondition(holder.node.decide(fill).version != nil, "the holder refused its fill")
            copiedBytes += fill.bytes
            start = end
        }
        released.node = holder.node
        let summary = holder.node.stateSummary
        let loadSeconds = Double(DispatchTime.now().uptimeNanoseconds - loadStart) / 1e9
        print(String(format: "   holder loaded %d entries (%.0f MB of keys and values) in %.1f s", summary.entryCount,
                     Double(copiedBytes) / 1e6, loadSeconds))

        let text: String
        let fields: [String: Double]
        do {
            (_, text, fields) = try BenchChild.run(["join-child", holder.listenAddress, String(summary.digest, radix: 16), "\(summary.entryCount)"])
        } catch {
            print("   cannot start the joiner: \(error)\n")
            return
        }
        guard let seconds = fields["seconds"], let peak = fields["peakKB"], let settled = fields["settledKB"],
              fields["converged"] == 1 else {
            print("   the joiner did not converge: \(text)\n")
            Task { await holder.shutdown() }
            return
        }
        let megabytesPerSecond = Double(copiedBytes) / 1e6 / seconds
        let ratio = peak / settled
        BenchTable.print(rows: [
            ["copied", String(format: "%.0f MB, %d entries", Double(copiedBytes) / 1e6, summary.entryCount), "", ""],
            ["join time", String(format: "%.2f s", seconds), "", ""],
            ["rate", String(format: "%.1f MB/s, %.0f entries/s", megabytesPerSecond, Double(summary.entryCount) / seconds),
             "≥ 100 MB/s", BenchTable.verdict(megabytesPerSecond >= 100)],
            ["joiner peak RSS", String(format: "%.0f MB", peak / 1024), "", ""],
            ["joiner settled RSS", String(format: "%.0f MB", settled / 1024), "", ""],
            ["peak / settled", String(format: "%.2fx", ratio), "≤ 1.5x", BenchTable.verdict(ratio <= 1.5)],
        ], header: ["join", "measured", "goal", ""])
        let done = DispatchSemaphore(value: 0)
        Task {
            await holder.shutdown()
            done.signal()
        }
        done.wait()
    }

    /// The joiner: links to `seed`, waits until its digest is `digest`, then prints what it took.
    static func child(_ arguments: [String]) -> Never {
        guard arguments.count == 3, let target = UInt64(arguments[1], radix: 16), let count = Int(arguments[2]) else {
            print("converged=0 usage: join-child SEED DIGEST-HEX COUNT")
            exit(2)
        }
        var logger = Logger(label: "bench.joiner")
        logger.logLevel = Logger.Level(rawValue: ProcessInfo.processInfo.environment["BENCH_JOIN_LOG"] ?? "") ?? .error
        var configuration = ReplicatedNode.Configuration(id: "joiner", listen: "127.0.0.1:0", peers: [arguments[0]])
        configuration.node.logger = logger
        configuration.replication.logger = logger
        let start = DispatchTime.now().uptimeNanoseconds
        guard let joiner = try? ReplicatedNode(configuration: configuration) else {
            print("converged=0 cannot start")
            exit(1)
        }
        var converged = false
        let deadline = start + 900 * 1_000_000_000
        while DispatchTime.now().uptimeNanoseconds < deadline {
            let summary = joiner.node.stateSummary
            if summary.digest == target && summary.entryCount == count {
                converged = true
                break
            }
            usleep(10_000)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        usleep(500_000)
        print("converged=\(converged ? 1 : 0) seconds=\(seconds) peakKB=\(ProcessMemory.kilobytes("VmHWM")) settledKB=\(ProcessMemory.kilobytes("VmRSS"))")
        exit(converged ? 0 : 1)
    }

    /// `range.count` keys of `valueBytes` bytes each, in one decision.
    struct Fill: Decision {
        let range: Range<Int>
        let valueBytes: Int
        var bytes: Int { range.count * (valueBytes + 24) }
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            var value = [UInt8](repeating: 0x61, count: valueBytes)
            for index in range {
                value[0] = UInt8(truncatingIfNeeded: index)
                write.raw(value, into: StateKey(name: "join.bench", element: Array("\(index)".utf8)))
            }
            return .none
        }
    }
}
