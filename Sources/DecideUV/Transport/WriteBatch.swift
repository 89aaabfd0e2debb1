import CLibUV
import Synchronization

/// The frames one loop turn writes to one link, as ONE `uv_write` of several `uv_buf_t`.
///
/// Small frames are copied (with their length prefixes) into shared chunks of up to
/// `chunkBytes`; a larger frame gets a buffer of its own. The request, the `uv_buf_t` array and
/// every buffer are allocated here and freed in `deinit`, which runs only after libuv's write
/// callback released the batch (`submit` retains it for libuv).
final class WriteBatch {
    static let chunkBytes = 64 * 1024
    let connectionID: UInt64
    /// Bytes in the buffers (prefixes included).
    let totalBytes: Int
    /// What `OutboundQueues.release` gets back when the write is done: the bytes the queue counted
    /// for these frames (more than `totalBytes` on a sealed link, whose queue counts a tag per
    /// frame while records share one).
    let queuedBytes: Int
    private let request: UnsafeMutablePointer<uv_write_t>
    private let buffers: UnsafeMutablePointer<uv_buf_t>
    private let bufferCapacity: Int
    private(set) var bufferCount = 0
    /// Counts live batches per transport (tests check it returns to zero).
    private let liveCounter: LiveCounter

    init(connectionID: UInt64, frames: [[UInt8]], totalBytes: Int, queuedBytes: Int? = nil, liveCounter: LiveCounter) {
        precondition(!frames.isEmpty && totalBytes > 0, "empty write batch")
        self.connectionID = connectionID
        self.totalBytes = totalBytes
        self.queuedBytes = queuedBytes ?? totalBytes
        self.liveCounter = liveCounter
        request = .allocate(capacity: 1)
        // Every buffer holds at least one frame, so there are never more buffers than frames.
        bufferCapacity = frames.count
        buffers = .allocate(capacity: bufferCapacity)
        liveCounter.add(1)

        var chunk: UnsafeMutableRawPointer?
        var chunkCapacity = 0
        var chunkUsed = 0
        var bytesLeft = totalBytes
        func closeChunk() {
            if let base = chunk, chunkUsed > 0 { append(base, chunkUsed) } else if let base = chunk { base.deallocate() }
            chunk = nil
            chunkCapacity = 0
            chunkUsed = 0
        }
        for frame in frames {
            let needed = frame.count + WireProtocol.frameHeaderBytes
            let destination: UnsafeMutableRawPointer
            if needed > Self.chunkBytes {
                closeChunk()
                destination = .allocate(byteCount: needed, alignment: 1)
                Self.write(frame, at: destination)
                append(destination, needed)
            } else {
                if chunkCapacity - chunkUsed < needed {
                    closeChunk()
                    chunkCapacity = min(Self.chunkBytes, bytesLeft)
                    chunk = .allocate(byteCount: chunkCapacity, alignment: 1)
                }
                Self.write(frame, at: chunk! + chunkUsed)
                chunkUsed += needed
            }
            bytesLeft -= needed
        }
        closeChunk()
        precondition(bytesLeft == 0, "write batch byte count mismatch")
    }

    /// A batch of one buffer it takes over: frames as they go on the wire (an outbox's
    /// `FrameBuffer`), allocated with `UnsafeMutableRawPointer.allocate`, freed with the batch.
    /// Nothing is copied.
    init(connectionID: UInt64, taking wire: UnsafeMutableRawPointer, count: Int, queuedBytes: Int, liveCounter: LiveCounter) {
        precondition(count > 0, "empty write batch")
        self.connectionID = connectionID
        self.totalBytes = count
        self.queuedBytes = queuedBytes
        self.liveCounter = liveCounter
        request = .allocate(capacity: 1)
        bufferCapacity = 1
        buffers = .allocate(capacity: 1)
        liveCounter.add(1)
        append(wire, count)
    }

    deinit {
        for index in 0 ..< bufferCount { UnsafeMutableRawPointer(buffers[index].base!).deallocate() }
        buffers.deallocate()
        request.deallocate()
        liveCounter.add(-1)
    }

    private func append(_ base: UnsafeMutableRawPointer, _ length: Int) {
        precondition(bufferCount < bufferCapacity, "write batch buffer array overflow")
        buffers[bufferCount] = uv_buf_init(base.assumingMemoryBound(to: CChar.self), UInt32(length))
        bufferCount += 1
    }

    private static func write(_ frame: [UInt8], at destination: UnsafeMutableRawPointer) {
        let length = UInt32(frame.count)
        destination.storeBytes(of: length.littleEndian, as: UInt32.self)
        frame.withUnsafeBytes { source in
            (destination + WireProtocol.frameHeaderBytes).copyMemory(from: source.baseAddress!, byteCount: source.count)
        }
    }

    /// Hands the batch to libuv. `done` runs on the loop thread with the status (0 = written,
    /// negative = failed or cancelled) exactly once, after which the memory is freed.
    func submit(on stream: UnsafeMutablePointer<uv_stream_t>, done: @escaping (WriteBatch, Int32) -> Void) -> Int32 {
        completion = done
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_write(request, stream, buffers, UInt32(bufferCount)) { request, status in
            let batch = Unmanaged<WriteBatch>.fromOpaque(request!.pointee.data).takeRetainedValue()
            let completion = batch.completion
            batch.completion = nil
            completion?(batch, status)
        }
        if status != 0 {
            // libuv did not take the request: no callback will come.
            Unmanaged<WriteBatch>.fromOpaque(request.pointee.data).release()
            completion = nil
        }
        return status
    }

    private var completion: ((WriteBatch, Int32) -> Void)?
}

/// A counter of live objects, for leak checks in tests. Thread-safe.
final class LiveCounter: Sendable {
    private let value = Synchronization.Atomic<Int>(0)
    func add(_ delta: Int) { value.add(delta, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}
