import Decide
import DecideCore
import Foundation
import Synchronization

/// `DecideBench collection`: how long one decision can wait while the replication engine's
/// table-wide chores hold the node's state lock, in a node of `BENCH_COLLECTION_KEYS` keys
/// (default 1,000,000), 1,000 of them deleted, a tenth written by a peer and 1,000 owned by
/// another: a tombstone collection (`Node.collectTombstones`, every
/// `tombstoneCollectionIntervalMilliseconds`) and a member's link dropping
/// (`Node.setPresentOwners`: that member's owned values read as absent); and the read behind
/// `syncnode dump` (`Node.entriesReadInSlices`); and 100,000 keys expiring at one instant
/// (`Node.expireDue`, on every engine tick); and, last, the table growing from
/// `BENCH_COLLECTION_KEYS` to twice as many keys, one insert a decision, which takes its
/// index past at least one growth (the index was rebuilt whole in the insert that filled it:
/// docs/design/0007-growing-without-stalls.md, "The index drains a few cells per insert"); and
/// then as many keys given a lifetime, one a decision, which grows the expiry schedule to that
/// many items (its key map was rehashed whole in one decision: the same record, "The expiry
/// schedule"); and as many owned by the node, which grows its list of owned keys (a set, once,
/// rehashed whole: "Owned keys"); and as many typed reads of distinct keys, which fill and turn
/// over the node's cache of decoded values (a dictionary, once, rehashed and emptied whole:
/// "Decoded values"). Every decision, every peer's batch and every read waits while the lock is
/// held.
///
/// The baseline, measured in the same run, is the longest one-write decision on the same node
/// in half a second without the chore. The goal is the delta-propagation p99.9
/// budget: no decision waits more than 2 ms for a chore.
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

    struct Session: CollectionState {
        static func defaultValue(at id: Int) -> String { "" }
        static var name: String { "bench.session" }
    }

    /// Sessions `range`, each living one second.
    struct Grant: Decision {
        let range: Range<Int>
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in range { write("open", into: Session.self, at: index, expiringAfter: .seconds(1)) }
            return .none
        }
    }

    /// Item `index` rewritten to live an hour: it joins the expiry schedule.
    struct Lease: Decision {
        let index: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("leased-\(index)", into: Item.self, at: index, expiringAfter: .seconds(3_600))
            return .none
        }
    }

    /// Item `index` rewritten as owned by this node (it reads as absent on a peer whose link to
    /// this node is down): it joins the node's list of owned keys.
    struct Own: Decision {
        let index: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("owned-\(index)", into: Item.self, at: index, ownedByThisNode: true)
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

    /// What the timing writer thread and the main thread share: the phase (0: before the
    /// operation, 1: during it, 2: stop) and, by phase, the longest decision.
    final class Shared: Sendable {
        let phase = Atomic(0)
        /// The longest write of each phase, and when it ended (monotonic nanoseconds).
        let longest = Mutex([(milliseconds: 0.0, ended: UInt64(0)), (milliseconds: 0.0, ended: UInt64(0))])
    }

    static func run() {
        let environment = ProcessInfo.processInfo.environment
        let keys = max(deletedKeys * 2, Int(environment["BENCH_COLLECTION_KEYS"] ?? "") ?? 1_000_000)
        print("== collection: the longest decision while housekeeping holds the state lock, \(keys) keys, \(deletedKeys) of them deleted, a tenth written by a peer, 1,000 owned by another")
        var configuration = Node.Configuration(id: "collection")
        // The bench calls `expireDue` itself, timed; the node's own timer stays out of the way.
        configuration.expiryCheckIntervalMilliseconds = 60_000
        let node = try! Node(configuration: configuration)
        var start = 0
        while start < keys {
            let end = min(keys, start + 10_000)
            node.decide(Fill(range: start..<end))
            start = end
        }
        let stride = keys / deletedKeys
        node.decide(Delete(indices: (0..<deletedKeys).map { $0 * stride }))
        // A peer wrote a tenth of the keys (shared values, not owned): its node id is in the
        // table, as every member's is in a real cluster.
        let peerVersion = Version(timestamp: HLCTimestamp(physicalMilliseconds: node.nowMilliseconds, logical: 0), node: "peer")
        var peerWrites: [KeyedEntry] = []
        for index in Swift.stride(from: 1, to: keys, by: 10) where index % stride != 0 {
            peerWrites.append(KeyedEntry(key: StateKey(name: Item.name, element: Array("\(index)".utf8)),
                                         entry: Entry(version: peerVersion, value: Array("\"peer-\(index)\"".utf8))))
        }
        // Another member owns 1,000 values (presence, say): they read as absent when its link drops.
        for index in Swift.stride(from: 3, to: keys, by: keys / 1_000) where index % stride != 0 && index % 10 != 1 {
            peerWrites.append(KeyedEntry(key: StateKey(name: Item.name, element: Array("\(index)".utf8)),
                                         entry: Entry(version: Version(timestamp: peerVersion.timestamp, node: "owner"),
                                                      value: Array("\"up\"".utf8), ownedByWriter: true)))
        }
        _ = try? node.apply(entries: peerWrites)
        // Replacing a tenth of the values freed 100,000 small blocks; glibc consolidates them at
        // the next allocation of a kilobyte or more, which would otherwise be the collection's
        // (about 9 ms here, once: docs/design/0017-table-wide-chores.md, "What is not the lock").
        ProcessMemory.settleHeap()
        var rows: [[String]] = []
        // The replication engine's two table-wide chores: a collection round, and a member's
        // link dropping (its owned values, if it had any, would read as absent from then on).
        let collection = whileWriting(node, keys: keys, stride: stride) {
            "\(node.collectTombstones(olderThan: HLCTimestamp(rawValue: UInt64.max))) removed"
        }
        rows.append(row("tombstone collection", collection))
        // A later round, 1,000 other keys deleted: the first round after the fill also pays
        // one-time costs of the heap left by it (about 1 ms here; docs/design/0017-table-wide-chores.md,
        // "What is not the lock"), which a node collecting every minute pays once.
        node.decide(Delete(indices: (0..<deletedKeys).map { $0 * stride + stride / 2 }))
        let laterCollection = whileWriting(node, keys: keys, stride: stride) {
            "\(node.collectTombstones(olderThan: HLCTimestamp(rawValue: UInt64.max))) removed"
        }
        rows.append(row("tombstone collection, a later round", laterCollection))
        node.setPresentOwners(["peer", "owner"], removed: [])
        let linkDrop = whileWriting(node, keys: keys, stride: stride) {
            node.setPresentOwners(["owner"], removed: [])
            return "owns nothing"
        }
        rows.append(row("a member's link drops", linkDrop))
        let ownerDrop = whileWriting(node, keys: keys, stride: stride) {
            node.setPresentOwners([], removed: [])
            return "1,000 owned hidden"
        }
        rows.append(row("an owner's link drops", ownerDrop))
        let dump = whileWriting(node, keys: keys, stride: stride) { "\(node.entriesReadInSlices().count) entries" }
        rows.append(row("syncnode dump's read (in slices)", dump))
        // 100,000 sessions granted together expire together.
        let sessions = 100_000
        var granted = 0
        while granted < sessions {
            node.decide(Grant(range: granted..<min(sessions, granted + 10_000)))
            granted += 10_000
        }
        Thread.sleep(forTimeInterval: 1.2)
        let expiry = whileWriting(node, keys: keys, stride: stride) { "\(node.expireDue()) expired" }
        rows.append(row("100,000 keys expire at once", expiry))
        // Last: it doubles the table. One key a decision, as a service adding keys does.
        let growth = whileWriting(node, keys: keys, stride: stride) {
            for index in keys..<(2 * keys) { node.decide(Fill(range: index..<(index + 1))) }
            return "\(keys) inserted"
        }
        rows.append(row("the table doubles, one insert a decision", growth))
        // Then its first `keys` keys are given a lifetime, one a decision: the expiry schedule
        // grows from nothing to a million items.
        let leases = whileWriting(node, keys: keys, stride: stride) {
            for index in 0..<keys { node.decide(Lease(index: index)) }
            return "\(keys) expiring"
        }
        rows.append(row("as many keys given a lifetime, one a decision", leases))
        // And owned by this node, one a decision: its list of owned keys grows to a million.
        let owned = whileWriting(node, keys: keys, stride: stride) {
            for index in 0..<keys { node.decide(Own(index: index)) }
            return "\(keys) owned"
        }
        rows.append(row("as many keys owned by the node, one a decision", owned))
        // And read, typed, one key at a time: the decoded-value cache fills and turns over.
        let reads = whileWriting(node, keys: keys, stride: stride) {
            var bytes = 0
            for index in 0..<keys { bytes &+= node.read(Item.self, at: index).utf8.count }
            return "\(keys) read (\(bytes / 1_000_000) MB)"
        }
        rows.append(row("as many typed reads, one key each", reads))
        BenchTable.print(rows: rows, header: [
            "operation", "result", "took", "longest write, 0.5 s without", "longest write during (ended ms past 100 ms)", "ratio", "goal",
        ])
        if let floor = MachineBench.floorLine() { print(floor + "\n") }
    }

    /// The longest write during the chore is shown with where in 100 ms it ended: this machine's
    /// host takes its processors away at one instant of every 100 ms (`MachineBench`), so long
    /// writes that end there, in several rows, are likely the machine's.
    private static func row(_ label: String, _ measured: (result: String, milliseconds: Double, baseline: Double, during: Double, duringEnded: UInt64)) -> [String] {
        [label, measured.result, String(format: "%.2f ms", measured.milliseconds), String(format: "%.2f ms", measured.baseline),
         String(format: "%.2f ms (ended %.1f)", measured.during, MachineBench.phaseMilliseconds(of: measured.duringEnded)),
         String(format: "%.1fx", measured.during / max(measured.baseline, 1e-6)),
         "\(BenchTable.verdict(measured.during <= goalMilliseconds)) (≤ \(Int(goalMilliseconds)) ms)"]
    }

    /// Runs `operation` while a writer on another thread times each of its one-write decisions:
    /// for half a second before (the baseline: the longest a decision takes anyway on this
    /// machine), then while the operation runs. A decision counts for the later phase it saw.
    private static func whileWriting(_ node: Node, keys: Int, stride: Int, _ operation: () -> String)
        -> (result: String, milliseconds: Double, baseline: Double, during: Double, duringEnded: UInt64) {
        let shared = Shared()
        let writer = Thread {
            var index = 1
            while true {
                let phase = shared.phase.load(ordering: .acquiring)
                if phase == 2 { break }
                let began = DispatchTime.now().uptimeNanoseconds
                node.decide(Fill(range: index..<(index + 1)))
                let ended = DispatchTime.now().uptimeNanoseconds
                let took = Double(ended - began) / 1e6
                let counted = max(phase, min(1, shared.phase.load(ordering: .acquiring)))
                shared.longest.withLock { if took > $0[counted].milliseconds { $0[counted] = (took, ended) } }
                // Never a deleted key (multiples of `stride`, and half a stride past them for the
                // later round) nor an owned one (3 past them): what is collected or hidden stays put.
                index = index % (keys - 1) + 1
                while index % stride == 0 || index % stride == 3 || index % stride == stride / 2 { index += 1 }
            }
        }
        writer.start()
        Thread.sleep(forTimeInterval: 0.5)
        shared.phase.store(1, ordering: .releasing)
        let began = DispatchTime.now().uptimeNanoseconds
        let result = operation()
        let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6
        shared.phase.store(2, ordering: .releasing)
        while !writer.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        let (baseline, during) = shared.longest.withLock { ($0[0], $0[1]) }
        return (result, milliseconds, baseline.milliseconds, during.milliseconds, during.ended)
    }
}
