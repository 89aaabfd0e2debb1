import CLibUV
import Decide

/// One TCP link on the loop thread: its libuv handles, frame decoder and handshake.
///
/// Owned by `UVReactor.connections` from creation until both handle close callbacks ran, so
/// the unretained pointers in the handles' `data` fields never dangle.
final class UVConnection {
    enum Phase: Equatable {
        /// Outbound TCP connect in progress.
        case connecting
        /// TCP is up, hellos and proofs are being exchanged.
        case handshaking
        /// Reported to the delegate; frames flow.
        case established
        /// Refused: the refusal is written and the write side shut; waiting briefly for EOF.
        case lingering
        /// `uv_close` was called on both handles.
        case closed
    }

    let id: UInt64
    let outbound: Bool
    /// The dialled address (outbound) or the peer's socket address (inbound), for logs.
    var remoteAddress: String
    let tcp: UnsafeMutablePointer<uv_tcp_t>
    let timer: UnsafeMutablePointer<uv_timer_t>
    var phase: Phase
    /// Used on the loop thread only, by `nextPayload`, which calls nothing back: no two accesses
    /// can overlap, so the dynamic exclusivity check of a class property (about 80
    /// instructions per frame read) is left out.
    @exclusivity(unchecked) var decoder = FrameDecoder(maxFrameBytes: WireProtocol.maxHandshakeFrameBytes)
    var handshake: Handshake
    /// Seals and opens every frame once a link with a cluster secret is established (nil before,
    /// and on links without a secret).
    var sealer: LinkSealer?
    var peer: PeerInfo?
    /// `close` was called from a delegate callback: deliver nothing more; the close runs next turn.
    var closeRequested = false
    /// What it holds of the reactor's `ConnectionBudget`, given back when its handles are gone
    /// (`.none` for a connection refused at accept).
    var slot: ConnectionBudget.Slot = .none
    /// Handles not yet reported closed by libuv (0, 1 or 2).
    var openHandles = 0
    private let liveCounter: LiveCounter

    /// Initialises both handles on `loop`; the caller stores the connection before any callback.
    init(id: UInt64, outbound: Bool, remoteAddress: String, loop: UnsafeMutablePointer<uv_loop_t>,
         handshake: Handshake, liveCounter: LiveCounter) {
        self.id = id
        self.outbound = outbound
        self.remoteAddress = remoteAddress
        self.handshake = handshake
        self.liveCounter = liveCounter
        phase = outbound ? .connecting : .handshaking
        tcp = .allocate(capacity: 1)
        timer = .allocate(capacity: 1)
        let tcpStatus = uv_tcp_init(loop, tcp)
        precondition(tcpStatus == 0, "uv_tcp_init failed: \(UVError.text(tcpStatus))")
        let timerStatus = uv_timer_init(loop, timer)
        precondition(timerStatus == 0, "uv_timer_init failed: \(UVError.text(timerStatus))")
        openHandles = 2
        let me = Unmanaged.passUnretained(self).toOpaque()
        tcp.pointee.data = me
        timer.pointee.data = me
        liveCounter.add(1)
    }

    deinit {
        precondition(openHandles == 0, "connection released with open handles")
        tcp.deallocate()
        timer.deallocate()
        liveCounter.add(-1)
    }

    var stream: UnsafeMutablePointer<uv_stream_t> { decide_uv_tcp_as_stream(tcp) }

    /// The connection stored in a handle's `data` (unretained).
    static func from(_ data: UnsafeMutableRawPointer?) -> UVConnection {
        Unmanaged<UVConnection>.fromOpaque(data!).takeUnretainedValue()
    }
}
