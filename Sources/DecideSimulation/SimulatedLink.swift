import Decide

/// One simulated TCP link between two transports (possibly the same one): a dialer side and an
/// acceptor side. Each side owns the frames it sent that are still in flight towards the other.
final class SimulatedLink {
    /// Network-wide number, in creation order; used to iterate links deterministically.
    let id: UInt64
    /// False from the moment either side closed or died; in-flight frames are then dropped.
    var isOpen = true
    /// Index 0: the dialer's side; index 1: the acceptor's side.
    let sides: [LinkSide]

    init(id: UInt64, dialer: LinkSide, acceptor: LinkSide) {
        self.id = id
        sides = [dialer, acceptor]
    }

    func side(_ index: Int) -> LinkSide { sides[index] }
    func peer(of index: Int) -> LinkSide { sides[1 - index] }
}

/// One end of a link as one transport sees it, plus the frames travelling away from it.
final class LinkSide {
    let transport: SimulatedTransport
    let connectionID: ConnectionID
    /// Who is on the other end, as reported in `didConnect`.
    let peer: PeerInfo

    /// Set once this side is due to be told the link ended; the reason it will be told.
    var disconnectReason: DisconnectReason?
    /// True once `didDisconnect` was delivered (or the transport died): never told twice.
    var told = false
    /// An `outboundLimitExceeded` notice is scheduled and not yet delivered.
    var limitNoticePending = false

    /// Wire bytes of original frames from this side in flight (duplicates are the network's,
    /// not the sender's, and do not count against the sender's limit).
    var inFlightBytes = 0
    /// Copies (originals and duplicates) from this side in flight, held ones included.
    var inFlightCopies = 0
    /// Delivery time of the latest frame scheduled from this side, for FIFO order.
    var lastDeliveryMilliseconds: UInt64 = 0
    /// Frames that arrived while the receiver was stalled (or behind such frames), in order.
    var held = HeldFrames()
    /// A drain of `held` is scheduled.
    var drainPending = false
    /// The end of the read this side's latest delivered frames belong to is scheduled: the
    /// frames delivered to it at one instant are one read (`didFinishReading`).
    var readEndPending = false

    init(transport: SimulatedTransport, connectionID: ConnectionID, peer: PeerInfo) {
        self.transport = transport
        self.connectionID = connectionID
        self.peer = peer
    }
}

/// One frame copy on its way.
struct FrameCopy {
    let frame: [UInt8]
    /// True for the original, false for a duplicate (only originals count in `inFlightBytes`).
    let isOriginal: Bool

    var wireBytes: Int { frame.count + SimulatedNetwork.frameHeaderBytes }
}

/// A FIFO of held frame copies (array plus head index, compacted as it drains).
struct HeldFrames {
    private var items: [FrameCopy] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }

    mutating func append(_ copy: FrameCopy) { items.append(copy) }

    mutating func popFirst() -> FrameCopy? {
        guard head < items.count else { return nil }
        let copy = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return copy
    }

    mutating func removeAll() {
        items.removeAll()
        head = 0
    }
}
