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
        /// A connection whose handshake has not completed this long after it was accepted (or,
        /// for a dial, after `connect` began) is closed: a stranger holds a handshake slot
        /// (`maxInboundHandshakes`) for at most this long.
        public var handshakeTimeoutMilliseconds: UInt64
        /// TCP keepalive idle time; 0 turns keepalive off.
        public var keepaliveSeconds: UInt32
        /// Connections (inbound and outbound, any phase) at most. An inbound one past its share
        /// (`maxConnections - reservedOutboundConnections`) is refused and closed at once; a dial
        /// past all of them fails with `didFailToConnect`.
        public var maxConnections: Int
        /// Of `maxConnections`, the slots only this node's own dials may take: inbound
        /// connections, authenticated or not, never hold more than `maxConnections -
        /// reservedOutboundConnections`, so nobody connecting to `listen` can keep this node from
        /// dialling its peers. 0 up to `maxConnections - 1`; 128 by default.
        public var reservedOutboundConnections: Int = 128
        /// Inbound connections still in their handshake (not yet authenticated), at most, from
        /// all addresses together; one more is refused (refusal 9) and closed at once, without
        /// holding a slot. Each handshake ends within `handshakeTimeoutMilliseconds`, so a
        /// stranger that never finishes one frees its slot by then. 1 up to `maxConnections`;
        /// 128 by default.
        public var maxInboundHandshakes: Int = 128
        /// Of `maxInboundHandshakes`, at most this many from one source address (the IPv4 or the
        /// whole IPv6 address, any port), so strangers on one address cannot take the handshakes
        /// of peers on others. 1 up to `maxInboundHandshakes`; 16 by default.
        public var maxInboundHandshakesPerAddress: Int = 16
        /// Inbound connections refused before they authenticated are logged at most once per
        /// this interval for each reason: the first in full, the rest counted and their number
        /// logged in one `connections refused` line (`count`, `in-last-ms`, `reason`) once the
        /// interval passed. No refusal goes uncounted. 1 up to 3,600,000; 1,000 by default.
        public var refusalLogIntervalMilliseconds: UInt64 = 1_000
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
        /// link, 5 s handshake timeout, 30 s keepalive, 1024 connections of which 128 are kept for
        /// this node's dials, 128 inbound handshakes at once and 16 from one address, refusals
        /// logged once a second per reason, writes coalesced for 50 µs while links stream.
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
            guard reservedOutboundConnections >= 0, reservedOutboundConnections < maxConnections else {
                throw .invalidConfiguration("reservedOutboundConnections must be 0...maxConnections-1 (\(maxConnections - 1)), so that inbound connections keep a share")
            }
            guard maxInboundHandshakes >= 1, maxInboundHandshakes <= maxConnections else {
                throw .invalidConfiguration("maxInboundHandshakes must be 1...maxConnections (\(maxConnections))")
            }
            guard maxInboundHandshakesPerAddress >= 1, maxInboundHandshakesPerAddress <= maxInboundHandshakes else {
                throw .invalidConfiguration("maxInboundHandshakesPerAddress must be 1...maxInboundHandshakes (\(maxInboundHandshakes))")
            }
            guard refusalLogIntervalMilliseconds >= 1, refusalLogIntervalMilliseconds <= 3_600_000 else {
                throw .invalidConfiguration("refusalLogIntervalMilliseconds must be 1...3600000")
            }
            guard flushCoalescingMicroseconds <= 1_000 else {
                throw .invalidConfiguration("flushCoalescingMicroseconds must be 0...1000")
            }
        }
    }
}
