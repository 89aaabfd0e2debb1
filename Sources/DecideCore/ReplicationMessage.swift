/// The messages replication engines exchange after the handshake (docs/replication.md,
/// "Messages"). Each is one frame payload: a type byte, then its body.
///
/// Guarantees: `decode(encode(m)) == m`; any other input throws a `WireDecodeError` (never a
/// crash, never a partial message), with every count and length checked against `Limits`.
public enum ReplicationMessage: Hashable, Sendable {
    /// One committed decision.
    case delta(Delta)
    /// Anti-entropy: the sender's hashes of digest-tree nodes at `level` (index, hash), for a
    /// walk identified by `round`. The receiver compares them with its own tree.
    case digest(round: UInt64, shape: DigestShape, level: UInt8, nodes: [DigestNode])
    /// Anti-entropy: the walk `round` found nothing (more) to repair.
    case digestDone(round: UInt64)
    /// Anti-entropy: "send me your entries in these leaf buckets".
    case entriesRequest(round: UInt64, buckets: [UInt32])
    /// Entries (each with its own version), sent in answer to a request or pushed in a walk.
    /// A sender's entries for one round may span several messages; the receiver applies them
    /// all at once when the one marked `last` arrives, so it never shows part of a decision.
    case entries(round: UInt64, last: Bool, batch: [KeyedEntry])
    /// Membership: the members the sender knows.
    case gossip([MemberRecord])
    /// Liveness probe; the receiver answers `ack` with the same nonce.
    case ping(nonce: UInt64)
    case ack(nonce: UInt64)
    /// The sender is leaving the cluster for good (until it starts again).
    case leave

    public static let deltaType: UInt8 = 1
    public static let digestType: UInt8 = 2
    public static let digestDoneType: UInt8 = 3
    public static let entriesRequestType: UInt8 = 4
    public static let entriesType: UInt8 = 5
    public static let gossipType: UInt8 = 6
    public static let pingType: UInt8 = 7
    public static let ackType: UInt8 = 8
    public static let leaveType: UInt8 = 9

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

    /// What one node says about one member.
    public struct MemberRecord: Hashable, Sendable {
        public enum Status: UInt8, Hashable, Sendable {
            case alive = 0
            case left = 1
        }
        public let nodeID: String
        public let address: String
        public let status: Status
        /// Raised by the member itself each time it starts, so newer news about it wins.
        public let incarnation: UInt64
        public init(nodeID: String, address: String, status: Status, incarnation: UInt64) {
            self.nodeID = nodeID
            self.address = address
            self.status = status
            self.incarnation = incarnation
        }
    }
}

/// Encodes and decodes `ReplicationMessage`s with the limits of a `WireCodec`.
public struct ReplicationCodec: Sendable {
    public let wire: WireCodec
    /// The most digest nodes, buckets or members one message may carry.
    public let maxItemsPerMessage: Int
    public let maxAddressBytes = 1024

    public init(wire: WireCodec = WireCodec(), maxItemsPerMessage: Int = 1 << 20) {
        self.wire = wire
        self.maxItemsPerMessage = maxItemsPerMessage
    }

    public func encode(_ message: ReplicationMessage) -> [UInt8] {
        var writer = WireWriter(reservingCapacity: 32)
        switch message {
        case .delta(let delta):
            writer.writeUInt8(ReplicationMessage.deltaType)
            writer.writeRaw(wire.encode(delta))
        case let .digest(round, shape, level, nodes):
            writer.writeUInt8(ReplicationMessage.digestType)
            writer.writeUInt64(round)
            writer.writeUInt8(shape.fanoutBits)
            writer.writeUInt8(shape.depth)
            writer.writeUInt8(level)
            writer.writeVarint(UInt64(nodes.count))
            for node in nodes {
                writer.writeVarint(UInt64(node.index))
                writer.writeUInt64(node.hash)
            }
        case .digestDone(let round):
            writer.writeUInt8(ReplicationMessage.digestDoneType)
            writer.writeUInt64(round)
        case let .entriesRequest(round, buckets):
            writer.writeUInt8(ReplicationMessage.entriesRequestType)
            writer.writeUInt64(round)
            writer.writeVarint(UInt64(buckets.count))
            for bucket in buckets { writer.writeVarint(UInt64(bucket)) }
        case let .entries(round, last, batch):
            writer.writeUInt8(ReplicationMessage.entriesType)
            writer.writeUInt64(round)
            writer.writeUInt8(last ? 1 : 0)
            writer.writeRaw(wire.encode(batch))
        case .gossip(let members):
            writer.writeUInt8(ReplicationMessage.gossipType)
            writer.writeVarint(UInt64(members.count))
            for member in members {
                writer.writeString(member.nodeID)
                writer.writeString(member.address)
                writer.writeUInt8(member.status.rawValue)
                writer.writeUInt64(member.incarnation)
            }
        case .ping(let nonce):
            writer.writeUInt8(ReplicationMessage.pingType)
            writer.writeUInt64(nonce)
        case .ack(let nonce):
            writer.writeUInt8(ReplicationMessage.ackType)
            writer.writeUInt64(nonce)
        case .leave:
            writer.writeUInt8(ReplicationMessage.leaveType)
        }
        return writer.bytes
    }

    public func decode(_ bytes: [UInt8]) throws(WireDecodeError) -> ReplicationMessage {
        var reader = WireReader(bytes)
        let type = try reader.readUInt8("message.type")
        let message: ReplicationMessage
        switch type {
        case ReplicationMessage.deltaType:
            return .delta(try wire.decodeDelta(Array(bytes.dropFirst())))
        case ReplicationMessage.digestType:
            let round = try reader.readUInt64("digest.round")
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
            message = .digest(round: round, shape: shape, level: level, nodes: nodes)
        case ReplicationMessage.digestDoneType:
            message = .digestDone(round: try reader.readUInt64("digestDone.round"))
        case ReplicationMessage.entriesRequestType:
            let round = try reader.readUInt64("entriesRequest.round")
            let count = try reader.readCount("entriesRequest.count", limit: maxItemsPerMessage, minimumItemBytes: 1)
            var buckets: [UInt32] = []
            buckets.reserveCapacity(count)
            for _ in 0..<count {
                let bucket = try reader.readVarint("entriesRequest.bucket")
                guard bucket <= UInt64(UInt32.max) else {
                    throw .tooLarge(field: "entriesRequest.bucket", length: bucket, limit: Int(UInt32.max))
                }
                buckets.append(UInt32(bucket))
            }
            message = .entriesRequest(round: round, buckets: buckets)
        case ReplicationMessage.entriesType:
            let round = try reader.readUInt64("entries.round")
            let last = try reader.readUInt8("entries.last")
            guard last <= 1 else { throw .invalidFlag(field: "entries.last", value: last) }
            return .entries(round: round, last: last == 1, batch: try wire.decodeEntries(Array(bytes.dropFirst(10))))
        case ReplicationMessage.gossipType:
            let count = try reader.readCount("gossip.count", limit: maxItemsPerMessage, minimumItemBytes: 11)
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
                                     incarnation: try reader.readUInt64("gossip.incarnation")))
            }
            message = .gossip(members)
        case ReplicationMessage.pingType:
            message = .ping(nonce: try reader.readUInt64("ping.nonce"))
        case ReplicationMessage.ackType:
            message = .ack(nonce: try reader.readUInt64("ack.nonce"))
        case ReplicationMessage.leaveType:
            message = .leave
        default:
            throw .unknownMessageType(type)
        }
        try reader.expectEnd()
        return message
    }
}
