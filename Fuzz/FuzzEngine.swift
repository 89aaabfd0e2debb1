// libFuzzer entry for the replication *engine*: a real `Node` and `Replicator` (Sources/Decide)
// driven through an in-process fake `Transport` by a program decoded from the fuzz input.
// Built by `make fuzz` / `make fuzz-smoke` (mk/transport.mk) with swiftc
// -sanitize=fuzzer,address, compiled together with every file under Sources/DecideCore and
// Sources/Decide as one module (so `package` API is visible; public API is preferred).
//
// The input: one profile byte (bits: 0x01 tombstone collection, 0x02 dead-member timeout,
// 0x04 catch-up window of 1, 0x08 a change log of 4, 0x30 the incarnation, 0x40 seeds, 0x80 a
// member-list file), then up to `maxOperations` operations, each an opcode byte (bit 0x80:
// leave the transport's events undelivered for now) followed by its operands. Operations:
// connect a hostile peer (inbound or outbound, any id, the victim's own included); deliver a
// raw frame, a structured message with extreme values, or an echo of a frame the victim sent;
// advance the clock (forwards, sometimes back) and tick; make a local decision; disconnect;
// forget a member; answer a dial; drain queues; restart the victim's replicator; let time pass
// on a healthy cluster; and relay frames to and from an honest second engine (`a`), sometimes
// corrupted, so real anti-entropy walks run deep.
//
// Oracles: nothing traps (ASan and libFuzzer catch the rest); every frame the victim hands the
// transport is 1...maxFrameBytes bytes and decodes canonically with a peer's codec; after each
// operation `status` answers and lists at most 2 × maxMembers members (removed included); once
// every link is reported gone no member shows as connected or catching up; and while the honest
// link was never impersonated or corrupted and tombstone collection is off, the coverage the
// victim claims for `a` is true: it holds every entry `a` holds at or below that clock. The
// replicators log through `OracleLogHandler`, which traps when the engine reports a message it
// built is too large to send (a walk that can never finish).
//
// DECIDE_FUZZ_TRACE=1 prints each operation of an input and what both engines show after it:
//   SWIFT_BACKTRACE=enable=no DECIDE_FUZZ_TRACE=1 .build-fuzz/fuzz-engine -runs=1 INPUT

import Foundation
import Logging
import Synchronization

enum EngineFuzz {
    static let maxFrameBytes = 64 * 1024
    static let maxDecisionBytes = 32 * 1024
    /// Per link, in the fake transport: sends past it answer `.overLimit`.
    static let maxOutboundBytes = 96 * 1024
    static let maxMembers = 16
    static let catchUpBatchBytes = 4096
    static let maxOperations = 64
    static let startMilliseconds: UInt64 = 1_700_000_000_000
    static let maxClockSkewMilliseconds: UInt64 = 60_000
    static let honestID = "a"
    static let victimID = "victim"
    /// Ids a hostile peer may claim: the honest one, the victim's own, one of 255 bytes, and
    /// enough invented ones to pass maxMembers.
    static let peerIDs: [String] = ["a", "b", "m", "z", victimID, longNodeID]
        + (0..<(maxMembers + 6)).map { "n\($0)" }
    static let keys: [StateKey] = (0..<8).map { index in
        StateKey(name: "k\(index % 4)", element: index < 4 ? [] : Array("e\(index)".utf8))
    }
    static let longAddress = "fake://" + String(repeating: "h", count: 1000)
    static let longNodeID = String(repeating: "y", count: 255)
    static let oddKeys = [StateKey(name: ""), StateKey(name: String(repeating: "n", count: 1024)),
                          StateKey(name: "k0", element: [UInt8](repeating: 7, count: 2_000))]
    static let longReason = String(repeating: "é", count: 700)
    static let shape = StateDigest(fanoutBits: 2, depth: 2)
    static let trace = ProcessInfo.processInfo.environment["DECIDE_FUZZ_TRACE"] == "1"
    static let logger = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
    /// The replicators' logger: silent, but an oracle on the lines that mean a guarantee broke.
    static let oracleLogger = Logger(label: "fuzz.replication", factory: { _ in OracleLogHandler() })
    /// A directory of this process for the victim's member list (profile bit 0x80).
    static let membershipDirectory: String = {
        let path = (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/decide-fuzz-engine-\(getpid())"
        _ = mkdir(path, 0o700)
        // The member file inside too (rmdir alone leaves a directory per run behind).
        atexit { try? FileManager.default.removeItem(atPath: EngineFuzz.membershipDirectory) }
        return path
    }()
}

/// An oracle: unlike `precondition`, it prints its message in optimized builds too.
func oracle(_ holds: Bool, _ message: @autoclosure () -> String) {
    if !holds { fatalError(message()) }
}

// MARK: - input

/// The fuzz input read front to back; past its end every read answers zero.
struct FuzzInput {
    let bytes: [UInt8]
    var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var exhausted: Bool { position >= bytes.count }
    var remaining: Int { max(0, bytes.count - position) }

    mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func flag() -> Bool { byte() & 1 == 1 }

    /// 0..<count (count at most 256).
    mutating func below(_ count: Int) -> Int { count <= 1 ? 0 : Int(byte()) % count }

    mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }

    /// One of `values`, or (one chance more) eight bytes of the input read as a number; the
    /// bytes are read only when chosen, so every pick costs one byte otherwise.
    mutating func pickOrRead(_ values: [UInt64]) -> UInt64 {
        let index = below(values.count + 1)
        return index < values.count ? values[index] : u64()
    }

    /// Bytes of one of `sizes` (each made only when chosen), nil for index 0.
    mutating func bytes(_ sizes: [Int], fill: UInt8) -> [UInt8]? {
        let index = below(sizes.count + 1)
        return index == 0 ? nil : [UInt8](repeating: fill, count: sizes[index - 1])
    }

