import Decide
import Testing
@testable import DecideUV

@Suite("Framing over loopback")
struct FramingTests {
    @Test("a client writing one byte at a time: handshake and frame arrive whole")
    func partialReads() throws {
        let a = try makeNode("a")
        defer { a.transport.shutdown() }
        let address = try a.transport.listen(on: "127.0.0.1:0")
        let client = try RawClient(connectTo: address)
        #expect(client.handshake(byteByByte: true))
        let (link, peer) = try #require(a.delegate.waitForConnection())
        #expect(peer.nodeID == "raw")
        let payload: [UInt8] = [4] + Array(repeating: 0xAB, count: 300)
        client.send(WireProtocol.frame(payload), byteByByte: true)
        #expect(a.delegate.waitForFrames(on: link, count: 1) == [payload])
    }

    @Test("many frames in one write arrive whole and in order")
    func manyFramesInOneRead() throws {
        let a = try makeNode("a")
        defer { a.transport.shutdown() }
        let address = try a.transport.listen(on: "[::1]:0")
        let client = try RawClient(connectTo: address)
        #expect(client.handshake())
        let (link, _) = try #require(a.delegate.waitForConnection())
        let frames: [[UInt8]] = (0 ..< 500).map { [1, UInt8($0 % 256), UInt8($0 / 256)] + Array(repeating: 7, count: $0 % 37) }
        client.write(frames.flatMap { WireProtocol.frame($0) })
        #expect(a.delegate.waitForFrames(on: link, count: frames.count) == frames)
        // Each read ends with `didFinishReading`, after its frames and only when it had some:
        // the counts grow strictly, the last covers every frame, and reads carried many frames.
        let ends = a.delegate.readEnds(on: link, through: frames.count)
        #expect(ends.last == frames.count)
        #expect(zip(ends, ends.dropFirst()).allSatisfy { $0 < $1 })
        #expect((ends.first ?? 0) > 0)
        #expect(ends.count < frames.count / 10)
    }

    @Test("10,000 frames keep their order")
    func ordering() throws {
        let pair = try #require(try connectedPair())
        defer { pair.a.transport.shutdown(); pair.b.transport.shutdown() }
        let count = 10_000
        for index in 0 ..< count {
            let value = UInt32(index)
            let frame: [UInt8] = [1, UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16)]
            #expect(pair.b.transport.send(frame, to: pair.bLink) == .queued)
        }
        let received = pair.a.delegate.waitForFrames(on: pair.aLink, count: count, timeoutSeconds: 20)
        #expect(received.count == count)
        let indices = received.map { Int($0[1]) | Int($0[2]) << 8 | Int($0[3]) << 16 }
        #expect(indices == Array(0 ..< count))
    }

    @Test("frames larger than a write chunk and than a read buffer")
    func largeFrames() throws {
        let pair = try #require(try connectedPair())
        defer { pair.a.transport.shutdown(); pair.b.transport.shutdown() }
        let big: [UInt8] = [5] + (0 ..< 300_000).map { UInt8($0 % 251) }
        let small: [UInt8] = [1, 2]
        #expect(pair.b.transport.send(small, to: pair.bLink) == .queued)
        #expect(pair.b.transport.send(big, to: pair.bLink) == .queued)
        #expect(pair.b.transport.send(small, to: pair.bLink) == .queued)
        #expect(pair.a.delegate.waitForFrames(on: pair.aLink, count: 3) == [small, big, small])
    }
}

@Suite("Backpressure")
struct BackpressureTests {
    @Test("a reader that stops reading: send answers .overLimit, the delegate is told, memory stays bounded")
    func overLimit() throws {
        let limit = 64 * 1024
        let a = try makeNode("a") { $0.maxOutboundBytes = limit; $0.maxFrameBytes = 16 * 1024 }
        defer { a.transport.shutdown() }
        let address = try a.transport.listen(on: "127.0.0.1:0")
        let client = try RawClient(connectTo: address, receiveBufferBytes: 4096)
        #expect(client.handshake())
        let (link, _) = try #require(a.delegate.waitForConnection())
        let frame: [UInt8] = [1] + Array(repeating: 0x5A, count: 1023)
        var queued = 0
        var result = SendResult.queued
        // The kernel buffers absorb some megabytes first; 200 MiB is far past that.
        while result == .queued && queued < 200_000 {
            result = a.transport.send(frame, to: link)
            if result == .queued { queued += 1 }
            #expect(a.transport.outboundBytes(of: link) <= limit)
        }
        #expect(result == .overLimit)
        #expect(a.delegate.wait { $0.contains { if case .overLimit(link) = $0 { return true }; return false } ? true : nil } == true)
        // Keep pushing: whatever the loop drains meanwhile, the bound holds and refusals keep coming.
        var refusals = 0
        for _ in 0 ..< 10_000 {
            if a.transport.send(frame, to: link) == .overLimit { refusals += 1 }
            #expect(a.transport.outboundBytes(of: link) <= limit)
        }
        #expect(refusals > 0)
        // The link itself stays up.
        #expect(!a.delegate.events.contains { if case .disconnected = $0 { return true }; return false })
    }
}
