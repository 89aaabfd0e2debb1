/// Identifies one live link of a `Transport`. Never reused within one transport's lifetime.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    /// The transport's number for the link.
    public let rawValue: UInt64
    /// The link numbered `rawValue` (transports make these; tests may too).
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "conn#\(rawValue)" }
}

/// What a peer proved about itself in the handshake. A `Transport` reports a link only after
/// the handshake (and, with a cluster secret, the mutual proof) has succeeded.
public struct PeerInfo: Hashable, Sendable {
    /// The peer's node id, as it sent it in its hello.
    public let nodeID: String
    /// The address the peer says it listens on (`HOST:PORT`), or "" when it does not listen.
    public let listenAddress: String
    /// True when this side opened the link (`connect`), false when the peer dialled in.
    public let outbound: Bool
    /// For an outbound link, the address given to `connect` (it may differ from
    /// `listenAddress`, e.g. a host name against an IP); nil for inbound links.
    public let dialedAddress: String?

    /// What a transport reports of a peer after its handshake; `dialedAddress` only for links
    /// this side opened.
    public init(nodeID: String, listenAddress: String, outbound: Bool, dialedAddress: String? = nil) {
        self.nodeID = nodeID
        self.listenAddress = listenAddress
        self.outbound = outbound
        self.dialedAddress = dialedAddress
    }
}

/// Why a link ended. Carried to the delegate so the engine and the logs can say what happened.
public enum DisconnectReason: Hashable, Sendable, CustomStringConvertible {
    /// This side called `close` or `shutdown`.
    case closedLocally
    /// The peer closed the stream (EOF) after the handshake.
    case closedByPeer
    /// `connect` could not reach the address, or the socket failed (the text is the OS error).
    case networkError(String)
    /// The peer broke the protocol: bad frame, oversize length, unknown message, bad handshake.
    case protocolViolation(String)
    /// The peer failed the handshake: wrong cluster, wrong or missing secret, unsupported version.
    case refused(String)
    /// Nothing arrived within the handshake or idle deadline.
    case timedOut(String)

    public var description: String {
        switch self {
        case .closedLocally: return "closed locally"
        case .closedByPeer: return "closed by peer"
        case .networkError(let text): return "network error: \(text)"
        case .protocolViolation(let text): return "protocol violation: \(text)"
        case .refused(let text): return "refused: \(text)"
        case .timedOut(let text): return "timed out: \(text)"
        }
    }
}

/// The answer of `Transport.send`: whether the frame was taken.
public enum SendResult: Hashable, Sendable {
    /// The frame is queued and will be written in order after every frame queued before it.
    case queued
    /// Queuing it would pass the link's outbound byte limit; the frame was **not** queued.
    /// The delegate is also told (`outboundLimitExceeded`). The engine drops its own queue for
    /// that peer and marks it for catch-up (anti-entropy repairs what was not sent).
    case overLimit
    /// The link is gone (or was never there); the frame was not queued.
    case notConnected
}

/// Receives a transport's events. Calls come from the transport's own thread, one at a time,
/// in the order the events happened on each link; an implementation must not block in them
/// unless the transport's `delegateMayBlock` says it may.
public protocol TransportDelegate: AnyObject, Sendable {
    /// A link finished its handshake; frames may now be sent and will be received.
    func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo)
    /// One whole frame arrived on a connected link (the length prefix already removed). The
    /// bytes are lent for the call only, often straight from the transport's read buffer:
    /// copy what must outlive it.
    func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID)
    /// A `send` was refused because the link's queued outbound bytes would pass the limit.
    func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID)
    /// A link that had been reported by `didConnect` is gone. Called exactly once per link.
    func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason)
    /// An outbound `connect` failed before a handshake completed (no `didConnect` was sent).
    func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason)
    /// Every frame of one read from `connection` was delivered (at least one was): a delegate
    /// that held frames back may now handle them together. Called only by transports whose
    /// `reportsReadEnds` is true; the default does nothing.
    func transport(_ transport: any Transport, didFinishReading connection: ConnectionID)
}

extension TransportDelegate {
    public func transport(_ transport: any Transport, didFinishReading connection: ConnectionID) {}
}

/// A message link between nodes. The replication engine talks to the network only through this
/// protocol, so the same engine runs over libuv (`DecideUV`) and over the seeded simulator.
///
/// Guarantees an implementation gives:
/// - frames on one link arrive whole, in the order they were sent, or the link is reported gone;
/// - a link is reported to the delegate only after its handshake succeeded;
/// - queued outbound bytes per link stay under the configured limit (`send` says `.overLimit`);
/// - after `shutdown` returns, no delegate call is made and every resource is released.
public protocol Transport: AnyObject, Sendable {
    /// Begins delivering events to `delegate`. Call once, before `listen` or `connect`.
    func start(delegate: any TransportDelegate) throws
    /// Accepts links on `address` (`HOST:PORT`; port 0 picks a free one). Returns the bound
    /// address, with the real port.
    func listen(on address: String) throws -> String
    /// Dials `address`; the result arrives as `didConnect` or `didFailToConnect`.
    func connect(to address: String)
    /// Queues one frame for the link. Thread-safe; never blocks on the network.
    func send(_ frame: [UInt8], to connection: ConnectionID) -> SendResult
    /// Queues one frame for the link from bytes lent for the call (the engine encodes its
    /// deltas in scratch memory): the same as `send(_:to:)` of an array of those bytes, which is
    /// what the default does; a transport that copies frames into its own buffer takes them
    /// without the array.
    func send(bytes frame: UnsafeRawBufferPointer, to connection: ConnectionID) -> SendResult
    /// Closes one link; `didDisconnect(.closedLocally)` follows.
    func close(_ connection: ConnectionID)
    /// Bytes queued for the link and not yet written (0 for an unknown link).
    func outboundBytes(for connection: ConnectionID) -> Int
    /// Closes every link and listener and releases every resource; waits until that is done.
    func shutdown()
    /// True when nothing but the delegate runs on the thread that calls it (a simulator or a
    /// test driver): the engine then handles every frame inside the call, deterministically,
    /// even where that waits for the disk. False for an event loop: the engine moves whatever
    /// may wait for the disk onto a queue of its own, so the loop never waits.
    var delegateMayBlock: Bool { get }
    /// True when the transport calls `didFinishReading` after the frames of every read: the
    /// engine may then hold a read's deltas back and apply them together.
    var reportsReadEnds: Bool { get }
}

extension Transport {
    /// Sends an array of the bytes (`send(_:to:)`).
    public func send(bytes frame: UnsafeRawBufferPointer, to connection: ConnectionID) -> SendResult {
        send([UInt8](frame), to: connection)
    }

    /// An event loop's answer: the delegate must not block.
    public var delegateMayBlock: Bool { false }
    /// Unless a transport says otherwise, it does not report the ends of reads.
    public var reportsReadEnds: Bool { false }
}
