import CLibUV
import Dispatch
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A small newline-delimited TCP server on a libuv loop of its own (its own thread), for local
/// control endpoints such as syncnode's admin port.
///
/// Guarantees:
/// - it listens on loopback addresses only (`listen` throws `.insecureListenRefused` otherwise);
/// - a connection never buffers more than `maxLineBytes` of unfinished input: a longer line gets
///   an error line back and the connection is closed once that is written;
/// - a connection never has more than `maxOutboundBytes` queued or in flight: `send` answers
///   `.overLimit` instead of queueing past it;
/// - every delegate call comes from the server's loop thread, one at a time, in order per
///   connection; `didClose` is the last call for a connection;
/// - `shutdown` is idempotent and returns after every handle closed and the thread ended.
///
/// Thread-safety: `send`, `close` and `closeWhenWritten` may be called from any thread (also from
/// inside a delegate call); `listen` and `shutdown` from any thread but the loop's.
public final class UVLineServer: @unchecked Sendable {
    /// The bounds of a line server, with units in their names.
    public struct Configuration: Sendable {
        /// The longest request line accepted (without its newline).
        public var maxLineBytes: Int = 1 << 20
        /// Bytes queued or being written per connection before `send` answers `.overLimit`.
        public var maxOutboundBytes: Int = 8 << 20
        /// Connections at once; extra ones get one error line and are closed.
        public var maxConnections: Int = 64
        /// Where accept failures and refusals are logged.
        public var logger: Logger = Logger(label: "decide.uv.lines")

        public init() {}
    }

    /// Receives the server's events, on its loop thread. Keep each call short: the loop waits.
    public protocol Delegate: AnyObject, Sendable {
        /// One complete line (without its `\n` or a trailing `\r`) from `connection`.
        func lineServer(_ server: UVLineServer, didReceive line: [UInt8], from connection: UInt64)
        /// Every byte sent to `connection` so far has been written to the socket.
        func lineServer(_ server: UVLineServer, didDrain connection: UInt64)
        /// The client closed its sending side: no more lines will come from `connection`.
        /// The connection stays open for replies until `close` or `closeWhenWritten`.
        func lineServer(_ server: UVLineServer, inputEndedOn connection: UInt64)
        /// `connection` is gone (closed by either side or by `shutdown`); nothing sent to it is
        /// delivered any more.
        func lineServer(_ server: UVLineServer, didClose connection: UInt64)
    }

    /// What became of a `send`.
    public enum SendResult: Hashable, Sendable {
        case queued
        /// Not queued: the connection already has `maxOutboundBytes` waiting.
        case overLimit
        /// Not queued: no such open connection.
        case notConnected
    }

    public let configuration: Configuration
    private let eventLoop: UVEventLoop
    private weak var delegate: (any Delegate)?
    /// Bytes queued or in flight per open connection, readable from any thread.
    private let outbound = Mutex<[UInt64: Int]>([:])
    // Loop-thread state.
    private var connections: [UInt64: LineConnection] = [:]
    private var listener: UVListener?
    private let liveListeners = LiveCounter()
    private var nextID: UInt64 = 1
    private var stopping = false
    private let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    private enum Lifecycle { case idle, running, stopped }
    private let lifecycle = Mutex(Lifecycle.idle)

    /// Makes a server; nothing runs until `listen`. `delegate` is held weakly.
    public init(configuration: Configuration = Configuration(), delegate: any Delegate) throws(UVTransportError) {
        guard configuration.maxLineBytes >= 1, configuration.maxOutboundBytes >= 1, configuration.maxConnections >= 1 else {
            throw .invalidConfiguration("maxLineBytes, maxOutboundBytes and maxConnections must be positive")
        }
        self.configuration = configuration
        self.delegate = delegate
        eventLoop = try UVEventLoop(afterTasks: {})
    }

    deinit {
        shutdown()
        readBuffer.deallocate()
    }

