import Decide

/// A seeded, in-memory network between `SimulatedTransport`s, driven by a `SimulatedScheduler`.
///
/// Guarantees:
/// - deterministic: with the same scheduler seed and the same calls, every delay, drop,
///   duplicate and delegate call happens identically (all random choices come from the
///   scheduler; nothing depends on hash order, threads or real time);
/// - a perfect network by default (`Faults()`): nothing lost, nothing duplicated, FIFO per link;
/// - faults change at run time through `faults` and act on later sends and deliveries;
/// - partitions drop frames and refuse connects but never close a link: the engine's
///   heartbeats must notice;
/// - every frame is counted exactly once as delivered, dropped (by cause) or in flight
///   (see `Counters`);
/// - bounded memory: in-flight bytes per link side are bounded by `maxOutboundBytes`, events
///   by the scheduler's `maxPendingEvents`.
///
/// Thread-safety: as `SimulatedScheduler` (one thread at a time).
public final class SimulatedNetwork: @unchecked Sendable {
    /// The 4-byte length prefix each frame would carry on TCP; counted in every byte figure.
    public static let frameHeaderBytes = 4

    /// The scheduler every delay and random choice of this network comes from.
    public let scheduler: SimulatedScheduler
    /// The fixed limits.
    public let configuration: Configuration

    private var currentFaults: Faults
    private var currentCounters = Counters()
    /// nodeID → address, for every node ever made (a node keeps its address across restarts).
    private var knownNodes: [String: String] = [:]
    /// address → nodeID that owns it.
    private var addressOwners: [String: String] = [:]
    /// nodeID → the node's transport while it is not dead.
    private var liveTransports: [String: SimulatedTransport] = [:]
    /// address → the live transport listening there.
    private var listeners: [String: SimulatedTransport] = [:]
    /// Nodes whose delegates receive nothing until unstalled. Looked up, never iterated.
    private var stalledReaders: Set<String> = []
    /// Open links by id; iterated in id order only.
    private var openLinks: [UInt64: SimulatedLink] = [:]
    private var nextLinkID: UInt64 = 1

    /// A network on `scheduler`, perfect unless `faults` says otherwise.
    public init(scheduler: SimulatedScheduler, configuration: Configuration = Configuration(),
                faults: Faults = Faults()) {
        configuration.validate()
        faults.validate()
        self.scheduler = scheduler
        self.configuration = configuration
        currentFaults = faults
    }

    // MARK: Nodes

    /// Makes the transport of node `nodeID`, which owns `address` (e.g. "sim://a"). For a
    /// restart, call again with the same id and address once the node's previous transport
    /// crashed or shut down; the old object stays inert. Preconditions: the node has no live
    /// transport, the address belongs to no other node, and a node keeps its address.
    public func makeTransport(nodeID: String, address: String) -> SimulatedTransport {
        confined {
            precondition(!nodeID.isEmpty && !address.isEmpty, "node id and address must not be empty")
            precondition(liveTransports[nodeID] == nil, "node \(nodeID) still has a live transport: crash or shut it down first")
            precondition(addressOwners[address, default: nodeID] == nodeID, "address \(address) belongs to another node")
            precondition(knownNodes[nodeID, default: address] == address, "node \(nodeID) must keep its address \(knownNodes[nodeID] ?? "")")
            knownNodes[nodeID] = address
            addressOwners[address] = nodeID
            let transport = SimulatedTransport(nodeID: nodeID, address: address, network: self)
            liveTransports[nodeID] = transport
            return transport
        }
    }

    /// Kills node `nodeID` at once, as `kill -9` would: its listener is gone, its links vanish
    /// and their in-flight frames are dropped, its peers are told
    /// `.networkError("connection reset by peer")` after a link delay (later across a
    /// partition), and its transport never calls its delegate again. Crashing a node that has no
    /// live transport does nothing. Precondition: the node was made by this network.
    public func crash(_ nodeID: String) {
        confined {
            precondition(knownNodes[nodeID] != nil, "unknown node \(nodeID)")
            guard let transport = liveTransports[nodeID] else { return }
            kill(transport, peerReason: .networkError("connection reset by peer"))
        }
    }

