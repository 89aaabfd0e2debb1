import Decide
import DecideUV
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `DecideBench transport`: loopback round-trip latency of a 64-byte message and one-way
/// throughput of 100-byte frames between two `UVTransport`s, each beside a plain blocking-socket
/// baseline measured in the same run. Prints both and their ratios.
/// Targets: p99 RTT within 2x the socket baseline; at least 1,000,000 frames/s one way.
func runTransportBench() {
    let roundTrips = Int(ProcessInfo.processInfo.environment["BENCH_ROUND_TRIPS"] ?? "") ?? 20_000
    let frames = Int(ProcessInfo.processInfo.environment["BENCH_FRAMES"] ?? "") ?? 2_000_000
    print("transport: \(roundTrips) round trips of 64 bytes, \(frames) one-way frames of 100 bytes, loopback 127.0.0.1")
    let socketRTT = TransportBench.socketPingPong(count: roundTrips)
    let uvRTT = TransportBench.uvPingPong(count: roundTrips)
    let sealedRTT = TransportBench.uvPingPong(count: roundTrips, sealed: true)
    let socketStream = TransportBench.socketStream(frames: frames)
    let uvStream = TransportBench.uvStream(frames: frames)
    let sealedStream = TransportBench.uvStream(frames: frames, sealed: true)
    func us(_ seconds: Double) -> String { String(format: "%.1f us", seconds * 1e6) }
    BenchTable.print(rows: [
        ["blocking socket", us(socketRTT.p50), us(socketRTT.p99), "1.00", "1.00"],
        ["UVTransport", us(uvRTT.p50), us(uvRTT.p99),
         String(format: "%.2f", uvRTT.p50 / socketRTT.p50), String(format: "%.2f", uvRTT.p99 / socketRTT.p99)],
        ["UVTransport, sealed", us(sealedRTT.p50), us(sealedRTT.p99),
         String(format: "%.2f", sealedRTT.p50 / socketRTT.p50), String(format: "%.2f", sealedRTT.p99 / socketRTT.p99)],
    ], header: ["round trip (64 B)", "p50", "p99", "p50 ratio", "p99 ratio"])
    func rate(_ seconds: Double) -> (String, String) {
        let perSecond = Double(frames) / seconds
        return (String(format: "%.0f", perSecond), String(format: "%.1f", perSecond * 100 / 1e6))
    }
    let (socketFrames, socketMB) = rate(socketStream)
    let (uvFrames, uvMB) = rate(uvStream)
    BenchTable.print(rows: [
        ["blocking socket stream", socketFrames, socketMB, "1.00"],
        ["UVTransport", uvFrames, uvMB, String(format: "%.2f", socketStream / uvStream)],
        ["UVTransport, sealed", rate(sealedStream).0, rate(sealedStream).1, String(format: "%.2f", socketStream / sealedStream)],
    ], header: ["one way (100 B frames)", "frames/s", "MB/s (payload)", "ratio"])
    let rttOK = uvRTT.p99 <= 2 * socketRTT.p99
    let rateOK = Double(frames) / uvStream >= 1_000_000
    print("target p99 RTT <= 2x socket: \(BenchTable.verdict(rttOK)); target >= 1,000,000 frames/s: \(BenchTable.verdict(rateOK))")
    // Sealing (ChaCha20-Poly1305 per frame, on the loop threads) beside plain links, same run.
    let sealedShare = uvStream / sealedStream
    print(String(format: "sealed links: %.0f%% of plain frames/s (goal >= 70%%: %@); p99 round trip %.2fx plain",
                 sealedShare * 100, BenchTable.verdict(sealedShare >= 0.7), sealedRTT.p99 / uvRTT.p99))
}

enum TransportBench {
    struct Latency { var p50: Double; var p99: Double }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func percentiles(_ samples: [Double]) -> Latency {
        let sorted = samples.sorted()
        return Latency(p50: sorted[sorted.count / 2], p99: sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }

    // MARK: Blocking-socket baselines

