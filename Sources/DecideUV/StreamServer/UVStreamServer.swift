import CLibUV
import Dispatch
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A byte-stream server for client protocols (syncnode's Redis-protocol endpoint) on a libuv
/// loop of its own thread: TCP and Unix-domain listeners, one `Connection` object per client,
/// and replies coalesced into one write per read.
///
/// Guarantees:
/// - TCP listeners bind loopback addresses only, unless `allowsNonLoopback` (the caller then
///   requires a password); a Unix socket is created with `unixSocketMode` permissions;
/// - every delegate call and every `execute` task runs on the server's loop thread, one at a
///   time; `didClose` is the last call for a connection;
/// - what a `didRead` call appends to `Connection.output` is written once every connection
///   readable in this loop turn was read (a `uv_check` handle, as Redis writes its replies
///   before it sleeps), with one `write(2)` per connection when the socket takes it
///   (`uv_try_write`): a pipelined batch is answered by one write, and a client of many
///   connections gets its replies in one burst rather than one wake-up per connection;
/// - before that write, the delegate hears `streamServerWillEndTurn`, so work gathered across
///   the connections of one turn (syncnode commits their SETs as one decision) is answered in
///   the same burst;
/// - a client whose unwritten replies pass `pauseReadingAboveBytes` is not read from until
///   they fall below half of it: a client that pipelines without reading gets back-pressure,
///   not unbounded buffering;
/// - `shutdown` is idempotent and returns after every handle closed and the thread ended;
/// - the delegate is held strongly from `init` until `shutdown` returns, then let go (as
///   `UVTransport` holds its own): a delegate that keeps its server is a cycle that `shutdown`
///   breaks.
///
/// Thread-safety: `execute` and `shutdown` from any thread (`shutdown` not from the loop's);
/// everything on `Connection` only on the loop thread.
public final class UVStreamServer: @unchecked Sendable {
    /// The bounds of a stream server, with units in their names.
    public struct Configuration: Sendable {
        /// Connections at once; extra ones get `tooManyConnectionsReply` and are closed.
        public var maxConnections = 1024
        /// Unwritten reply bytes on one connection above which it is not read from.
        public var pauseReadingAboveBytes = 4 << 20
        /// Bytes asked of the kernel per read (one buffer, shared by every connection).
        public var readBufferBytes = UVEventLoop.defaultReadBufferBytes
        /// Whether TCP listeners may bind non-loopback addresses (the caller authenticates).
        public var allowsNonLoopback = false
        /// Permission bits of a Unix socket this server creates.
        public var unixSocketMode: mode_t = 0o600
        /// Written to a connection refused for `maxConnections` before it is closed.
        public var tooManyConnectionsReply: [UInt8] = []
        /// Where accept failures and refusals are logged.
        public var logger = Logger(label: "decide.uv.server")

        /// A configuration with every bound at its default.
        public init() {}
    }

    /// Receives the server's events on its loop thread. Keep each call short: the loop waits.
    public protocol Delegate: AnyObject, Sendable {
        /// A new client. Set `connection.context` here to keep per-connection state.
        func streamServer(_ server: UVStreamServer, didAccept connection: Connection)
        /// Bytes from `connection`, valid only during the call (copy what is kept).
        func streamServer(_ server: UVStreamServer, didRead bytes: UnsafeRawBufferPointer, on connection: Connection)
        /// Every reply appended so far has been written to the socket.
        func streamServer(_ server: UVStreamServer, didDrain connection: Connection)
        /// The client closed its sending side; replies may still be written until `close`.
        func streamServer(_ server: UVStreamServer, inputEndedOn connection: Connection)
        /// `connection` is gone; nothing appended to it is written any more.
        func streamServer(_ server: UVStreamServer, didClose connection: Connection)
        /// Every connection readable in this loop turn was read, and what they were answered is
        /// about to be written: the last moment to finish work gathered across connections
        /// (append to their `output` and call `writeAtEndOfTurn`).
        func streamServerWillEndTurn(_ server: UVStreamServer)
    }

    // (The extension below gives `streamServerWillEndTurn` a default that does nothing.)

    /// One client, owned by the server from accept until its handle's close callback. Touch it
    /// only on the loop thread.
    public final class Connection {
        /// Unique per server, increasing.
        public let id: UInt64
        /// The client's address, or `unix:PATH` for a Unix-socket client.
        public fileprivate(set) var peer: String
        // Every field is touched on the loop thread only, and the server's code calls nothing
        // back while it holds an access to one: no two accesses can overlap, so the dynamic
        // exclusivity checks of class properties (a runtime call each, several per request)
        // are left out, `output` and `context` included (docs/design/0008-in-place-access.md,
        // "Exclusivity left out where one thread owns the state"). A delegate must not overlap
        // them either: no access to `output` from inside a closure given to one of `output`'s
        // own methods.
        //
        // The public fields are inlinable accessors of `…Storage`: another module's access to a
        // stored property is checked whatever its declaration says (Swift 6.3 does not carry
        // `@exclusivity(unchecked)` across modules), an inlined accessor's is not.

        @exclusivity(unchecked) @usableFromInline var contextStorage: AnyObject?
        @exclusivity(unchecked) @usableFromInline var outputStorage: [UInt8] = []
        @exclusivity(unchecked) @usableFromInline var bytesInFlightStorage = 0
        @exclusivity(unchecked) @usableFromInline var isClosingStorage = false
        @exclusivity(unchecked) @usableFromInline var inputEndedStorage = false

        /// The delegate's state for this connection.
        public var context: AnyObject? {
            @inlinable get { contextStorage }
            @inlinable set { contextStorage = newValue }
        }
        /// Reply bytes not yet handed to the socket; append, and the server writes them after
        /// the current delegate call (or at `flush`).
        public var output: [UInt8] {
            @inlinable get { outputStorage }
            @inlinable set { outputStorage = newValue }
            @inlinable _modify { yield &outputStorage }
        }
        /// Bytes handed to libuv and not yet written (excludes `output`).
        @inlinable public var bytesInFlight: Int { bytesInFlightStorage }
        /// Set once `close` or `closeWhenWritten` was asked or the socket failed.
        @inlinable public var isClosing: Bool { isClosingStorage }
        /// The client sent EOF.
        @inlinable public var inputEnded: Bool { inputEndedStorage }

        fileprivate let handle: UnsafeMutableRawPointer
        fileprivate let isPipe: Bool
        @exclusivity(unchecked) fileprivate var readsPausedByDelegate = false
        @exclusivity(unchecked) fileprivate var readsPausedForOutput = false
        @exclusivity(unchecked) fileprivate var reading = false
        @exclusivity(unchecked) fileprivate var closeOnceWritten = false
        @exclusivity(unchecked) fileprivate var inDrainCall = false
        @exclusivity(unchecked) fileprivate var drainAgain = false
        /// Waiting in `pendingFlush` for the end of the loop turn.
        @exclusivity(unchecked) fileprivate var flushQueued = false
        /// In the server's `connections`: from its accept until its handle's close callback.
        /// Read where each request looked the connection up in that dictionary (a hash, a
        /// class-property access check and a retain, twice a request).
        @exclusivity(unchecked) fileprivate var registered = false
        fileprivate unowned(unsafe) var server: UVStreamServer?

        fileprivate init(id: UInt64, peer: String, isPipe: Bool, loop: UnsafeMutablePointer<uv_loop_t>) {
            self.id = id
            self.peer = peer
            self.isPipe = isPipe
            if isPipe {
                let pipe = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
                let status = uv_pipe_init(loop, pipe, 0)
                precondition(status == 0, "uv_pipe_init failed: \(UVError.text(status))")
                handle = UnsafeMutableRawPointer(pipe)
            } else {
                let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
                let status = uv_tcp_init(loop, tcp)
                precondition(status == 0, "uv_tcp_init failed: \(UVError.text(status))")
                handle = UnsafeMutableRawPointer(tcp)
            }
            stream.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        }

        deinit {
            if isPipe {
                handle.assumingMemoryBound(to: uv_pipe_t.self).deallocate()
            } else {
                handle.assumingMemoryBound(to: uv_tcp_t.self).deallocate()
            }
        }

        fileprivate var stream: UnsafeMutablePointer<uv_stream_t> {
            isPipe ? decide_uv_pipe_as_stream(handle.assumingMemoryBound(to: uv_pipe_t.self))
                : decide_uv_tcp_as_stream(handle.assumingMemoryBound(to: uv_tcp_t.self))
        }

        /// Reply bytes not yet written: appended and in flight.
        public var unwrittenBytes: Int { output.count + bytesInFlight }

        /// Stops reading from this client until `resumeReading` (e.g. while a request is
        /// answered off the loop). Bytes already read stay with the delegate.
        public func pauseReading() {
            readsPausedByDelegate = true
            server?.updateReading(self)
        }

        /// Undoes `pauseReading`.
        public func resumeReading() {
            readsPausedByDelegate = false
            server?.updateReading(self)
        }

        fileprivate static func from(_ data: UnsafeMutableRawPointer?) -> Connection {
            Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue()
        }
    }

    /// The configuration the server was made with.
    public let configuration: Configuration
    private let eventLoop: UVEventLoop
    /// Lines about refused connections, a few a second with the count of the rest (loop thread).
    private var refusals = LogThrottle()
    /// Strong, not weak: a weak reference gives its object a side table, and then each load of
    /// it and each count of that object's references takes the runtime's slow path, for every
    /// read of every client (docs/design/0009-atomics-off-the-hot-paths.md, "Strong references
    /// instead of weak ones").
    /// Set in `init`, read on the loop thread, cleared by `shutdown` after the thread ended.
    @exclusivity(unchecked) private var delegate: (any Delegate)?
    // Loop-thread state.
    private var connections: [UInt64: Connection] = [:]
    private var listeners: [Listener] = []
    private var nextID: UInt64 = 1
    private var stopping = false
    /// Connections read from in this loop turn whose replies are written at its end. Like
    /// `Connection`'s own fields, touched only on the loop thread by code that calls nothing
    /// back while it holds an access: no dynamic exclusivity check.
    @exclusivity(unchecked) private var pendingFlush: [Connection] = []
    /// The list `flushPending` writes from, swapped with `pendingFlush`: the two arrays trade
    /// their storage every turn instead of a copy that makes emptying the other allocate.
    @exclusivity(unchecked) private var flushing: [Connection] = []
    /// Runs after each loop turn's I/O callbacks: writes `pendingFlush`.
    private let endOfTurn = UnsafeMutablePointer<uv_check_t>.allocate(capacity: 1)
    private var endOfTurnStarted = false
    private let readBuffer: UnsafeMutableRawPointer
    private enum Lifecycle { case idle, running, stopped }
    private let lifecycle = Mutex(Lifecycle.idle)

    /// A listening handle (TCP or Unix socket) and what it was bound to. Retained by its
    /// handle's `data` from `init` until the close callback; its memory is freed with it.
    private final class Listener {
        let handle: UnsafeMutableRawPointer
        let isPipe: Bool
        var bound = ""
        /// The socket file to remove at shutdown (Unix sockets only).
        var path: String?

        init(loop: UnsafeMutablePointer<uv_loop_t>, isPipe: Bool) {
            self.isPipe = isPipe
            if isPipe {
                let pipe = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
                precondition(uv_pipe_init(loop, pipe, 0) == 0, "uv_pipe_init failed")
                handle = UnsafeMutableRawPointer(pipe)
            } else {
                let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
                precondition(uv_tcp_init(loop, tcp) == 0, "uv_tcp_init failed")
                handle = UnsafeMutableRawPointer(tcp)
            }
            stream.pointee.data = Unmanaged.passRetained(self).toOpaque()
        }

        deinit {
            if isPipe {
                handle.assumingMemoryBound(to: uv_pipe_t.self).deallocate()
            } else {
                handle.assumingMemoryBound(to: uv_tcp_t.self).deallocate()
            }
        }

        var stream: UnsafeMutablePointer<uv_stream_t> {
            isPipe ? decide_uv_pipe_as_stream(handle.assumingMemoryBound(to: uv_pipe_t.self))
                : decide_uv_tcp_as_stream(handle.assumingMemoryBound(to: uv_tcp_t.self))
        }

        /// Closes the handle; the listener (and the handle's memory) goes in the close callback.
        func close() {
            uv_close(decide_uv_stream_as_handle(stream)) { handle in
                Unmanaged<Listener>.fromOpaque(handle!.pointee.data).release()
            }
        }
    }

    /// Makes a server; nothing runs until the first `listen`. `delegate` is held until
    /// `shutdown` returns.
    public init(configuration: Configuration = Configuration(), delegate: any Delegate) throws(UVTransportError) {
        guard configuration.maxConnections >= 1, configuration.pauseReadingAboveBytes >= 1,
              configuration.readBufferBytes >= 1024 else {
            throw .invalidConfiguration("maxConnections and pauseReadingAboveBytes must be positive, readBufferBytes at least 1024")
        }
        self.configuration = configuration
        self.delegate = delegate
        readBuffer = .allocate(byteCount: configuration.readBufferBytes, alignment: 16)
        eventLoop = try UVEventLoop(afterTasks: {})
    }

    deinit {
        shutdown()
        readBuffer.deallocate()
        endOfTurn.deallocate()
    }

    /// Listens on `address` (`HOST:PORT`; port 0 picks one); returns the bound address.
    /// Starts the loop thread on first use.
    public func listen(on address: String) throws(UVTransportError) -> String {
        guard let hostPort = HostPort(address) else { throw .invalidAddress(address) }
        let socketAddress = try SocketAddress.resolveBlocking(hostPort)
        guard socketAddress.isLoopback || configuration.allowsNonLoopback else {
            configuration.logger.error("listen refused: not a loopback address", metadata: ["listen": "\(address)"])
            throw .insecureListenRefused(address)
        }
        return try onLoop { [self] () throws(UVTransportError) -> String in try bindTCP(socketAddress) }
    }

    /// Listens on a Unix-domain socket at `path` with `unixSocketMode` permissions. A stale
    /// socket file at `path` is replaced; any other file there is an error. The file is removed
    /// at shutdown.
    public func listen(unixSocket path: String) throws(UVTransportError) -> String {
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFSOCK else {
                throw .invalidConfiguration("\(path) exists and is not a socket; refusing to replace it")
            }
            unlink(path)
        }
        return try onLoop { [self] () throws(UVTransportError) -> String in try bindPipe(path) }
    }

    /// Runs `task` on the loop thread. False (and the task dropped) after `shutdown`.
    @discardableResult
    public func execute(_ task: @escaping @Sendable () -> Void) -> Bool {
        eventLoop.execute(task)
    }

    /// Writes what `connection.output` holds now. Call on the loop thread after appending
    /// outside a delegate call (e.g. in an `execute` task).
    public func flush(_ connection: Connection) {
        flush(connection, delegate: delegate)
    }

    /// `flush`, with the delegate already loaded (`flushPending` loads it once a turn, not once
    /// a connection).
    private func flush(_ connection: Connection, delegate: (any Delegate)?) {
        guard !connection.output.isEmpty else { return }
        guard !connection.isClosing || connection.closeOnceWritten, connection.registered else {
            connection.output.removeAll()
            return
        }
        // Written from where it lies; emptied in place when the socket took it all (its
        // capacity kept for the next replies), handed to the write request otherwise.
        var offset = 0
        if connection.bytesInFlight == 0 {
            let written = connection.output.withUnsafeBytes { raw -> Int32 in
                var buffer = uv_buf_init(UnsafeMutablePointer(mutating: raw.baseAddress!.assumingMemoryBound(to: CChar.self)),
                                         UInt32(raw.count))
                return uv_try_write(connection.stream, &buffer, 1)
            }
            if written >= 0 {
                offset = Int(written)
            } else if written != UV_EAGAIN.rawValue {
                closeHandle(connection)  // the client went away
                return
            }
        }
        if offset == connection.output.count {
            connection.output.removeAll(keepingCapacity: true)
            afterWrite(connection, delegate: delegate)
            return
        }
        let request = StreamWrite(bytes: connection.output[offset...], connection: connection)
        connection.output = []
        connection.bytesInFlightStorage += request.byteCount
        let status = request.submit { [self] request, status in
            let connection = request.connection
            connection.bytesInFlightStorage -= request.byteCount
            guard !connection.isClosing || connection.closeOnceWritten else { return }
            guard status == 0 else { return closeHandle(connection) }
            afterWrite(connection, delegate: self.delegate)  // loaded again: not held while the write waits
        }
        if status != 0 {
            connection.bytesInFlightStorage -= request.byteCount
            closeHandle(connection)
            return
        }
        updateReading(connection)
    }

    /// Closes `connection` now; unwritten replies are dropped. Loop thread only.
    public func close(_ connection: Connection) {
        closeHandle(connection)
    }

    /// Closes `connection` once everything appended so far is written; reads nothing more.
    /// Loop thread only.
    public func closeWhenWritten(_ connection: Connection) {
        guard !connection.isClosing else { return }
        connection.closeOnceWritten = true
        connection.isClosingStorage = true
        updateReading(connection)
        flush(connection)
        if connection.bytesInFlight == 0 && connection.output.isEmpty { finishClose(connection) }
    }

    /// Every open connection, for operations that address all of them. Loop thread only.
    public var openConnections: some Collection<Connection> { connections.values }

    /// Closes the listeners and every connection (each gets `didClose`), removes Unix socket
    /// files, joins the thread, and lets the delegate go. Idempotent.
    public func shutdown() {
        let previous = lifecycle.withLock { state -> Lifecycle in
            defer { state = .stopped }
            return state
        }
        switch previous {
        case .stopped: return
        case .idle: eventLoop.closeUnstarted()
        case .running:
            precondition(!eventLoop.isLoopThread, "UVStreamServer.shutdown from its own loop thread would wait for itself")
            eventLoop.stop { [self] in
                stopping = true
                if endOfTurnStarted { uv_close(decide_uv_check_as_handle(endOfTurn), nil) }
                for listener in listeners {
                    if let path = listener.path { unlink(path) }
                    listener.close()
                }
                listeners = []
                for connection in connections.values.sorted(by: { $0.id < $1.id }) { closeHandle(connection) }
            }
            eventLoop.join()
        }
        // After the last call (`didClose` runs in the loop's final turns, before `join`).
        delegate = nil
    }

    // MARK: loop thread

    /// Runs `body` on the loop thread (starting it if needed) and waits for its result.
    private func onLoop<T: Sendable>(_ body: @escaping () throws(UVTransportError) -> T) throws(UVTransportError) -> T {
        try lifecycle.withLock { state throws(UVTransportError) in
            switch state {
            case .idle:
                state = .running
                uv_loop_set_data(eventLoop.loop, Unmanaged.passUnretained(self).toOpaque())
                eventLoop.start()
            case .running: break
            case .stopped: throw .notRunning("listen after shutdown")
            }
        }
        let result = Mutex<Result<T, UVTransportError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let body = body
        let accepted = eventLoop.execute { [self] in
            startEndOfTurn()
            result.withLock { $0 = Result { () throws(UVTransportError) -> T in try body() } }
            done.signal()
        }
        guard accepted else { throw .notRunning("listen after shutdown") }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Starts the end-of-turn handle (loop thread, once).
    private func startEndOfTurn() {
        guard !endOfTurnStarted else { return }
        endOfTurnStarted = true
        precondition(uv_check_init(eventLoop.loop, endOfTurn) == 0, "uv_check_init failed")
        endOfTurn.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_check_start(endOfTurn) { handle in
            Unmanaged<UVStreamServer>.fromOpaque(handle!.pointee.data)._withUnsafeGuaranteedRef { $0.flushPending() }
        }
    }

    /// Queues what `connection.output` holds to be written at the end of this loop turn, with
    /// the replies of every other connection read in it. Loop thread only.
    public func writeAtEndOfTurn(_ connection: Connection) {
        guard !connection.isClosing else { return }
        flushAtEndOfTurn(connection)
    }

    /// Queues `connection` to be written at the end of this loop turn.
    private func flushAtEndOfTurn(_ connection: Connection) {
        guard !connection.flushQueued, !connection.output.isEmpty else { return }
        connection.flushQueued = true
        pendingFlush.append(connection)
    }

    /// Writes every connection queued in this loop turn.
    private func flushPending() {
        let delegate = self.delegate
        delegate?.streamServerWillEndTurn(self)
        guard !pendingFlush.isEmpty else { return }
        // Connections queued while these are written (a drain answered with more output) wait
        // in the emptied `pendingFlush` for the next turn, as before the swap.
        swap(&flushing, &pendingFlush)
        for index in flushing.indices {
            let connection = flushing[index]
            connection.flushQueued = false
            flush(connection, delegate: delegate)
            updateReading(connection)
        }
        // One `removeLast` each: `removeAll(keepingCapacity:)` goes through the standard
        // library's unspecialised `replaceSubrange`.
        while !flushing.isEmpty { flushing.removeLast() }
    }

    private static let onConnection: uv_connection_cb = { server, status in
        let this = Unmanaged<UVStreamServer>.fromOpaque(uv_loop_get_data(server!.pointee.loop)).takeUnretainedValue()
        this.accept(from: Unmanaged<Listener>.fromOpaque(server!.pointee.data).takeUnretainedValue(), status: status)
    }

    private func bindTCP(_ address: SocketAddress) throws(UVTransportError) -> String {
        let listener = Listener(loop: eventLoop.loop, isPipe: false)
        let tcp = listener.handle.assumingMemoryBound(to: uv_tcp_t.self)
        var status = address.withSockaddr { uv_tcp_bind(tcp, $0, 0) }
        if status == 0 { status = uv_listen(listener.stream, 128, Self.onConnection) }
        guard status == 0 else {
            listener.close()
            throw .system("cannot listen on \(address): \(UVError.text(status))")
        }
        var bound = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        _ = uv_tcp_getsockname(tcp, decide_sockaddr_storage_as_mutable_sockaddr(&bound), &length)
        listener.bound = withUnsafePointer(to: &bound) {
            SocketAddress(decide_sockaddr_storage_as_sockaddr($0))?.description ?? "\(address)"
        }
        listeners.append(listener)
        return listener.bound
    }

    private func bindPipe(_ path: String) throws(UVTransportError) -> String {
        let listener = Listener(loop: eventLoop.loop, isPipe: true)
        let pipe = listener.handle.assumingMemoryBound(to: uv_pipe_t.self)
        // Created with no permissions for others from the start, then set exactly.
        let previousMask = umask(0o177)
        var status = uv_pipe_bind(pipe, path)
        umask(previousMask)
        if status == 0, chmod(path, configuration.unixSocketMode) != 0 { status = -errno }
        if status == 0 { status = uv_listen(listener.stream, 128, Self.onConnection) }
        guard status == 0 else {
            listener.close()
            throw .system("cannot listen on unix socket \(path): \(UVError.text(status))")
        }
        listener.bound = "unix:" + path
        listener.path = path
        listeners.append(listener)
        return listener.bound
    }

    private func accept(from listener: Listener, status: Int32) {
        guard status == 0, !stopping else {
            if status != 0 { configuration.logger.warning("accept failed", metadata: ["error": "\(UVError.text(status))"]) }
            return
        }
        let connection = Connection(id: nextID, peer: listener.path.map { "unix:" + $0 } ?? "", isPipe: listener.isPipe,
                                    loop: eventLoop.loop)
        connection.server = self
        nextID += 1
        connections[connection.id] = connection
        connection.registered = true
        guard uv_accept(listener.stream, connection.stream) == 0 else {
            closeHandle(connection)
            return
        }
        if !listener.isPipe {
            let tcp = connection.handle.assumingMemoryBound(to: uv_tcp_t.self)
            _ = uv_tcp_nodelay(tcp, 1)
            var peer = sockaddr_storage()
            var length = Int32(MemoryLayout<sockaddr_storage>.size)
            if uv_tcp_getpeername(tcp, decide_sockaddr_storage_as_mutable_sockaddr(&peer), &length) == 0 {
                connection.peer = withUnsafePointer(to: &peer) {
                    SocketAddress(decide_sockaddr_storage_as_sockaddr($0))?.description ?? ""
                }
            }
        }
        if connections.count > configuration.maxConnections {
            refusals.log(configuration.logger, .warning, "connection refused: too many connections",
                         metadata: ["maxConnections": "\(configuration.maxConnections)", "peer": "\(connection.peer)"],
                         now: uv_now(eventLoop.loop))
            connection.output = configuration.tooManyConnectionsReply
            closeWhenWritten(connection)
            return
        }
        delegate?.streamServer(self, didAccept: connection)
        flush(connection)
        updateReading(connection)
    }

    /// Starts or stops reading `connection` to match its flags.
    fileprivate func updateReading(_ connection: Connection) {
        if connection.bytesInFlight + connection.output.count > configuration.pauseReadingAboveBytes {
            connection.readsPausedForOutput = true
        } else if connection.bytesInFlight + connection.output.count <= configuration.pauseReadingAboveBytes / 2 {
            connection.readsPausedForOutput = false
        }
        let wanted = !connection.isClosing && !connection.inputEnded && !connection.readsPausedByDelegate
            && !connection.readsPausedForOutput && connection.registered
        guard wanted != connection.reading else { return }
        connection.reading = wanted
        if !wanted {
            _ = uv_read_stop(connection.stream)
            return
        }
        let status = uv_read_start(connection.stream, { handle, _, buffer in
            let this = Unmanaged<UVStreamServer>.fromOpaque(uv_loop_get_data(handle!.pointee.loop)).takeUnretainedValue()
            buffer!.pointee = uv_buf_init(this.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(this.configuration.readBufferBytes))
        }, { stream, count, _ in
            // Borrowed, not retained: the server outlives its loop's callbacks, and a connection
            // its handle's (it is released in the close callback, after the last read).
            Unmanaged<UVStreamServer>.fromOpaque(uv_loop_get_data(stream!.pointee.loop))._withUnsafeGuaranteedRef { this in
                Unmanaged<Connection>.fromOpaque(stream!.pointee.data!)._withUnsafeGuaranteedRef { connection in
                    this.onRead(connection, count: count)
                }
            }
        })
        if status != 0 { closeHandle(connection) }
    }

    private func onRead(_ connection: Connection, count: Int) {
        guard !connection.isClosing else { return }
        if count == 0 { return }
        if count < 0 {
            if Int32(count) == UV_EOF.rawValue {
                connection.inputEndedStorage = true
                updateReading(connection)
                delegate?.streamServer(self, inputEndedOn: connection)
                flush(connection)
            } else {
                closeHandle(connection)
            }
            return
        }
        delegate?.streamServer(self, didRead: UnsafeRawBufferPointer(start: readBuffer, count: count), on: connection)
        flushAtEndOfTurn(connection)
        updateReading(connection)
    }

    private func afterWrite(_ connection: Connection, delegate: (any Delegate)?) {
        guard connection.bytesInFlight == 0 else {
            updateReading(connection)
            return
        }
        if connection.closeOnceWritten {
            if connection.output.isEmpty { finishClose(connection) } else { flush(connection, delegate: delegate) }
            return
        }
        updateReading(connection)
        // A delegate that answers a drain with more output (a long reply written in chunks)
        // would otherwise recurse once per chunk the socket takes at once.
        if connection.inDrainCall {
            connection.drainAgain = true
            return
        }
        connection.inDrainCall = true
        repeat {
            connection.drainAgain = false
            delegate?.streamServer(self, didDrain: connection)
            flush(connection, delegate: delegate)
        } while connection.drainAgain && !connection.isClosing
        connection.inDrainCall = false
    }

    private func closeHandle(_ connection: Connection) {
        guard connection.registered else { return }
        connection.isClosingStorage = true
        connection.closeOnceWritten = false
        finishClose(connection)
    }

    private func finishClose(_ connection: Connection) {
        guard connection.registered, uv_is_closing(decide_uv_stream_as_handle(connection.stream)) == 0 else {
            return
        }
        connection.output = []
        if connection.reading {
            _ = uv_read_stop(connection.stream)
            connection.reading = false
        }
        uv_close(decide_uv_stream_as_handle(connection.stream)) { handle in
            let this = Unmanaged<UVStreamServer>.fromOpaque(uv_loop_get_data(handle!.pointee.loop)).takeUnretainedValue()
            let connection = Connection.from(handle!.pointee.data)
            this.connections[connection.id] = nil
            connection.registered = false
            connection.server = nil
            this.delegate?.streamServer(this, didClose: connection)
            connection.context = nil
        }
    }
}

/// One `uv_write` of a copy of some reply bytes; retained for libuv until its callback ran.
private final class StreamWrite {
    let connection: UVStreamServer.Connection
    let byteCount: Int
    private let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
    private let buffer: UnsafeMutableRawPointer
    private var completion: ((StreamWrite, Int32) -> Void)?

    init(bytes: ArraySlice<UInt8>, connection: UVStreamServer.Connection) {
        self.connection = connection
        byteCount = bytes.count
        buffer = .allocate(byteCount: max(1, bytes.count), alignment: 1)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    }

    deinit {
        buffer.deallocate()
        request.deallocate()
    }

    /// Starts the write; `done` runs once on the loop thread unless the returned status is nonzero.
    func submit(done: @escaping (StreamWrite, Int32) -> Void) -> Int32 {
        completion = done
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        var buf = uv_buf_init(buffer.assumingMemoryBound(to: CChar.self), UInt32(byteCount))
        let status = uv_write(request, connection.stream, &buf, 1) { request, status in
            let this = Unmanaged<StreamWrite>.fromOpaque(request!.pointee.data).takeRetainedValue()
            let completion = this.completion
            this.completion = nil
            completion?(this, status)
        }
        if status != 0 {
            Unmanaged<StreamWrite>.fromOpaque(request.pointee.data).release()
            completion = nil
        }
        return status
    }
}

extension UVStreamServer.Delegate {
    /// Nothing to finish at the end of a turn.
    public func streamServerWillEndTurn(_ server: UVStreamServer) {}
}