    // MARK: Faults

    /// The faults in force. Setting it affects later sends and deliveries only.
    public var faults: Faults {
        get { confined { currentFaults } }
        set {
            newValue.validate()
            confined { currentFaults = newValue }
        }
    }

    /// `faults.partition(a, from: b)`.
    public func partition(_ a: String, from b: String) {
        confined { currentFaults.partition(a, from: b) }
    }

    /// `faults.partition(groups:)`.
    public func partition(groups: [[String]]) {
        confined { currentFaults.partition(groups: groups) }
    }

    /// Cuts `nodeID` off from every other node this network has made so far.
    public func isolate(_ nodeID: String) {
        confined {
            for other in knownNodes.keys.sorted() where other != nodeID {
                currentFaults.partition(nodeID, from: other)
            }
        }
    }

    /// `faults.heal()`: every partition is gone. Frames already dropped stay dropped.
    public func heal() {
        confined { currentFaults.heal() }
    }

    /// Models a peer that stops reading: frames to `nodeID` arrive nowhere and stay in flight,
    /// so their senders reach `maxOutboundBytes`. Survives the node's restart until `unstallReader`.
    public func stallReader(_ nodeID: String) {
        confined { _ = stalledReaders.insert(nodeID) }
    }

    /// The node reads again: frames held for it are delivered in order after a link delay.
    public func unstallReader(_ nodeID: String) {
        confined {
            guard stalledReaders.remove(nodeID) != nil else { return }
            for link in sortedOpenLinks() {
                for index in 0..<2 where link.peer(of: index).transport.nodeID == nodeID {
                    scheduleDrain(link, from: index)
                }
            }
        }
    }

    // MARK: Inspection

    /// What the network did so far.
    public var counters: Counters { confined { currentCounters } }

    /// Wire bytes in flight from node `from` to node `to`, over all their open links.
    public func inFlightBytes(from: String, to: String) -> Int {
        confined {
            sortedOpenLinks().reduce(0) { total, link in
                var total = total
                for index in 0..<2 where link.side(index).transport.nodeID == from
                    && link.peer(of: index).transport.nodeID == to {
                    total += link.side(index).inFlightBytes
                }
                return total
            }
        }
    }

    /// Frame copies in flight on every open link (held ones included).
    public var framesInFlight: Int {
        confined { sortedOpenLinks().reduce(0) { $0 + $1.sides[0].inFlightCopies + $1.sides[1].inFlightCopies } }
    }

    /// Links currently open (neither side closed nor crashed).
    public var openLinkCount: Int { confined { openLinks.count } }

    // MARK: Transport operations

    func start(_ transport: SimulatedTransport, delegate: any TransportDelegate) throws {
        try confined {
            switch transport.lifecycle {
            case .idle: break
            case .running: throw SimulatedTransportError.alreadyStarted
            case .dead: throw SimulatedTransportError.notRunning
            }
            transport.delegate = delegate
            transport.lifecycle = .running
        }
    }

    func listen(_ transport: SimulatedTransport, on address: String) throws -> String {
        try confined {
            guard transport.lifecycle == .running else { throw SimulatedTransportError.notRunning }
            guard address == transport.address else {
                throw SimulatedTransportError.addressNotOwned(requested: address, owned: transport.address)
            }
            if !transport.isListening {
                precondition(listeners[address] == nil, "two live transports listen on \(address)")
                listeners[address] = transport
                transport.isListening = true
            }
            return address
        }
    }

    func connect(_ dialer: SimulatedTransport, to address: String) {
        confined {
            precondition(dialer.lifecycle != .idle, "connect before start")
            guard dialer.lifecycle == .running else { return }
            scheduler.schedule(atMilliseconds: scheduler.deadline(afterMilliseconds: drawDelay())) { [weak self] in
                self?.handshake(dialer: dialer, address: address)
            }
        }
    }

