import Decide

/// One node's `Transport` in a simulation. Made by `SimulatedNetwork.makeTransport`.
///
/// Guarantees, beyond those of `Transport` (see `SimulatedNetwork` for the network's faults):
/// - no delegate call is ever made synchronously inside `start`, `listen`, `connect`, `send`,
///   `close` or `shutdown`: every call comes from inside the scheduler's run loop, one at a time;
/// - `didDisconnect` is called exactly once per link reported by `didConnect`, after it;
/// - frames in flight per link never pass `Configuration.maxOutboundBytes` (`send` answers
///   `.overLimit`, and one `outboundLimitExceeded` follows per burst of refusals);
/// - connection ids are unique per transport, counting up from 1;
/// - after `shutdown` returns, or after the network crashed this node, the object is inert
///   forever: no delegate call, `send` answers `.notConnected`, `listen` throws.
///
/// Differences from `UVTransport`: `shutdown` reports nothing to its own delegate (UVTransport
/// reports `.closedLocally` per link before returning); `listen(on:)` accepts only the address
/// the network assigned to the node. Thread-safety: as `SimulatedScheduler` (one thread at a time).
public final class SimulatedTransport: Transport, @unchecked Sendable {
    /// The node this transport belongs to; sent as `PeerInfo.nodeID` to peers.
    public let nodeID: String
    /// The only address it may listen on; sent as `PeerInfo.listenAddress` once it listens.
    public let address: String
    let network: SimulatedNetwork

    enum Lifecycle { case idle, running, dead }
    var lifecycle = Lifecycle.idle
    var delegate: (any TransportDelegate)?
    var isListening = false
    /// This transport's links that it has not been told (or has not told itself) are gone.
    var links: [ConnectionID: LinkRef] = [:]
    private var nextConnection: UInt64 = 1

    init(nodeID: String, address: String, network: SimulatedNetwork) {
        self.nodeID = nodeID
        self.address = address
        self.network = network
    }

    // MARK: Transport

    /// Delivers events to `delegate` from now on. Throws `.alreadyStarted` on a second call and
    /// `.notRunning` after shutdown or a crash.
    public func start(delegate: any TransportDelegate) throws {
        try network.start(self, delegate: delegate)
    }

    /// Listens on `address`, which must be the node's own `address`; returns it. Listening
    /// twice is harmless. Throws when not running or given another address.
    public func listen(on address: String) throws -> String {
        try network.listen(self, on: address)
    }

    /// Dials `address` after one link delay: `didConnect` on both sides if a live node listens
    /// there and no partition is between them, else `didFailToConnect` (`.networkError` at once
    /// when nobody listens, `.timedOut` after the connect timeout across a partition).
    /// Must follow `start`; ignored after shutdown or a crash.
    public func connect(to address: String) {
        network.connect(self, to: address)
    }

    /// Puts the frame in flight towards the other side (see `SimulatedNetwork.Faults`). The frame
    /// must be 1...maxFrameBytes bytes with a first byte below 0xF0, as for `UVTransport`.
    public func send(_ frame: [UInt8], to connection: ConnectionID) -> SendResult {
        network.send(frame, from: self, on: connection)
    }

    /// Closes the link: this side is told `.closedLocally` later in this instant, the peer
    /// `.closedByPeer` after a link delay (delayed further while a partition is between them).
    /// Frames of the link in flight either way are dropped. Unknown connections are ignored.
    public func close(_ connection: ConnectionID) {
        network.close(connection, of: self)
    }

    /// Stops listening and closes every link; peers are told `.closedByPeer`. From its return on
    /// this transport makes no delegate call. Idempotent.
    /// The simulator calls the delegate from its scheduler, where nothing else waits: the
    /// engine handles every frame inside the call, so a seed replays exactly.
    public var delegateMayBlock: Bool { true }

    /// The frames delivered on one link at one instant are one read: `didFinishReading`
    /// follows them, at the same instant, so an engine that holds a read's deltas back (a node
    /// without a store) does so here too, deterministically.
    public var reportsReadEnds: Bool { true }

    public func shutdown() {
        network.shutdown(self)
    }

    // MARK: Inspection

    /// False before `start` and after shutdown or a crash.
    public var isRunning: Bool { network.scheduler.confinement.run { lifecycle == .running } }

    /// Wire bytes this side has in flight on `connection` (held by a stalled reader included),
    /// 0 when this transport has no such link.
    public func outboundBytes(for connection: ConnectionID) -> Int {
        network.scheduler.confinement.run {
            guard let ref = links[connection] else { return 0 }
            return ref.link.side(ref.side).inFlightBytes
        }
    }

    /// Links this transport has and has not yet been told are gone, in connection id order.
    public var connectionIDs: [ConnectionID] {
        network.scheduler.confinement.run { links.keys.sorted { $0.rawValue < $1.rawValue } }
    }

    // MARK: Internal

    func takeConnectionID() -> ConnectionID {
        defer { nextConnection += 1 }
        return ConnectionID(rawValue: nextConnection)
    }

    /// Calls the delegate if this transport is still running.
    func notify(_ call: (any TransportDelegate, SimulatedTransport) -> Void) {
        guard lifecycle == .running, let delegate else { return }
        call(delegate, self)
    }
}

/// Where a transport finds one of its links.
struct LinkRef {
    let link: SimulatedLink
    /// 0 when the transport dialled, 1 when it accepted.
    let side: Int
}