    mutating func u16() -> Int { Int(byte()) | Int(byte()) << 8 }

    mutating func u64() -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 8) { value |= UInt64(byte()) << UInt64(shift) }
        return value
    }

    /// A chunk of the input itself, its length read first (at most `limit`).
    mutating func chunk(limit: Int) -> [UInt8] {
        let count = min(u16(), limit, remaining)
        defer { position += count }
        return Array(bytes[position..<position + count])
    }
}

// MARK: - clock

/// The physical clock of both engines; only the harness moves it.
final class FuzzClock: PhysicalClock {
    private let milliseconds: Mutex<UInt64>
    init(_ start: UInt64) { milliseconds = Mutex(start) }
    func nowMilliseconds() -> UInt64 { milliseconds.withLock { $0 } }
    func set(_ value: UInt64) { milliseconds.withLock { $0 = value } }
}

// MARK: - transport

/// An in-process `Transport`: links exist because the harness says so, frames sent are kept in
/// an outbox per link, and every event the transport owes its delegate (a closed link, a full
/// queue) is queued and delivered by the harness later, never from inside a call of the engine.
final class FakeTransport: Transport, @unchecked Sendable {
    struct Link {
        var outbox: [[UInt8]] = []
        var queued = 0
        /// `close` was called; `didDisconnect(.closedLocally)` is queued.
        var closing = false
        var overLimitReported = false
    }

    enum Event {
        case disconnect(ConnectionID, DisconnectReason)
        case limit(ConnectionID)
    }

    let name: String
    let codec = ReplicationCodec()
    weak var delegate: (any TransportDelegate)?
    private(set) var down = false
    var links: [ConnectionID: Link] = [:]
    var events: [Event] = []
    var dials: [String] = []
    private var nextConnection: UInt64 = 1
    /// The newest frames sent on any link, for echoes (at most 64).
    var recent: [[UInt8]] = []
    /// What the engine's own frames said: walk rounds with the last sequence number sent in
    /// each, ping nonces, and its own gossip record.
    var rounds: [UInt64] = []
    var sentSeq: [UInt64: UInt64] = [:]
    var nonces: [UInt64] = []
    /// The newest walk round and ping nonce sent on each link.
    var lastRound: [ConnectionID: UInt64] = [:]
    var lastNonce: [ConnectionID: UInt64] = [:]
    var ownRecord: ReplicationMessage.MemberRecord?

    init(name: String) { self.name = name }

    func newConnection() -> ConnectionID {
        defer { nextConnection += 1 }
        let connection = ConnectionID(rawValue: nextConnection)
        links[connection] = Link()
        return connection
    }

    func start(delegate: any TransportDelegate) throws {
        oracle(self.delegate == nil, "transport started twice")
        self.delegate = delegate
    }

    func listen(on address: String) throws -> String { address }

    func connect(to address: String) {
        guard !down, dials.count < 64 else { return }
        dials.append(address)
    }

    func send(_ frame: [UInt8], to connection: ConnectionID) -> SendResult {
        check(frame, on: connection)
        guard !down, var link = links[connection], !link.closing else { return .notConnected }
        guard link.queued + frame.count <= EngineFuzz.maxOutboundBytes else {
            if !link.overLimitReported {
                link.overLimitReported = true
                events.append(.limit(connection))
            }
            links[connection] = link
            return .overLimit
        }
        link.overLimitReported = false
        link.outbox.append(frame)
        link.queued += frame.count
        links[connection] = link
        return .queued
    }

    func close(_ connection: ConnectionID) {
        guard !down, var link = links[connection], !link.closing else { return }
        link.closing = true
        links[connection] = link
        events.append(.disconnect(connection, .closedLocally))
    }

    func outboundBytes(for connection: ConnectionID) -> Int { links[connection]?.queued ?? 0 }

    /// The fuzzer drives the engine from one thread: every frame is handled inside the call.
    var delegateMayBlock: Bool { true }

    func shutdown() {
        down = true
        delegate = nil
        links = [:]
        events = []
        dials = []
    }

    /// Takes the oldest frame of a link's outbox.
    func takeFrame(_ connection: ConnectionID) -> [UInt8]? {
        guard var link = links[connection], !link.outbox.isEmpty else { return nil }
        let frame = link.outbox.removeFirst()
        // An empty outbox ends a stall too (the reader caught up).
        link.queued = link.outbox.isEmpty ? 0 : link.queued - frame.count
        links[connection] = link
        return frame
    }

    /// The oracle on everything the engine sends: a frame a peer's transport and codec take.
    private func check(_ frame: [UInt8], on connection: ConnectionID) {
        oracle(!frame.isEmpty && frame.count <= EngineFuzz.maxFrameBytes,
               "\(name) sent a frame of \(frame.count) bytes (maxFrameBytes \(EngineFuzz.maxFrameBytes))")
        oracle(frame[0] < 0xF0, "\(name) sent a frame with a transport type byte \(frame[0])")
        let message: ReplicationMessage
        do {
            message = try codec.decode(frame)
        } catch {
            fatalError("\(name) sent a frame its peers cannot decode: \(error)")
        }
        oracle(codec.encode(message) == frame, "\(name) sent a frame that does not re-encode to itself")
        recent.append(frame)
        if recent.count > 64 { recent.removeFirst() }
        switch message {
        case let .digest(round, seq, _, _, _, _), let .digestDone(round, seq, _, _),
             let .summary(round, seq, _, _, _), let .keysRequest(round, seq, _, _), let .entries(round, seq, _, _):
            if sentSeq[round] == nil {
                rounds.append(round)
                if rounds.count > 16 { sentSeq[rounds.removeFirst()] = nil }
            }
            sentSeq[round] = max(sentSeq[round] ?? 0, seq)
            lastRound[connection] = round
        case .ping(let nonce):
            lastNonce[connection] = nonce
            nonces.append(nonce)
            if nonces.count > 8 { nonces.removeFirst() }
        case .gossip(let records):
            if let first = records.first, first.nodeID == EngineFuzz.victimID { ownRecord = first }
        default:
            break
        }
    }
}

