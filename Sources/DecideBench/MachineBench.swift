import Foundation
import Synchronization

/// `DecideBench machine`: how long this machine takes a busy processor away from a process
/// that does nothing but read the clock, with one processor busy and then all of them: the
/// floor under every "longest decision" and tail-latency row of the sections after it.
///
/// On a virtual machine whose processors the host rations (a CPU quota per period), a process
/// that keeps every processor busy loses them for milliseconds at a time at the period's
/// edge, whatever it runs; one that leaves a processor idle does not. The bench's stall rows
/// (collection, the propagation tail) keep two processors busy, so they are read beside this
/// row, measured in the same run (docs/benchmarks.md, "The machine's own pauses").
enum MachineBench {
    /// A pause longer than this counts: a busy loop reads the clock every few tens of
    /// nanoseconds, so anything near a millisecond is time the processor was taken away.
    static let pauseMilliseconds = 0.5

    /// What one measurement saw: the pauses of every spinning thread, merged.
    struct Pauses {
        var count = 0
        var longestMilliseconds = 0.0
        var totalMilliseconds = 0.0
        /// Where the longest pauses ended, in milliseconds past a whole 100 ms of the
        /// monotonic clock: pauses that end at one phase come from a periodic rationing.
        var longestEndPhases: [Double] = []
    }

    /// The longest pause measured with every processor busy earlier in this process, for the
    /// sections that print it beside their own stall rows; nil when `machine` did not run.
    static let busyLongestMilliseconds = Mutex<Double?>(nil)

    static func run(seconds: Double) {
        let processors = ProcessInfo.processInfo.activeProcessorCount
        let duration = max(1, seconds * 3)
        print("== machine: threads that only read the clock, \(String(format: "%.0f", duration)) s each; a pause is a gap over \(pauseMilliseconds) ms between two reads")
        var rows: [[String]] = []
        for threads in Set([1, processors]).sorted() {
            let pauses = measure(threads: threads, seconds: duration)
            if threads == processors { busyLongestMilliseconds.withLock { $0 = pauses.longestMilliseconds } }
            rows.append([
                "\(threads) of \(processors) processors busy", "\(pauses.count)",
                String(format: "%.2f ms", pauses.longestMilliseconds),
                String(format: "%.1f ms (%.2f %%)", pauses.totalMilliseconds, 100 * pauses.totalMilliseconds / (duration * 1_000 * Double(threads))),
                pauses.longestEndPhases.map { String(format: "%.1f", $0) }.joined(separator: ", "),
            ])
        }
        BenchTable.print(rows: rows, header: [
            "spinning", "pauses", "longest", "total (of the threads' time)", "longest ended at (ms past 100 ms)",
        ])
    }

    /// `threads` threads each read the monotonic clock in a loop for `seconds`, and note every
    /// gap between two reads longer than `pauseMilliseconds`.
    static func measure(threads: Int, seconds: Double) -> Pauses {
        let found = Mutex<[(milliseconds: Double, endedAt: UInt64)]>([])
        let done = DispatchGroup()
        let nanoseconds = UInt64(seconds * 1e9)
        for _ in 0..<threads {
            done.enter()
            Thread {
                var mine: [(milliseconds: Double, endedAt: UInt64)] = []
                let start = DispatchTime.now().uptimeNanoseconds
                var last = start
                while last - start < nanoseconds {
                    let now = DispatchTime.now().uptimeNanoseconds
                    let gap = Double(now - last) / 1e6
                    if gap > pauseMilliseconds { mine.append((gap, now)) }
                    last = now
                }
                found.withLock { $0.append(contentsOf: mine) }
                done.leave()
            }.start()
        }
        done.wait()
        let all = found.withLock { $0 }.sorted { $0.milliseconds > $1.milliseconds }
        var pauses = Pauses()
        pauses.count = all.count
        pauses.longestMilliseconds = all.first?.milliseconds ?? 0
        pauses.totalMilliseconds = all.reduce(0) { $0 + $1.milliseconds }
        pauses.longestEndPhases = all.prefix(4).map { phaseMilliseconds(of: $0.endedAt) }
        return pauses
    }

    /// Where in its 100 ms of the monotonic clock the instant `nanoseconds` falls, in
    /// milliseconds: the pauses of a host that rations per 100 ms end at one such phase.
    static func phaseMilliseconds(of nanoseconds: UInt64) -> Double {
        Double(nanoseconds % 100_000_000) / 1e6
    }

    /// The line a stall row's section prints under its table: the machine's own longest pause
    /// with every processor busy, measured earlier in this run, or nothing when it was not.
    static func floorLine() -> String? {
        guard let longest = busyLongestMilliseconds.withLock({ $0 }) else { return nil }
        return String(format: "   the machine itself paused a busy processor for up to %.2f ms in this run (section machine): a longest decision or a tail up to about that may be the machine's, not the code's", longest)
    }
}
