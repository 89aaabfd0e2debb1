import Decide
import DecideSimulation

/// A member that passed the handshake and then sends well-formed messages chosen to hurt:
/// extreme numbers (UInt64.max clocks, rounds, sequence numbers, incarnations), empty and huge
/// lists, repeated indices, unknown rounds, news of the victim's leaving, invented members.
/// It redials whenever a victim closes its link, so the attack goes on over many links.
final class HostilePeer: TransportDelegate, @unchecked Sendable {
    let transport: SimulatedTransport
    let target: String
    let victimIDs: [String]
    var random: SplitMix64
    let codec = ReplicationCodec()
    /// Its live links (the victim may dial it too); it attacks on the newest.
    private var connections: [ConnectionID] = []
    var connection: ConnectionID? { connections.last }
    private(set) var framesSent = 0
    private(set) var linksOpened = 0
    private var invented = 0

    init(network: SimulatedNetwork, id: String, target: String, victimIDs: [String], seed: UInt64) {
        transport = network.makeTransport(nodeID: id, address: "sim://\(id)")
        self.target = target
        self.victimIDs = victimIDs
        random = SplitMix64(seed: seed)
        try! transport.start(delegate: self)
        try! _ = transport.listen(on: "sim://\(id)")
        transport.connect(to: target)
    }

    /// Sends `count` hostile messages on the current link, if any.
    func attack(count: Int) {
        guard let connection else { return }
        for _ in 0..<count {
            let frame = codec.encode(message())
            guard frame.count <= 16 << 20 else { continue }
            if transport.send(frame, to: connection) == .queued { framesSent += 1 }
        }
    }

    private func pick<T>(_ values: [T]) -> T { values[Int(random.next() % UInt64(values.count))] }
    private func number() -> UInt64 { pick([0, 1, 2, 63, 64, 65_535, 1 << 32, UInt64.max - 1, UInt64.max, random.next()]) }
    private func small(_ limit: Int) -> Int { Int(random.next() % UInt64(limit + 1)) }

    private func entry(name: String) -> KeyedEntry {
        let physical = pick([0, 1, UInt64(1_700_000_000_000), HLCTimestamp.maxPhysicalMilliseconds])
        let timestamp = HLCTimestamp(physicalMilliseconds: physical, logical: UInt16(truncatingIfNeeded: random.next()))
        let value: [UInt8]? = random.next() % 4 == 0 ? nil : Array(repeating: 0x41, count: small(2_000))
        return KeyedEntry(key: StateKey(name: name, element: Array("\(small(1_000))".utf8)),
                          entry: Entry(version: Version(timestamp: timestamp, node: pick(["x", "a", "b", "zz"])), value: value))
    }

    private func member() -> ReplicationMessage.MemberRecord {
        if random.next() % 3 == 0 {
            // News about a victim: left, with the largest incarnation there is.
            return .init(nodeID: pick(victimIDs), address: "sim://\(pick(victimIDs))", status: pick([.left, .alive]),
                         incarnation: number(), heartbeat: number(), coverage: number(), membersHash: number())
        }
        invented += 1
        return .init(nodeID: "invented-\(invented)", address: "sim://nowhere-\(invented)",
                     status: pick([.alive, .left, .removed]), incarnation: number(),
                     heartbeat: number(), coverage: number(), membersHash: number())
    }

    private func message() -> ReplicationMessage {
        let round = pick([0, 1, UInt64.max, random.next()])
        switch small(11) {
        case 0:
            return .gossip((0..<pick([0, 1, 5, 300, 3_000])).map { _ in member() })
        case 1:
            let level = UInt8(small(2))
            let width = 1 << (2 * Int(level))
            let count = pick([0, 1, 4, 200_000])
            let repeated = random.next() % 2 == 0
            return .digest(round: round, seq: pick([1, 2, UInt64.max]), clock: number(),
                           shape: .init(fanoutBits: pick([2, 2, 4]), depth: 3), level: level,
                           nodes: (0..<count).map { index in
                               .init(index: repeated ? 0 : UInt32(index % width), hash: number()) })
        case 2:
            return .digestDone(round: round, seq: pick([1, 2, 3, UInt64.max]), clock: number(), synced: random.next() % 2 == 0)
        case 3:
            let buckets = (0..<small(6)).map { _ in UInt32(pick([0, 1, 63, 64, 65_535, UInt32.max])) }
            return .summary(round: round, seq: pick([1, 2, UInt64.max]), clock: number(), last: random.next() % 2 == 0,
                            groups: buckets.map { bucket in
                                .init(bucket: bucket, items: (0..<pick([0, 1, 50, 20_000])).map { _ in
                                    .init(keyHash: number(), timestamp: number(), entryHash: number()) }) })
        case 4:
            return .keysRequest(round: round, seq: pick([1, 2, UInt64.max]), last: random.next() % 2 == 0,
                                keys: (0..<pick([0, 1, 100, 50_000])).map { _ in
                                    .init(bucket: UInt32(truncatingIfNeeded: number()), keyHash: number()) })
        case 5:
            return .entries(round: round, seq: pick([1, 2, UInt64.max]), last: random.next() % 2 == 0,
                            batch: (0..<pick([0, 1, 10, 300])).map { _ in entry(name: "h\(small(50))") })
        case 6:
            return .streamAck(round: round, seq: number())
        case 7:
            let sample = entry(name: "h\(small(50))")
            return .delta(Delta(version: sample.entry.version, writes: (0..<pick([0, 1, 100])).map { _ in
                Delta.Write(key: StateKey(name: "h\(small(50))"), value: sample.entry.value) }))
        case 8:
            return .ping(nonce: number())
        case 9:
            return .ack(nonce: number(), physicalMilliseconds: number())
        case 10:
            return .refusal(reason: String(repeating: "r", count: small(1_024)))
        default:
            return random.next() % 8 == 0 ? .leave : .ping(nonce: 1)
        }
    }

    // MARK: TransportDelegate

    func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
        connections.append(connection)
        linksOpened += 1
    }

    func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID) {
        // Answer honest traffic with more of the same.
        if random.next() % 4 == 0 { attack(count: 1) }
    }

    func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {}

    func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {
        connections.removeAll { $0 == connection }
        if connections.isEmpty { transport.connect(to: target) }
    }

    func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {
        transport.connect(to: target)
    }
}
