import DecideCore
import Synchronization

/// How the node (`LocalCommitSender`) and the engine's timer reach a `Replicator` without owning
/// it and without a weak reference. A weak reference gives the engine a side table: then every
/// retain and release of it takes the slow path, and a local commit's weak load was a contended
/// atomic of its own (about 170 instructions and four atomics a replicated decision:
/// docs/design/0009-atomics-off-the-hot-paths.md, "Strong references instead of weak ones").
///
/// Guarantees:
/// - `sendCommit` and `frame` are called only under the node's lock (`LocalCommitSender`), and
///   the engine's `deinit` unhooks its handle from the node under that lock first: they never
///   reach an engine whose `deinit` went past that point.
/// - `send` (a strict commit's frame, after its sync) and `withEngine` (the timer) reach the
///   engine only while it is attached, under the handle's own lock, which `detach` takes.
final class ReplicatorHandle: LocalCommitSender, @unchecked Sendable {
    private let engine: Unmanaged<Replicator>
    private let attached = Mutex(true)

    init(_ engine: Replicator) {
        self.engine = Unmanaged.passUnretained(engine)
    }

    func sendCommit(version: Version, writes: borrowing PendingWrites) {
        engine.lend { $0.sendCommit(version: version, writes: writes) }
    }

    func frame(version: Version, writes: borrowing PendingWrites) -> [UInt8]? {
        engine.lend { $0.frame(version: version, writes: writes) }
    }

    func send(_ frame: [UInt8], timestamp: HLCTimestamp) {
        withEngine { $0.send(frame, timestamp: timestamp) }
    }

    /// Calls `body` with the engine unless it was detached (its `deinit` started).
    func withEngine(_ body: (Replicator) -> Void) {
        attached.withLock { attached in
            if attached { engine.lend(body) }
        }
    }

    /// The engine is going away: `send` and `withEngine` do nothing from now on (an in-flight
    /// call is waited for).
    func detach() {
        attached.withLock { $0 = false }
    }
}
