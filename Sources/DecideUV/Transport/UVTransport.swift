import Decide
import DecideCore
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// The libuv `Transport`: one event-loop thread, TCP links over IPv4/IPv6, length-prefixed
/// frames (docs/protocol.md), an authenticated handshake, sealed links, and bounded memory per link.
///
/// Guarantees, beyond those of `Transport`:
/// - every delegate call comes from the transport's own loop thread, never concurrently;
/// - with `clusterSecret`, no link is reported before both sides proved a secret of the other's
///   keyring, the hello names neither cluster nor node, and every frame after the handshake is
///   sealed (ChaCha20-Poly1305, keys per link and direction): a replayed, reordered or changed
///   record closes the link;
/// - without it, `listen` accepts loopback addresses only unless `insecure` is set;
/// - a peer sending bad bytes loses its own link only (one log line says why);
/// - a link never buffers more than `maxOutboundBytes` outbound or `maxFrameBytes` (+4) inbound;
/// - `shutdown` is idempotent, returns after every handle closed and the thread ended (and the
///   delegate let go of), and is also run by `deinit` if it was not called;
/// - a peer that disappears mid-write costs only its link: SIGPIPE is ignored process-wide
///   from the first transport on.
///
/// Thread-safety: every method may be called from any thread, except `shutdown` from inside a
/// delegate callback (that would wait for itself) — and for the same reason the last reference
/// to a running transport must not be dropped inside a callback. Swift concurrency is never
/// used on the loop thread.
public final class UVTransport: Transport, @unchecked Sendable {
    /// The configuration the transport was made with.
    public let configuration: Configuration
    private let reactor: UVReactor
    private enum Lifecycle { case idle, running, stopped }
    private let lifecycle = Mutex(Lifecycle.idle)
    private let shutdownLock = Mutex(())

    /// libuv writes with write(2): a peer that vanishes mid-write would raise SIGPIPE and kill
    /// the process. Making a transport therefore ignores SIGPIPE for the whole process, once
    /// (the write then fails with EPIPE and only that link closes).
    private static let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Makes a transport from `configuration`; nothing runs until `start`. Throws
    /// `.invalidConfiguration` for a configuration out of bounds, `.system` if libuv fails.
    public init(configuration: Configuration) throws(UVTransportError) {
        _ = Self.ignoreBrokenPipes
        try configuration.validate()
        self.configuration = configuration
        reactor = try UVReactor(configuration: configuration)
        reactor.transport = self
    }

    deinit {
        shutdown()
    }

    /// Starts the loop thread; events go to `delegate` from then on. Throws if called twice.
    public func start(delegate: any TransportDelegate) throws {
        try lifecycle.withLock { state throws(UVTransportError) in
            guard state == .idle else { throw .notRunning("start may be called once, before shutdown") }
            state = .running
        }
        reactor.delegate = delegate
        reactor.startLoop()
    }

    /// Listens on `address` (`HOST:PORT`, `[v6]:PORT`; port 0 picks one) and returns the bound
    /// address with the real port. Without a cluster secret a non-loopback address is refused
    /// unless `insecure` is set. Blocks until the loop has bound the socket.
    public func listen(on address: String) throws -> String {
        guard let hostPort = HostPort(address) else { throw UVTransportError.invalidAddress(address) }
        let socketAddress = try SocketAddress.resolveBlocking(hostPort)
        let logger = reactor.logger
        if configuration.clusterSecret == nil {
            if !socketAddress.isLoopback && !configuration.insecure {
                logger.error("listen refused: no cluster secret and not loopback", metadata: ["listen": "\(address)"])
                throw UVTransportError.insecureListenRefused(address)
            }
        }
        let reactor = self.reactor
        let result = try onLoop { () throws(UVTransportError) -> String in try reactor.listen(on: socketAddress) }
        if configuration.clusterSecret == nil {
            logger.warning("listening WITHOUT authentication (no cluster secret)", metadata: ["listen": "\(result)"])
        } else {
            logger.info("listening", metadata: ["listen": "\(result)", "seal": "chacha20-poly1305"])
        }
        return result
    }

    /// Dials `address` (`HOST:PORT`, `[v6]:PORT` or a host name); the outcome arrives as
    /// `didConnect` or `didFailToConnect`. Ignored after `shutdown`.
    public func connect(to address: String) {
        precondition(lifecycle.withLock { $0 } != .idle, "connect before start")
        let reactor = self.reactor
        reactor.eventLoop.execute { reactor.connect(to: address) }
    }

    /// The loop calls `didFinishReading` after the frames of every read.
    public var reportsReadEnds: Bool { true }

    /// Queues `frame` (1...`maxFrameBytes` bytes; its first byte is the message type, below
    /// 0xF0) for `connection`. Never blocks on the network; answers `.overLimit` instead of
    /// letting the link's outbound bytes pass `maxOutboundBytes`.
    public func send(_ frame: [UInt8], to connection: ConnectionID) -> SendResult {
        frame.withUnsafeBytes { send(bytes: $0, to: connection) }
    }

    /// Queues one frame for the link: its bytes are copied into the link's outbox, so the
    /// caller's scratch memory or array is free again when this returns.
    public func send(bytes frame: UnsafeRawBufferPointer, to connection: ConnectionID) -> SendResult {
        precondition(!frame.isEmpty && frame.count <= configuration.maxFrameBytes, "frame must be 1...maxFrameBytes bytes")
        precondition(frame[0] < WireProtocol.firstTransportType, "message types 0xF0...0xFF are the transport's")
        // The queues lent (`lend`), not retained and released around the call (atomics a frame,
        // docs/design/0009-atomics-off-the-hot-paths.md, "The technique"): the reactor holds
        // them for its life.
        switch Unmanaged.passUnretained(reactor.queues).lend({ $0.enqueue(frame, to: connection.rawValue) }) {
        case .queued(let wakeLoop):
            if wakeLoop { reactor.eventLoop.wake() }
            return .queued
        case .overLimit(let notify):
            if notify {
                let reactor = self.reactor
                reactor.eventLoop.execute { reactor.notifyOverLimit(connection.rawValue) }
            }
            return .overLimit
        case .notConnected:
            return .notConnected
        }
    }

