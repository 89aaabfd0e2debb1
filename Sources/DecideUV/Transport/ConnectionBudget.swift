// Pure: no libuv, no Foundation, no clock.

/// Who may hold one of the transport's connection slots: the admission rules as a value, asked
/// by `UVReactor` before it keeps an accepted socket or starts a dial, and told when a
/// connection authenticates and when its handles are gone.
///
/// Guarantees, for the limits it was made with (`UVTransport.Configuration`):
/// - connections of both directions, in any phase, never pass `maxConnections`;
/// - inbound connections, in any phase, never pass `maxConnections - reservedOutboundConnections`:
///   whoever connects, at least `reservedOutboundConnections` slots stay for this node's own dials;
/// - inbound connections not yet authenticated (handshaking, or refused and lingering before
///   that) never pass `maxInboundHandshakes` in all, nor `maxInboundHandshakesPerAddress` from
///   one source address, so strangers on one address cannot take the handshakes of peers on
///   others;
/// - it holds at most `maxInboundHandshakes` addresses: an address is dropped with its last
///   unauthenticated connection.
struct ConnectionBudget {
    /// What a connection holds; `release` gives it back.
    enum Slot: Equatable {
        /// Nothing: not admitted, or released.
        case none
        /// One of this node's dials, in any phase.
        case outbound
        /// An inbound connection from `address` that has not authenticated (yet, or ever).
        case inboundHandshake(address: String)
        /// An inbound connection that authenticated: a link.
        case inboundLink
    }

    /// Why a connection was not admitted, most specific first.
    enum Refusal: Error, Equatable, Sendable {
        /// `maxInboundHandshakesPerAddress` unauthenticated connections from this address already.
        case addressHandshakesFull
        /// `maxInboundHandshakes` unauthenticated inbound connections already.
        case handshakesFull
        /// Inbound connections hold every slot but the ones reserved for this node's dials.
        case inboundShareFull
        /// Every one of `maxConnections` slots is taken (only a dial is refused so).
        case connectionsFull
    }

    let maxConnections: Int
    let reservedOutboundConnections: Int
    let maxInboundHandshakes: Int
    let maxInboundHandshakesPerAddress: Int
    /// Inbound connections admitted and not released, authenticated or not.
    private(set) var inbound = 0
    /// Dials admitted and not released.
    private(set) var outbound = 0
    /// Inbound connections admitted that have not authenticated.
    private(set) var inboundHandshakes = 0
    /// `inboundHandshakes` by source address; only addresses with at least one.
    private(set) var inboundHandshakesByAddress: [String: Int] = [:]

    init(maxConnections: Int, reservedOutboundConnections: Int, maxInboundHandshakes: Int,
         maxInboundHandshakesPerAddress: Int) {
        precondition(reservedOutboundConnections >= 0 && reservedOutboundConnections < maxConnections)
        precondition(maxInboundHandshakes >= 1 && maxInboundHandshakesPerAddress >= 1)
        self.maxConnections = maxConnections
        self.reservedOutboundConnections = reservedOutboundConnections
        self.maxInboundHandshakes = maxInboundHandshakes
        self.maxInboundHandshakesPerAddress = maxInboundHandshakesPerAddress
    }

    /// The slots inbound connections may hold at most.
    var inboundShare: Int { maxConnections - reservedOutboundConnections }

    /// Admits an inbound connection from `address` (its source host, without the port), or says
    /// why not.
    mutating func admitInbound(from address: String) -> Result<Slot, Refusal> {
        if inboundHandshakesByAddress[address, default: 0] >= maxInboundHandshakesPerAddress { return .failure(.addressHandshakesFull) }
        if inboundHandshakes >= maxInboundHandshakes { return .failure(.handshakesFull) }
        if inbound >= inboundShare || inbound + outbound >= maxConnections { return .failure(.inboundShareFull) }
        inbound += 1
        inboundHandshakes += 1
        inboundHandshakesByAddress[address, default: 0] += 1
        return .success(.inboundHandshake(address: address))
    }

    /// Admits one of this node's dials, or says why not. Inbound connections can never take the
    /// last `reservedOutboundConnections` slots, so this fails only when dials themselves hold them.
    mutating func admitOutbound() -> Result<Slot, Refusal> {
        guard inbound + outbound < maxConnections else { return .failure(.connectionsFull) }
        outbound += 1
        return .success(.outbound)
    }

    /// The inbound connection holding `slot` authenticated: its handshake's share is given back,
    /// its inbound slot kept.
    mutating func authenticated(_ slot: inout Slot) {
        guard case .inboundHandshake(let address) = slot else { return }
        endHandshake(from: address)
        slot = .inboundLink
    }

    /// The connection holding `slot` is gone: everything it held is given back, once.
    mutating func release(_ slot: inout Slot) {
        switch slot {
        case .none: return
        case .outbound: outbound -= 1
        case .inboundHandshake(let address):
            endHandshake(from: address)
            inbound -= 1
        case .inboundLink: inbound -= 1
        }
        slot = .none
    }

    private mutating func endHandshake(from address: String) {
        inboundHandshakes -= 1
        let left = inboundHandshakesByAddress[address, default: 1] - 1
        inboundHandshakesByAddress[address] = left > 0 ? left : nil
    }
}
