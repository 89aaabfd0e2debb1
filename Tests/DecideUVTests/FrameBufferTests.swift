import Testing
@testable import DecideUV

/// `FrameBuffer`, an outbox's bytes: frames of every size (empty, around the first capacity,
/// larger than the cap) come back from `take` exactly, in order, each behind its length; it
/// starts empty after each `take`; it never grows past its cap unless one frame needs more; a
/// new buffer starts at the last batch's size, within the cap.
@Suite struct FrameBufferTests {
    @Test func framesComeBackExactlyInOrder() {
        var random = UInt64(0x5EED)
        func next(_ bound: Int) -> Int {
            random = random &* 6364136223846793005 &+ 1442695040888963407
            return Int((random >> 33) % UInt64(bound))
        }
        let cap = 64 * 1024
        var buffer = FrameBuffer(maxCapacityBytes: cap)
        #expect(buffer.take() == nil, "nothing written, nothing taken")
        for round in 0..<20 {
            let sizes = (0..<(1 + next(300))).map { _ in [0, 1, 7, 100, 4_095, 4_096, 5_000, 70_000][next(8)] }
            let frames = sizes.enumerated().map { index, size in [UInt8](repeating: UInt8(truncatingIfNeeded: index &+ round), count: size) }
            for frame in frames { frame.withUnsafeBytes { buffer.append($0) } }
            #expect(buffer.frames == frames.count)
            #expect(buffer.count == frames.reduce(0) { $0 + 4 + $1.count })
            guard let taken = buffer.take() else {
                Issue.record("round \(round): nothing taken")
                continue
            }
            defer { taken.bytes.deallocate() }
            #expect(buffer.isEmpty && buffer.frames == 0, "empty again after take")
            var read: [[UInt8]] = []
            var offset = 0
            let wire = UnsafeRawBufferPointer(start: taken.bytes, count: taken.count)
            while offset < wire.count {
                let length = Int(UInt32(littleEndian: wire.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                read.append(Array(wire[offset + 4 ..< offset + 4 + length]))
                offset += 4 + length
            }
            #expect(read == frames, "round \(round)")
            #expect(taken.frames == frames.count)
        }
    }

    @Test func growthStopsAtTheCapUnlessOneFrameNeedsMore() {
        var buffer = FrameBuffer(maxCapacityBytes: 10_000)
        for _ in 0..<9 { [UInt8](repeating: 1, count: 1_000).withUnsafeBytes { buffer.append($0) } }
        #expect(buffer.capacityBytes <= 10_000)
        [UInt8](repeating: 2, count: 50_000).withUnsafeBytes { buffer.append($0) }
        #expect(buffer.capacityBytes == buffer.count, "past the cap, exactly what is needed")
        buffer.take().map { $0.bytes.deallocate() }
    }

    /// A link that streams allocates its buffer once a flush: the buffer after a batch starts
    /// at that batch's size and holds the same batch again without growing. A quiet link's
    /// next batch is small, and so is the buffer after it; the cap still holds.
    @Test func aNewBufferStartsAtTheLastBatchSize() {
        let frame = [UInt8](repeating: 3, count: 996)  // 1,000 bytes with its length
        var buffer = FrameBuffer(maxCapacityBytes: 1 << 20)
        for _ in 0..<100 { frame.withUnsafeBytes { buffer.append($0) } }
        buffer.take().map { $0.bytes.deallocate() }
        frame.withUnsafeBytes { buffer.append($0) }
        #expect(buffer.capacityBytes == 100_000, "the next buffer starts at the last batch's 100,000 bytes")
        for _ in 0..<99 { frame.withUnsafeBytes { buffer.append($0) } }
        #expect(buffer.capacityBytes == 100_000, "and holds the same batch without growing")
        buffer.take().map { $0.bytes.deallocate() }
        [UInt8](repeating: 4, count: 10).withUnsafeBytes { buffer.append($0) }
        buffer.take().map { $0.bytes.deallocate() }
        [UInt8](repeating: 5, count: 10).withUnsafeBytes { buffer.append($0) }
        #expect(buffer.capacityBytes == FrameBuffer.initialCapacityBytes, "after a small batch, a small buffer")
        buffer.take().map { $0.bytes.deallocate() }

        var capped = FrameBuffer(maxCapacityBytes: 8_192)
        for _ in 0..<20 { frame.withUnsafeBytes { capped.append($0) } }
        capped.take().map { $0.bytes.deallocate() }
        frame.withUnsafeBytes { capped.append($0) }
        #expect(capped.capacityBytes == 8_192, "a batch past the cap starts the next buffer at the cap")
        capped.take().map { $0.bytes.deallocate() }
    }
}
