import Foundation
import Testing
@testable import DecideUV

/// Writes coalesced while links stream (`FlushPacing`, `flushCoalescingMicroseconds`): the
/// policy itself, its bound in the configuration, and what it does to a stream on a real
/// loopback link.
@Suite struct FlushPacingTests {
    @Test func waitsOnlyWhileTheLoopWroteWithinTheCoalescingTime() {
        var pacing = FlushPacing(coalescingMicroseconds: 50)
        let start: UInt64 = 7_000_000
        #expect(pacing.delayNanoseconds(at: start) == 0, "the first write goes at once")
        pacing.flushed(at: start, frames: 2)
        #expect(pacing.delayNanoseconds(at: start + 1) == 50_000)
        #expect(pacing.delayNanoseconds(at: start + 49_999) == 50_000)
        #expect(pacing.delayNanoseconds(at: start + 50_000) == 0, "quiet for the coalescing time: at once")
        #expect(pacing.delayNanoseconds(at: start + 3_600_000_000_000) == 0)
        #expect(pacing.delayNanoseconds(at: start - 1) == 0, "a clock behind the last write never delays")
        pacing.flushed(at: start + 80_000, frames: 7)
        #expect(pacing.delayNanoseconds(at: start + 100_000) == 50_000, "measured from the latest write")
    }

    /// A write of one frame says frames do not pile up between writes (a request, its reply):
    /// the next goes at once, however soon, so a round trip is not held for the coalescing time
    /// each way. Once a write carries two frames, the next waits again.
    @Test func aWriteOfOneFrameDoesNotHoldTheNext() {
        var pacing = FlushPacing(coalescingMicroseconds: 50)
        let start: UInt64 = 7_000_000
        pacing.flushed(at: start, frames: 1)
        #expect(pacing.delayNanoseconds(at: start + 1) == 0)
        #expect(pacing.delayNanoseconds(at: start + 20_000) == 0)
        pacing.flushed(at: start + 20_000, frames: 0)
        #expect(pacing.delayNanoseconds(at: start + 20_001) == 0, "nor a write of nothing")
        pacing.flushed(at: start + 30_000, frames: 2)
        #expect(pacing.delayNanoseconds(at: start + 30_001) == 50_000)
    }

    @Test func zeroWritesAtOnceAlways() {
        var pacing = FlushPacing(coalescingMicroseconds: 0)
        pacing.flushed(at: 100, frames: 9)
        #expect(pacing.delayNanoseconds(at: 100) == 0)
        #expect(pacing.delayNanoseconds(at: 101) == 0)
    }

    @Test func theConfigurationBoundsIt() throws {
        var configuration = UVTransport.Configuration(nodeID: "a", clusterName: "test")
        #expect(configuration.flushCoalescingMicroseconds == 50)
        configuration.flushCoalescingMicroseconds = 1_001
        #expect(throws: UVTransportError.self) { _ = try UVTransport(configuration: configuration) }
        configuration.flushCoalescingMicroseconds = 1_000
        let transport = try UVTransport(configuration: configuration)
        transport.shutdown()
    }

    /// Frames sent ten at a time, 100 µs apart: they pile up between writes, a stream. Written
    /// at once, each burst would go in a write or more of its own (400 reads on the peer or
    /// more). With 1 ms of coalescing, each write after one of two frames or more starts at
    /// least 1 ms after it; a write of one frame (the loop caught a burst's first frame alone)
    /// lets the next go at once, and that one takes the rest of the burst. So over a stream of
    /// T ms there are at most about 2 (T + 2) writes, and the peer reads no more often than that
    /// (a read may take several writes, never split one this small). A late loop or a late
    /// reader only merges more. Every frame arrives, in order.
    @Test func aStreamGoesOutInAWriteAMillisecondAndIntact() throws {
        let pair = try #require(try connectedPair { $0.flushCoalescingMicroseconds = 1_000 })
        defer { pair.a.transport.shutdown(); pair.b.transport.shutdown() }
        let count = 4_000
        let burst = 10
        let started = DispatchTime.now().uptimeNanoseconds
        for index in stride(from: 0, to: count, by: burst) {
            let sent = DispatchTime.now().uptimeNanoseconds
            for frame in index ..< index + burst {
                #expect(pair.b.transport.send([1, UInt8(frame & 0xFF), UInt8(frame >> 8)], to: pair.bLink) == .queued)
            }
            while DispatchTime.now().uptimeNanoseconds - sent < 100_000 {}
        }
        let elapsedMilliseconds = Int((DispatchTime.now().uptimeNanoseconds - started) / 1_000_000)
        let received = pair.a.delegate.waitForFrames(on: pair.aLink, count: count, timeoutSeconds: 20)
        #expect(received.map { Int($0[1]) | Int($0[2]) << 8 } == Array(0 ..< count))
        let reads = pair.a.delegate.readEnds(on: pair.aLink, through: count).count
        #expect(reads <= 2 * (elapsedMilliseconds + 2), "\(reads) reads for \(count) frames sent over \(elapsedMilliseconds) ms")
    }
}
