// Pure: no libuv, no Crypto, no Foundation. Compiled into the fuzz target as well.

/// Why a byte stream is not a valid sequence of frames. Each one closes the link.
package enum FrameDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A length prefix announced more payload bytes than the current limit allows.
    case frameTooLarge(lengthBytes: Int, maxFrameBytes: Int)
    /// A length prefix of zero: every payload carries at least its type byte.
    case emptyFrame

    package var description: String {
        switch self {
        case .frameTooLarge(let length, let limit):
            return "frame length \(length) bytes exceeds the limit of \(limit) bytes"
        case .emptyFrame:
            return "empty frame (length 0)"
        }
    }
}

/// Splits a byte stream into frames: `u32 little-endian length` + `length` payload bytes.
///
/// Feed it whatever each read returned; it keeps the partial frame between reads. It never
/// holds more than `maxFrameBytes + 4` bytes, and a length past `maxFrameBytes` is refused before
/// any payload is buffered. After it threw once, the stream is broken: do not feed it again.
package struct FrameDecoder: Sendable {
    /// The largest payload accepted; may be raised between calls (after the handshake).
    package var maxFrameBytes: Int
    private var header: [UInt8] = []
    private var payload: [UInt8] = []
    private var expectedPayloadBytes = -1  // -1: reading a header

    /// A decoder refusing payloads longer than `maxFrameBytes` (must be at least 1).
    package init(maxFrameBytes: Int) {
        precondition(maxFrameBytes >= 1, "maxFrameBytes must be positive")
        self.maxFrameBytes = maxFrameBytes
    }

    /// True while part of a frame (a header byte or more) has been read but not the whole.
    package var hasPartialFrame: Bool { !header.isEmpty || expectedPayloadBytes >= 0 }

    /// Where `nextPayload` found a whole payload.
    package enum Payload: Equatable {
        /// Whole inside the input of this call: these bytes of it, to be read in place.
        case inInput(Range<Int>)
        /// Gathered across reads into the decoder's own buffer, now handed over.
        case gathered([UInt8])

        /// Runs `body` over the payload's bytes: lent from `input` (the call's input) or from the
        /// gathered array, copied in neither case.
        package func withBytes<Result>(in input: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
            switch self {
            case .inInput(let range): body(UnsafeRawBufferPointer(rebasing: input[range]))
            case .gathered(let bytes): bytes.withUnsafeBytes(body)
            }
        }

        /// The payload as an array of its own: a copy of its range of `input`, or the gathered
        /// array itself.
        package func bytes(in input: UnsafeRawBufferPointer) -> [UInt8] {
            switch self {
            case .inInput(let range): Array(UnsafeRawBufferPointer(rebasing: input[range]))
            case .gathered(let bytes): bytes
            }
        }
    }

    /// Takes bytes from `input` starting at `offset` and returns the next whole payload, or nil
    /// when `input` is used up (then `offset == input.count`). Call again until it returns nil.
    package mutating func next(from input: UnsafeRawBufferPointer, offset: inout Int) throws(FrameDecodingError) -> [UInt8]? {
        try nextPayload(from: input, offset: &offset)?.bytes(in: input)
    }

    /// `next` without copying a payload that lies whole in `input`: its range is returned
    /// instead (most frames, on a link that keeps up). Same checks, same state.
    package mutating func nextPayload(from input: UnsafeRawBufferPointer, offset: inout Int) throws(FrameDecodingError) -> Payload? {
        precondition(offset >= 0 && offset <= input.count, "offset out of range")
        while offset < input.count {
            if expectedPayloadBytes < 0 {
                // Fast path: a whole header (and maybe the whole frame) is in this read.
                if header.isEmpty && input.count - offset >= WireProtocol.frameHeaderBytes {
                    let length = Self.readLength(input, at: offset)
                    try check(length)
                    offset += WireProtocol.frameHeaderBytes
                    if input.count - offset >= length {
                        let range = offset ..< offset + length
                        offset += length
                        return .inInput(range)
                    }
                    startPayload(length)
                    continue
                }
                header.append(input[offset])
                offset += 1
                if header.count == WireProtocol.frameHeaderBytes {
                    let length = header.withUnsafeBytes { Self.readLength($0, at: 0) }
                    header.removeAll(keepingCapacity: true)
                    try check(length)
                    startPayload(length)
                }
            } else {
                let take = min(expectedPayloadBytes - payload.count, input.count - offset)
                payload.append(contentsOf: input[offset ..< offset + take])
                offset += take
                if payload.count == expectedPayloadBytes {
                    let frame = payload
                    payload = []
                    expectedPayloadBytes = -1
                    return .gathered(frame)
                }
            }
        }
        return nil
    }

    /// Convenience for tests and the fuzzer: every whole frame in `bytes`, in order.
    package mutating func frames(in bytes: [UInt8]) throws(FrameDecodingError) -> [[UInt8]] {
        var result: [[UInt8]] = []
        var offset = 0
        var failure: FrameDecodingError?
        bytes.withUnsafeBytes { raw in
            do throws(FrameDecodingError) {
                while let frame = try next(from: raw, offset: &offset) { result.append(frame) }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return result
    }

    private func check(_ length: Int) throws(FrameDecodingError) {
        if length == 0 { throw .emptyFrame }
        if length > maxFrameBytes { throw .frameTooLarge(lengthBytes: length, maxFrameBytes: maxFrameBytes) }
    }

    private mutating func startPayload(_ length: Int) {
        expectedPayloadBytes = length
        payload = []
        // Grow with what arrives, not with what is announced.
        payload.reserveCapacity(min(length, 64 * 1024))
    }

    private static func readLength(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int {
        Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
    }
}
