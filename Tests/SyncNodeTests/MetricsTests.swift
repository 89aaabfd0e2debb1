import CoreMetrics
import Foundation
import Glibc
import Prometheus
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// `--metrics`: Prometheus text on `GET /metrics`, with the numbers of a running pair moving as
/// it works (docs/operations.md, "Metrics"). The integration run scrapes it with curl.
extension SyncNodeTests {
    @Suite struct MetricsTests {
        /// The process has one metrics backend: every node of every test reports into it.
        static let registry: PrometheusCollectorRegistry = {
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            return registry
        }()

        /// One HTTP exchange on a fresh connection: the whole response as text.
        static func http(_ request: String, to address: String) throws -> String {
            let port = UInt16(address.split(separator: ":").last!)!
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            // A server that never answers fails the test after 5 s instead of hanging it.
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var target = sockaddr_in()
            target.sin_family = sa_family_t(AF_INET)
            target.sin_addr.s_addr = inet_addr("127.0.0.1")
            target.sin_port = port.bigEndian
            let connected = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw TestFailure("cannot connect to \(address)") }
            let bytes = Array(request.utf8)
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var response: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                response += buffer[0..<count]
            }
            return String(decoding: response, as: UTF8.self)
        }

        /// The value of the sample `name{labels}` in a scrape, or nil.
        static func sample(_ text: String, _ name: String) -> Double? {
            for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
                return Double(line.dropFirst(name.count + 1))
            }
            return nil
        }

        /// `GET /health` and `GET /ready` (docs/operations.md, "Health and readiness"): a peer
        /// whose only seed never answers is not ready until `--ready-seed-wait-ms` passed, then
        /// ready and serving alone; a peer without seeds is ready at once; one linked to a member
        /// says so; HEAD answers the status without a body.
        @Test func healthAndReadinessAnswerProbes() async throws {
            let registry = Self.registry
            let lone = try TestPeer("ready-lone", metricsRegistry: registry) { $0.metrics = "127.0.0.1:0" }
            func get(_ path: String, _ peer: TestPeer, method: String = "GET") throws -> String {
                try Self.http("\(method) \(path) HTTP/1.1\r\nHost: test\r\n\r\n", to: try #require(peer.process.metricsAddress))
            }
            // Before any member links to it.
            let alone = try get("/ready", lone)
            #expect(alone.hasPrefix("HTTP/1.1 200 OK\r\n") && alone.hasSuffix("\r\n\r\nready: store open, no seeds: serving alone\n"), "\(alone)")
            // Port 1 on loopback: nothing listens, every dial is refused.
            let waiting = try TestPeer("ready-waiting", peers: ["127.0.0.1:1"], metricsRegistry: registry) {
                $0.metrics = "127.0.0.1:0"
                $0.readySeedWaitMilliseconds = "1500"
            }
            let linked = try TestPeer("ready-linked", peers: [lone.listenAddress], metricsRegistry: registry) {
                $0.metrics = "127.0.0.1:0"
                $0.readySeedWaitMilliseconds = "600000"
            }
            defer { Task { await lone.stop(); await waiting.stop(); await linked.stop() } }
            let health = try get("/health", waiting)
            #expect(health.hasPrefix("HTTP/1.1 200 OK\r\n") && health.hasSuffix("\r\n\r\nok\n"), "\(health)")
            let early = try get("/ready", waiting)
            #expect(early.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n") && early.contains("not ready: store open, waiting for a seed to answer"), "\(early)")
            #expect(await eventually(10) { (try? get("/ready", waiting))?.hasPrefix("HTTP/1.1 200 OK") ?? false })
            #expect(try get("/ready", waiting).hasSuffix("ready: store open, no member linked (waited 1500 ms for a seed): serving alone\n"))
            #expect(await eventually(10) { (try? get("/ready", linked))?.hasSuffix("ready: store open, linked to 1 of 1 members\n") ?? false })
            let head = try get("/ready", linked, method: "HEAD")
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.hasSuffix("\r\n\r\n"), "\(head)")
            #expect(try get("/nothing", lone).hasPrefix("HTTP/1.1 404 Not Found"))
        }

        /// Every answer `Readiness` gives, from its inputs alone.
        @Test func readinessFollowsItsRule() {
            func answer(seeds: Int = 1, linked: Int = 0, members: Int = 1, elapsed: UInt64 = 0, leaving: Bool = false) -> Readiness {
                Readiness.of(seeds: seeds, linked: linked, members: members, elapsedMilliseconds: elapsed,
                             seedWaitMilliseconds: 30_000, leaving: leaving)
            }
            #expect(answer(seeds: 0, members: 0) == Readiness(ready: true, reason: "store open, no seeds: serving alone"))
            #expect(answer(elapsed: 29_999) == Readiness(ready: false, reason: "store open, waiting for a seed to answer (29999 of 30000 ms)"))
            #expect(answer(elapsed: 30_000) == Readiness(ready: true, reason: "store open, no member linked (waited 30000 ms for a seed): serving alone"))
            #expect(answer(linked: 2, members: 3) == Readiness(ready: true, reason: "store open, linked to 2 of 3 members"))
            #expect(answer(linked: 2, members: 3, leaving: true) == Readiness(ready: false, reason: "leaving the cluster"))
            #expect(answer(seeds: 0, members: 0, leaving: true).ready == false)
        }

        @Test func aRunningPairIsScrapedAndItsNumbersMove() async throws {
            let registry = Self.registry
            let a = try TestPeer("metrics-a", metricsRegistry: registry) { $0.metrics = "127.0.0.1:0" }
            let b = try TestPeer("metrics-b", peers: [a.listenAddress], metricsRegistry: registry) { $0.metrics = "127.0.0.1:0" }
            defer { Task { await a.stop(); await b.stop() } }
            let address = try #require(a.process.metricsAddress)
            #expect(await eventually { a.isConnected(to: "metrics-b") })
            let client = try a.client()
            for index in 0..<25 { _ = try client.call("SET", "metered[\(index)]", "\(index)") }
            func scrape() throws -> String { try Self.http("GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n", to: address) }
            // Published on the engines' tick, at most once a second.
            let moved = try await eventually(10) {
                let text = try scrape()
                return (Self.sample(text, #"decide_decisions_total{node="metrics-a"}"#) ?? 0) >= 25
                    && (Self.sample(text, #"decide_deltas_sent_total{node="metrics-a"}"#) ?? 0) >= 25
                    && (Self.sample(text, #"decide_deltas_received_total{node="metrics-b"}"#) ?? 0) >= 25
                    && (Self.sample(text, #"decide_propagation_lag_seconds_count{node="metrics-b"}"#) ?? 0) >= 25
                    && Self.sample(text, #"decide_peers_connected{node="metrics-a"}"#) == 1
                    && (Self.sample(text, #"decide_link_changes_total{node="metrics-a",change="up"}"#) ?? 0) >= 1
                    && (Self.sample(text, #"decide_entries{node="metrics-b"}"#) ?? 0) >= 25
            }
            let text = try scrape()
            #expect(moved, "\(text.split(separator: "\n").filter { $0.contains("metrics-") }.joined(separator: "\n"))")
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4"))
            #expect(text.contains(#"decide_peer_queued_bytes{node="metrics-a",peer="metrics-b"}"#))
            // More writes: the counters only go up, by what happened.
            let before = Self.sample(text, #"decide_decisions_total{node="metrics-a"}"#) ?? 0
            for index in 25..<35 { _ = try client.call("SET", "metered[\(index)]", "\(index)") }
            #expect(try await eventually(10) { (Self.sample(try scrape(), #"decide_decisions_total{node="metrics-a"}"#) ?? 0) >= before + 10 })

            #expect(try Self.http("GET /other HTTP/1.1\r\n\r\n", to: address).hasPrefix("HTTP/1.1 404"))
            #expect(try Self.http("POST /metrics HTTP/1.1\r\n\r\n", to: address).hasPrefix("HTTP/1.1 405"))
            #expect(try Self.http("HELLO\r\n\r\n", to: address).hasPrefix("HTTP/1.1 400"))
            #expect(try Self.http(String(repeating: "x", count: 9_000), to: address).hasPrefix("HTTP/1.1 400"))
        }
    }
}
