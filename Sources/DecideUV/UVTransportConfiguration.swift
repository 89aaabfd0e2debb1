import Logging

extension UVTransport {
    /// Everything a `UVTransport` needs. Only `nodeID` and `clusterName` have no default.
    public struct Configuration: Sendable {
        /// This node's id, sent in the hello (1...255 UTF-8 bytes).
        public var nodeID: String
        /// Peers of another cluster name are refused (1...255 UTF-8 bytes).
        public var clusterName: String
        /// With a secret, both sides prove it (HMAC-SHA256 challenge-response) before any message;
        /// a peer without it is refused. Without one, `listen` accepts loopback addresses only.
        public var clusterSecret: [UInt8]?
        /// Allows `listen` on a non-loopback address without a secret (unauthenticated, logged).
        public var insecure: Bool
        /// Largest frame payload accepted from a peer; a longer length closes the link. Frames
        /// passed to `send` must not be longer either.
        public var maxFrameBytes: Int
        /// Bytes (length prefixes included) queued or in flight per link before `send` answers
        /// `.overLimit`.
        public var maxOutboundBytes: Int
        /// A link whose handshake has not completed by then is closed.
        public var handshakeTimeoutMilliseconds: UInt64
        /// TCP keepalive idle time; 0 turns keepalive off.
        public var keepaliveSeconds: UInt32
        /// Links (inbound and outbound, any state) at most; extra inbound ones are refused.
        public var maxConnections: Int
        /// Where link up / refused / closed lines go.
        public var logger: Logger

        /// A configuration with the documented defaults: 16 MiB frames, 64 MiB outbound per
        /// link, 5 s handshake timeout, 30 s keepalive, 1024 connections.
        public init(nodeID: String, clusterName: String, clusterSecret: [UInt8]? = nil, insecure: Bool = false,
                    maxFrameBytes: Int = 16 * 1024 * 1024, maxOutboundBytes: Int = 64 * 1024 * 1024,
                    handshakeTimeoutMilliseconds: UInt64 = 5_000, keepaliveSeconds: UInt32 = 30,
                    maxConnections: Int = 1024, logger: Logger = Logger(label: "decide.uv")) {
            self.nodeID = nodeID
            self.clusterName = clusterName
            self.clusterSecret = clusterSecret
            self.insecure = insecure
            self.maxFrameBytes = maxFrameBytes
            self.maxOutboundBytes = maxOutboundBytes
            self.handshakeTimeoutMilliseconds = handshakeTimeoutMilliseconds
            self.keepaliveSeconds = keepaliveSeconds
            self.maxConnections = maxConnections
            self.logger = logger
        }

        /// Protocol versions offered in the hello; tests narrow it to provoke a version refusal.
        package var protocolVersions: ClosedRange<UInt16> = WireProtocol.minSupportedVersion ... WireProtocol.maxSupportedVersion

        func validate() throws(UVTransportError) {
            func text(_ value: String, _ name: String) throws(UVTransportError) {
                guard !value.isEmpty, value.utf8.count <= WireProtocol.maxTextFieldBytes else {
                    throw .invalidConfiguration("\(name) must be 1...255 UTF-8 bytes")
                }
            }
            try text(nodeID, "nodeID")
            try text(clusterName, "clusterName")
            if let secret = clusterSecret, secret.count < 16 {
                throw .invalidConfiguration("clusterSecret must be at least 16 bytes")
            }
            guard maxFrameBytes >= 1, maxFrameBytes <= Int(UInt32.max) else {
                throw .invalidConfiguration("maxFrameBytes must be 1...4294967295")
            }
            guard maxOutboundBytes >= maxFrameBytes + WireProtocol.frameHeaderBytes else {
                throw .invalidConfiguration("maxOutboundBytes must hold at least one frame of maxFrameBytes")
            }
            guard handshakeTimeoutMilliseconds >= 1 else { throw .invalidConfiguration("handshakeTimeoutMilliseconds must be positive") }
            guard maxConnections >= 1 else { throw .invalidConfiguration("maxConnections must be positive") }
        }
    }
}