// MARK: - log oracle

/// Prints nothing; traps on the engine's own report that a message it built does not fit a
/// frame (`Replicator.send` refuses it, and the walk or delta it belonged to never completes):
/// every decision a node holds must fit one frame, and a catch-up batch with it.
struct OracleLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .error

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let text = event.message.description
        // Built with -D DECIDE_FUZZ_IGNORE_UNSENDABLE, the fuzzer looks past this (known) failure.
        #if !DECIDE_FUZZ_IGNORE_UNSENDABLE
        if text.hasPrefix("not sending a message over maxFrameBytes") || text.hasPrefix("delta too large for one frame") {
            fatalError("\(metadata["node"].map { "\($0)" } ?? "?"): \(text) \(event.metadata ?? [:])")
        }
        #endif
    }
}

// MARK: - decisions

struct FuzzWrites: Decision {
    let writes: [Delta.Write]
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        for item in writes { write.raw(item.value, into: item.key) }
        return .none
    }
}

// MARK: - one engine

final class Engine {
    let node: Node
    let transport: FakeTransport
    let replicator: Replicator

    /// A new engine, on a new node unless `node` is given (a restart of the replicator only).
    init(id: String, clock: FuzzClock, profile: UInt8, seeds: [String], node: Node? = nil,
         membershipPath: String? = nil, restarts: UInt64 = 0) {
        if let node {
            self.node = node
        } else {
            var configuration = Node.Configuration(id: id)
            configuration.clock = clock
            configuration.digestFanoutBits = 2
            configuration.digestDepth = 2
            configuration.maxDecisionBytes = EngineFuzz.maxDecisionBytes
            // Every entry the limits allow must fit one 64 KiB frame (Replicator.start checks).
            configuration.limits.maxValueBytes = 16 * 1024
            configuration.limits.maxElementBytes = 4 * 1024
            configuration.maxClockSkewMilliseconds = EngineFuzz.maxClockSkewMilliseconds
            configuration.recentChangeCapacity = profile & 0x08 != 0 ? 4 : 1024
            configuration.effectConcurrency = 1
            configuration.logger = EngineFuzz.logger
            self.node = try! Node(configuration: configuration)
        }
        transport = FakeTransport(name: id)
        var settings = Replicator.Configuration()
        settings.maxMembers = EngineFuzz.maxMembers
        settings.catchUpBatchBytes = EngineFuzz.catchUpBatchBytes
        settings.maxFrameBytes = EngineFuzz.maxFrameBytes
        settings.catchUpWindowMessages = profile & 0x04 != 0 ? 1 : 4
        settings.tombstoneCollectionIntervalMilliseconds = EngineFuzz.collectsTombstones(profile) ? 30_000 : UInt64.max / 2
        settings.deadMemberTimeoutMilliseconds = profile & 0x02 != 0 ? 20_000 : nil
        settings.incarnation = [0, 1, 7, UInt64.max][Int(profile >> 4) & 3] &+ restarts
        settings.membershipPath = membershipPath
        settings.seeds = seeds
        settings.randomSeed = 0x5EED_0000 + UInt64(id.utf8.count)
        settings.logger = EngineFuzz.oracleLogger
        replicator = Replicator(node: self.node, transport: transport, configuration: settings)
        try! replicator.start(listeningOn: "fake://\(id)")
    }

    func tearDown() {
        replicator.stop()
        transport.shutdown()
    }

    /// The oracle on what `status` says.
    func checkStatus() -> ReplicationStatus {
        let status = replicator.status
        oracle(status.members.count <= EngineFuzz.maxMembers * 2,
               "\(node.id) keeps \(status.members.count) members, over 2 × maxMembers \(EngineFuzz.maxMembers)")
        return status
    }
}

extension EngineFuzz {
    static func collectsTombstones(_ profile: UInt8) -> Bool { profile & 0x01 != 0 }
    /// The victim's seeds: the honest engine, itself, and a hostile one.
    static func seeds(_ profile: UInt8) -> [String] {
        profile & 0x40 != 0 ? ["fake://a", "fake://victim", "fake://b"] : []
    }
}

// MARK: - the harness

final class EngineHarness {
    let profile: UInt8
    let clock = FuzzClock(EngineFuzz.startMilliseconds)
    var victim: Engine
    var honest: Engine?
    /// With profile bit 0x80 the victim keeps its member list in this file (gone at start),
    /// and a restart reads it back.
    let membershipPath: String?
    var restarts: UInt64 = 0
    /// Victim links paired with the honest engine's, both ways.
    var honestOf: [ConnectionID: ConnectionID] = [:]
    var victimOf: [ConnectionID: ConnectionID] = [:]
    /// Something other than the honest engine spoke as `a`, or `a` heard something other than
    /// the victim: the coverage oracle is off.
    var impersonated = false
    /// The last walk sequence number the harness sent per round (to pick the next one).
    var peerSeq: [UInt64: UInt64] = [:]

    init(profile: UInt8) {
        self.profile = profile
        if profile & 0x80 != 0 {
            let path = EngineFuzz.membershipDirectory + "/members"
            _ = unlink(path)
            membershipPath = path
        } else {
            membershipPath = nil
        }
        victim = Engine(id: EngineFuzz.victimID, clock: clock, profile: profile, seeds: EngineFuzz.seeds(profile),
                        membershipPath: membershipPath)
    }

