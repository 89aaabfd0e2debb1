/// The messages replication engines exchange after the handshake (docs/replication.md,
/// "Messages"). Each is one frame payload: a type byte, then its body.
///
/// Guarantees: `decode(encode(m)) == m`; any other input throws a `WireDecodeError` (never a
/// crash, never a partial message), with every count and length checked against `Limits`.
package enum ReplicationMessage: Hashable, Sendable {
    /// One committed decision.
    case delta(Delta)
    /// Every walk message carries `seq`, counting 1, 2, 3… per walk and direction: the receiver
    /// ignores a repeated number and abandons the walk at a gap, so a walk proves nothing unless
    /// every message of it arrived once and in order.
    ///
    /// Anti-entropy: the sender's hashes of digest-tree nodes at `level` (index, hash), for a
    /// walk identified by `round`. `clock` is the sender's hybrid clock when it joined the walk.
    case digest(round: UInt64, seq: UInt64, clock: UInt64, shape: DigestShape, level: UInt8, nodes: [DigestNode])
    /// Anti-entropy: the walk `round` found nothing (more) to repair (`synced`), or the sender
    /// could not take part (`synced == false`: digest shapes differ, its change log overflowed).
    case digestDone(round: UInt64, seq: UInt64, clock: UInt64, synced: Bool)
    /// Anti-entropy leaf step: the sender's entries in differing leaf buckets, one summary item
    /// per key. A sender's summary for one walk may span several messages; the one marked
    /// `last` ends it. Buckets come in ascending order; one bucket may continue in the next group.
    case summary(round: UInt64, seq: UInt64, clock: UInt64, last: Bool, groups: [SummaryGroup])
    /// "Send me these entries": keys picked from a summary, by bucket and key hash. The one
    /// marked `last` ends the requests of this walk.
    case keysRequest(round: UInt64, seq: UInt64, last: Bool, keys: [KeyReference])
    /// One batch of a walk's entry stream, sorted by version and cut only between versions (a
    /// decision's writes travel in one batch). The receiver applies each batch as it arrives
    /// and answers `streamAck`; `last` ends the sender's stream for the walk.
    case entries(round: UInt64, seq: UInt64, last: Bool, batch: [KeyedEntry])
    /// Flow control: the receiver processed every `summary` and `entries` message of `round`
    /// up to sequence number `seq` (cumulative).
    case streamAck(round: UInt64, seq: UInt64)
    /// Membership: the members the sender knows, itself first.
    case gossip([MemberRecord])
    /// Liveness probe; the receiver answers `ack` with the same nonce.
    case ping(nonce: UInt64)
    /// Answer to `ping`: the nonce and the answering node's physical clock, in milliseconds.
    case ack(nonce: UInt64, physicalMilliseconds: UInt64)
    /// The sender is leaving the cluster for good (until it starts again).
    case leave
    /// The sender refuses this link for a reason the receiver must act on (e.g. it was removed
    /// from the cluster); the sender closes the link after it.
    case refusal(reason: String)
    /// "Tell me whether you applied my deltas up to this timestamp (raw hybrid clock)": sent
    /// after the delta of a decision someone waits on (`Replicator.decide(_:acknowledgedBy:...)`),
    /// on the same link, so it arrives after it. `deltas` is how many deltas the sender queued
    /// on this link so far: the receiver answers yes only if it applied exactly that many.
    case ackRequest(timestamp: UInt64, deltas: UInt64)
    /// The answer to `ackRequest`: every delta this link brought, up to `timestamp`, is applied
    /// here at this node's durability level (0: not so), and this node holds everything the
    /// asker held when the asker's hybrid clock read `covered` (raw; proven by a clean
    /// catch-up, 0 for none), at the same level. A node whose store stopped taking writes
    /// answers 0 for both. Also sent unasked (`timestamp` 0) when `covered` rises.
    case applied(timestamp: UInt64, covered: UInt64)

    public static let deltaType: UInt8 = 1
    public static let digestType: UInt8 = 2
    public static let digestDoneType: UInt8 = 3
    public static let keysRequestType: UInt8 = 4
    public static let entriesType: UInt8 = 5
    public static let gossipType: UInt8 = 6
    public static let pingType: UInt8 = 7
    public static let ackType: UInt8 = 8
    public static let leaveType: UInt8 = 9
    public static let summaryType: UInt8 = 10
    public static let streamAckType: UInt8 = 11
    public static let refusalType: UInt8 = 12
    public static let ackRequestType: UInt8 = 13
    public static let appliedType: UInt8 = 14

    /// The shape of a digest tree; two trees are comparable only when their shapes match.
    public struct DigestShape: Hashable, Sendable {
        public let fanoutBits: UInt8
        public let depth: UInt8
        public init(fanoutBits: UInt8, depth: UInt8) {
            self.fanoutBits = fanoutBits
            self.depth = depth
        }
    }

    /// One node of a digest tree: its index within its level and its hash.
    public struct DigestNode: Hashable, Sendable {
        public let index: UInt32
        public let hash: UInt64
        public init(index: UInt32, hash: UInt64) {
            self.index = index
            self.hash = hash
        }
    }

    /// What the sender holds for one key: the key's stable hash, its version's timestamp and
    /// the digest contribution of (key, version, value), which identifies the entry.
    public struct SummaryItem: Hashable, Sendable {
        public let keyHash: UInt64
        public let timestamp: UInt64
        public let entryHash: UInt64
        public init(keyHash: UInt64, timestamp: UInt64, entryHash: UInt64) {
            self.keyHash = keyHash
            self.timestamp = timestamp
            self.entryHash = entryHash
        }
    }

    /// The summary items of one leaf bucket (possibly continued in the next group).
    public struct SummaryGroup: Hashable, Sendable {
        public let bucket: UInt32
        public let items: [SummaryItem]
        public init(bucket: UInt32, items: [SummaryItem]) {
            self.bucket = bucket
            self.items = items
        }
    }

    /// A key named by its leaf bucket and stable hash.
    public struct KeyReference: Hashable, Sendable {
        public let bucket: UInt32
        public let keyHash: UInt64
        public init(bucket: UInt32, keyHash: UInt64) {
            self.bucket = bucket
            self.keyHash = keyHash
        }
    }

    /// What one node says about one member.
    public struct MemberRecord: Hashable, Sendable {
        public enum Status: UInt8, Hashable, Sendable {
            case alive = 0
            case left = 1
            /// Removed on purpose (`forget`): never counted, redialled or let back in.
            case removed = 2
        }
        public let nodeID: String
        public let address: String
        public let status: Status
        /// Raised by the member itself each time it starts, so newer news about it wins.
        public let incarnation: UInt64
        /// Raised by the member whenever it changes `coverage` or `membersHash` within one
        /// incarnation, so the newest of its reports wins wherever they meet.
        public let heartbeat: UInt64
        /// The member's own report: it holds, for every key, an entry at least as new as every
        /// entry with a timestamp at or below this (raw HLC) from any member it counts.
        public let coverage: UInt64
        /// The member's own report: a hash of the member ids it counts (itself included).
        public let membersHash: UInt64
        public init(nodeID: String, address: String, status: Status, incarnation: UInt64,
                    heartbeat: UInt64 = 0, coverage: UInt64 = 0, membersHash: UInt64 = 0) {
            self.nodeID = nodeID
            self.address = address
            self.status = status
            self.incarnation = incarnation
            self.heartbeat = heartbeat
            self.coverage = coverage
            self.membersHash = membersHash
        }
    }
}

