@_spi(Engine) import DecideCore
import Synchronization

/// The frames each established link has queued for writing, shared between the threads that
/// call `send` and the loop thread that writes, as the bytes that go on the wire
/// (`FrameBuffer`). Bounded: a link's queued plus in-flight bytes (length prefixes included)
/// never pass `maxOutboundBytes`.
final class OutboundQueues: Sendable {
    /// Its fields are touched only under `OutboundQueues.state`'s lock, so no two accesses can
    /// overlap: the dynamic exclusivity checks of class properties (about 80 instructions per
    /// frame queued) are left out.
    private final class Outbox: @unchecked Sendable {
        @exclusivity(unchecked) var wire: FrameBuffer
        @exclusivity(unchecked) var frameBytes = 0          // bytes `wire` counts for, prefixes and sealing included
        @exclusivity(unchecked) var frames = 0              // frames in `wire`
        @exclusivity(unchecked) var committedBytes = 0      // `frameBytes` plus bytes handed to uv_write, not yet done
        @exclusivity(unchecked) var dirty = false
        @exclusivity(unchecked) var limitNoticePending = false
        /// Bytes sealing adds to each frame of this link (0 when it is not sealed).
        var frameOverheadBytes = 0

        init(maxOutboundBytes: Int) { wire = FrameBuffer(maxCapacityBytes: maxOutboundBytes) }
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
            let box = Outbox(maxOutboundBytes: maxOutboundBytes)
            box.frameOverheadBytes = frameOverheadBytes
            state.outboxes[id] = box
        }
    }

    /// Drops the queue of a link that is gone; later `enqueue`s answer `.notConnected`.
    func remove(_ id: UInt64) {
        _ = state.withLock { state in state.outboxes.removeValue(forKey: id) }
    }

    /// Queues one frame (a copy of its bytes) unless that passes the limit. `wakeLoop` is true
    /// when the loop must be woken.
    func enqueue(_ frame: UnsafeRawBufferPointer, to id: UInt64) -> EnqueueResult {
        state.withLock { state in
            // The link's box lent, not retained and released (atomics a frame): the map holds it.
            guard let outbox = state.outboxes[id].map(Unmanaged.passUnretained) else { return .notConnected }
            return outbox.lend { box in enqueue(frame, into: box, id: id, state: &state) }
        }
    }

    /// `enqueue`'s work on the link's `box`, under the lock.
    private func enqueue(_ frame: UnsafeRawBufferPointer, into box: Outbox, id: UInt64, state: inout State) -> EnqueueResult {
        let bytes = frame.count + WireProtocol.frameHeaderBytes + box.frameOverheadBytes
        guard box.committedBytes + bytes <= maxOutboundBytes else {
            let notify = !box.limitNoticePending
            box.limitNoticePending = true
            return .overLimit(notify: notify)
        }
        box.wire.append(frame)
        box.frames += 1
        box.frameBytes += bytes
        box.committedBytes += bytes
        if !box.dirty {
            box.dirty = true
            state.dirty.append(id)
            return .queued(wakeLoop: state.dirty.count == 1)
        }
        return .queued(wakeLoop: false)
    }

    /// What the loop thread takes of one link: its queued frames as they go on the wire (each
    /// a u32 length and its payload; the taker deallocates `bytes`), how many there are, and the
    /// bytes the queue counted for them (`release` gives those back once written).
    struct Taken {
        let id: UInt64
        let bytes: UnsafeMutableRawPointer
        let count: Int
        let frames: Int
        let queuedBytes: Int
    }

    /// Whether any link has frames queued since the last `takeDirty`.
    var hasDirty: Bool { state.withLock { !$0.dirty.isEmpty } }

    /// Loop thread: the frames to write now, per link, in the order they were queued.
    func takeDirty(into body: (Taken) -> Void) {
        let batches = state.withLock { state -> [Taken] in
            var batches: [Taken] = []
            batches.reserveCapacity(state.dirty.count)
            for id in state.dirty {
                guard let box = state.outboxes[id] else { continue }
                if let wire = box.wire.take() {
                    batches.append(Taken(id: id, bytes: wire.bytes, count: wire.count, frames: box.frames, queuedBytes: box.frameBytes))
                }
                box.frames = 0
                box.frameBytes = 0
                box.dirty = false
            }
            state.dirty.removeAll(keepingCapacity: true)
            return batches
        }
        for batch in batches { body(batch) }
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
