import DecideUV
import Prometheus

/// `GET /metrics` over HTTP/1.1 for Prometheus (docs/operations.md, "Metrics"): the registry's
/// text exposition (format 0.0.4), one response per connection, then the connection closes.
/// Beside it, for orchestrators (docs/operations.md, "Health and readiness"): `GET /health`,
/// `200 ok` whenever the peer's loop answers, and `GET /ready`, `200` or `503` with the reason
/// (`Readiness`).
///
/// Guarantees: a request head larger than `maxRequestBytes` (8 KiB), or one that is not a
/// request line, gets `400` and a close; another path gets `404`, another method `405`; nothing
/// read is kept past its connection.
final class MetricsEndpoint: UVStreamServer.Delegate, @unchecked Sendable {  // request state lives on the connection, loop thread only
    static let maxRequestBytes = 8 * 1024
    private let registry: PrometheusCollectorRegistry
    private let readiness: @Sendable () -> Readiness

    init(registry: PrometheusCollectorRegistry, readiness: @escaping @Sendable () -> Readiness) {
        self.registry = registry
        self.readiness = readiness
    }

    private final class Request {
        var head: [UInt8] = []
        var answered = false
    }

    func streamServer(_ server: UVStreamServer, didAccept connection: UVStreamServer.Connection) {
        connection.context = Request()
    }

    func streamServer(_ server: UVStreamServer, didRead bytes: UnsafeRawBufferPointer, on connection: UVStreamServer.Connection) {
        guard let request = connection.context as? Request, !request.answered else { return }
        request.head.append(contentsOf: bytes)
        guard let end = Self.headEnd(request.head) else {
            if request.head.count > Self.maxRequestBytes { answer(server, connection, request, status: "400 Bad Request", body: "request head too large\n") }
            return
        }
        let line = request.head[..<end].split(separator: UInt8(ascii: "\r"), maxSplits: 1).first ?? []
        let parts = line.split(separator: UInt8(ascii: " "))
        guard parts.count == 3, parts[2].starts(with: Array("HTTP/1.".utf8)) else {
            answer(server, connection, request, status: "400 Bad Request", body: "not an HTTP/1 request\n")
            return
        }
        let path = String(decoding: parts[1], as: UTF8.self)
        guard parts[0].elementsEqual("GET".utf8) || parts[0].elementsEqual("HEAD".utf8) else {
            answer(server, connection, request, status: "405 Method Not Allowed", body: "GET /metrics\n", extra: "Allow: GET, HEAD\r\n")
            return
        }
        let headOnly = parts[0].elementsEqual("HEAD".utf8)
        switch path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path {
        case "/health":
            answer(server, connection, request, status: "200 OK", body: "ok\n", headOnly: headOnly)
            return
        case "/ready":
            let state = readiness()
            answer(server, connection, request, status: state.ready ? "200 OK" : "503 Service Unavailable",
                   body: (state.ready ? "ready: " : "not ready: ") + state.reason + "\n", headOnly: headOnly)
            return
        case "/metrics":
            break
        default:
            answer(server, connection, request, status: "404 Not Found", body: "the metrics are at /metrics; /health and /ready answer probes\n")
            return
        }
        answer(server, connection, request, status: "200 OK", body: registry.emitToString(),
               contentType: "text/plain; version=0.0.4; charset=utf-8", headOnly: headOnly)
    }

    private func answer(_ server: UVStreamServer, _ connection: UVStreamServer.Connection, _ request: Request, status: String,
                        body: String, contentType: String = "text/plain; charset=utf-8", extra: String = "", headOnly: Bool = false) {
        request.answered = true
        request.head = []
        let bytes = Array(body.utf8)
        connection.output.append(contentsOf: Array(("HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(bytes.count)\r\n"
                                                     + "Connection: close\r\n\(extra)\r\n").utf8))
        if !headOnly { connection.output.append(contentsOf: bytes) }
        server.closeWhenWritten(connection)
    }

    /// The index of the blank line ending the request head, if it arrived.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    func streamServer(_ server: UVStreamServer, didDrain connection: UVStreamServer.Connection) {}
    func streamServer(_ server: UVStreamServer, inputEndedOn connection: UVStreamServer.Connection) {
        if let request = connection.context as? Request, !request.answered { server.close(connection) }
    }
    func streamServer(_ server: UVStreamServer, didClose connection: UVStreamServer.Connection) {
        connection.context = nil
    }
}
