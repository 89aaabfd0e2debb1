import CLibUV
import Decide
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Everything the transport does on its loop thread: listeners, connections, handshakes,
/// reads, batched writes, refusals and shutdown. Every method runs on the loop thread only
/// (the transport hands work over through `UVEventLoop.execute`).
final class UVReactor: @unchecked Sendable {
    static let readBufferBytes = UVEventLoop.defaultReadBufferBytes
    /// How long a refused link waits for the peer's EOF after sending its refusal.
    static let lingerMilliseconds: UInt64 = 1_000

    let configuration: UVTransport.Configuration
    let queues: OutboundQueues
    var logger: Logger
    weak var transport: UVTransport?
    var delegate: (any TransportDelegate)?
    private(set) var eventLoop: UVEventLoop!
    var loop: UnsafeMutablePointer<uv_loop_t> { eventLoop.loop }

    private(set) var connections: [UInt64: UVConnection] = [:]
    private var listeners: [UVListener] = []
    private var resolves: [ObjectIdentifier: PendingResolve] = [:]
    private var nextID: UInt64 = 1
    private var stopping = false
    /// The address this node advertises in its hellos (its first listener's), or "".
    private var advertisedAddress = ""
    /// The cluster secrets new handshakes accept, the one they prove first (`updateKeyring`).
    private var keyring: [[UInt8]]
    /// One read buffer for every connection: libuv reads into it and `onRead` consumes it at once.
    private let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: readBufferBytes, alignment: 16)

    /// Who may hold a connection slot: inbound handshakes in all and per address, inbound
    /// connections, this node's dials (`ConnectionBudget`).
    private var budget: ConnectionBudget
    /// Which refusals of inbound connections get a line of their own, and how many there were.
    private var refusalLog: RefusalLog
    /// Logs the counts of refusals `refusalLog` only counted; made on the loop thread when first
    /// needed, closed by `shutdownAll`, freed by `deinit`.
    private var refusalTimer: UnsafeMutablePointer<uv_timer_t>?
    /// When `refusalTimer` is set to fire (loop milliseconds), nil when it is not.
    private var refusalTimerDue: UInt64?

    let liveConnections = LiveCounter()
    let liveBatches = LiveCounter()
    let liveListeners = LiveCounter()
    /// When `flush` writes (loop thread only).
    private var pacing: FlushPacing

    init(configuration: UVTransport.Configuration) throws(UVTransportError) {
        self.configuration = configuration
        queues = OutboundQueues(maxOutboundBytes: configuration.maxOutboundBytes)
        pacing = FlushPacing(coalescingMicroseconds: configuration.flushCoalescingMicroseconds)
        keyring = configuration.keyring
        budget = ConnectionBudget(maxConnections: configuration.maxConnections,
                                  reservedOutboundConnections: configuration.reservedOutboundConnections,
                                  maxInboundHandshakes: configuration.maxInboundHandshakes,
                                  maxInboundHandshakesPerAddress: configuration.maxInboundHandshakesPerAddress)
        refusalLog = RefusalLog(intervalMilliseconds: configuration.refusalLogIntervalMilliseconds)
        logger = configuration.logger
        logger[metadataKey: "node"] = "\(configuration.nodeID)"
        eventLoop = try UVEventLoop(afterTasks: { [unowned self] in flush() })
    }

    deinit {
        readBuffer.deallocate()
        refusalTimer?.deallocate()
    }

    // MARK: Listening

    /// Binds and listens; returns the bound address (real port).
    func listen(on address: SocketAddress) throws(UVTransportError) -> String {
        precondition(!stopping, "listen after shutdown began")
        let listener = UVListener(loop: loop, liveCounter: liveListeners)
        var status = address.withSockaddr { uv_tcp_bind(listener.tcp, $0, 0) }
        if status == 0 {
            status = uv_listen(decide_uv_tcp_as_stream(listener.tcp), 128) { server, status in
                let listener = UVListener.from(server!.pointee.data)
                let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(server!.pointee.loop)).takeUnretainedValue()
                reactor.accept(on: listener, status: status)
            }
        }
        guard status == 0 else {
            listener.close()
            throw .system("cannot listen on \(address): \(UVError.text(status))")
        }
        var bound = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let nameStatus = uv_tcp_getsockname(listener.tcp, decide_sockaddr_storage_as_mutable_sockaddr(&bound), &length)
        precondition(nameStatus == 0, "uv_tcp_getsockname failed: \(UVError.text(nameStatus))")
        listener.boundAddress = withUnsafePointer(to: &bound) { SocketAddress(decide_sockaddr_storage_as_sockaddr($0))!.description }
        listeners.append(listener)
        if advertisedAddress.isEmpty { advertisedAddress = listener.boundAddress }
        return listener.boundAddress
    }

    private func accept(on listener: UVListener, status: Int32) {
        guard status == 0 else {
            logRefusal(.acceptFailed, "accept failed") { ["listen": "\(listener.boundAddress)", "error": "\(UVError.text(status))"] }
            return
        }
        guard !stopping, !listener.closing else { return }
        let connection = makeConnection(outbound: false, remoteAddress: "?")
        let acceptStatus = uv_accept(decide_uv_tcp_as_stream(listener.tcp), connection.stream)
        guard acceptStatus == 0 else {
            logRefusal(.acceptFailed, "accept failed") { ["listen": "\(listener.boundAddress)", "error": "\(UVError.text(acceptStatus))"] }
            closeHandles(connection)
            return
        }
        connection.remoteAddress = peerName(connection)
        switch budget.admitInbound(from: HostPort(connection.remoteAddress)?.host ?? connection.remoteAddress) {
        case .success(let slot):
            connection.slot = slot
            beginHandshake(connection)
        case .failure(let refusal):
            shed(connection, refusal)
        }
    }

    /// Turns away an inbound connection the budget did not admit, at once: a refusal the kernel
    /// takes now or never (a few bytes to a fresh socket), then both handles close. No linger,
    /// no timer, no slot held, and a line only as `logRefusal` allows: a flood of connections
    /// costs the loop an accept and a close each.
    private func shed(_ connection: UVConnection, _ refusal: ConnectionBudget.Refusal) {
        let kind: RefusalLog.Kind
        let text: String
        switch refusal {
        case .addressHandshakesFull:
            kind = .tooManyFromAddress
            text = "too many handshakes in progress from this address (\(configuration.maxInboundHandshakesPerAddress))"
        case .handshakesFull:
            kind = .tooManyHandshakes
            text = "too many handshakes in progress (\(configuration.maxInboundHandshakes))"
        case .inboundShareFull, .connectionsFull:
            kind = .tooManyConnections
            text = "too many connections (\(budget.inboundShare) inbound of \(configuration.maxConnections))"
        }
        var frame = WireProtocol.frame(HandshakeMessage.refusal(Refusal(code: .tooManyConnections, reason: text)).encoded())
        frame.withUnsafeMutableBytes { raw in
            var buffer = uv_buf_init(raw.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(raw.count))
            _ = uv_try_write(connection.stream, &buffer, 1)
        }
        logRefusal(kind, "link refused") {
            ["conn": "\(connection.id)", "address": "\(connection.remoteAddress)", "reason": "\(DisconnectReason.refused(text))"]
        }
        closeHandles(connection)
    }

    // MARK: Refusal lines

    /// Logs one refusal of an inbound connection, unless a line of its kind went out less than
    /// `refusalLogIntervalMilliseconds` ago: then it is counted, and the count logged when the
    /// interval has passed (`RefusalLog`).
    private func logRefusal(_ kind: RefusalLog.Kind, _ message: Logger.Message, _ metadata: () -> Logger.Metadata) {
        switch refusalLog.note(kind, atMilliseconds: uv_now(loop)) {
        case .log(let earlier, let window):
            var all = metadata()
            if earlier > 0 {
                all["also-refused"] = "\(earlier)"
                all["in-last-ms"] = "\(window)"
            }
            logger.warning(message, metadata: all)
        case .count:
            armRefusalTimer()
        }
    }

    private func logRefusalCount(_ summary: RefusalLog.Summary) {
        logger.warning("connections refused", metadata: [
            "count": "\(summary.count)", "in-last-ms": "\(summary.windowMilliseconds)", "reason": "\(summary.kind)",
        ])
    }

    /// Sets `refusalTimer` to fire when the next count falls due.
    private func armRefusalTimer() {
        guard !stopping, let due = refusalLog.nextDueMilliseconds, refusalTimerDue != due else { return }
        let timer: UnsafeMutablePointer<uv_timer_t>
        if let existing = refusalTimer {
            timer = existing
        } else {
            timer = .allocate(capacity: 1)
            let status = uv_timer_init(loop, timer)
            precondition(status == 0, "uv_timer_init failed: \(UVError.text(status))")
            refusalTimer = timer
        }
        let now = uv_now(loop)
        refusalTimerDue = due
        uv_timer_start(timer, { timer in
            let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(timer!.pointee.loop)).takeUnretainedValue()
            reactor.refusalTimerFired()
        }, due > now ? due - now : 0, 0)
    }

    private func refusalTimerFired() {
        refusalTimerDue = nil
        for summary in refusalLog.due(atMilliseconds: uv_now(loop)) { logRefusalCount(summary) }
        armRefusalTimer()
    }

    /// Refusals of inbound connections so far, by kind (logged or only counted).
    func refusalTotals() -> [RefusalLog.Kind: UInt64] {
        Dictionary(uniqueKeysWithValues: RefusalLog.Kind.allCases.map { ($0, refusalLog.total($0)) })
    }

    // MARK: Connecting

    /// Dials `text`: literal addresses at once, names after an asynchronous lookup.
    func connect(to text: String) {
        guard !stopping else { return }
        guard let hostPort = HostPort(text) else {
            failConnect(text, .networkError("invalid address '\(text)': expected HOST:PORT ([v6]:PORT for IPv6)"))
            return
        }
        if let literal = SocketAddress(literal: hostPort) {
            startConnect(to: literal, label: text)
            return
        }
        let pending = PendingResolve(label: text)
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        pending.request.pointee.data = Unmanaged.passUnretained(pending).toOpaque()
        let status = uv_getaddrinfo(loop, pending.request, { request, status, result in
            let pending = Unmanaged<PendingResolve>.fromOpaque(request!.pointee.data).takeUnretainedValue()
            let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(request!.pointee.loop)).takeUnretainedValue()
            var address: SocketAddress?
            var cursor = result
            while let entry = cursor, address == nil {
                if let raw = entry.pointee.ai_addr { address = SocketAddress(raw) }
                cursor = entry.pointee.ai_next
            }
            if let result { uv_freeaddrinfo(result) }
            reactor.resolved(pending, status: status, address: address)
        }, hostPort.host, String(hostPort.port), &hints)
        guard status == 0 else {
            failConnect(text, .networkError("cannot resolve \(hostPort.host): \(UVError.text(status))"))
            return
        }
        resolves[ObjectIdentifier(pending)] = pending
    }

    private func resolved(_ pending: PendingResolve, status: Int32, address: SocketAddress?) {
        resolves.removeValue(forKey: ObjectIdentifier(pending))
        if stopping {
            failConnect(pending.label, .closedLocally)
        } else if status != 0 {
            failConnect(pending.label, .networkError("cannot resolve \(pending.label): \(UVError.text(status))"))
        } else if let address {
            startConnect(to: address, label: pending.label)
        } else {
            failConnect(pending.label, .networkError("cannot resolve \(pending.label): no IPv4 or IPv6 address"))
        }
    }

    private func startConnect(to address: SocketAddress, label: String) {
        guard case .success(let slot) = budget.admitOutbound() else {
            failConnect(label, .networkError("too many connections (\(configuration.maxConnections), \(budget.outbound) of them dials)"))
            return
        }
        let connection = makeConnection(outbound: true, remoteAddress: label)
        connection.slot = slot
        startHandshakeTimer(connection)
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        request.pointee.data = Unmanaged.passUnretained(connection).toOpaque()
        let status = address.withSockaddr { sockaddr in
            uv_tcp_connect(request, connection.tcp, sockaddr) { request, status in
                let connection = UVConnection.from(request!.pointee.data)
                let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(request!.pointee.handle.pointee.loop)).takeUnretainedValue()
                request!.deallocate()
                reactor.connected(connection, status: status)
            }
        }
        if status != 0 {
            request.deallocate()
            close(connection, reason: .networkError("connect to \(label): \(UVError.text(status))"), refusal: nil)
        }
    }

    private func connected(_ connection: UVConnection, status: Int32) {
        guard connection.phase == .connecting else { return }  // closed meanwhile (timeout, shutdown)
        guard status == 0 else {
            close(connection, reason: .networkError("connect to \(connection.remoteAddress): \(UVError.text(status))"), refusal: nil)
            return
        }
        connection.phase = .handshaking
        beginHandshake(connection)
    }

    private func failConnect(_ label: String, _ reason: DisconnectReason) {
        logger.warning("connect failed", metadata: ["peer": "\(label)", "reason": "\(reason)"])
        if let transport, let delegate { delegate.transport(transport, didFailToConnect: label, reason: reason) }
    }

    // MARK: Connections

    private func makeConnection(outbound: Bool, remoteAddress: String) -> UVConnection {
        let id = nextID
        nextID += 1
        // Eight bytes a draw of the system's generator (one getrandom call each), not one.
        var random = SystemRandomNumberGenerator()
        var nonce: [UInt8] = []
        nonce.reserveCapacity(WireProtocol.nonceBytes)
        while nonce.count < WireProtocol.nonceBytes { withUnsafeBytes(of: random.next()) { nonce.append(contentsOf: $0) } }
        let handshake = Handshake(clusterName: configuration.clusterName, nodeID: configuration.nodeID,
                                  listenAddress: advertisedAddress, secrets: keyring,
                                  outbound: outbound, nonce: nonce, versions: configuration.protocolVersions)
        let connection = UVConnection(id: id, outbound: outbound, remoteAddress: remoteAddress, loop: loop,
                                      handshake: handshake, liveCounter: liveConnections)
        connections[id] = connection
        return connection
    }

    private func beginHandshake(_ connection: UVConnection) {
        _ = uv_tcp_nodelay(connection.tcp, 1)
        if configuration.keepaliveSeconds > 0 {
            _ = uv_tcp_keepalive(connection.tcp, 1, configuration.keepaliveSeconds)
        }
        if !connection.outbound { startHandshakeTimer(connection) }
        let status = startReading(connection)
        guard status == 0 else {
            close(connection, reason: .networkError("read start: \(UVError.text(status))"), refusal: nil)
            return
        }
        writeDirect(connection, [connection.handshake.helloPayload])
    }

    private func startHandshakeTimer(_ connection: UVConnection) {
        uv_timer_start(connection.timer, { timer in
            let connection = UVConnection.from(timer!.pointee.data)
            let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(timer!.pointee.loop)).takeUnretainedValue()
            reactor.timerFired(connection)
        }, configuration.handshakeTimeoutMilliseconds, 0)
    }

    private func timerFired(_ connection: UVConnection) {
        switch connection.phase {
        case .connecting:
            close(connection, reason: .timedOut("no connection within \(configuration.handshakeTimeoutMilliseconds) ms"), refusal: nil)
        case .handshaking:
            let text = "no handshake within \(configuration.handshakeTimeoutMilliseconds) ms"
            close(connection, reason: .timedOut(text), refusal: Refusal(code: .handshakeTimeout, reason: text))
        case .lingering:
            closeHandles(connection)
        case .established, .closed:
            break
        }
    }

    private func startReading(_ connection: UVConnection) -> Int32 {
        uv_read_start(connection.stream, { handle, _, buffer in
            let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(handle!.pointee.loop)).takeUnretainedValue()
            buffer!.pointee = uv_buf_init(reactor.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(UVReactor.readBufferBytes))
        }, { stream, count, _ in
            let connection = UVConnection.from(stream!.pointee.data)
            let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(stream!.pointee.loop)).takeUnretainedValue()
            reactor.onRead(connection, count: count)
        })
    }

    private func onRead(_ connection: UVConnection, count: Int) {
        if count == 0 { return }  // EAGAIN
        if count < 0 {
            let status = Int32(count)
            switch connection.phase {
            case .lingering:
                closeHandles(connection)
            case .established where status == UV_EOF.rawValue:
                if connection.decoder.hasPartialFrame {
                    close(connection, reason: .protocolViolation("truncated frame: the peer closed mid-frame"), refusal: nil)
                } else {
                    close(connection, reason: .closedByPeer, refusal: nil)
                }
            case .handshaking where status == UV_EOF.rawValue:
                close(connection, reason: .networkError("the peer closed the connection during the handshake"), refusal: nil)
            case .established, .handshaking, .connecting:
                close(connection, reason: .networkError("read: \(UVError.text(status))"), refusal: nil)
            case .closed:
                break
            }
            return
        }
        guard connection.phase == .established || connection.phase == .handshaking else { return }  // lingering: discard
        pacing.read()
        let input = UnsafeRawBufferPointer(start: readBuffer, count: count)
        var offset = 0
        var delivered = false
        // Who hears of the frames, loaded once a read, the transport as the delegate's
        // `any Transport`: it is held weakly, and a weak load for each frame cost ~90
        // instructions (docs/design/0009-atomics-off-the-hot-paths.md, "Strong references instead
        // of weak ones"). Each frame's call borrows both (`!` on the captured constants); binding
        // them with `if let` for each frame retained and released both, the transport through its
        // side table (the same record, "The technique").
        let transport: (any Transport)? = self.transport
        let delegate = self.delegate
        let hearing = transport != nil && delegate != nil
        func deliver(_ frame: UnsafeRawBufferPointer) {
            if hearing, admits(frame, on: connection) {
                delegate!.transport(transport!, didReceive: frame, from: ConnectionID(rawValue: connection.id))
            }
        }
        defer {
            if delivered, let transport, let delegate {
                delegate.transport(transport, didFinishReading: ConnectionID(rawValue: connection.id))
            }
        }
        while (connection.phase == .established || connection.phase == .handshaking) && !connection.closeRequested {
            let payload: FrameDecoder.Payload
            do {
                guard let next = try connection.decoder.nextPayload(from: input, offset: &offset) else { break }
                payload = next
            } catch {
                close(connection, reason: .protocolViolation(error.description),
                      refusal: Refusal(code: .protocolViolation, reason: error.description))
                return
            }
            // A plain link's frame goes to the delegate straight from the read buffer.
            if connection.phase == .established && connection.sealer == nil {
                payload.withBytes(in: input) { deliver($0) }
                delivered = true
                continue
            }
            if connection.phase == .established {
                // A sealed link's record, opened in place; its frames lent from the plaintext.
                let maxFrameBytes = configuration.maxFrameBytes
                let opened = payload.withBytes(in: input) { connection.sealer!.openFrames($0, maxFrameBytes: maxFrameBytes) }
                guard let opened else {
                    let text = "a sealed record did not open: replayed, reordered, cut, changed, not sealed by the peer, or malformed inside"
                    close(connection, reason: .protocolViolation(text), refusal: Refusal(code: .protocolViolation, reason: text))
                    return
                }
                opened.plain.withUnsafeBytes { plain in
                    for range in opened.frames where connection.phase == .established && !connection.closeRequested {
                        deliver(UnsafeRawBufferPointer(rebasing: plain[range]))
                        delivered = true
                    }
                }
            } else {
                handshakeFrame(payload.bytes(in: input), on: connection)
            }
        }
    }

    /// Whether `frame`, arrived on an established link, goes to the delegate: a replication
    /// frame does; anything else closes the link (a refusal as the peer's, the rest as
    /// violations).
    private func admits(_ frame: UnsafeRawBufferPointer, on connection: UVConnection) -> Bool {
        guard let type = frame.first else {
            let text = "an empty frame inside a sealed record"
            close(connection, reason: .protocolViolation(text), refusal: Refusal(code: .protocolViolation, reason: text))
            return false
        }
        if type >= WireProtocol.firstTransportType {
            if case .refusal(let refusal)? = try? HandshakeMessage.parse(Array(frame)) {
                close(connection, reason: .refused("peer: \(refusal.reason)"), refusal: nil)
            } else {
                let text = "transport frame of type \(type) after the handshake"
                close(connection, reason: .protocolViolation(text), refusal: Refusal(code: .protocolViolation, reason: text))
            }
            return false
        }
        return true
    }

    private func handshakeFrame(_ frame: [UInt8], on connection: UVConnection) {
        switch connection.handshake.receive(frame) {
        case .send(let payloads):
            writeDirect(connection, payloads)
        case .established(let payloads, let hello, let version, let sealer):
            if !payloads.isEmpty { writeDirect(connection, payloads) }
            connection.sealer = sealer
            if let sealer, !sealsUnderAccepted(sealer) {
                // Its proof was sent under a secret retired while the handshake ran: it must not
                // become a link. The refusal goes sealed, after that proof, so the peer opens it.
                let text = "the handshake used a cluster secret retired meanwhile (sends under \(sealer.sendSecret), receives under \(sealer.receiveSecret)); redial"
                close(connection, reason: .refused(text), refusal: Refusal(code: .badProof, reason: "cluster secret retired during the handshake"))
                return
            }
            establish(connection, hello: hello, version: version)
        case .refuse(let refusal, let text):
            let reason: DisconnectReason
            switch refusal.code {
            case .malformed, .protocolViolation: reason = .protocolViolation(text)
            case .handshakeTimeout: reason = .timedOut(text)
            default: reason = .refused(text)
            }
            close(connection, reason: reason, refusal: refusal)
        case .refusedByPeer(let refusal):
            close(connection, reason: .refused("peer refused (\(refusal.code)): \(refusal.reason)"), refusal: nil)
        }
    }

    private func establish(_ connection: UVConnection, hello: Hello, version: UInt16) {
        uv_timer_stop(connection.timer)
        connection.phase = .established
        budget.authenticated(&connection.slot)
        let overhead = connection.sealer == nil ? 0 : LinkSealer.overheadBytes
        connection.decoder.maxFrameBytes = connection.sealer == nil
            ? configuration.maxFrameBytes : LinkSealer.maxRecordBytes(maxFrameBytes: configuration.maxFrameBytes)
        let peer = PeerInfo(nodeID: hello.nodeID, listenAddress: hello.listenAddress, outbound: connection.outbound,
                            dialedAddress: connection.outbound ? connection.remoteAddress : nil)
        connection.peer = peer
        queues.open(connection.id, frameOverheadBytes: overhead)
        var metadata: Logger.Metadata = [
            "conn": "\(connection.id)", "peer": "\(hello.nodeID)", "address": "\(connection.remoteAddress)",
            "direction": "\(connection.outbound ? "out" : "in")", "version": "\(version)",
            "seal": "\(connection.sealer == nil ? "none" : "chacha20-poly1305")",
        ]
        if let sealer = connection.sealer {
            metadata["secret-in"] = "\(sealer.receiveSecret)"
            metadata["secret-out"] = "\(sealer.sendSecret)"
        }
        logger.info("link up", metadata: metadata)
        if let transport, let delegate {
            delegate.transport(transport, didConnect: ConnectionID(rawValue: connection.id), peer: peer)
        }
    }

    /// Ends a link: one log line, the delegate told (didDisconnect once for established links,
    /// didFailToConnect for outbound ones that never got there), then either a refusal is written
    /// and the link lingers for the peer's EOF, or both handles close now.
    private func close(_ connection: UVConnection, reason: DisconnectReason, refusal: Refusal?) {
        let phase = connection.phase
        guard phase != .lingering && phase != .closed else { return }
        let id = ConnectionID(rawValue: connection.id)
        if phase == .established {
            queues.remove(connection.id)
            let level: Logger.Level = (reason == .closedLocally || reason == .closedByPeer) ? .info : .warning
            logger.log(level: level, "link closed", metadata: [
                "conn": "\(connection.id)", "peer": "\(connection.peer?.nodeID ?? "?")",
                "address": "\(connection.remoteAddress)", "reason": "\(reason)",
            ])
            if let transport, let delegate { delegate.transport(transport, didDisconnect: id, reason: reason) }
        } else {
            let metadata: Logger.Metadata = ["conn": "\(connection.id)", "address": "\(connection.remoteAddress)", "reason": "\(reason)"]
            if connection.outbound || reason == .closedLocally {
                logger.warning(connection.outbound ? "connect failed" : "link refused", metadata: metadata)
            } else {
                logRefusal(Self.refusalKind(reason, refusal), "link refused") { metadata }
            }
            if connection.outbound, let transport, let delegate {
                delegate.transport(transport, didFailToConnect: connection.remoteAddress, reason: reason)
            }
        }
        if let refusal, phase != .connecting, !stopping {
            connection.phase = .lingering
            writeDirect(connection, [HandshakeMessage.refusal(refusal).encoded()])
            let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
            let status = uv_shutdown(request, connection.stream) { request, _ in request!.deallocate() }
            if status != 0 { request.deallocate() }
            uv_timer_stop(connection.timer)
            uv_timer_start(connection.timer, { timer in
                let connection = UVConnection.from(timer!.pointee.data)
                let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(timer!.pointee.loop)).takeUnretainedValue()
                reactor.timerFired(connection)
            }, Self.lingerMilliseconds, 0)
        } else {
            closeHandles(connection)
        }
    }

    /// Which line budget the refusal of an inbound handshake counts against.
    private static func refusalKind(_ reason: DisconnectReason, _ refusal: Refusal?) -> RefusalLog.Kind {
        switch refusal?.code {
        case .handshakeTimeout?: return .handshakeTimeout
        case .badProof?: return .wrongSecret
        case .malformed?, .protocolViolation?: return .malformed
        case .unsupportedVersion?, .clusterMismatch?, .secretRequired?, .secretNotConfigured?, .tooManyConnections?, .other?:
            return .refusedHandshake
        case nil:
            if case .refused = reason { return .refusedHandshake }
            return .closedDuringHandshake
        }
    }

    /// `uv_close` on both handles; the connection is released when both callbacks ran.
    private func closeHandles(_ connection: UVConnection) {
        guard connection.phase != .closed else { return }
        connection.phase = .closed
        let onClose: uv_close_cb = { handle in
            let connection = UVConnection.from(handle!.pointee.data)
            let reactor = Unmanaged<UVReactor>.fromOpaque(uv_loop_get_data(handle!.pointee.loop)).takeUnretainedValue()
            connection.openHandles -= 1
            if connection.openHandles == 0 {
                reactor.budget.release(&connection.slot)
                reactor.connections.removeValue(forKey: connection.id)
            }
        }
        uv_close(decide_uv_tcp_as_handle(connection.tcp), onClose)
        uv_close(decide_uv_timer_as_handle(connection.timer), onClose)
    }

    private func peerName(_ connection: UVConnection) -> String {
        var name = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        guard uv_tcp_getpeername(connection.tcp, decide_sockaddr_storage_as_mutable_sockaddr(&name), &length) == 0 else { return "?" }
        return withUnsafePointer(to: &name) { SocketAddress(decide_sockaddr_storage_as_sockaddr($0))?.description ?? "?" }
    }

    // MARK: Writing

    /// Writes handshake frames (outside the outbound queues: they are few and small).
    private func writeDirect(_ connection: UVConnection, _ payloads: [[UInt8]]) {
        // After a sealed handshake every frame is sealed, a refusal included.
        let payloads = connection.sealer == nil ? payloads : connection.sealer!.seal(payloads)
        let bytes = payloads.reduce(0) { $0 + $1.count + WireProtocol.frameHeaderBytes }
        let batch = WriteBatch(connectionID: connection.id, frames: payloads, totalBytes: bytes, liveCounter: liveBatches)
        let status = batch.submit(on: connection.stream) { [unowned self] batch, status in
            writeFinished(batch, status: status, queued: false)
        }
        if status != 0 { writeFinished(batch, status: status, queued: false) }
    }

    /// After each batch of loop tasks: one `uv_write` per link with everything it queued,
    /// coalesced while links stream (`FlushPacing`).
    private func flush() {
        guard queues.hasDirty else { return }
        let delay = pacing.delayNanoseconds(at: uv_hrtime())
        if delay > 0 { usleep(UInt32(delay / 1_000)) }
        let started = uv_hrtime()
        var frames = 0
        queues.takeDirty { taken in
            frames += taken.frames
            guard let connection = connections[taken.id], connection.phase == .established else {
                // Gone meanwhile: its frames are dropped, and so is its queue.
                taken.bytes.deallocate()
                return
            }
            let batch: WriteBatch
            if connection.sealer == nil {
                // As queued: the outbox's bytes are the wire's, handed to uv_write without a copy.
                batch = WriteBatch(connectionID: taken.id, taking: taken.bytes, count: taken.count, queuedBytes: taken.queuedBytes,
                                   liveCounter: liveBatches)
            } else {
                // Sealed here, on the loop thread, in the order the frames are written: the
                // record numbers both sides count follow the bytes on the wire.
                let records = connection.sealer!.seal(wire: UnsafeRawBufferPointer(start: taken.bytes, count: taken.count))
                taken.bytes.deallocate()
                let wireBytes = records.reduce(0) { $0 + $1.count + WireProtocol.frameHeaderBytes }
                batch = WriteBatch(connectionID: taken.id, frames: records, totalBytes: wireBytes, queuedBytes: taken.queuedBytes,
                                   liveCounter: liveBatches)
            }
            let status = batch.submit(on: connection.stream) { [unowned self] batch, status in
                writeFinished(batch, status: status, queued: true)
            }
            if status != 0 { writeFinished(batch, status: status, queued: true) }
        }
        pacing.flushed(at: started, frames: frames)
    }

    private func writeFinished(_ batch: WriteBatch, status: Int32, queued: Bool) {
        if queued { queues.release(batch.queuedBytes, of: batch.connectionID) }
        guard status != 0, status != UV_ECANCELED.rawValue, let connection = connections[batch.connectionID] else { return }
        if connection.phase == .lingering {
            closeHandles(connection)
        } else {
            close(connection, reason: .networkError("write: \(UVError.text(status))"), refusal: nil)
        }
    }

    // MARK: Requests from other threads

    func sealedLinks() -> [UVTransport.SealedLink] {
        connections.values.filter { $0.phase == .established }.sorted { $0.id < $1.id }.compactMap { connection in
            guard let sealer = connection.sealer, let peer = connection.peer else { return nil }
            return UVTransport.SealedLink(connection: ConnectionID(rawValue: connection.id), peerNodeID: peer.nodeID,
                                          sendsUnder: sealer.sendSecret.description, receivesUnder: sealer.receiveSecret.description)
        }
    }

    /// New handshakes accept `secrets` (the first is proved and sealed with), and so do the
    /// handshakes in progress: a peer's proof that arrives later verifies only under `secrets`,
    /// and one whose own proof went out under a secret no longer accepted is refused when it
    /// completes (`handshakeFrame`). Established links whose either direction was derived from a
    /// secret no longer accepted are closed, so they redial and seal under one that is. So once
    /// this returns, no link is or becomes sealed under a retired secret.
    func updateKeyring(_ secrets: [[UInt8]]) {
        keyring = secrets
        logger.info("cluster secrets changed", metadata: [
            "accepted": "\(secrets.map { SecretFingerprint($0).description }.joined(separator: ","))",
        ])
        for connection in connections.values.sorted(by: { $0.id < $1.id }) {
            switch connection.phase {
            case .connecting, .handshaking:
                connection.handshake.updateKeyring(secrets)
            case .established:
                guard let sealer = connection.sealer, !sealsUnderAccepted(sealer) else { continue }
                close(connection, reason: .closedLocally, refusal: nil)
            case .lingering, .closed:
                break
            }
        }
    }

    /// Whether both directions of `sealer` were derived from secrets of the current keyring.
    private func sealsUnderAccepted(_ sealer: LinkSealer) -> Bool {
        let accepted = Set(keyring.map(SecretFingerprint.init))
        return accepted.contains(sealer.sendSecret) && accepted.contains(sealer.receiveSecret)
    }

    /// `send` was refused for `id`: tell the delegate (once per refusal streak).
    func notifyOverLimit(_ id: UInt64) {
        queues.limitNoticeDelivered(id)
        guard let connection = connections[id], connection.phase == .established else { return }
        if let transport, let delegate {
            delegate.transport(transport, outboundLimitExceeded: ConnectionID(rawValue: id))
        }
    }

    /// `close` called on the loop thread (inside a delegate callback): stop delivering at once,
    /// close on the next turn so that delegate calls never nest.
    func requestClose(_ id: UInt64) {
        connections[id]?.closeRequested = true
        eventLoop.execute { [unowned self] in closeByUser(id) }
    }

    /// The user closed a link.
    func closeByUser(_ id: UInt64) {
        guard let connection = connections[id] else { return }
        close(connection, reason: .closedLocally, refusal: nil)
    }

    /// Closes every listener, connection and lookup; the loop ends when their callbacks ran.
    func shutdownAll() {
        stopping = true
        for summary in refusalLog.remaining(atMilliseconds: uv_now(loop)) { logRefusalCount(summary) }
        if let refusalTimer { uv_close(decide_uv_timer_as_handle(refusalTimer), nil) }
        for listener in listeners { listener.close() }
        listeners.removeAll()
        for connection in connections.values.sorted(by: { $0.id < $1.id }) {
            if connection.phase == .lingering {
                closeHandles(connection)
            } else {
                close(connection, reason: .closedLocally, refusal: nil)
            }
        }
        for pending in resolves.values { _ = uv_cancel(pending.requestAsReq) }
    }

    /// Registers this reactor as the loop's data (callbacks find it there) and starts the thread.
    func startLoop() {
        uv_loop_set_data(loop, Unmanaged.passUnretained(self).toOpaque())
        eventLoop.start()
    }
}

/// A host-name lookup for `connect`, alive until its callback ran.
final class PendingResolve {
    let label: String
    let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
    init(label: String) { self.label = label }
    deinit { request.deallocate() }
    var requestAsReq: UnsafeMutablePointer<uv_req_t> {
        UnsafeMutableRawPointer(request).assumingMemoryBound(to: uv_req_t.self)
    }
}
