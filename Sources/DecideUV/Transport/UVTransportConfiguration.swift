import Logging

extension UVTransport {
    /// Everything a `UVTransport` needs. Only `nodeID` and `clusterName` have no default.
    public struct Configuration: Sendable {
        /// This node's id, sent in the hello (1...255 UTF-8 bytes).
        public var nodeID: String
        /// Peers of another cluster name are refused (1...255 UTF-8 bytes).
        public var clusterName: String
        /// With a secret, both sides prove it before any message, and every frame after that is
        /// sealed (ChaCha20-Poly1305, keys per link and direction; docs/protocol.md §3–4); the
        /// hello names nothing before the peer proved it. A peer without it is refused. Without
        /// one, `listen` accepts loopback addresses only. It is the secret this node proves and
        /// seals with; `acceptedClusterSecrets` are accepted from peers as well (rotation).
        public var clusterSecret: [UInt8]?
        /// More secrets a peer may prove (beside `clusterSecret`), for rotating the secret without
        /// downtime: docs/operations.md, "Rotating the cluster secret". Change them on a running
        /// transport with `UVTransport.updateClusterSecrets`.
        public var acceptedClusterSecrets: [[UInt8]] = []
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
        /// While links stream (the loop's previous write started less than this long ago, and
        /// carried more than one frame or was followed by no input), each write waits this long
        /// first, so that the frames queued meanwhile go out in the same write: a stream of small
        /// deltas then costs both sides a system call per few hundred frames instead of per few.
        /// A frame after a quiet spell, or after a one-frame write that was answered (a request
        /// and its reply), is written at once. 0 writes at once always; at most 1,000
        /// (docs/protocol.md §7).
        public var flushCoalescingMicroseconds: UInt32 = 50
        /// Where link up / refused / closed lines go.
        public var logger: Logger

        /// A configuration with the documented defaults: 16 MiB frames, 64 MiB outbound per
        /// link, 5 s handshake timeout, 30 s keepalive, 1024 connections, writes coalesced for
        /// 50 µs while links stream.
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

        /// The secrets this node accepts, the one it proves first (empty without a secret).
        var keyring: [[UInt8]] {
            guard let clusterSecret else { return [] }
            return [clusterSecret] + acceptedClusterSecrets.filter { $0 != clusterSecret }
        }

        static func validateKeyring(_ keyring: [[UInt8]]) throws(UVTransportError) {
            guard keyring.allSatisfy({ $0.count >= 16 }) else {
                throw .invalidConfiguration("every cluster secret must be at least 16 bytes")
            }
            guard keyring.count <= 8 else { throw .invalidConfiguration("at most 8 cluster secrets may be accepted at once") }
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
            if clusterSecret == nil, !acceptedClusterSecrets.isEmpty {
                throw .invalidConfiguration("acceptedClusterSecrets need a clusterSecret to prove and seal with")
            }
            try Self.validateKeyring(keyring)
            guard maxFrameBytes >= 1, maxFrameBytes <= Int(UInt32.max) else {
                throw .invalidConfiguration("maxFrameBytes must be 1...4294967295")
            }
            guard maxOutboundBytes >= maxFrameBytes + WireProtocol.frameHeaderBytes else {
                throw .invalidConfiguration("maxOutboundBytes must hold at least one frame of maxFrameBytes")
            }
            guard handshakeTimeoutMilliseconds >= 1 else { throw .invalidConfiguration("handshakeTimeoutMilliseconds must be positive") }
            guard maxConnections >= 1 else { throw .invalidConfiguration("maxConnections must be positive") }
            guard flushCoalescingMicroseconds <= 1_000 else {
                throw .invalidConfiguration("flushCoalescingMicroseconds must be 0...1000")
            }
        }
    }
}