    func send(_ frame: [UInt8], from sender: SimulatedTransport, on connection: ConnectionID) -> SendResult {
        precondition(!frame.isEmpty && frame.count <= configuration.maxFrameBytes, "frame must be 1...maxFrameBytes bytes")
        precondition(frame[0] < 0xF0, "message types 0xF0...0xFF are the transport's")
        return confined {
            guard sender.lifecycle == .running, let ref = sender.links[connection] else { return .notConnected }
            let link = ref.link
            let side = link.side(ref.side)
            let wireBytes = frame.count + Self.frameHeaderBytes
            guard link.isOpen else {
                // Half-open: the peer is gone but this side has not been told. The bytes go nowhere.
                currentCounters.framesSent += 1
                currentCounters.bytesSent += UInt64(wireBytes)
                currentCounters.framesDroppedByClosedLink += 1
                return .queued
            }
            guard side.inFlightBytes + wireBytes <= configuration.maxOutboundBytes else {
                currentCounters.sendsOverLimit += 1
                if !side.limitNoticePending {
                    side.limitNoticePending = true
                    scheduler.schedule(atMilliseconds: scheduler.nowMilliseconds) { [weak self] in
                        self?.limitNotice(link, index: ref.side)
                    }
                }
                return .overLimit
            }
            currentCounters.framesSent += 1
            currentCounters.bytesSent += UInt64(wireBytes)
            if currentFaults.lossProbability > 0 && scheduler.randomChance(currentFaults.lossProbability) {
                currentCounters.framesDroppedByLoss += 1
                return .queued
            }
            dispatch(FrameCopy(frame: frame, isOriginal: true), on: link, from: ref.side)
            if currentFaults.duplicateProbability > 0 && scheduler.randomChance(currentFaults.duplicateProbability) {
                currentCounters.framesDuplicated += 1
                dispatch(FrameCopy(frame: frame, isOriginal: false), on: link, from: ref.side)
            }
            return .queued
        }
    }

    func close(_ connection: ConnectionID, of transport: SimulatedTransport) {
        confined {
            guard transport.lifecycle == .running, let ref = transport.links.removeValue(forKey: connection) else { return }
            let link = ref.link
            let side = link.side(ref.side)
            side.disconnectReason = .closedLocally
            scheduler.schedule(atMilliseconds: scheduler.nowMilliseconds) { [weak self] in
                self?.disconnectNotice(link, index: ref.side)
            }
            if link.isOpen { closeLink(link, peerReason: .closedByPeer) }
        }
    }

    func shutdown(_ transport: SimulatedTransport) {
        confined {
            guard transport.lifecycle != .dead else { return }
            kill(transport, peerReason: .closedByPeer)
        }
    }

    // MARK: Internal

    private func confined<T>(_ body: () throws -> T) rethrows -> T {
        try scheduler.confinement.run(body)
    }

    private func sortedOpenLinks() -> [SimulatedLink] {
        openLinks.keys.sorted().map { openLinks[$0]! }
    }

    private func drawDelay() -> UInt64 {
        scheduler.randomUInt64(in: currentFaults.delayMilliseconds)
    }

    private func isStalled(_ nodeID: String) -> Bool { stalledReaders.contains(nodeID) }

    /// The transport is dead from now on: no listener, no links, no delegate, no callbacks.
    private func kill(_ transport: SimulatedTransport, peerReason: DisconnectReason) {
        transport.lifecycle = .dead
        transport.delegate = nil
        if transport.isListening {
            listeners[transport.address] = nil
            transport.isListening = false
        }
        if liveTransports[transport.nodeID] === transport { liveTransports[transport.nodeID] = nil }
        let connections = transport.links.keys.sorted { $0.rawValue < $1.rawValue }
        for connection in connections {
            let ref = transport.links.removeValue(forKey: connection)!
            let side = ref.link.side(ref.side)
            side.told = true
            if ref.link.isOpen { closeLink(ref.link, peerReason: peerReason) }
        }
        precondition(transport.links.isEmpty)
    }

