import DecideCore

/// Frames queued for one link as they go on the wire: each a u32 length and its payload, one
/// after another in one buffer the queue owns. A frame is copied in when queued, so the sender
/// keeps (and frees, on its own thread) its array, and nothing is retained per frame; the loop
/// thread takes the whole buffer and writes it as it is (or seals it, record by record), with
/// no second copy (docs/design/0015-the-replicated-update.md, "The technique").
///
/// Guarantees: `take` hands over exactly the frames appended since the last `take`, in order,
/// each behind its length; the buffer never grows past `maxCapacityBytes` unless a single
/// append needs more (the caller's own bound, `maxOutboundBytes`, keeps what is queued below
/// it). Not thread-safe: its owner (`OutboundQueues`) touches it under its lock.
struct FrameBuffer: ~Copyable {
    private var base: UnsafeMutableRawPointer?
    private var capacity = 0
    /// Bytes written (lengths included).
    private(set) var count = 0
    /// Frames written.
    private(set) var frames = 0
    private let maxCapacityBytes: Int
    /// The bytes of the batch taken last: the next buffer starts that large, so a link that
    /// streams allocates one buffer a flush instead of doubling one from
    /// `initialCapacityBytes` and copying what it holds at each step
    /// (docs/design/0015-the-replicated-update.md, "The technique"). A quiet link's next batch
    /// is small again, and so is the buffer after it.
    private var lastTakenBytes = 0

    /// The first buffer of a link holds this much; it doubles as frames arrive.
    static let initialCapacityBytes = 4 * 1024

    init(maxCapacityBytes: Int) {
        self.maxCapacityBytes = max(maxCapacityBytes, Self.initialCapacityBytes)
    }

    deinit { base?.deallocate() }

    var isEmpty: Bool { count == 0 }

    /// The bytes allocated now.
    var capacityBytes: Int { capacity }

    /// Appends `payload` behind its u32 little-endian length.
    mutating func append(_ payload: UnsafeRawBufferPointer) {
        let needed = count + WireProtocol.frameHeaderBytes + payload.count
        if needed > capacity { grow(toAtLeast: needed) }
        let destination = base! + count
        destination.storeBytes(of: UInt32(truncatingIfNeeded: payload.count).littleEndian, as: UInt32.self)
        if let source = payload.baseAddress, payload.count > 0 {
            (destination + WireProtocol.frameHeaderBytes).copyMemory(from: source, byteCount: payload.count)
        }
        count = needed
        frames += 1
    }

    /// Hands over the bytes written (nil when none), which the caller must deallocate, and starts
    /// empty again.
    mutating func take() -> (bytes: UnsafeMutableRawPointer, count: Int, frames: Int)? {
        guard let taken = base, count > 0 else { return nil }
        defer {
            base = nil
            capacity = 0
            lastTakenBytes = count
            count = 0
            frames = 0
        }
        return (taken, count, frames)
    }

    /// Doubles the capacity (up to `maxCapacityBytes`, or exactly `needed` past it), keeping
    /// what was written; an empty buffer starts at the last batch's size.
    private mutating func grow(toAtLeast needed: Int) {
        var size = max(capacity == 0 ? lastTakenBytes : capacity * 2, Self.initialCapacityBytes)
        if size > maxCapacityBytes { size = maxCapacityBytes }
        if size < needed { size = needed }
        base = movedBytes(from: base, count: count, toCapacity: size)
        capacity = size
    }
}
