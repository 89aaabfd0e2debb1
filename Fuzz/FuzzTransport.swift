// libFuzzer entry for the transport's pure decoders: FrameDecoder, HandshakeMessage.parse and parseIdentity.
// Built by `make fuzz` / `make fuzz-smoke` (mk/transport.mk) with swiftc -sanitize=fuzzer,address
// together with Sources/DecideUV/Transport/{WireProtocol,FrameDecoder}.swift and
// Sources/DecideUV/Handshake/HandshakeMessage.swift.
//
// Oracles: nothing traps; a stream fed in two pieces decodes like the stream fed whole; every
// parsed handshake message re-encodes to exactly the bytes it came from (unknown refusal codes
// aside, which parse as `.other`).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTransport(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    let limit = 1 + Int(first) * 16

    // 1. The stream as one read.
    var whole = FrameDecoder(maxFrameBytes: limit)
    let wholeResult = Result { () throws(FrameDecodingError) in try whole.frames(in: bytes) }

    // 2. The same stream split at a position chosen by the input.
    let split = bytes.count > 1 ? Int(bytes[1]) % bytes.count : 0
    var pieces = FrameDecoder(maxFrameBytes: limit)
    let piecesResult = Result { () throws(FrameDecodingError) -> [[UInt8]] in
        let head = try pieces.frames(in: Array(bytes[..<split]))
        return head + (try pieces.frames(in: Array(bytes[split...])))
    }
    switch (wholeResult, piecesResult) {
    case (.success(let a), .success(let b)): precondition(a == b, "split changed the frames")
    case (.failure(let a), .failure(let b)): precondition(a == b, "split changed the error")
    default: preconditionFailure("split changed success into failure or back")
    }

    // 3. Every frame, and the raw input, through the handshake parser.
    var candidates = (try? wholeResult.get()) ?? []
    candidates.append(bytes)
    for payload in candidates {
        // A sealed identity, once opened, goes through this parser: any bytes, no trap, and
        // what parses encodes back to the same bytes.
        if let identity = try? HandshakeMessage.parseIdentity(payload) {
            precondition(HandshakeMessage.encodeIdentity(clusterName: identity.0, nodeID: identity.1, listenAddress: identity.2) == payload,
                         "identity parse/encode round trip changed the bytes")
        }
        guard let message = try? HandshakeMessage.parse(payload) else { continue }
        if case .refusal(let refusal) = message, refusal.code == .other { continue }
        precondition(message.encoded() == payload, "parse/encode round trip changed the bytes")
    }
    return 0
}
