// libFuzzer entry for the replication layer's pure decoders: ReplicationCodec (every message
// type) and WireCodec (deltas, entry batches). Built by `make fuzz` / `make fuzz-smoke`
// (mk/transport.mk) with swiftc -sanitize=fuzzer,address together with every file under Sources/DecideCore.
//
// Oracles: nothing traps; whatever decodes re-encodes to exactly the bytes it came from (the
// encodings are canonical), so no input decodes partially or ambiguously; and decoding with the
// strings the inputs before left behind (`RecentWireStrings`, as a replicator decodes one
// peer's stream) answers exactly what decoding alone does; and holding a delta message as it
// arrived (`ReceivedDeltas`, after the inputs before, as a replicator holds one read's deltas)
// accepts and refuses exactly what decoding does, with the same error, and reads back the same
// delta.

/// The strings the previous inputs left, as one peer's stream would.
nonisolated(unsafe) private var recent = RecentWireStrings()
/// The deltas the previous inputs left held, emptied now and then as a replicator does.
nonisolated(unsafe) private var held: ReceivedDeltas?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzReplication(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var limits = WireCodec.Limits()
    limits.maxValueBytes = 4_096
    limits.maxEntriesPerMessage = 4_096
    let wire = WireCodec(limits: limits)
    let codec = ReplicationCodec(wire: wire, maxItemsPerMessage: 4_096)
    let alone = Result { () throws(WireDecodeError) in try codec.decode(bytes) }
    if case .success(let message) = alone {
        precondition(codec.encode(message) == bytes, "message re-encoding changed the bytes")
    }
    let streamed = Result { () throws(WireDecodeError) in try codec.decode(bytes, recent: &recent) }
    switch (alone, streamed) {
    case (.success(let one), .success(let other)):
        precondition(one == other, "decoding with recent strings changed the message")
        if case .delta(let one) = one, case .delta(let other) = other {
            precondition(one.version.nodeHash == other.version.nodeHash
                         && one.writes.map(\.key.stableHash) == other.writes.map(\.key.stableHash),
                         "decoding with recent strings changed a hash")
        }
    case (.failure(let one), .failure(let other)):
        precondition(one == other, "decoding with recent strings changed the error")
    default:
        preconditionFailure("decoding with recent strings changed whether the message decodes")
    }
    if bytes.first == ReplicationMessage.deltaType {
        let received = held ?? ReceivedDeltas(codec: wire)
        held = received
        if received.count >= 64 { received.removeAll() }
        let before = received.count
        let appended = bytes.withUnsafeBytes { raw in
            Result { () throws(WireDecodeError) in try received.append(raw, from: 1, source: 0) }
        }
        switch (alone, appended) {
        case (.success(.delta(let delta)), .success):
            var strings = RecentWireStrings()
            precondition(received.delta(at: before, recent: &strings) == delta, "a held delta reads back differently")
        case (.failure(let one), .failure(let other)):
            precondition(one == other && received.count == before, "holding a delta refused it differently")
        default:
            preconditionFailure("holding a delta changed whether it decodes")
        }
    }
    if let delta = try? wire.decodeDelta(bytes) {
        precondition(wire.encode(delta) == bytes, "delta re-encoding changed the bytes")
    }
    if let entries = try? wire.decodeEntries(bytes) {
        precondition(wire.encode(entries) == bytes, "entry batch re-encoding changed the bytes")
    }
    return 0
}