    /// A connected pair of loopback TCP sockets with TCP_NODELAY.
    static func socketPair() -> (Int32, Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                precondition(bind(listener, raw, length) == 0 && Glibc.listen(listener, 1) == 0)
                precondition(getsockname(listener, raw, &length) == 0)
            }
        }
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                precondition(Glibc.connect(client, raw, length) == 0)
            }
        }
        let server = accept(listener, nil, nil)
        Glibc.close(listener)
        var one: Int32 = 1
        for fd in [client, server] { setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        return (client, server)
    }

    static func readFully(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Bool {
        var done = 0
        while done < count {
            let n = read(fd, buffer + done, count - done)
            if n <= 0 { return false }
            done += n
        }
        return true
    }

    static func writeFully(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) {
        var done = 0
        while done < count {
            let n = write(fd, buffer + done, count - done)
            precondition(n > 0, "write failed")
            done += n
        }
    }

    /// Echo thread + client thread, 64 bytes each way (4-byte prefix + 60 bytes, as a frame).
    static func socketPingPong(count: Int) -> Latency {
        let (client, server) = socketPair()
        let echo = Thread {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
            while readFully(server, buffer, 64) { writeFully(server, buffer, 64) }
            buffer.deallocate()
        }
        echo.start()
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
        buffer.initializeMemory(as: UInt8.self, repeating: 1, count: 64)
        var samples: [Double] = []
        samples.reserveCapacity(count)
        for _ in 0 ..< count {
            let start = now()
            writeFully(client, buffer, 64)
            precondition(readFully(client, buffer, 64))
            samples.append(now() - start)
        }
        buffer.deallocate()
        Glibc.close(client)
        while !echo.isFinished { usleep(1000) }
        Glibc.close(server)
        return percentiles(samples)
    }

    /// Writer thread sends 100-byte frames with 4-byte prefixes in 64 KiB writes; the reader
    /// parses the prefixes and counts frames. Returns seconds for `frames`.
    static func socketStream(frames: Int) -> Double {
        let (client, server) = socketPair()
        let perWrite = 64 * 1024 / 104
        let writer = Thread {
            let chunk = UnsafeMutableRawPointer.allocate(byteCount: perWrite * 104, alignment: 8)
            for index in 0 ..< perWrite {
                (chunk + index * 104).storeBytes(of: UInt32(100).littleEndian, as: UInt32.self)
                (chunk + index * 104 + 4).initializeMemory(as: UInt8.self, repeating: 1, count: 100)
            }
            var sent = 0
            while sent < frames {
                let batch = min(perWrite, frames - sent)
                writeFully(client, chunk, batch * 104)
                sent += batch
            }
            chunk.deallocate()
        }
        let start = now()
        writer.start()
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64 * 1024, alignment: 8)
        var received = 0
        var pending = 0  // bytes of the current frame still to skip
        var header: [UInt8] = []
        while received < frames {
            let n = read(server, buffer, 64 * 1024)
            precondition(n > 0)
            var offset = 0
            while offset < n {
                if pending > 0 {
                    let take = min(pending, n - offset)
                    pending -= take
                    offset += take
                    if pending == 0 { received += 1 }
                } else {
                    header.append(buffer.load(fromByteOffset: offset, as: UInt8.self))
                    offset += 1
                    if header.count == 4 {
                        pending = Int(header[0]) | Int(header[1]) << 8 | Int(header[2]) << 16 | Int(header[3]) << 24
                        header.removeAll(keepingCapacity: true)
                    }
                }
            }
        }
        let elapsed = now() - start
        buffer.deallocate()
        Glibc.close(client)
        Glibc.close(server)
        return elapsed
    }

    // MARK: UVTransport

    /// Counts, echoes or times frames; the bench thread waits on `done`.
    final class BenchDelegate: TransportDelegate, @unchecked Sendable {
        enum Role { case echo, pinger(count: Int), sink(count: Int) }
        var role: Role
        let connected = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        var link: ConnectionID?
        var received = 0
        var sentAt = 0.0
        var samples: [Double] = []
        init(role: Role) { self.role = role }

        func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
            link = connection
            connected.signal()
        }
        func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID) {
            switch role {
            case .echo:
                _ = transport.send(Array(frame), to: connection)
            case .pinger(let count):
                samples.append(TransportBench.now() - sentAt)
                if samples.count == count {
                    done.signal()
                } else {
                    sentAt = TransportBench.now()
                    _ = transport.send(Array(frame), to: connection)
                }
            case .sink(let count):
                received += 1
                if received == count { done.signal() }
            }
        }
        func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {}
        func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {}
        func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {
            fatalError("bench connect failed: \(reason)")
        }
    }

    /// Two started transports, b dialled into a.
    /// With `sealed`, both share a cluster secret, so every frame is sealed and opened.
    static func uvPair(a aDelegate: BenchDelegate, b bDelegate: BenchDelegate, sealed: Bool = false) -> (UVTransport, UVTransport, ConnectionID) {
        let secret: [UInt8]? = sealed ? Array("a cluster secret for the benchmark".utf8) : nil
        let a = try! UVTransport(configuration: .init(nodeID: "a", clusterName: "bench", clusterSecret: secret))
        let b = try! UVTransport(configuration: .init(nodeID: "b", clusterName: "bench", clusterSecret: secret))
        try! a.start(delegate: aDelegate)
        try! b.start(delegate: bDelegate)
        let address = try! a.listen(on: "127.0.0.1:0")
        b.connect(to: address)
        aDelegate.connected.wait()
        bDelegate.connected.wait()
        return (a, b, bDelegate.link!)
    }

    /// Ping-pong driven from b's delegate (on b's loop thread), as the engine would.
    static func uvPingPong(count: Int, sealed: Bool = false) -> Latency {
        let echo = BenchDelegate(role: .echo)
        let pinger = BenchDelegate(role: .pinger(count: count))
        let (a, b, link) = uvPair(a: echo, b: pinger, sealed: sealed)
        pinger.samples.reserveCapacity(count)
        pinger.sentAt = now()
        _ = b.send([1] + Array(repeating: 0, count: 59), to: link)  // 60 + 4-byte prefix = 64 bytes
        pinger.done.wait()
        b.shutdown()
        a.shutdown()
        return percentiles(pinger.samples)
    }

    /// b's caller thread sends `frames` 100-byte frames as fast as `send` takes them (yielding
    /// on `.overLimit`); seconds until a's delegate counted them all.
    static func uvStream(frames: Int, sealed: Bool = false) -> Double {
        let sink = BenchDelegate(role: .sink(count: frames))
        let idle = BenchDelegate(role: .echo)
        let (a, b, link) = uvPair(a: sink, b: idle, sealed: sealed)
        let frame: [UInt8] = [1] + Array(repeating: 2, count: 99)
        let start = now()
        var sent = 0
        while sent < frames {
            switch b.send(frame, to: link) {
            case .queued: sent += 1
            case .overLimit: sched_yield()
            case .notConnected: fatalError("bench link lost")
            }
        }
        sink.done.wait()
        let elapsed = now() - start
        b.shutdown()
        a.shutdown()
        return elapsed
    }
}