    private func handshake(dialer: SimulatedTransport, address: String) {
        guard dialer.lifecycle == .running else { return }
        guard let acceptor = listeners[address], acceptor.lifecycle == .running else {
            currentCounters.connectsFailed += 1
            dialer.notify { $0.transport($1, didFailToConnect: address, reason: .networkError("connection refused")) }
            return
        }
        if currentFaults.isPartitioned(dialer.nodeID, acceptor.nodeID) {
            let timeout = scheduler.deadline(afterMilliseconds: configuration.connectTimeoutMilliseconds)
            scheduler.schedule(atMilliseconds: timeout) { [weak self] in
                guard let self, dialer.lifecycle == .running else { return }
                currentCounters.connectsFailed += 1
                dialer.notify { $0.transport($1, didFailToConnect: address, reason: .timedOut("connect to \(address) timed out")) }
            }
            return
        }
        let dialerSide = LinkSide(transport: dialer, connectionID: dialer.takeConnectionID(),
                                  peer: PeerInfo(nodeID: acceptor.nodeID, listenAddress: acceptor.address, outbound: true,
                                                 dialedAddress: address))
        let acceptorSide = LinkSide(transport: acceptor, connectionID: acceptor.takeConnectionID(),
                                    peer: PeerInfo(nodeID: dialer.nodeID,
                                                   listenAddress: dialer.isListening ? dialer.address : "",
                                                   outbound: false))
        let link = SimulatedLink(id: nextLinkID, dialer: dialerSide, acceptor: acceptorSide)
        nextLinkID += 1
        openLinks[link.id] = link
        dialer.links[dialerSide.connectionID] = LinkRef(link: link, side: 0)
        acceptor.links[acceptorSide.connectionID] = LinkRef(link: link, side: 1)
        currentCounters.connectsSucceeded += 1
        acceptor.notify { $0.transport($1, didConnect: acceptorSide.connectionID, peer: acceptorSide.peer) }
        dialer.notify { $0.transport($1, didConnect: dialerSide.connectionID, peer: dialerSide.peer) }
    }

    /// Puts one copy in flight from side `index` of `link`.
    private func dispatch(_ copy: FrameCopy, on link: SimulatedLink, from index: Int) {
        let side = link.side(index)
        var time = scheduler.deadline(afterMilliseconds: drawDelay())
        if !currentFaults.reorder { time = max(time, side.lastDeliveryMilliseconds) }
        side.lastDeliveryMilliseconds = max(side.lastDeliveryMilliseconds, time)
        side.inFlightCopies += 1
        if copy.isOriginal { side.inFlightBytes += copy.wireBytes }
        scheduler.schedule(atMilliseconds: time) { [weak self] in
            self?.arrive(copy, on: link, from: index)
        }
    }

    /// A copy reaches the receiver's side of the link.
    private func arrive(_ copy: FrameCopy, on link: SimulatedLink, from index: Int) {
        guard link.isOpen else { return }                   // counted when the link closed
        let side = link.side(index)
        let receiver = link.peer(of: index).transport
        if isStalled(receiver.nodeID) || !side.held.isEmpty {
            side.held.append(copy)                          // keeps its place behind held frames
            if !isStalled(receiver.nodeID) { scheduleDrain(link, from: index) }
            return
        }
        deliver(copy, on: link, from: index)
    }

    private func scheduleDrain(_ link: SimulatedLink, from index: Int) {
        let side = link.side(index)
        guard !side.held.isEmpty, !side.drainPending else { return }
        side.drainPending = true
        scheduler.schedule(atMilliseconds: scheduler.deadline(afterMilliseconds: drawDelay())) { [weak self] in
            self?.drain(link, from: index)
        }
    }

