import Decide
@testable import DecideUV

/// A started transport with its delegate and captured logs.
struct Node {
    let transport: UVTransport
    let delegate: TestDelegate
    let logs: LogCapture
}

/// Makes and starts a transport named `nodeID` logging into its own capture.
func makeNode(_ nodeID: String, cluster: String = "test", secret: [UInt8]? = nil,
              configure: (inout UVTransport.Configuration) -> Void = { _ in }) throws -> Node {
    let logs = LogCapture()
    var configuration = UVTransport.Configuration(nodeID: nodeID, clusterName: cluster, clusterSecret: secret,
                                                  logger: logs.logger(nodeID))
    configure(&configuration)
    let transport = try UVTransport(configuration: configuration)
    let delegate = TestDelegate()
    try transport.start(delegate: delegate)
    return Node(transport: transport, delegate: delegate, logs: logs)
}

let secretA: [UInt8] = Array("correct horse battery staple!!".utf8)
let secretB: [UInt8] = Array("another secret of some length".utf8)

/// Two started nodes, `b` dialled into `a` on `host`; returns both links (a's side, b's side).
func connectedPair(host: String = "127.0.0.1", secret: [UInt8]? = nil,
                   configure: (inout UVTransport.Configuration) -> Void = { _ in })
    throws -> (a: Node, b: Node, aLink: ConnectionID, bLink: ConnectionID)? {
    let a = try makeNode("a", secret: secret, configure: configure)
    let b = try makeNode("b", secret: secret, configure: configure)
    let address = try a.transport.listen(on: host.contains(":") ? "[\(host)]:0" : "\(host):0")
    b.transport.connect(to: address)
    guard let (aLink, _) = a.delegate.waitForConnection(), let (bLink, _) = b.delegate.waitForConnection() else {
        a.transport.shutdown()
        b.transport.shutdown()
        return nil
    }
    return (a, b, aLink, bLink)
}