    /// Starts the loop thread and listens on `address` (`HOST:PORT`, loopback only; port 0
    /// picks one). Returns the bound address. Call once.
    public func listen(on address: String) throws(UVTransportError) -> String {
        guard let hostPort = HostPort(address) else { throw .invalidAddress(address) }
        let socketAddress = try SocketAddress.resolveBlocking(hostPort)
        guard socketAddress.isLoopback else {
            configuration.logger.error("admin listen refused: not a loopback address", metadata: ["listen": "\(address)"])
            throw .insecureListenRefused(address)
        }
        try lifecycle.withLock { state throws(UVTransportError) in
            guard state == .idle else { throw .notRunning("listen may be called once, before shutdown") }
            state = .running
        }
        uv_loop_set_data(eventLoop.loop, Unmanaged.passUnretained(self).toOpaque())
        eventLoop.start()
        let result = Mutex<Result<String, UVTransportError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        eventLoop.execute { [self] in
            do throws(UVTransportError) {
                let bound = try bind(socketAddress)
                result.withLock { $0 = .success(bound) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Queues `bytes` (whole `\n`-terminated lines) for `connection`. Never blocks.
    @discardableResult
    public func send(_ bytes: [UInt8], to connection: UInt64) -> SendResult {
        guard !bytes.isEmpty else { return .queued }
        let result = outbound.withLock { table -> SendResult in
            guard let queued = table[connection] else { return .notConnected }
            guard queued + bytes.count <= configuration.maxOutboundBytes else { return .overLimit }
            table[connection] = queued + bytes.count
            return .queued
        }
        guard result == .queued else { return result }
        let accepted = eventLoop.execute { [self] in write(bytes, to: connection) }
        if !accepted { return .notConnected }
        return result
    }

    /// Closes `connection` now; bytes not yet written are dropped. Unknown ids are ignored.
    public func close(_ connection: UInt64) {
        eventLoop.execute { [self] in
            if let line = connections[connection] { closeHandle(line) }
        }
    }

    /// Closes `connection` once everything sent to it so far is written.
    public func closeWhenWritten(_ connection: UInt64) {
        eventLoop.execute { [self] in
            guard let line = connections[connection] else { return }
            line.closeWhenWritten = true
            if line.writesInFlight == 0 { closeHandle(line) }
        }
    }

    /// Closes the listener and every connection (each gets `didClose`) and joins the thread.
    /// Idempotent.
    public func shutdown() {
        let previous = lifecycle.withLock { state -> Lifecycle in
            defer { state = .stopped }
            return state
        }
        switch previous {
        case .stopped: return
        case .idle: eventLoop.closeUnstarted()
        case .running:
            precondition(!eventLoop.isLoopThread, "UVLineServer.shutdown from its own loop thread would wait for itself")
            eventLoop.stop { [self] in
                stopping = true
                listener?.close()
                listener = nil
                for line in connections.values.sorted(by: { $0.id < $1.id }) { closeHandle(line) }
            }
            eventLoop.join()
        }
    }

    // MARK: loop thread

    private func bind(_ address: SocketAddress) throws(UVTransportError) -> String {
        let listener = UVListener(loop: eventLoop.loop, liveCounter: liveListeners)
        var status = address.withSockaddr { uv_tcp_bind(listener.tcp, $0, 0) }
        if status == 0 {
            status = uv_listen(decide_uv_tcp_as_stream(listener.tcp), 64) { server, status in
                let this = Unmanaged<UVLineServer>.fromOpaque(uv_loop_get_data(server!.pointee.loop)).takeUnretainedValue()
                this.accept(status: status)
            }
        }
        guard status == 0 else {
            listener.close()
            throw .system("cannot listen on \(address): \(UVError.text(status))")
        }
        var bound = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        _ = uv_tcp_getsockname(listener.tcp, decide_sockaddr_storage_as_mutable_sockaddr(&bound), &length)
        listener.boundAddress = withUnsafePointer(to: &bound) {
            SocketAddress(decide_sockaddr_storage_as_sockaddr($0))?.description ?? "\(address)"
        }
        self.listener = listener
        return listener.boundAddress
    }

    private func accept(status: Int32) {
        guard status == 0, let listener, !stopping else {
            if status != 0 { configuration.logger.warning("admin accept failed", metadata: ["error": "\(UVError.text(status))"]) }
            return
        }
        let line = LineConnection(id: nextID, loop: eventLoop.loop)
        nextID += 1
        connections[line.id] = line
        outbound.withLock { $0[line.id] = 0 }
        guard uv_accept(decide_uv_tcp_as_stream(listener.tcp), line.stream) == 0 else {
            closeHandle(line)
            return
        }
        // Replies are small and written one by one: without this, a pipelining client's
        // delayed ACK holds every reply after the first for ~40 ms (Nagle).
        _ = uv_tcp_nodelay(line.tcp, 1)
        if connections.count > configuration.maxConnections {
            configuration.logger.warning("admin connection refused: too many connections",
                                         metadata: ["maxConnections": "\(configuration.maxConnections)"])
            send(Array("{\"ok\":false,\"error\":\"too many admin connections (\(configuration.maxConnections))\"}\n".utf8), to: line.id)
            closeWhenWritten(line.id)
            return
        }
        let readStatus = uv_read_start(line.stream, { handle, _, buffer in
            let this = Unmanaged<UVLineServer>.fromOpaque(uv_loop_get_data(handle!.pointee.loop)).takeUnretainedValue()
            buffer!.pointee = uv_buf_init(this.readBuffer.assumingMemoryBound(to: CChar.self), 64 * 1024)
        }, { stream, count, _ in
            let this = Unmanaged<UVLineServer>.fromOpaque(uv_loop_get_data(stream!.pointee.loop)).takeUnretainedValue()
            this.onRead(LineConnection.from(stream!.pointee.data), count: count)
        })
        if readStatus != 0 { closeHandle(line) }
    }

    private func onRead(_ line: LineConnection, count: Int) {
        guard !line.closing else { return }
        if count == 0 { return }
        if count < 0 {
            _ = uv_read_stop(line.stream)
            if Int32(count) == UV_EOF.rawValue {
                line.inputEnded = true
                delegate?.lineServer(self, inputEndedOn: line.id)
            } else {
                closeHandle(line)
            }
            return
        }
        let input = UnsafeRawBufferPointer(start: readBuffer, count: count)
        var start = 0
        for index in 0 ..< count where input[index] == UInt8(ascii: "\n") {
            line.pending.append(contentsOf: input[start ..< index])
            start = index + 1
            var text = line.pending
            line.pending.removeAll(keepingCapacity: true)
            if text.last == UInt8(ascii: "\r") { text.removeLast() }
            guard text.count <= configuration.maxLineBytes else { return refuseLongLine(line) }
            delegate?.lineServer(self, didReceive: text, from: line.id)
            if line.closing || line.inputEnded { return }
        }
        line.pending.append(contentsOf: input[start ..< count])
        if line.pending.count > configuration.maxLineBytes { refuseLongLine(line) }
    }

    private func refuseLongLine(_ line: LineConnection) {
        _ = uv_read_stop(line.stream)
        line.pending = []
        line.inputEnded = true
        // Through the task queue, like every reply, so it goes out after the replies before it.
        send(Array("{\"ok\":false,\"error\":\"request line longer than \(configuration.maxLineBytes) bytes; closing\"}\n".utf8), to: line.id)
        closeWhenWritten(line.id)
    }

    private func write(_ bytes: [UInt8], to id: UInt64) {
        guard let line = connections[id], !line.closing else { return }
        let request = LineWrite(bytes: bytes, connection: line)
        line.writesInFlight += 1
        let status = request.submit { [self] request, status in
            let line = request.connection
            line.writesInFlight -= 1
            outbound.withLock { table in
                if let queued = table[line.id] { table[line.id] = queued - request.byteCount }
            }
            guard !line.closing else { return }
            guard status == 0 else { return closeHandle(line) }  // the client went away
            if line.writesInFlight == 0 {
                if line.closeWhenWritten {
                    closeHandle(line)
                } else {
                    delegate?.lineServer(self, didDrain: line.id)
                }
            }
        }
        if status != 0 {
            line.writesInFlight -= 1
            closeHandle(line)
        }
    }

    private func closeHandle(_ line: LineConnection) {
        guard !line.closing else { return }
        line.closing = true
        outbound.withLock { $0[line.id] = nil }
        uv_close(decide_uv_tcp_as_handle(line.tcp)) { handle in
            let this = Unmanaged<UVLineServer>.fromOpaque(uv_loop_get_data(handle!.pointee.loop)).takeUnretainedValue()
            let line = LineConnection.from(handle!.pointee.data)
            this.connections[line.id] = nil
            this.delegate?.lineServer(this, didClose: line.id)
        }
    }
}

/// One client of a `UVLineServer`, on its loop thread. Owned by the server's table from accept
/// until the handle's close callback, so the unretained pointer in `data` never dangles.
private final class LineConnection {
    let id: UInt64
    let tcp: UnsafeMutablePointer<uv_tcp_t>
    /// Bytes of an unfinished line (at most `maxLineBytes`).
    var pending: [UInt8] = []
    var inputEnded = false
    var closing = false
    var closeWhenWritten = false
    var writesInFlight = 0

    init(id: UInt64, loop: UnsafeMutablePointer<uv_loop_t>) {
        self.id = id
        tcp = .allocate(capacity: 1)
        let status = uv_tcp_init(loop, tcp)
        precondition(status == 0, "uv_tcp_init failed: \(UVError.text(status))")
        tcp.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit { tcp.deallocate() }

    var stream: UnsafeMutablePointer<uv_stream_t> { decide_uv_tcp_as_stream(tcp) }

    static func from(_ data: UnsafeMutableRawPointer?) -> LineConnection {
        Unmanaged<LineConnection>.fromOpaque(data!).takeUnretainedValue()
    }
}

/// One `uv_write` of a copy of some bytes; retained for libuv until its callback ran.
private final class LineWrite {
    let connection: LineConnection
    let byteCount: Int
    private let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
    private let buffer: UnsafeMutableRawPointer
    private var completion: ((LineWrite, Int32) -> Void)?

    init(bytes: [UInt8], connection: LineConnection) {
        self.connection = connection
        byteCount = bytes.count
        buffer = .allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    }

    deinit {
        buffer.deallocate()
        request.deallocate()
    }

    /// Starts the write; `done` runs once on the loop thread unless the returned status is nonzero.
    func submit(done: @escaping (LineWrite, Int32) -> Void) -> Int32 {
        completion = done
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        var buf = uv_buf_init(buffer.assumingMemoryBound(to: CChar.self), UInt32(byteCount))
        let status = uv_write(request, connection.stream, &buf, 1) { request, status in
            let this = Unmanaged<LineWrite>.fromOpaque(request!.pointee.data).takeRetainedValue()
            let completion = this.completion
            this.completion = nil
            completion?(this, status)
        }
        if status != 0 {
            Unmanaged<LineWrite>.fromOpaque(request.pointee.data).release()
            completion = nil
        }
        return status
    }
}