    /// Delivers held copies in order while the link is open and the receiver reads.
    private func drain(_ link: SimulatedLink, from index: Int) {
        let side = link.side(index)
        side.drainPending = false
        let receiver = link.peer(of: index).transport
        while link.isOpen, !isStalled(receiver.nodeID), let copy = side.held.popFirst() {
            deliver(copy, on: link, from: index)
        }
    }

    /// The copy leaves flight: dropped at a partition or handed to the receiver's delegate.
    private func deliver(_ copy: FrameCopy, on link: SimulatedLink, from index: Int) {
        let side = link.side(index)
        let receiverSide = link.peer(of: index)
        side.inFlightCopies -= 1
        if copy.isOriginal { side.inFlightBytes -= copy.wireBytes }
        precondition(side.inFlightCopies >= 0 && side.inFlightBytes >= 0, "in-flight accounting went negative")
        if currentFaults.isPartitioned(side.transport.nodeID, receiverSide.transport.nodeID) {
            currentCounters.framesDroppedByPartition += 1
            return
        }
        currentCounters.framesDelivered += 1
        currentCounters.bytesDelivered += UInt64(copy.wireBytes)
        let connection = receiverSide.connectionID
        copy.frame.withUnsafeBytes { frame in
            receiverSide.transport.notify { $0.transport($1, didReceive: frame, from: connection) }
        }
        // The frames delivered on this link at this instant are one read: its end is reported
        // after them, still at this instant (events of one instant run in the order scheduled).
        if !receiverSide.readEndPending {
            receiverSide.readEndPending = true
            scheduler.schedule(atMilliseconds: scheduler.nowMilliseconds) {
                receiverSide.readEndPending = false
                receiverSide.transport.notify { $0.transport($1, didFinishReading: connection) }
            }
        }
    }

    /// Ends an open link: in-flight frames dropped; each side not already due a notice (and
    /// still alive) is told `peerReason` after a link delay.
    private func closeLink(_ link: SimulatedLink, peerReason: DisconnectReason) {
        precondition(link.isOpen)
        link.isOpen = false
        openLinks[link.id] = nil
        for index in 0..<2 {
            let side = link.side(index)
            currentCounters.framesDroppedByClosedLink += UInt64(side.inFlightCopies)
            side.inFlightCopies = 0
            side.inFlightBytes = 0
            side.held.removeAll()
            guard side.disconnectReason == nil, !side.told, side.transport.lifecycle == .running else { continue }
            side.disconnectReason = peerReason
            scheduler.schedule(atMilliseconds: scheduler.deadline(afterMilliseconds: drawDelay())) { [weak self] in
                self?.disconnectNotice(link, index: index)
            }
        }
    }

    /// Tells side `index` its link is gone, once; a peer's close waits while a partition is between.
    private func disconnectNotice(_ link: SimulatedLink, index: Int) {
        let side = link.side(index)
        guard !side.told, side.transport.lifecycle == .running, let reason = side.disconnectReason else { return }
        if reason != .closedLocally,
           currentFaults.isPartitioned(side.transport.nodeID, link.peer(of: index).transport.nodeID) {
            let retry = scheduler.deadline(afterMilliseconds: configuration.closeRetryMilliseconds)
            scheduler.schedule(atMilliseconds: retry) { [weak self] in self?.disconnectNotice(link, index: index) }
            return
        }
        side.told = true
        if let ref = side.transport.links[side.connectionID], ref.link === link {
            side.transport.links[side.connectionID] = nil
        }
        let connection = side.connectionID
        side.transport.notify { $0.transport($1, didDisconnect: connection, reason: reason) }
    }

    private func limitNotice(_ link: SimulatedLink, index: Int) {
        let side = link.side(index)
        side.limitNoticePending = false
        guard !side.told, side.transport.links[side.connectionID] != nil else { return }
        let connection = side.connectionID
        side.transport.notify { $0.transport($1, outboundLimitExceeded: connection) }
    }
}
