// libFuzzer entry for the replication layer's pure decoders: ReplicationCodec (every message
// type) and WireCodec (deltas, entry batches). Built by `make fuzz` / `make fuzz-smoke`
// (mk/transport.mk) with swiftc -sanitize=fuzzer,address together with Sources/DecideCore/*.swift.
//
// Oracles: nothing traps; whatever decodes re-encodes to exactly the bytes it came from (the
// encodings are canonical), so no input decodes partially or ambiguously.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzReplication(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var limits = WireCodec.Limits()
    limits.maxValueBytes = 4_096
    limits.maxEntriesPerMessage = 4_096
    let wire = WireCodec(limits: limits)
    let codec = ReplicationCodec(wire: wire, maxItemsPerMessage: 4_096)
    if let message = try? codec.decode(bytes) {
        precondition(codec.encode(message) == bytes, "message re-encoding changed the bytes")
    }
    if let delta = try? wire.decodeDelta(bytes) {
        precondition(wire.encode(delta) == bytes, "delta re-encoding changed the bytes")
    }
    if let entries = try? wire.decodeEntries(bytes) {
        precondition(wire.encode(entries) == bytes, "entry batch re-encoding changed the bytes")
    }
    return 0
}