    /// Replaces the cluster secrets: `secrets[0]` is proved and sealed with from now on, and a
    /// peer proving any of them is accepted (at most 8, each at least 16 bytes). Links still
    /// sealed under a secret that is no longer accepted close and redial. Throws for an invalid
    /// keyring, or to add or remove the secret of a transport started with (without) one.
    public func updateClusterSecrets(_ secrets: [[UInt8]]) throws(UVTransportError) {
        try Configuration.validateKeyring(secrets)
        guard secrets.isEmpty == configuration.keyring.isEmpty else {
            throw .invalidConfiguration("a transport started \(configuration.keyring.isEmpty ? "without" : "with") a cluster secret keeps it that way; restart to change")
        }
        let reactor = self.reactor
        try onLoop { () throws(UVTransportError) in reactor.updateKeyring(secrets) }
    }

    /// One established link and the secrets its two directions are sealed under, as local
    /// fingerprints (the first 8 bytes of the secret's SHA-256, hex; never sent). Before retiring
    /// a secret, check that no link of any node still uses it.
    public struct SealedLink: Sendable, Equatable {
        /// The link, as the transport's delegate calls name it.
        public let connection: ConnectionID
        /// The node id the peer proved in the handshake.
        public let peerNodeID: String
        /// The secret this node seals its frames on the link with.
        public let sendsUnder: String
        /// The secret the peer seals its frames with.
        public let receivesUnder: String
    }

    /// The established links and the secrets sealing them (empty without a cluster secret).
    public func sealedLinks() -> [SealedLink] {
        let reactor = self.reactor
        return (try? onLoop { () throws(UVTransportError) -> [SealedLink] in reactor.sealedLinks() }) ?? []
    }

    /// The local fingerprint of `secret`, as `sealedLinks` names secrets.
    public static func fingerprint(ofSecret secret: [UInt8]) -> String { SecretFingerprint(secret).description }

    /// Closes `connection`; `didDisconnect(.closedLocally)` follows on a later loop turn (never
    /// nested in the caller's delegate callback; no frame of that link is delivered after a
    /// `close` made inside a callback). Unknown or already closed links are ignored.
    public func close(_ connection: ConnectionID) {
        let reactor = self.reactor
        if reactor.eventLoop.isLoopThread {
            reactor.requestClose(connection.rawValue)
        } else {
            reactor.eventLoop.execute { reactor.closeByUser(connection.rawValue) }
        }
    }

    /// Closes every link (each gets `didDisconnect(.closedLocally)`) and listener, waits for
    /// every libuv close callback and joins the loop thread. Idempotent; later calls return at once.
    public func shutdown() {
        precondition(!reactor.eventLoop.isLoopThread, "shutdown from a delegate callback would wait for itself")
        shutdownLock.withLock { _ in
            let previous = lifecycle.withLock { state -> Lifecycle in
                defer { state = .stopped }
                return state
            }
            switch previous {
            case .stopped: return
            case .idle:
                reactor.eventLoop.closeUnstarted()
                return
            case .running: break
            }
            let reactor = self.reactor
            reactor.eventLoop.stop { reactor.shutdownAll() }
            reactor.eventLoop.join()
            // The loop thread is gone: nothing calls the delegate any more. Letting go of it
            // breaks the cycle of an owner that holds this transport and is its delegate (the
            // replication engine): with it, a shut-down node and all its state stayed allocated.
            reactor.delegate = nil
            reactor.logger.info("transport stopped")
        }
    }

    /// Runs `body` on the loop thread and waits for its result (inline when already there).
    private func onLoop<T>(_ body: @escaping @Sendable () throws(UVTransportError) -> T) throws(UVTransportError) -> T {
        guard lifecycle.withLock({ $0 }) == .running else { throw .notRunning("listen before start or after shutdown") }
        if reactor.eventLoop.isLoopThread { return try body() }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<T, UVTransportError>?
        let accepted = reactor.eventLoop.execute {
            do throws(UVTransportError) { result = .success(try body()) } catch { result = .failure(error) }
            done.signal()
        }
        guard accepted else { throw .notRunning("transport is shutting down") }
        done.wait()
        return try result!.get()
    }

    // MARK: Diagnostics for tests

    /// Bytes queued or in flight for `connection`.
    package func outboundBytes(of connection: ConnectionID) -> Int { reactor.queues.committedBytes(of: connection.rawValue) }

    /// Bytes queued or handed to `uv_write` for `connection` and not yet written (0 when unknown).
    public func outboundBytes(for connection: ConnectionID) -> Int { outboundBytes(of: connection) }
    /// Inbound connections refused before they authenticated, by why, since `start` (each
    /// counted whether it had a log line of its own or not); empty when not running.
    func inboundRefusals() -> [RefusalLog.Kind: UInt64] {
        let reactor = self.reactor
        return (try? onLoop { () throws(UVTransportError) -> [RefusalLog.Kind: UInt64] in reactor.refusalTotals() }) ?? [:]
    }

    /// Live connection objects, write batches and listeners (all zero after `shutdown`).
    package var liveResources: (connections: Int, writeBatches: Int, listeners: Int) {
        (reactor.liveConnections.current, reactor.liveBatches.current, reactor.liveListeners.current)
    }
}
