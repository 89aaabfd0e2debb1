@_spi(Engine) import DecideCore
import Synchronization

/// The frames each established link has queued for writing, shared between the threads that
/// call `send` and the loop thread that writes. Bounded: a link's queued plus in-flight bytes
/// (length prefixes included) never pass `maxOutboundBytes`.
final class OutboundQueues: Sendable {
    /// Its fields are touched only under `OutboundQueues.state`'s lock, so no two accesses can
    /// overlap: the dynamic exclusivity checks of class properties (about 80 instructions per
    /// frame queued) are left out.
    private final class Outbox: @unchecked Sendable {
        @exclusivity(unchecked) var frames: [[UInt8]] = []
        @exclusivity(unchecked) var frameBytes = 0          // bytes in `frames`, prefixes included
        @exclusivity(unchecked) var committedBytes = 0      // bytes in `frames` plus bytes handed to uv_write, not yet done
        @exclusivity(unchecked) var dirty = false
        @exclusivity(unchecked) var limitNoticePending = false
        /// Bytes sealing adds to each frame of this link (0 when it is not sealed).
        var frameOverheadBytes = 0
    }
    private struct State {
        /// By connection number; looked up on every frame sent (`NumberMap`, not `Dictionary`).
        var outboxes = NumberMap<Outbox>()
        var dirty: [UInt64] = []
    }
    /// The result of `enqueue`.
    enum EnqueueResult { case queued(wakeLoop: Bool), overLimit(notify: Bool), notConnected }

    private let state = Mutex(State())
    let maxOutboundBytes: Int

    init(maxOutboundBytes: Int) {
        self.maxOutboundBytes = maxOutboundBytes
    }

    /// Opens the queue of a link that just became established; each of its frames will be
    /// `frameOverheadBytes` longer on the wire (sealing), and counts so.
    func open(_ id: UInt64, frameOverheadBytes: Int = 0) {
        state.withLock { state in
            precondition(state.outboxes[id] == nil, "outbox opened twice")
            let box = Outbox()
            box.frameOverheadBytes = frameOverheadBytes
            state.outboxes[id] = box
        }
    }

    /// Drops the queue of a link that is gone; later `enqueue`s answer `.notConnected`.
    func remove(_ id: UInt64) {
        _ = state.withLock { state in state.outboxes.removeValue(forKey: id) }
    }

    /// Queues one frame unless that passes the limit. `wakeLoop` is true when the loop must be woken.
    func enqueue(_ frame: [UInt8], to id: UInt64) -> EnqueueResult {
        state.withLock { state in
            guard let box = state.outboxes[id] else { return .notConnected }
            let bytes = frame.count + WireProtocol.frameHeaderBytes + box.frameOverheadBytes
            guard box.committedBytes + bytes <= maxOutboundBytes else {
                let notify = !box.limitNoticePending
                box.limitNoticePending = true
                return .overLimit(notify: notify)
            }
            box.frames.append(frame)
            box.frameBytes += bytes
            box.committedBytes += bytes
            if !box.dirty {
                box.dirty = true
                state.dirty.append(id)
                return .queued(wakeLoop: state.dirty.count == 1)
            }
            return .queued(wakeLoop: false)
        }
    }

    /// Loop thread: the frames to write now, per link, in the order they were queued.
    func takeDirty(into body: (UInt64, [[UInt8]], Int) -> Void) {
        let batches = state.withLock { state -> [(UInt64, [[UInt8]], Int)] in
            var batches: [(UInt64, [[UInt8]], Int)] = []
            batches.reserveCapacity(state.dirty.count)
            for id in state.dirty {
                guard let box = state.outboxes[id] else { continue }
                batches.append((id, box.frames, box.frameBytes))
                box.frames = []
                box.frameBytes = 0
                box.dirty = false
            }
            state.dirty.removeAll(keepingCapacity: true)
            return batches
        }
        for (id, frames, bytes) in batches { body(id, frames, bytes) }
    }

    /// Loop thread: `bytes` handed to uv_write for link `id` are done (written or failed).
    func release(_ bytes: Int, of id: UInt64) {
        state.withLock { state in
            guard let box = state.outboxes[id] else { return }
            box.committedBytes -= bytes
            precondition(box.committedBytes >= box.frameBytes, "outbound byte accounting went wrong")
        }
    }

    /// Loop thread: the over-limit notice for `id` was delivered; the next refusal notifies again.
    func limitNoticeDelivered(_ id: UInt64) {
        state.withLock { state in state.outboxes[id]?.limitNoticePending = false }
    }

    /// Bytes queued or in flight for `id` (0 when the link is gone). For tests and diagnostics.
    func committedBytes(of id: UInt64) -> Int {
        state.withLock { state in state.outboxes[id]?.committedBytes ?? 0 }
    }
}