    /// The victim's replicator stops and a new one starts on the same node (reading the member
    /// list back when it keeps one); every link of the old one ends.
    private func restart() {
        victim.tearDown()
        for (mine, theirs) in honestOf {
            if let honest, honest.transport.links.removeValue(forKey: theirs) != nil {
                honest.replicator.transport(honest.transport, didDisconnect: theirs, reason: .closedByPeer)
            }
            victimOf[theirs] = nil
            honestOf[mine] = nil
        }
        restarts += 1
        peerSeq = [:]
        victim = Engine(id: EngineFuzz.victimID, clock: clock, profile: profile, seeds: EngineFuzz.seeds(profile), node: victim.node,
                        membershipPath: membershipPath, restarts: restarts)
    }

    /// Time passes on a healthy cluster: ticks, every frame between the victim and the honest
    /// engine delivered, and (optionally) hostile links kept alive by pings.
    private func settle(_ input: inout FuzzInput) {
        let rounds = input.pick([2, 4, 8, 16, 32])
        let step: UInt64 = input.pick([50, 200, 500, 1_000, 2_500])
        let keepAlive = input.flag()
        for _ in 0..<rounds {
            clock.set(now + step)
            victim.replicator.tick()
            honest?.replicator.tick()
            relayAll()
            if keepAlive {
                let ping = victim.transport.codec.encode(.ping(nonce: 1))
                for connection in victimLinks where honestOf[connection] == nil {
                    victim.transport.links[connection]?.outbox = []
                    victim.transport.links[connection]?.queued = 0
                    victim.replicator.receive(ping, over: victim.transport, from: connection)
                }
            }
            deliverEvents()
        }
    }

