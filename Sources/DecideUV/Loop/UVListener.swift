import CLibUV

/// One listening TCP socket on the loop thread. Retained for libuv from `listen` until its
/// close callback; its handle memory is freed only then.
final class UVListener {
    let tcp: UnsafeMutablePointer<uv_tcp_t>
    /// The bound address with the real port.
    var boundAddress = ""
    var closing = false
    private let liveCounter: LiveCounter

    init(loop: UnsafeMutablePointer<uv_loop_t>, liveCounter: LiveCounter) {
        self.liveCounter = liveCounter
        tcp = .allocate(capacity: 1)
        let status = uv_tcp_init(loop, tcp)
        precondition(status == 0, "uv_tcp_init failed: \(UVError.text(status))")
        tcp.pointee.data = Unmanaged.passRetained(self).toOpaque()
        liveCounter.add(1)
    }

    deinit {
        tcp.deallocate()
        liveCounter.add(-1)
    }

    /// Closes the handle; the listener is released in the close callback.
    func close() {
        guard !closing else { return }
        closing = true
        uv_close(decide_uv_tcp_as_handle(tcp)) { handle in
            Unmanaged<UVListener>.fromOpaque(handle!.pointee.data).release()
        }
    }

    static func from(_ data: UnsafeMutableRawPointer?) -> UVListener {
        Unmanaged<UVListener>.fromOpaque(data!).takeUnretainedValue()
    }
}
