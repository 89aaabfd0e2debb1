extension SimulatedNetwork {
    /// The fixed limits of a simulated network. Byte counts are wire bytes: the frame plus the
    /// 4-byte length prefix it would carry over TCP, as `DecideUV` counts them.
    public struct Configuration: Hashable, Sendable {
        /// The most bytes one side of a link may have in flight (sent, neither delivered nor
        /// dropped). A send that would pass it answers `.overLimit`. Default 64 MiB, as DecideUV.
        public var maxOutboundBytes: Int
        /// The largest frame `send` accepts (a precondition, as in DecideUV). Default 16 MiB.
        public var maxFrameBytes: Int
        /// How long a connect across a partition waits before `didFailToConnect(.timedOut)`.
        public var connectTimeoutMilliseconds: UInt64
        /// While a partition keeps a close notice from reaching the peer (a FIN that cannot
        /// cross), the notice is retried this often, like a TCP retransmission.
        public var closeRetryMilliseconds: UInt64

        /// The defaults: 64 MiB outbound, 16 MiB frames, 1 s connect timeout, 200 ms close retry.
        public init(maxOutboundBytes: Int = 64 << 20, maxFrameBytes: Int = 16 << 20,
                    connectTimeoutMilliseconds: UInt64 = 1_000, closeRetryMilliseconds: UInt64 = 200) {
            self.maxOutboundBytes = maxOutboundBytes
            self.maxFrameBytes = maxFrameBytes
            self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
            self.closeRetryMilliseconds = closeRetryMilliseconds
        }

        func validate() {
            precondition(maxOutboundBytes > 0, "maxOutboundBytes must be positive")
            precondition(maxFrameBytes > 0, "maxFrameBytes must be positive")
            precondition(closeRetryMilliseconds > 0, "closeRetryMilliseconds must be positive")
        }
    }
}
