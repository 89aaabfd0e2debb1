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
/// row, measured in the same run (docs/performance.md, "The machine's own pauses").
///
/// A third row keeps every processor busy with one thread paging in fresh memory, as a table
/// that grows does: here that turned the host's pauses from a few milliseconds into 26–34
/// (docs/performance.md, "Paging in fresh memory"), and the collection
/// rows, whose tables grow while the housekeeping thread runs, read beside it.
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

    /// The longest pauses measured with every processor busy earlier in this process: only
    /// reading the clock, and with one of them paging in fresh memory. For the sections that
    /// print them beside their own stall rows; nil when `machine` did not run.
    struct Floor {
        var spinning: Double
        var pagingIn: Double
    }
    static let floor = Mutex<Floor?>(nil)

    /// Bytes the paging thread maps, writes a byte of each page of, and unmaps, in turn.
    static let pagedMappingBytes = 256 << 20

    static func run(seconds: Double) {
        let processors = ProcessInfo.processInfo.activeProcessorCount
        let duration = max(1, seconds * 3)
        print("== machine: threads that only read the clock, \(String(format: "%.0f", duration)) s each (in the last row one of them pages in fresh memory instead); a pause is a gap over \(pauseMilliseconds) ms between two reads or page writes")
        var rows: [[String]] = []
        func addRow(_ label: String, _ pauses: Pauses, threads: Int) {
            rows.append([
                label, "\(pauses.count)",
                String(format: "%.2f ms", pauses.longestMilliseconds),
                String(format: "%.1f ms (%.2f %%)", pauses.totalMilliseconds, 100 * pauses.totalMilliseconds / (duration * 1_000 * Double(threads))),
                pauses.longestEndPhases.map { String(format: "%.1f", $0) }.joined(separator: ", "),
            ])
        }
        var spinning = 0.0
        for threads in Set([1, processors]).sorted() {
            let pauses = measure(threads: threads, seconds: duration)
            if threads == processors { spinning = pauses.longestMilliseconds }
            addRow("\(threads) of \(processors) processors busy", pauses, threads: threads)
        }
        let paging = measure(threads: processors - 1, pagingThreads: 1, seconds: duration)
        addRow("\(processors) of \(processors) busy, one paging in fresh memory", paging, threads: processors)
        floor.withLock { $0 = Floor(spinning: spinning, pagingIn: paging.longestMilliseconds) }
        BenchTable.print(rows: rows, header: [
            "spinning", "pauses", "longest", "total (of the threads' time)", "longest ended at (ms past 100 ms)",
        ])
    }

    /// `threads` threads each read the monotonic clock in a loop for `seconds`, and note every
    /// gap between two reads longer than `pauseMilliseconds`; `pagingThreads` more each map
    /// `pagedMappingBytes` of fresh memory, write one byte of each page, unmap it and start
    /// again, noting every page write that took longer.
    static func measure(threads: Int, pagingThreads: Int = 0, seconds: Double) -> Pauses {
        let found = Mutex<[(milliseconds: Double, endedAt: UInt64)]>([])
        let done = DispatchGroup()
        let nanoseconds = UInt64(seconds * 1e9)
        for paging in Array(repeating: true, count: pagingThreads) + Array(repeating: false, count: threads) {
            done.enter()
            Thread {
                let gaps = paging ? pagingGaps(nanoseconds: nanoseconds) : gaps(nanoseconds: nanoseconds) {}
                found.withLock { $0.append(contentsOf: gaps) }
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

    /// Reads the monotonic clock after each `step` until `nanoseconds` passed; every gap
    /// between two reads longer than `pauseMilliseconds`, and when it ended.
    @inline(__always)
    static func gaps(nanoseconds: UInt64, _ step: () -> Void) -> [(milliseconds: Double, endedAt: UInt64)] {
        var found: [(milliseconds: Double, endedAt: UInt64)] = []
        let start = DispatchTime.now().uptimeNanoseconds
        var last = start
        while last - start < nanoseconds {
            step()
            let now = DispatchTime.now().uptimeNanoseconds
            let gap = Double(now - last) / 1e6
            if gap > pauseMilliseconds { found.append((gap, now)) }
            last = now
        }
        return found
    }

    /// `gaps` with a step that writes one byte of the next page of fresh memory: mappings of
    /// `pagedMappingBytes`, each unmapped once written through and replaced by a new one.
    static func pagingGaps(nanoseconds: UInt64) -> [(milliseconds: Double, endedAt: UInt64)] {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var mapping: UnsafeMutableRawPointer?
        var offset = pagedMappingBytes
        let found = gaps(nanoseconds: nanoseconds) {
            if offset == pagedMappingBytes {
                if let mapping { munmap(mapping, pagedMappingBytes) }
                guard let fresh = mmap(nil, pagedMappingBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
                      fresh != MAP_FAILED else { fatalError("machine: mmap of \(pagedMappingBytes) bytes failed: errno \(errno)") }
                mapping = fresh
                offset = 0
            }
            mapping!.storeBytes(of: 1, toByteOffset: offset, as: UInt8.self)
            offset += page
        }
        if let mapping { munmap(mapping, pagedMappingBytes) }
        return found
    }

    /// Where in its 100 ms of the monotonic clock the instant `nanoseconds` falls, in
    /// milliseconds: the pauses of a host that rations per 100 ms end at one such phase.
    static func phaseMilliseconds(of nanoseconds: UInt64) -> Double {
        Double(nanoseconds % 100_000_000) / 1e6
    }

    /// The line a stall row's section prints under its table: the machine's own longest pauses
    /// with every processor busy, measured earlier in this run, or nothing when they were not.
    static func floorLine() -> String? {
        guard let floor = floor.withLock({ $0 }) else { return nil }
        return String(format: "   the machine itself paused a busy processor for up to %.2f ms in this run, %.2f ms with one of them paging in fresh memory (section machine): a longest decision or a tail up to about that may be the machine's, not the code's", floor.spinning, floor.pagingIn)
    }
}
