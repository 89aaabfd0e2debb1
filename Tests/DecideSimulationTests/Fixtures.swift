import Decide
import DecideSimulation

/// One delegate call a transport made.
enum Event: Hashable {
    case connected(ConnectionID, PeerInfo)
    case received(ConnectionID, [UInt8])
    case overLimit(ConnectionID)
    case disconnected(ConnectionID, DisconnectReason)
    case failed(String, DisconnectReason)
    case readEnd(ConnectionID)
}

/// Records every delegate call with its virtual time; counts calls made while the test was
/// inside a transport method (which must never happen: calls come from the run loop only).
final class Recorder: TransportDelegate, @unchecked Sendable {
    let name: String
    let scheduler: SimulatedScheduler
    private(set) var events: [Event] = []
    private(set) var timedLog: [String] = []
    /// True while the test is inside a call to the transport (see `api`).
    private var insideAPI = false
    private(set) var synchronousCallbacks = 0
    /// Optional reactions, run after recording.
    var onConnect: ((ConnectionID, PeerInfo) -> Void)?
    var onReceive: ((ConnectionID, [UInt8]) -> Void)?

    init(name: String, scheduler: SimulatedScheduler) {
        self.name = name
        self.scheduler = scheduler
    }

    /// Runs `body` (calls into a transport) and notes any delegate call made during it.
    func api<T>(_ body: () throws -> T) rethrows -> T {
        insideAPI = true
        defer { insideAPI = false }
        return try body()
    }

    private func record(_ event: Event) {
        if insideAPI { synchronousCallbacks += 1 }
        events.append(event)
        timedLog.append("\(scheduler.nowMilliseconds) \(name) \(event)")
    }

    /// Frames received, in order (read ends left out).
    var received: [[UInt8]] {
        events.compactMap { if case .received(_, let frame) = $0 { return frame } else { return nil } }
    }
    var connections: [ConnectionID: PeerInfo] {
        var result: [ConnectionID: PeerInfo] = [:]
        for case .connected(let id, let peer) in events { result[id] = peer }
        return result
    }
    var disconnects: [(ConnectionID, DisconnectReason)] {
        events.compactMap { if case .disconnected(let id, let reason) = $0 { return (id, reason) } else { return nil } }
    }
    var failures: [(String, DisconnectReason)] {
        events.compactMap { if case .failed(let address, let reason) = $0 { return (address, reason) } else { return nil } }
    }
    var overLimits: [ConnectionID] {
        events.compactMap { if case .overLimit(let id) = $0 { return id } else { return nil } }
    }

    func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
        record(.connected(connection, peer))
        onConnect?(connection, peer)
    }
    func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID) {
        let frame = Array(frame)
        record(.received(connection, frame))
        onReceive?(connection, frame)
    }
    func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {
        record(.overLimit(connection))
    }
    func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {
        record(.disconnected(connection, reason))
    }
    func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {
        record(.failed(address, reason))
    }
    func transport(_ transport: any Transport, didFinishReading connection: ConnectionID) {
        record(.readEnd(connection))
    }
}

/// A scheduler, a network and one started, listening transport + recorder per node.
final class World {
    let scheduler: SimulatedScheduler
    let network: SimulatedNetwork
    private(set) var transports: [String: SimulatedTransport] = [:]
    private(set) var recorders: [String: Recorder] = [:]

    init(seed: UInt64, nodes: [String], faults: SimulatedNetwork.Faults = .init(),
         configuration: SimulatedNetwork.Configuration = .init()) throws {
        scheduler = SimulatedScheduler(seed: seed)
        network = SimulatedNetwork(scheduler: scheduler, configuration: configuration, faults: faults)
        for node in nodes { try boot(node) }
    }

    static func address(_ node: String) -> String { "sim://\(node)" }

    /// Makes (or remakes, after a crash) the node's transport, starts and listens.
    @discardableResult
    func boot(_ node: String) throws -> SimulatedTransport {
        let transport = network.makeTransport(nodeID: node, address: Self.address(node))
        let recorder = Recorder(name: node, scheduler: scheduler)
        try recorder.api {
            try transport.start(delegate: recorder)
            _ = try transport.listen(on: Self.address(node))
        }
        transports[node] = transport
        recorders[node] = recorder
        return transport
    }

    subscript(node: String) -> SimulatedTransport { transports[node]! }
    func recorder(_ node: String) -> Recorder { recorders[node]! }

    /// Dials `to` from `from`, runs until both sides are connected; returns both connection ids.
    func link(_ from: String, _ to: String) -> (ConnectionID, ConnectionID) {
        let dialerBefore = Set(recorder(from).connections.keys)
        let acceptorBefore = Set(recorder(to).connections.keys)
        recorder(from).api { transports[from]!.connect(to: Self.address(to)) }
        scheduler.run(forMilliseconds: 1_000)
        let dialer = recorder(from).connections.filter { !dialerBefore.contains($0.key) && $0.value.nodeID == to && $0.value.outbound }
        let acceptor = recorder(to).connections.filter { !acceptorBefore.contains($0.key) && $0.value.nodeID == from && !$0.value.outbound }
        precondition(dialer.count == 1 && acceptor.count == 1, "link \(from)->\(to) did not come up")
        return (dialer.first!.key, acceptor.first!.key)
    }

    var synchronousCallbacks: Int { recorders.values.reduce(0) { $0 + $1.synchronousCallbacks } }

    /// Every recorder's log, merged in node order (each in its own call order).
    var log: [String] { recorders.keys.sorted().flatMap { recorders[$0]!.timedLog } }
}

/// A frame whose first byte is a valid message type and whose rest says which it is.
func frame(_ number: Int, size: Int = 8) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: max(size, 5))
    bytes[0] = 1
    bytes[1] = UInt8(truncatingIfNeeded: number >> 24)
    bytes[2] = UInt8(truncatingIfNeeded: number >> 16)
    bytes[3] = UInt8(truncatingIfNeeded: number >> 8)
    bytes[4] = UInt8(truncatingIfNeeded: number)
    return bytes
}

/// The number `frame(_:)` put in.
func number(of frame: [UInt8]) -> Int {
    Int(frame[1]) << 24 | Int(frame[2]) << 16 | Int(frame[3]) << 8 | Int(frame[4])
}

/// Every frame is accounted for: sent (+ copies) = delivered + dropped + in flight.
func accountedFor(_ network: SimulatedNetwork) -> Bool {
    let c = network.counters
    return c.framesSent + c.framesDuplicated
        == c.framesDelivered + c.framesDroppedByLoss + c.framesDroppedByPartition + c.framesDroppedByClosedLink
        + UInt64(network.framesInFlight)
}