    /// Delivers every frame waiting between the victim and the honest engine, both ways.
    private func relayAll() {
        guard let honest else { return }
        for _ in 0..<1_024 {
            var moved = false
            for mine in honestOf.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
                guard let theirs = honestOf[mine] else { continue }
                if let frame = victim.transport.takeFrame(mine) {
                    moved = true
                    if honest.transport.links[theirs] != nil {
                        honest.replicator.receive(frame, over: honest.transport, from: theirs)
                    }
                }
                if let frame = honest.transport.takeFrame(theirs) {
                    moved = true
                    if victim.transport.links[mine] != nil {
                        victim.replicator.receive(frame, over: victim.transport, from: mine)
                    }
                }
            }
            if !moved { return }
        }
    }

    var now: UInt64 { clock.nowMilliseconds() }

    /// Victim links the transport has not reported gone, in id order.
    var victimLinks: [ConnectionID] { victim.transport.links.keys.sorted { $0.rawValue < $1.rawValue } }

    func pickLink(_ input: inout FuzzInput) -> ConnectionID? {
        let links = victimLinks
        guard !links.isEmpty else { return nil }
        return links[input.below(links.count)]
    }

    // MARK: operations

    func run(_ input: inout FuzzInput) {
        var operations = 0
        while !input.exhausted && operations < EngineFuzz.maxOperations {
            operations += 1
            let opcode = input.byte()
            switch opcode & 0x0F {
            case 0: connectHostile(&input)
            case 1: deliverRaw(&input)
            case 2, 3: deliverStructured(&input)
            case 4: echo(&input)
            case 5: advance(&input)
            case 6: decide(&input)
            case 7: disconnect(&input)
            case 8: forget(&input)
            case 9: answerDial(&input)
            case 10: drain(&input)
            case 11: connectHonest(&input)
            case 12, 13: relay(&input, corrupt: false)
            case 14: relay(&input, corrupt: true)
            default: misc(&input)
            }
            if opcode & 0x80 == 0 { deliverEvents() }
            check()
            if EngineFuzz.trace { trace("op \(operations) opcode \(opcode & 0x0F)\(opcode & 0x80 == 0 ? "" : " (events deferred)")") }
        }
        finish()
    }

    /// With DECIDE_FUZZ_TRACE=1 in the environment, each operation prints what the engines show.
    private func trace(_ what: String) {
        func describe(_ engine: Engine) -> String {
            let status = engine.replicator.status
            let members = status.members.map { member in
                "\(member.nodeID.prefix(8)):\(member.link.rawValue)/\(member.catchUp.rawValue)/covered=\(HLCTimestamp(rawValue: member.coveredClock))"
            }
            return "\(engine.node.id) links=\(engine.transport.links.count) entries=\(engine.node.stateSummary.entryCount) coverage=\(HLCTimestamp(rawValue: status.coverage)) [\(members.joined(separator: " "))]"
        }
        var line = "\(what) t=+\(Int64(bitPattern: now &- EngineFuzz.startMilliseconds))ms \(describe(victim))"
        if let honest { line += " | \(describe(honest))" }
        if impersonated { line += " | a impersonated" }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    private func connectHostile(_ input: inout FuzzInput) {
        let id = input.pick(EngineFuzz.peerIDs)
        let outbound = input.flag()
        let address = input.pick(["fake://\(id)", "", "fake://victim", "fake://a", "fake://b",
                                  "fake://\(id):2", EngineFuzz.longAddress])
        var dialed: String?
        if outbound {
            if !victim.transport.dials.isEmpty && input.flag() {
                dialed = victim.transport.dials.remove(at: input.below(victim.transport.dials.count))
            } else {
                dialed = address.isEmpty ? "fake://\(id)" : address
            }
        }
        if id == EngineFuzz.honestID { impersonated = true }
        let connection = victim.transport.newConnection()
        victim.replicator.transport(victim.transport, didConnect: connection,
                                    peer: PeerInfo(nodeID: id, listenAddress: address, outbound: outbound, dialedAddress: dialed))
    }

    private func deliver(_ frame: [UInt8], to connection: ConnectionID) {
        guard victim.transport.links[connection] != nil else { return }
        if honestOf[connection] != nil { impersonated = true }
        victim.replicator.receive(frame, over: victim.transport, from: connection)
    }

    private func deliverRaw(_ input: inout FuzzInput) {
        guard let connection = pickLink(&input) else { return }
        deliver(input.chunk(limit: 8192), to: connection)
    }

    private func deliverStructured(_ input: inout FuzzInput) {
        guard let connection = pickLink(&input) else { return }
        let message = makeMessage(&input, on: connection)
        let frame = victim.transport.codec.encode(message)
        // The transport takes no frame over maxFrameBytes from the wire.
        guard frame.count <= EngineFuzz.maxFrameBytes else { return }
        deliver(frame, to: connection)
    }

    private func echo(_ input: inout FuzzInput) {
        guard let connection = pickLink(&input) else { return }
        let recent = victim.transport.recent
        guard !recent.isEmpty else { return }
        var frame = recent[recent.count - 1 - input.below(recent.count)]
        if input.flag() { mutate(&frame, &input) }
        deliver(frame, to: connection)
    }

    private func mutate(_ frame: inout [UInt8], _ input: inout FuzzInput) {
        guard !frame.isEmpty else { return }
        switch input.below(4) {
        case 0:
            frame[input.u16() % frame.count] ^= input.byte() | 1
        case 1:
            frame[input.u16() % frame.count] = input.pick([0, 1, 0x7F, 0x80, 0xFF])
        case 2:
            frame.removeLast(min(frame.count - 1, 1 + input.below(16)))
        default:
            frame.append(contentsOf: [UInt8](repeating: input.byte(), count: 1 + input.below(8)))
        }
    }

    private func advance(_ input: inout FuzzInput) {
        let steps: [Int64] = [0, 1, 49, 50, 499, 500, 1_000, 2_000, 2_999, 3_001, 5_001, 10_001, 20_001, 30_001, 60_001,
                              -1, -1_000, -70_000]
        let index = input.below(steps.count + 1)
        let step = index < steps.count ? steps[index] : Int64(input.u16())
        let next = step < 0 ? now - UInt64(-step) : now + UInt64(step)
        clock.set(next)
        victim.replicator.tick()
        honest?.replicator.tick()
    }

    private func decide(_ input: inout FuzzInput) {
        let onHonest = input.below(4) == 0
        let count = 1 + input.below(4)
        var writes: [Delta.Write] = []
        for _ in 0..<count {
            let key = input.pick(EngineFuzz.keys)
            let value = input.bytes([0, 1, 300, 3_000, 40_000], fill: 0x61 &+ UInt8(count))
            writes.append(.init(key: key, value: value))
        }
        if onHonest, let honest {
            honest.node.decide(FuzzWrites(writes: writes))
        } else {
            victim.node.decide(FuzzWrites(writes: writes))
        }
    }

    private func disconnect(_ input: inout FuzzInput) {
        guard let connection = pickLink(&input) else { return }
        let reason = input.pick([DisconnectReason.closedByPeer, .networkError("reset"), .protocolViolation("bad frame"),
                                 .timedOut("idle"), .refused("secret"), .closedLocally])
        dropVictimLink(connection, reason: reason)
    }

    private func forget(_ input: inout FuzzInput) {
        let id = input.pick(EngineFuzz.peerIDs)
        try? victim.replicator.forget(id)
    }

    private func answerDial(_ input: inout FuzzInput) {
        let dials = victim.transport.dials
        guard !dials.isEmpty else { return }
        let address = victim.transport.dials.remove(at: input.below(dials.count))
        switch input.below(4) {
        case 0:
            victim.replicator.transport(victim.transport, didFailToConnect: address,
                                        reason: input.pick([.networkError("refused"), .timedOut("connect"), .refused("secret")]))
        case 1 where address == "fake://a":
            linkHonest(victimDialled: true, dialed: address, input: &input)
        default:
            // Whoever answers there: the node the address names, or another one.
            let named = address.hasPrefix("fake://") ? String(address.dropFirst(7)) : address
            let id = input.flag() ? named : input.pick(EngineFuzz.peerIDs)
            guard !id.isEmpty, id.utf8.count <= 255 else { return }
            if id == EngineFuzz.honestID { impersonated = true }
            let connection = victim.transport.newConnection()
            victim.replicator.transport(victim.transport, didConnect: connection,
                                        peer: PeerInfo(nodeID: id, listenAddress: input.flag() ? address : "",
                                                       outbound: true, dialedAddress: address))
        }
    }

    /// Empties the outboxes of hostile links (their peers read everything), stalls one link
    /// (its peer stops reading: the queue is all but full), or reports a full one.
    private func drain(_ input: inout FuzzInput) {
        switch input.below(4) {
        case 0:
            if let connection = pickLink(&input) {
                victim.replicator.transport(victim.transport, outboundLimitExceeded: connection)
            }
            return
        case 1:
            if let connection = pickLink(&input) {
                let room = input.pick([0, 16, 200, 4_096, 40_000])
                victim.transport.links[connection]?.queued = EngineFuzz.maxOutboundBytes - room
            }
            return
        default:
            break
        }
        for connection in victimLinks where honestOf[connection] == nil {
            victim.transport.links[connection]?.outbox = []
            victim.transport.links[connection]?.queued = 0
        }
    }

    private func connectHonest(_ input: inout FuzzInput) {
        linkHonest(victimDialled: input.flag(), dialed: "fake://a", input: &input)
    }

    private func linkHonest(victimDialled: Bool, dialed: String, input: inout FuzzInput) {
        if honest == nil {
            honest = Engine(id: EngineFuzz.honestID, clock: clock, profile: profile, seeds: [])
        }
        guard let honest else { return }
        let mine = victim.transport.newConnection()
        let theirs = honest.transport.newConnection()
        honestOf[mine] = theirs
        victimOf[theirs] = mine
        let toVictim = PeerInfo(nodeID: EngineFuzz.honestID, listenAddress: "fake://a", outbound: victimDialled,
                                dialedAddress: victimDialled ? dialed : nil)
        let toHonest = PeerInfo(nodeID: EngineFuzz.victimID, listenAddress: "fake://victim", outbound: !victimDialled,
                                dialedAddress: victimDialled ? nil : "fake://victim")
        if input.flag() {
            victim.replicator.transport(victim.transport, didConnect: mine, peer: toVictim)
            honest.replicator.transport(honest.transport, didConnect: theirs, peer: toHonest)
        } else {
            honest.replicator.transport(honest.transport, didConnect: theirs, peer: toHonest)
            victim.replicator.transport(victim.transport, didConnect: mine, peer: toVictim)
        }
    }

    /// Moves frames between the victim and the honest engine on one paired link, in both
    /// directions; with `corrupt`, one frame is altered on the way.
    private func relay(_ input: inout FuzzInput, corrupt: Bool) {
        guard let honest else { return }
        let pairs = honestOf.keys.sorted { $0.rawValue < $1.rawValue }
        guard !pairs.isEmpty else { return }
        let mine = pairs[input.below(pairs.count)]
        guard let theirs = honestOf[mine] else { return }
        let steps = corrupt ? 1 : input.pick([1, 2, 4, 8, 16, 64])
        let direction = input.below(3)   // 0 both, 1 to honest only, 2 to victim only
        for _ in 0..<steps {
            // Both sides' `moved` are evaluated: each direction takes its frame in the same step.
            let toHonest = direction != 2 && move(from: victim, mine, to: honest, theirs, corrupt: corrupt, &input)
            let toVictim = direction != 1 && move(from: honest, theirs, to: victim, mine, corrupt: corrupt, &input)
            if !toHonest && !toVictim { break }
        }
    }

    /// Takes the next frame `source` queued on `outgoing` and delivers it to `target` on
    /// `incoming` (if that link is still up); with `corrupt`, alters it on the way. False when
    /// nothing was queued.
    private func move(from source: Engine, _ outgoing: ConnectionID, to target: Engine, _ incoming: ConnectionID,
                      corrupt: Bool, _ input: inout FuzzInput) -> Bool {
        guard var frame = source.transport.takeFrame(outgoing) else { return false }
        if corrupt {
            // What the receiver then holds need not come from its peer: the coverage oracle is off.
            mutate(&frame, &input)
            impersonated = true
        }
        if target.transport.links[incoming] != nil {
            target.replicator.receive(frame, over: target.transport, from: incoming)
        }
        return true
    }

    private func misc(_ input: inout FuzzInput) {
        switch input.below(8) {
        case 0:
            victim.replicator.leave()
        case 2, 3, 4:
            settle(&input)
        case 5:
            restart()
        case 1:
            if let honest, input.flag() {
                if let connection = honest.transport.links.keys.min(by: { $0.rawValue < $1.rawValue }) {
                    dropHonestLink(connection, reason: .closedByPeer)
                }
            }
        default:
            _ = victim.checkStatus()
        }
    }

    // MARK: links going away

    /// The victim's link ends (reported once); its honest counterpart, if any, ends too.
    private func dropVictimLink(_ connection: ConnectionID, reason: DisconnectReason) {
        guard victim.transport.links.removeValue(forKey: connection) != nil else { return }
        victim.replicator.transport(victim.transport, didDisconnect: connection, reason: reason)
        if let theirs = honestOf.removeValue(forKey: connection) {
            victimOf[theirs] = nil
            if let honest, honest.transport.links.removeValue(forKey: theirs) != nil {
                honest.replicator.transport(honest.transport, didDisconnect: theirs, reason: .closedByPeer)
            }
        }
    }

    private func dropHonestLink(_ connection: ConnectionID, reason: DisconnectReason) {
        guard let honest, honest.transport.links.removeValue(forKey: connection) != nil else { return }
        honest.replicator.transport(honest.transport, didDisconnect: connection, reason: reason)
        if let mine = victimOf.removeValue(forKey: connection) {
            honestOf[mine] = nil
            if victim.transport.links.removeValue(forKey: mine) != nil {
                victim.replicator.transport(victim.transport, didDisconnect: mine, reason: .closedByPeer)
            }
        }
    }

    /// Delivers what the transports owe their engines (closed links, full queues), until none is left.
    func deliverEvents() {
        for _ in 0..<1_000 {
            if !victim.transport.events.isEmpty {
                switch victim.transport.events.removeFirst() {
                case let .disconnect(connection, reason): dropVictimLink(connection, reason: reason)
                case .limit(let connection):
                    if victim.transport.links[connection] != nil {
                        victim.replicator.transport(victim.transport, outboundLimitExceeded: connection)
                    }
                }
            } else if let honest, !honest.transport.events.isEmpty {
                switch honest.transport.events.removeFirst() {
                case let .disconnect(connection, reason): dropHonestLink(connection, reason: reason)
                case .limit(let connection):
                    if honest.transport.links[connection] != nil {
                        honest.replicator.transport(honest.transport, outboundLimitExceeded: connection)
                    }
                }
            } else {
                return
            }
        }
    }

    // MARK: oracles

    func check() {
        let status = victim.checkStatus()
        _ = honest?.checkStatus()
        checkCoverage(status)
    }

    /// The victim covers `a` up to the clock it reports only if it holds every entry `a` holds
    /// at or below it. Sound only while nothing but the honest engine spoke as `a` and no
    /// tombstone was collected anywhere (a collected tombstone is legitimately missing).
    private func checkCoverage(_ status: ReplicationStatus) {
        guard let honest, !impersonated, !EngineFuzz.collectsTombstones(profile),
              let member = status.members.first(where: { $0.nodeID == EngineFuzz.honestID }),
              member.coveredClock > 0 else { return }
        for item in honest.node.entries() where item.entry.version.timestamp.rawValue <= member.coveredClock {
            let mine = victim.node.entry(for: item.key)
            oracle(mine.map { $0.wins(over: item.entry) } ?? false,
                   "the victim claims coverage of a up to \(HLCTimestamp(rawValue: member.coveredClock)) but lacks \(item.key) at \(item.entry.version) (it holds \(mine.map { "\($0.version)" } ?? "nothing"))")
        }
    }

    /// Every link ends; then no member may show as connected or catching up.
    func finish() {
        deliverEvents()
        for connection in victimLinks { dropVictimLink(connection, reason: .closedByPeer) }
        if let honest {
            for connection in honest.transport.links.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
                dropHonestLink(connection, reason: .closedByPeer)
            }
        }
        deliverEvents()
        let status = victim.checkStatus()
        for member in status.members {
            oracle(member.link != .connected, "\(member.nodeID) shows as connected after every link ended")
            oracle(member.catchUp != .running, "\(member.nodeID) shows a walk running after every link ended")
        }
        victim.tearDown()
        honest?.tearDown()
        if let membershipPath { _ = unlink(membershipPath) }
    }

    // MARK: structured messages

    private func number(_ input: inout FuzzInput) -> UInt64 {
        input.pickOrRead([0, 1, 2, 3, 64, 1 << 32, 1 << 63, UInt64.max - 1, UInt64.max,
                          now, now << 16, victim.node.clockLast, victim.node.clockLast &+ 1])
    }

    private func timestamp(_ input: inout FuzzInput) -> UInt64 {
        let physical = now
        return input.pickOrRead([0, 1, physical << 16, (physical - 1_000) << 16, (physical + 1_000) << 16,
                           (physical + EngineFuzz.maxClockSkewMilliseconds + 1) << 16,
                           HLCTimestamp.maxPhysicalMilliseconds << 16 | 0xFFFF, UInt64.max,
                           victim.node.clockLast, victim.node.clockLast &+ 1, victim.node.clockLast &- 1])
    }

    /// A walk round: mostly the newest the victim used on this link, or another it used.
    private func round(_ input: inout FuzzInput, _ connection: ConnectionID) -> UInt64 {
        let rounds = victim.transport.rounds
        if let mine = victim.transport.lastRound[connection], input.below(3) != 0 { return mine }
        if !rounds.isEmpty && input.below(3) != 0 { return rounds[rounds.count - 1 - input.below(rounds.count)] }
        return input.pickOrRead([0, 1, UInt64.max])
    }

    /// A sequence number for a walk message the harness sends in `round`.
    private func seq(_ round: UInt64, _ input: inout FuzzInput) -> UInt64 {
        let next = (peerSeq[round] ?? 0) &+ 1
        let seq = input.pick([next, next, next, 1, 2, 0, next &+ 1, UInt64.max])
        peerSeq[round] = max(peerSeq[round] ?? 0, seq)
        return seq
    }

    private func nodeName(_ input: inout FuzzInput) -> String {
        input.pick(["a", "b", "victim", "z", "", EngineFuzz.longNodeID])
    }

    private func key(_ input: inout FuzzInput) -> StateKey {
        if input.below(16) == 0 {
            return input.pick(EngineFuzz.oddKeys)
        }
        return input.pick(EngineFuzz.keys)
    }

    private func value(_ input: inout FuzzInput) -> [UInt8]? {
        input.bytes([0, 1, 100, 2_000, 20_000], fill: 0x62)
    }

    private func version(_ input: inout FuzzInput) -> Version {
        Version(timestamp: HLCTimestamp(rawValue: timestamp(&input)), node: nodeName(&input))
    }

    private func entries(_ input: inout FuzzInput) -> [KeyedEntry] {
        let count = input.pick([0, 1, 2, 3, 5, 8, 300])
        var shared = version(&input)
        var result: [KeyedEntry] = []
        for index in 0..<count {
            if index < 8 && input.below(3) == 0 { shared = version(&input) }
            let key = index < 8 ? key(&input) : StateKey(name: "bulk", element: Array("\(index)".utf8))
            result.append(KeyedEntry(key: key, entry: Entry(version: shared, value: index < 8 ? value(&input) : [1])))
        }
        if input.below(4) == 0 { result.sort { $0.entry.version < $1.entry.version } }
        return result
    }

    private func makeMessage(_ input: inout FuzzInput, on connection: ConnectionID) -> ReplicationMessage {
        switch input.below(12) {
        case 0:
            let version = version(&input)
            let count = input.pick([0, 1, 2, 3, 6, 2_000])
            var writes: [Delta.Write] = []
            for index in 0..<count {
                if index < 6 {
                    writes.append(.init(key: key(&input), value: value(&input)))
                } else {
                    writes.append(.init(key: StateKey(name: "w", element: Array("\(index)".utf8)), value: nil))
                }
            }
            return .delta(Delta(version: version, writes: writes))
        case 1:
            let round = round(&input, connection)
            let seq = seq(round, &input)
            let shape = input.pick([(2, 2), (2, 2), (2, 2), (2, 3), (4, 2), (1, 0), (2, 0)])
            let level = UInt8(input.below(shape.1 + 1))
            let width = 1 << (shape.0 * Int(level))
            let matches = shape == (2, 2)
            let count = input.pick([0, 1, 2, 4, width, width, width + 1, 64])
            let mode = input.below(3)
            var indices: [Int] = []
            for index in 0..<count {
                switch mode {
                case 0: indices.append(index % width)
                case 1: indices.append(0)
                default: indices.append(input.below(width))
                }
            }
            let actual = matches ? victim.node.digestHashes(level: Int(level), indices: indices) : indices.map { _ in 0 }
            var nodes: [ReplicationMessage.DigestNode] = []
            for (index, hash) in zip(indices, actual) {
                let chosen = input.pickOrRead([hash, hash, hash, 0, hash ^ 1])
                nodes.append(.init(index: UInt32(index), hash: chosen))
            }
            return .digest(round: round, seq: seq, clock: number(&input),
                           shape: .init(fanoutBits: UInt8(shape.0), depth: UInt8(shape.1)), level: level, nodes: nodes)
        case 2:
            let round = round(&input, connection)
            return .digestDone(round: round, seq: seq(round, &input), clock: number(&input), synced: input.flag())
        case 3:
            let round = round(&input, connection)
            let seq = seq(round, &input)
            var groups: [ReplicationMessage.SummaryGroup] = []
            var bucket = 0
            for _ in 0..<input.pick([0, 1, 2, 3, 17]) {
                bucket = input.pick([bucket, bucket + 1, bucket + input.below(4), bucket - 1, 0, 15, 16, Int(UInt32.max)])
                bucket = max(0, min(bucket, Int(UInt32.max)))
                var items: [ReplicationMessage.SummaryItem] = []
                for _ in 0..<input.pick([0, 1, 2, 5, 9]) {
                    let key = key(&input)
                    let entry = victim.node.entry(for: key)
                    let hash = input.below(4) == 0 ? input.u64() : key.stableHash
                    let contribution = entry.map { StateDigest.contribution(of: key, $0) } ?? 0
                    items.append(.init(keyHash: hash, timestamp: input.flag() ? entry?.version.timestamp.rawValue ?? 0 : timestamp(&input),
                                       entryHash: input.pickOrRead([contribution, contribution ^ 1])))
                }
                groups.append(.init(bucket: UInt32(bucket), items: items))
            }
            return .summary(round: round, seq: seq, clock: number(&input), last: input.flag(), groups: groups)
        case 4:
            let round = round(&input, connection)
            let seq = seq(round, &input)
            var keys: [ReplicationMessage.KeyReference] = []
            for _ in 0..<input.pick([0, 1, 3, 8, 300]) {
                let key = key(&input)
                let bucket = input.below(8) == 0 ? input.pick([16, UInt32.max]) : UInt32(EngineFuzz.shape.bucket(of: key))
                keys.append(.init(bucket: bucket, keyHash: input.below(8) == 0 ? input.u64() : key.stableHash))
            }
            return .keysRequest(round: round, seq: seq, last: input.flag(), keys: keys)
        case 5:
            let round = round(&input, connection)
            let seq = seq(round, &input)
            return .entries(round: round, seq: seq, last: input.flag(), batch: entries(&input))
        case 6:
            let round = round(&input, connection)
            let sent = victim.transport.sentSeq[round] ?? 0
            return .streamAck(round: round, seq: input.pick([sent, sent, sent &- 1, sent &+ 1, 0, UInt64.max]))
        case 7:
            var records: [ReplicationMessage.MemberRecord] = []
            let own = victim.transport.ownRecord
            for _ in 0..<input.pick([0, 1, 2, 3, 8, 16, 17, 33, 34]) {
                let id = input.pick(EngineFuzz.peerIDs)
                records.append(.init(
                    nodeID: id, address: input.pick(["fake://\(id)", "", "fake://victim", "fake://a", "fake://\(id):2"]),
                    status: input.pick([.alive, .alive, .left, .removed]),
                    incarnation: input.pickOrRead([0, 1, 2, 7, 8, UInt64.max]),
                    heartbeat: input.pickOrRead([0, 1, 2, own?.heartbeat ?? 3, (own?.heartbeat ?? 3) &+ 1, UInt64.max]),
                    coverage: input.pickOrRead([0, own?.coverage ?? 1, victim.node.clockLast, UInt64.max]),
                    membersHash: input.pickOrRead([own?.membersHash ?? 0, own?.membersHash ?? 0, 0])))
            }
            return .gossip(records)
        case 8:
            return .ping(nonce: number(&input))
        case 9:
            let nonces = victim.transport.nonces
            var nonce = !nonces.isEmpty && input.flag() ? nonces[nonces.count - 1 - input.below(nonces.count)] : number(&input)
            if let mine = victim.transport.lastNonce[connection], input.below(4) != 0 { nonce = mine }
            return .ack(nonce: nonce, physicalMilliseconds: input.pick([now, now + 70_000, now - 70_000, now + 1_000, 0, UInt64.max]))
        case 10:
            return .leave
        default:
            return .refusal(reason: input.pick(["", "removed", EngineFuzz.longReason]))
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEngine(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    let harness = EngineHarness(profile: input.byte())
    harness.run(&input)
    return 0
}

extension Replicator {
    /// Hands the engine one frame as a transport would: lent for the call.
    fileprivate func receive(_ frame: [UInt8], over link: any Transport, from connection: ConnectionID) {
        frame.withUnsafeBytes { transport(link, didReceive: $0, from: connection) }
    }
}
