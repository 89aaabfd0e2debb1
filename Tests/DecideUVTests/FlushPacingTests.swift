import Foundation
import Testing
@testable import DecideUV

/// Writes coalesced while links stream (`FlushPacing`, `flushCoalescingMicroseconds`): the
/// policy itself, its bound in the configuration, and what it does to a paced stream on a real
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

    /// A write of one frame followed by input is a request and its reply: the next write goes
    /// at once, however soon, so a round trip is not held for the coalescing time each way. One
    /// frame with nothing read since is a stream of single frames, and a write of two frames or
    /// more is a stream whatever came in: the next waits.
    @Test func aOneFrameWriteThatWasAnsweredDoesNotHoldTheNext() {
        var pacing = FlushPacing(coalescingMicroseconds: 50)
        let start: UInt64 = 7_000_000
        pacing.flushed(at: start, frames: 1)
        #expect(pacing.delayNanoseconds(at: start + 1) == 50_000, "nothing read since: a stream")
        pacing.read()
        #expect(pacing.delayNanoseconds(at: start + 1) == 0)
        #expect(pacing.delayNanoseconds(at: start + 20_000) == 0)
        pacing.flushed(at: start + 20_000, frames: 1)
        #expect(pacing.delayNanoseconds(at: start + 20_001) == 50_000, "the input was taken by the write before")
        pacing.read()
        #expect(pacing.delayNanoseconds(at: start + 20_001) == 0)
        pacing.flushed(at: start + 30_000, frames: 2)
        pacing.read()
        #expect(pacing.delayNanoseconds(at: start + 30_001) == 50_000, "frames piled up: a stream")
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

    /// Frames sent about 100 µs apart, a steady stream slower than the loop, with nothing coming
    /// back: written at once, each would go in a write of its own (400 reads on the peer,
    /// measured here). With 1 ms of coalescing, each write starts at least 1 ms after the one
    /// before, so over a stream of T ms there are at most T + 2 writes, and the peer reads no
    /// more often than that (a read may take several writes, never split one this small). That
    /// bound holds however loaded the machine is: a late loop or a late reader only merges more,
    /// and a loop that catches the frames one at a time still waits after each write, as
    /// nothing was read in between. Every frame arrives, in order.
    @Test func aPacedStreamGoesOutInAWriteAMillisecondAndIntact() throws {
        let pair = try #require(try connectedPair { $0.flushCoalescingMicroseconds = 1_000 })
        defer { pair.a.transport.shutdown(); pair.b.transport.shutdown() }
        let count = 400
        let started = DispatchTime.now().uptimeNanoseconds
        for index in 0 ..< count {
            let sent = DispatchTime.now().uptimeNanoseconds
            #expect(pair.b.transport.send([1, UInt8(index & 0xFF), UInt8(index >> 8)], to: pair.bLink) == .queued)
            while DispatchTime.now().uptimeNanoseconds - sent < 100_000 {}
        }
        let elapsedMilliseconds = Int((DispatchTime.now().uptimeNanoseconds - started) / 1_000_000)
        let received = pair.a.delegate.waitForFrames(on: pair.aLink, count: count, timeoutSeconds: 20)
        #expect(received.map { Int($0[1]) | Int($0[2]) << 8 } == Array(0 ..< count))
        let reads = pair.a.delegate.readEnds(on: pair.aLink, through: count).count
        #expect(reads <= elapsedMilliseconds + 2, "\(reads) reads for \(count) frames sent over \(elapsedMilliseconds) ms")
    }
}
