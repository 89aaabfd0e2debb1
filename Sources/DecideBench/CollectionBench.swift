import Decide
import DecideCore
import Foundation
import Synchronization

/// `DecideBench collection`: how long one decision can wait while a tombstone collection
/// (`Node.collectTombstones`, run by the replication engine every
/// `tombstoneCollectionIntervalMilliseconds`) holds the node's state lock, in a node of
/// `BENCH_COLLECTION_KEYS` keys (default 1,000,000), 1,000 of them deleted. Every decision,
/// every peer's batch and every read waits while the lock is held.
///
/// The baseline, measured in the same run, is the longest one-write decision on the same node
/// in half a second without a collection. The goal is the delta-propagation p99.9
/// budget: no decision waits more than 2 ms for a collection.
enum CollectionBench {
    static let goalMilliseconds = 2.0
    static let deletedKeys = 1_000

    struct Item: CollectionState {
        static func defaultValue(at id: Int) -> String { "" }
        static var name: String { "bench.collection" }
    }

    struct Fill: Decision {
        let range: Range<Int>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in range { write("value-\(index)", into: Item.self, at: index) }
            return .none
        }
    }

    struct Delete: Decision {
        let indices: [Int]
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in indices { write.delete(Item.self, at: index) }
            return .none
        }
    }

    /// What the timing writer thread and the main thread share: the phase (0: no collection
    /// yet, 1: collecting, 2: stop) and, by phase, the longest decision.
    final class Shared: Sendable {
        let phase = Atomic(0)
        let longest = Mutex([0.0, 0.0])
    }

    static func run() {
        let environment = ProcessInfo.processInfo.environment
        let keys = max(deletedKeys * 2, Int(environment["BENCH_COLLECTION_KEYS"] ?? "") ?? 1_000_000)
        print("== collection: the longest decision while one tombstone collection runs (it holds the state lock), \(keys) keys, \(deletedKeys) of them deleted")
        let node = try! Node(configuration: .init(id: "collection"))
        var start = 0
        while start < keys {
            let end = min(keys, start + 10_000)
            node.decide(Fill(range: start..<end))
            start = end
        }
        let stride = keys / deletedKeys
        node.decide(Delete(indices: (0..<deletedKeys).map { $0 * stride }))

        // A writer on another thread times each of its one-write decisions: for a while with no
        // collection (the baseline: the longest a decision takes anyway on this machine), then
        // while the collection runs. A decision counts for the later phase it saw.
        let shared = Shared()
        let writer = Thread {
            var index = 1
            while true {
                let phase = shared.phase.load(ordering: .acquiring)
                if phase == 2 { break }
                let began = DispatchTime.now().uptimeNanoseconds
                node.decide(Fill(range: index..<(index + 1)))
                let took = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6
                let counted = max(phase, min(1, shared.phase.load(ordering: .acquiring)))
                shared.longest.withLock { $0[counted] = max($0[counted], took) }
                // Never one of the deleted keys (multiples of `stride`): what is collected stays put.
                index = index % (keys - 1) + 1
                if index % stride == 0 { index += 1 }
            }
        }
        writer.start()
        Thread.sleep(forTimeInterval: 0.5)
        shared.phase.store(1, ordering: .releasing)
        let began = DispatchTime.now().uptimeNanoseconds
        let collected = node.collectTombstones(olderThan: HLCTimestamp(rawValue: UInt64.max))
        let collectionMilliseconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6
        shared.phase.store(2, ordering: .releasing)
        while !writer.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        let (baseline, stalled) = shared.longest.withLock { ($0[0], $0[1]) }
        let rows = [[
            "\(collected)", String(format: "%.2f ms", collectionMilliseconds), String(format: "%.2f ms", baseline),
            String(format: "%.2f ms", stalled), String(format: "%.1fx", stalled / max(baseline, 1e-6)),
            "\(BenchTable.verdict(stalled <= goalMilliseconds)) (≤ \(Int(goalMilliseconds)) ms)",
        ]]
        BenchTable.print(rows: rows, header: [
            "collected", "collection took", "longest write, 0.5 s without", "longest write during", "ratio", "goal",
        ])
    }
}