/// Encodes and decodes `ReplicationMessage`s with the limits of a `WireCodec`.
package struct ReplicationCodec: Sendable {
    public let wire: WireCodec
    /// The most digest nodes, summary items, keys or members one message may carry.
    public let maxItemsPerMessage: Int
    public let maxAddressBytes = 1024
    public let maxReasonBytes = 1024

    public init(wire: WireCodec = WireCodec(), maxItemsPerMessage: Int = 1 << 20) {
        self.wire = wire
        self.maxItemsPerMessage = maxItemsPerMessage
    }

    /// Encoded size of one digest node at most (varint index, u64 hash).
    public static let maxDigestNodeBytes = 13
    /// Encoded size of one summary item (u64 × 3).
    public static let summaryItemBytes = 24
    /// Encoded size of one key reference at most (varint bucket, u64 hash).
    public static let maxKeyReferenceBytes = 13
    /// Bytes of a message's fixed part besides its items, at most (type, round, clock, flags,
    /// counts): what a sender leaves free when it cuts items to fit a frame.
    public static let maxHeaderBytes = 64

    public func encode(_ message: ReplicationMessage) -> [UInt8] {
        // A control message's frame, its buffer allocated once at about the size it needs: the
        // type byte, a walk's round and sequence number if it belongs to one, then the rest.
        func frame(_ type: UInt8, round: UInt64? = nil, seq: UInt64 = 0,
                   _ write: (inout WireWriter) -> Void = { _ in }) -> [UInt8] {
            var writer = WireWriter(reservingCapacity: Self.reservedBytes(for: message))
            writer.writeUInt8(type)
            if let round {
                writer.writeUInt64(round)
                writer.writeVarint(seq)
            }
            write(&writer)
            return writer.bytes
        }
        switch message {
        case .delta(let delta):
            return wire.encode(delta, afterTypeByte: ReplicationMessage.deltaType)
        case let .digest(round, seq, clock, shape, level, nodes):
            return frame(ReplicationMessage.digestType, round: round, seq: seq) { writer in
                writer.writeUInt64(clock)
                writer.writeUInt8(shape.fanoutBits)
                writer.writeUInt8(shape.depth)
                writer.writeUInt8(level)
                writer.writeVarint(UInt64(nodes.count))
                for node in nodes {
                    writer.writeVarint(UInt64(node.index))
                    writer.writeUInt64(node.hash)
                }
            }
        case let .digestDone(round, seq, clock, synced):
            return frame(ReplicationMessage.digestDoneType, round: round, seq: seq) { writer in
                writer.writeUInt64(clock)
                writer.writeUInt8(synced ? 1 : 0)
            }
        case let .summary(round, seq, clock, last, groups):
            return frame(ReplicationMessage.summaryType, round: round, seq: seq) { writer in
                writer.writeUInt64(clock)
                writer.writeUInt8(last ? 1 : 0)
                writer.writeVarint(UInt64(groups.count))
                for group in groups {
                    writer.writeVarint(UInt64(group.bucket))
                    writer.writeVarint(UInt64(group.items.count))
                    for item in group.items {
                        writer.writeUInt64(item.keyHash)
                        writer.writeUInt64(item.timestamp)
                        writer.writeUInt64(item.entryHash)
                    }
                }
            }
        case let .keysRequest(round, seq, last, keys):
            return frame(ReplicationMessage.keysRequestType, round: round, seq: seq) { writer in
                writer.writeUInt8(last ? 1 : 0)
                writer.writeVarint(UInt64(keys.count))
                for key in keys {
                    writer.writeVarint(UInt64(key.bucket))
                    writer.writeUInt64(key.keyHash)
                }
            }
        case let .entries(round, seq, last, batch):
            return frame(ReplicationMessage.entriesType, round: round, seq: seq) { writer in
                writer.writeUInt8(last ? 1 : 0)
                writer.writeRaw(wire.encode(batch))
            }
        case let .streamAck(round, seq):
            return frame(ReplicationMessage.streamAckType, round: round, seq: seq)
        case .gossip(let members):
            return frame(ReplicationMessage.gossipType) { writer in
                writer.writeVarint(UInt64(members.count))
                for member in members {
                    writer.writeString(member.nodeID)
                    writer.writeString(member.address)
                    writer.writeUInt8(member.status.rawValue)
                    writer.writeUInt64(member.incarnation)
                    writer.writeUInt64(member.heartbeat)
                    writer.writeUInt64(member.coverage)
                    writer.writeUInt64(member.membersHash)
                }
            }
        case .ping(let nonce):
            return frame(ReplicationMessage.pingType) { writer in
                writer.writeUInt64(nonce)
            }
        case let .ack(nonce, physical):
            return frame(ReplicationMessage.ackType) { writer in
                writer.writeUInt64(nonce)
                writer.writeUInt64(physical)
            }
        case .leave:
            return frame(ReplicationMessage.leaveType)
        case .refusal(let reason):
            return frame(ReplicationMessage.refusalType) { writer in
                // Cut at a character boundary, so the reason stays within the decoder's limit.
                var cut = reason
                while cut.utf8.count > maxReasonBytes { cut.removeLast() }
                writer.writeString(cut)
            }
        case let .ackRequest(timestamp, deltas):
            return frame(ReplicationMessage.ackRequestType) { writer in
                writer.writeUInt64(timestamp)
                writer.writeUInt64(deltas)
            }
        case let .applied(timestamp, covered):
            return frame(ReplicationMessage.appliedType) { writer in
                writer.writeUInt64(timestamp)
                writer.writeUInt64(covered)
            }
        }
    }

    /// About the bytes `message` encodes to, so its buffer is allocated once: what its items
    /// need for the messages that carry many, a small header's worth for the others.
    private static func reservedBytes(for message: ReplicationMessage) -> Int {
        switch message {
        case .digest(_, _, _, _, _, let nodes): return 32 + nodes.count * 12
        case .summary(_, _, _, _, let groups): return 32 + groups.reduce(0) { $0 + 8 + $1.items.count * summaryItemBytes }
        case .keysRequest(_, _, _, let keys): return 16 + keys.count * 12
        default: return 32
        }
    }

    /// Encoded size of one gossip record.
    public static func encodedSize(of record: ReplicationMessage.MemberRecord) -> Int {
        let id = record.nodeID.utf8.count
        let address = record.address.utf8.count
        return id + address + 2 * 5 + 1 + 32
    }

    public func decode(_ bytes: [UInt8]) throws(WireDecodeError) -> ReplicationMessage {
        var recent = RecentWireStrings()
        return try decode(bytes, recent: &recent)
    }

    /// `decode(_:recent:)` over an array's bytes.
    package func decode(_ bytes: [UInt8], recent: inout RecentWireStrings) throws(WireDecodeError) -> ReplicationMessage {
        try withWireBytes(bytes) { raw throws(WireDecodeError) in try decode(raw, recent: &recent) }
    }

    /// `decode`, a delta's strings taken from `recent` where the bytes say the same
    /// (`WireCodec.decodeDelta(_:from:recent:)`): for a stream of one peer's messages. Reads
    /// `bytes` in place: nothing of the message refers to them afterwards.
    package func decode(_ bytes: UnsafeRawBufferPointer, recent: inout RecentWireStrings) throws(WireDecodeError) -> ReplicationMessage {
        var reader = WireReader(bytes)
        let type = try reader.readUInt8("message.type")
        let message: ReplicationMessage
        switch type {
        case ReplicationMessage.deltaType:
            return .delta(try wire.decodeDelta(bytes, from: 1, recent: &recent))
        case ReplicationMessage.digestType:
            let round = try reader.readUInt64("digest.round")
            let seq = try reader.readVarint("digest.seq")
            let clock = try reader.readUInt64("digest.clock")
            let shape = ReplicationMessage.DigestShape(
                fanoutBits: try reader.readUInt8("digest.fanoutBits"), depth: try reader.readUInt8("digest.depth"))
            guard shape.fanoutBits >= 1, Int(shape.fanoutBits) * Int(shape.depth) <= 24 else {
                throw .invalidFlag(field: "digest.shape", value: shape.fanoutBits)
            }
            let level = try reader.readUInt8("digest.level")
            guard level <= shape.depth else { throw .invalidFlag(field: "digest.level", value: level) }
            let count = try reader.readCount("digest.count", limit: maxItemsPerMessage, minimumItemBytes: 9)
            let width = UInt64(1) << (UInt64(shape.fanoutBits) * UInt64(level))
            var nodes: [ReplicationMessage.DigestNode] = []
            nodes.reserveCapacity(count)
            for _ in 0..<count {
                let index = try reader.readVarint("digest.index")
                guard index < width else { throw .tooLarge(field: "digest.index", length: index, limit: Int(width) - 1) }
                nodes.append(.init(index: UInt32(index), hash: try reader.readUInt64("digest.hash")))
            }
            message = .digest(round: round, seq: seq, clock: clock, shape: shape, level: level, nodes: nodes)
        case ReplicationMessage.digestDoneType:
            let round = try reader.readUInt64("digestDone.round")
            let seq = try reader.readVarint("digestDone.seq")
            let clock = try reader.readUInt64("digestDone.clock")
            message = .digestDone(round: round, seq: seq, clock: clock, synced: try readFlag(&reader, "digestDone.synced"))
        case ReplicationMessage.summaryType:
            let round = try reader.readUInt64("summary.round")
            let seq = try reader.readVarint("summary.seq")
            let clock = try reader.readUInt64("summary.clock")
            let last = try readFlag(&reader, "summary.last")
            let groupCount = try reader.readCount("summary.groups", limit: maxItemsPerMessage, minimumItemBytes: 2)
            var groups: [ReplicationMessage.SummaryGroup] = []
            groups.reserveCapacity(groupCount)
            var total = 0
            for _ in 0..<groupCount {
                let bucket = try readUInt32(&reader, "summary.bucket")
                let count = try reader.readCount("summary.count", limit: maxItemsPerMessage - total, minimumItemBytes: 24)
                total += count
                var items: [ReplicationMessage.SummaryItem] = []
                items.reserveCapacity(count)
                for _ in 0..<count {
                    items.append(.init(keyHash: try reader.readUInt64("summary.keyHash"),
                                       timestamp: try reader.readUInt64("summary.timestamp"),
                                       entryHash: try reader.readUInt64("summary.entryHash")))
                }
                groups.append(.init(bucket: bucket, items: items))
            }
            message = .summary(round: round, seq: seq, clock: clock, last: last, groups: groups)
        case ReplicationMessage.keysRequestType:
            let round = try reader.readUInt64("keysRequest.round")
            let seq = try reader.readVarint("keysRequest.seq")
            let last = try readFlag(&reader, "keysRequest.last")
            let count = try reader.readCount("keysRequest.count", limit: maxItemsPerMessage, minimumItemBytes: 9)
            var keys: [ReplicationMessage.KeyReference] = []
            keys.reserveCapacity(count)
            for _ in 0..<count {
                let bucket = try readUInt32(&reader, "keysRequest.bucket")
                keys.append(.init(bucket: bucket, keyHash: try reader.readUInt64("keysRequest.keyHash")))
            }
            message = .keysRequest(round: round, seq: seq, last: last, keys: keys)
        case ReplicationMessage.entriesType:
            let round = try reader.readUInt64("entries.round")
            let seq = try reader.readVarint("entries.seq")
            let last = try readFlag(&reader, "entries.last")
            return .entries(round: round, seq: seq, last: last, batch: try wire.decodeEntries(reader.rest))
        case ReplicationMessage.streamAckType:
            message = .streamAck(round: try reader.readUInt64("streamAck.round"), seq: try reader.readVarint("streamAck.seq"))
        case ReplicationMessage.gossipType:
            let count = try reader.readCount("gossip.count", limit: maxItemsPerMessage, minimumItemBytes: 35)
            var members: [ReplicationMessage.MemberRecord] = []
            members.reserveCapacity(count)
            for _ in 0..<count {
                let nodeID = try reader.readString("gossip.nodeID", limit: wire.limits.maxNodeIDBytes)
                let address = try reader.readString("gossip.address", limit: maxAddressBytes)
                let rawStatus = try reader.readUInt8("gossip.status")
                guard let status = ReplicationMessage.MemberRecord.Status(rawValue: rawStatus) else {
                    throw .invalidFlag(field: "gossip.status", value: rawStatus)
                }
                members.append(.init(nodeID: nodeID, address: address, status: status,
                                     incarnation: try reader.readUInt64("gossip.incarnation"),
                                     heartbeat: try reader.readUInt64("gossip.heartbeat"),
                                     coverage: try reader.readUInt64("gossip.coverage"),
                                     membersHash: try reader.readUInt64("gossip.membersHash")))
            }
            message = .gossip(members)
        case ReplicationMessage.pingType:
            message = .ping(nonce: try reader.readUInt64("ping.nonce"))
        case ReplicationMessage.ackType:
            message = .ack(nonce: try reader.readUInt64("ack.nonce"), physicalMilliseconds: try reader.readUInt64("ack.time"))
        case ReplicationMessage.leaveType:
            message = .leave
        case ReplicationMessage.refusalType:
            message = .refusal(reason: try reader.readString("refusal.reason", limit: maxReasonBytes))
        case ReplicationMessage.ackRequestType:
            message = .ackRequest(timestamp: try reader.readUInt64("ackRequest.timestamp"), deltas: try reader.readUInt64("ackRequest.deltas"))
        case ReplicationMessage.appliedType:
            message = .applied(timestamp: try reader.readUInt64("applied.timestamp"), covered: try reader.readUInt64("applied.covered"))
        default:
            throw .unknownMessageType(type)
        }
        try reader.expectEnd()
        return message
    }

    private func readFlag(_ reader: inout WireReader, _ field: String) throws(WireDecodeError) -> Bool {
        let value = try reader.readUInt8(field)
        guard value <= 1 else { throw .invalidFlag(field: field, value: value) }
        return value == 1
    }

    private func readUInt32(_ reader: inout WireReader, _ field: String) throws(WireDecodeError) -> UInt32 {
        let value = try reader.readVarint(field)
        guard value <= UInt64(UInt32.max) else { throw .tooLarge(field: field, length: value, limit: Int(UInt32.max)) }
        return UInt32(value)
    }
}
