/// When a transport's loop writes what its links queued: at once, or, while links stream (its
/// previous write started less than the coalescing time ago, and carried more than one frame or
/// was followed by no input), after waiting the coalescing time, so that the frames queued
/// meanwhile join the same write.
///
/// A stream of small deltas otherwise costs a wakeup (an eventfd write), a `uv_write` and, on
/// the peer, an `epoll_wait` and a read for every few frames: in the library comparison those
/// calls were 37 % of the process's CPU time (docs/design/0015-the-replicated-update.md, "The
/// technique"). A write of one frame followed by input is a request and its reply (or a
/// reply and the next request): holding the next write would only add the coalescing time to
/// every round trip (docs/design/0015-the-replicated-update.md, "Alternatives tried and not
/// kept"). Frames that pile
/// up between writes, or writes with nothing read between them, are a stream. Guarantees: a
/// write is delayed by at most `coalescingNanoseconds`, and never when the previous one started
/// `coalescingNanoseconds` ago or more, nor when it carried at most one frame and the loop read
/// input since, nor when coalescing is 0.
struct FlushPacing {
    /// How long a write waits while links stream; 0 writes at once always.
    let coalescingNanoseconds: UInt64
    /// When the previous write started (monotonic nanoseconds), nil before the first.
    private var lastFlushNanoseconds: UInt64?
    /// Frames the previous write carried, over all links.
    private var lastFlushFrames = 0
    /// Whether the loop read input from a link since the previous write.
    private var readSinceFlush = false

    init(coalescingMicroseconds: UInt32) {
        coalescingNanoseconds = UInt64(coalescingMicroseconds) * 1_000
    }

    /// How long the write about to start at `now` waits first.
    func delayNanoseconds(at now: UInt64) -> UInt64 {
        guard coalescingNanoseconds > 0, lastFlushFrames > 1 || !readSinceFlush, let last = lastFlushNanoseconds, now >= last else {
            return 0
        }
        return now - last < coalescingNanoseconds ? coalescingNanoseconds : 0
    }

    /// Notes that a write of `frames` frames (over all links) started at `now`.
    mutating func flushed(at now: UInt64, frames: Int) {
        lastFlushNanoseconds = now
        lastFlushFrames = frames
        readSinceFlush = false
    }

    /// Notes that the loop read input from a link.
    mutating func read() {
        readSinceFlush = true
    }
}
