/// The binary encoding of SWIM messages (docs/replication.md, "Limits, and growing past a full mesh").
///
/// Layout, integers little-endian, lengths and counts as LEB128 varints, `str` a varint length
/// and UTF-8:
/// `u8 format (= 1)`, `u8 type` (1 ping, 2 ping request, 3 ack, 4 nack, 5 sync request,
/// 6 sync reply), `str from`, `str fromAddress`, `u64 fromIncarnation`, the body, then
/// `varint n` and n updates.
/// - ping: `u64 sequence`, `str target`; ping request: `u64 sequence`, `str target`,
///   `str targetAddress`; ack, nack: `u64 sequence`; sync request: `str after`; sync reply:
///   `str after`, `u8 complete` (0 or 1), `varint n`, n updates.
/// - update: `u8 status` (0 alive, 1 suspect, 2 dead, 3 left), `str member`, `str address`,
///   `u64 incarnation`, and `str origin` for a suspect only.
///
/// Guarantees: `decode(encode(x)) == x`; any other input (every truncation, an unknown type or
/// status, an id or address over its limit, more updates than `maxUpdates`, bytes after the
/// end) throws a `WireDecodeError` before anything over the limits is allocated.
package struct SWIMCodec: Sendable {
    package static let format: UInt8 = 1

    /// The longest member id, in UTF-8 bytes (`WireLimits.maxNodeIDBytes` by default).
    package var maxIDBytes: Int
    /// The longest address (`HOST:PORT`), in UTF-8 bytes.
    package var maxAddressBytes: Int
    /// The most updates (piggybacked or in a sync page) one message may carry.
    package var maxUpdates: Int

    package init(maxIDBytes: Int = WireLimits().maxNodeIDBytes, maxAddressBytes: Int = 1024, maxUpdates: Int = 4096) {
        self.maxIDBytes = maxIDBytes
        self.maxAddressBytes = maxAddressBytes
        self.maxUpdates = maxUpdates
    }

    /// The bytes `update` takes in a message: what a sender budgets its piggyback by.
    package static func encodedBytes(of update: SWIMUpdate) -> Int {
        1 + stringBytes(update.member) + stringBytes(update.address) + 8
            + (update.status == .suspect ? stringBytes(update.origin) : 0)
    }

    /// The bytes of an envelope with no updates (the type's header and body, and an update
    /// count of one byte).
    package static func encodedBytes(ofEmpty envelope: SWIMEnvelope) -> Int {
        var body = 0
        switch envelope.message {
        case let .ping(_, target): body = 8 + stringBytes(target)
        case let .pingRequest(_, target, address): body = 8 + stringBytes(target) + stringBytes(address)
        case .ack, .nack: body = 8
        case let .syncRequest(after): body = stringBytes(after)
        case let .syncReply(after, members, _):
            body = stringBytes(after) + 1 + WireCursor.varintBytes(UInt64(members.count)) + members.reduce(0) { $0 + encodedBytes(of: $1) }
        }
        return 2 + stringBytes(envelope.from) + stringBytes(envelope.fromAddress) + 8 + body + 1
    }

    static func stringBytes(_ string: String) -> Int {
        let count = string.utf8.count
        return WireCursor.varintBytes(UInt64(count)) + count
    }

    package func encode(_ envelope: SWIMEnvelope) -> [UInt8] {
        var writer = WireWriter(reservingCapacity: Self.encodedBytes(ofEmpty: envelope)
            + envelope.updates.reduce(0) { $0 + Self.encodedBytes(of: $1) } + 4)
        writer.writeUInt8(Self.format)
        switch envelope.message {
        case .ping: writer.writeUInt8(1)
        case .pingRequest: writer.writeUInt8(2)
        case .ack: writer.writeUInt8(3)
        case .nack: writer.writeUInt8(4)
        case .syncRequest: writer.writeUInt8(5)
        case .syncReply: writer.writeUInt8(6)
        }
        writer.writeString(envelope.from)
        writer.writeString(envelope.fromAddress)
        writer.writeUInt64(envelope.fromIncarnation)
        switch envelope.message {
        case let .ping(sequence, target):
            writer.writeUInt64(sequence)
            writer.writeString(target)
        case let .pingRequest(sequence, target, address):
            writer.writeUInt64(sequence)
            writer.writeString(target)
            writer.writeString(address)
        case let .ack(sequence), let .nack(sequence):
            writer.writeUInt64(sequence)
        case let .syncRequest(after):
            writer.writeString(after)
        case let .syncReply(after, members, complete):
            writer.writeString(after)
            writer.writeUInt8(complete ? 1 : 0)
            write(members, into: &writer)
        }
        write(envelope.updates, into: &writer)
        return writer.bytes
    }

    private func write(_ updates: [SWIMUpdate], into writer: inout WireWriter) {
        writer.writeVarint(UInt64(updates.count))
        for update in updates {
            writer.writeUInt8(update.status.rawValue)
            writer.writeString(update.member)
            writer.writeString(update.address)
            writer.writeUInt64(update.incarnation)
            if update.status == .suspect { writer.writeString(update.origin) }
        }
    }

    package func decode(_ bytes: [UInt8]) throws(WireDecodeError) -> SWIMEnvelope {
        try withWireBytes(bytes) { raw throws(WireDecodeError) in try decode(raw) }
    }

    package func decode(_ raw: UnsafeRawBufferPointer) throws(WireDecodeError) -> SWIMEnvelope {
        var reader = WireReader(raw)
        let format = try reader.readUInt8("format")
        guard format == Self.format else { throw .unsupportedFormat(format) }
        let type = try reader.readUInt8("type")
        guard (1...6).contains(type) else { throw .unknownMessageType(type) }
        let from = try reader.readString("from", limit: maxIDBytes)
        let fromAddress = try reader.readString("fromAddress", limit: maxAddressBytes)
        let fromIncarnation = try reader.readUInt64("fromIncarnation")
        let message: SWIMMessage
        switch type {
        case 1:
            message = .ping(sequence: try reader.readUInt64("sequence"), target: try reader.readString("target", limit: maxIDBytes))
        case 2:
            let sequence = try reader.readUInt64("sequence")
            let target = try reader.readString("target", limit: maxIDBytes)
            message = .pingRequest(sequence: sequence, target: target,
                                   targetAddress: try reader.readString("targetAddress", limit: maxAddressBytes))
        case 3: message = .ack(sequence: try reader.readUInt64("sequence"))
        case 4: message = .nack(sequence: try reader.readUInt64("sequence"))
        case 5: message = .syncRequest(after: try reader.readString("after", limit: maxIDBytes))
        default:
            let after = try reader.readString("after", limit: maxIDBytes)
            let complete = try reader.readUInt8("complete")
            guard complete <= 1 else { throw .invalidFlag(field: "complete", value: complete) }
            message = .syncReply(after: after, members: try readUpdates(&reader, field: "members"), complete: complete == 1)
        }
        let updates = try readUpdates(&reader, field: "updates")
        try reader.expectEnd()
        return SWIMEnvelope(from: from, fromAddress: fromAddress, fromIncarnation: fromIncarnation, message: message, updates: updates)
    }

    private func readUpdates(_ reader: inout WireReader, field: String) throws(WireDecodeError) -> [SWIMUpdate] {
        // The smallest update: a status, two empty strings and an incarnation.
        let count = try reader.readCount(field, limit: maxUpdates, minimumItemBytes: 11)
        var updates: [SWIMUpdate] = []
        updates.reserveCapacity(count)
        for _ in 0..<count {
            let rawStatus = try reader.readUInt8("status")
            guard let status = SWIMStatus(rawValue: rawStatus) else { throw .invalidFlag(field: "status", value: rawStatus) }
            let member = try reader.readString("member", limit: maxIDBytes)
            let address = try reader.readString("address", limit: maxAddressBytes)
            let incarnation = try reader.readUInt64("incarnation")
            let origin = status == .suspect ? try reader.readString("origin", limit: maxIDBytes) : ""
            updates.append(SWIMUpdate(member: member, address: address, incarnation: incarnation, status: status, origin: origin))
        }
        return updates
    }
}
