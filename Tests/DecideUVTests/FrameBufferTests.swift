import Testing
@testable import DecideUV

/// `FrameBuffer`, an outbox's bytes: frames of every size (empty, around the first capacity,
/// larger than the cap) come back from `take` exactly, in order, each behind its length; it
/// starts empty after each `take`; it never grows past its cap unless one frame needs more.
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
}
