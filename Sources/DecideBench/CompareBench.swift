import Decide
import DecideUV
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `DecideBench compare`: the library side of `make bench-compare` (Cluster/bench-compare.sh), and
/// the stream client the script uses against Redis (syncnode is measured with redis-benchmark,
/// like Redis). The mode comes from the environment:
///
/// - `COMPARE_MODE=library`: two nodes linked by DecideUV over 127.0.0.1, COMPARE_KEYS
///   single-write decisions of a 64-character string value to COMPARE_KEYS distinct keys on A,
///   by 1 writer thread and by COMPARE_CLIENTS writer threads (each a thread of its own, released
///   together); time until B holds A's state.
/// - `COMPARE_MODE=redis-stream`: one connection writes COMPARE_KEYS pipelined SETs to the Redis
///   master at COMPARE_MASTER; the replica at COMPARE_REPLICA is polled until it holds the last.
///
/// Every figure is printed as one machine-readable line `COMPARE name value` beside a readable
/// table; the script collects the COMPARE lines.
enum CompareBench {
    static let environment = ProcessInfo.processInfo.environment
    static func setting(_ name: String, _ fallback: Int) -> Int { Int(environment[name] ?? "") ?? fallback }
    static let valueText = String(repeating: "v", count: 64)

    static func emit(_ name: String, _ value: Double) {
        print("COMPARE \(name) \(String(format: "%.6f", value))")
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
    static func seconds(_ from: UInt64, _ to: UInt64) -> Double { Double(to &- from) / 1e9 }

    static func run() {
        switch environment["COMPARE_MODE"] ?? "library" {
        case "library": library()
        case "redis-stream": redisStream()
        case let other:
            FileHandle.standardError.write(Data("compare: unknown COMPARE_MODE \(other)\n".utf8))
            exit(2)
        }
    }

    // MARK: library, in process

    struct Item: CollectionState {
        static func defaultValue(at id: Int) -> String { "" }
        static var name: String { "compare.item" }
    }

    typealias Put = ReplicationBench.Write<Item>

    /// One pass: a fresh pair, `keys` decisions on A by `writers` threads, then B polled until
    /// it holds A's state. Returns (seconds until the last decision, seconds until B holds all,
    /// whether B holds all `keys`).
    static func libraryPass(keys: Int, writers: Int) -> (written: Double, replicated: Double, complete: Bool) {
        let pair = try! ReplicationBench.Pair()
        let start: UInt64
        if writers == 1 {
            start = now()
            for index in 0..<keys { pair.a.decide(Put(id: index, value: valueText)) }
        } else {
            // `writers` threads of their own, started before the clock and released together.
            // (`DispatchQueue.concurrentPerform` ran the writers on as many threads as there are
            // processors, two here, whatever `writers` said: docs/performance.md, "Fifty threads
            // of their own".)
            let a = pair.a
            let gate = DispatchSemaphore(value: 0)
            let ready = DispatchGroup()
            let done = DispatchGroup()
            for writer in 0..<writers {
                ready.enter()
                done.enter()
                Thread {
                    ready.leave()
                    gate.wait()
                    var index = writer
                    while index < keys {
                        a.decide(Put(id: index, value: valueText))
                        index += writers
                    }
                    done.leave()
                }.start()
            }
            ready.wait()
            start = now()
            for _ in 0..<writers { gate.signal() }
            done.wait()
        }
        let written = now()
        let target = pair.a.stateSummary.digest
        let deadline = Date().addingTimeInterval(120)
        while pair.b.stateSummary.digest != target && Date() < deadline { usleep(100) }
        let end = now()
        let complete = pair.b.stateSummary.digest == target && pair.b.stateSummary.entryCount == keys
        pair.stop()
        return (seconds(start, written), seconds(start, end), complete)
    }

    static func library() {
        let keys = setting("COMPARE_KEYS", 100_000)
        let clients = setting("COMPARE_CLIENTS", 50)
        print("== compare: library, two nodes over DecideUV on 127.0.0.1, \(keys) keys, 64-character values")
        // Redis is measured as a server that has held these keys before (bench-compare runs
        // redis-benchmark first, and each stream round follows a FLUSHALL of the last): its
        // allocator hands back pages it already has. One unreported pass gives the library the
        // same footing: the process's allocator has held a pair of this size before
        // (docs/performance.md, "A warm process on both sides"). COMPARE_WARMUP=0 measures cold.
        if setting("COMPARE_WARMUP", 1) > 0 { _ = libraryPass(keys: keys, writers: 1) }
        var rows: [[String]] = []
        for writers in [1, clients] {
            let pass = libraryPass(keys: keys, writers: writers)
            let name = "library_w\(writers)"
            let writeRate = Double(keys) / pass.written
            let replicatedRate = Double(keys) / pass.replicated
            let lag = (pass.replicated - pass.written) * 1000
            if pass.complete {
                emit("\(name)_write_per_s", writeRate)
                emit("\(name)_replicated_per_s", replicatedRate)
                emit("\(name)_lag_ms", lag)
                emit("\(name)_total_ms", pass.replicated * 1000)
            } else {
                print("COMPARE \(name)_incomplete 1")
            }
            rows.append(["\(writers) writer thread\(writers == 1 ? "" : "s")", CoreBench.format(writeRate),
                         pass.complete ? CoreBench.format(replicatedRate) : "INCOMPLETE", String(format: "%.3f ms", lag)])
        }
        BenchTable.print(rows: rows, header: ["writers on A", "decided /s on A", "B holds all: /s", "B behind A by"])
    }

    // MARK: a blocking loopback client

    final class LineSocket: @unchecked Sendable {
        let fd: Int32
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pending = 0
        var start = 0

        init(_ address: String) {
            let parts = address.split(separator: ":")
            precondition(parts.count == 2, "address \(address) is not HOST:PORT")
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            precondition(fd >= 0, "socket failed")
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = in_port_t(UInt16(parts[1])!).bigEndian
            inet_pton(AF_INET, String(parts[0]), &sin.sin_addr)
            let result = withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            precondition(result == 0, "cannot connect to \(address): errno \(errno)")
        }

        deinit { close(fd) }

        func write(_ bytes: [UInt8]) {
            var offset = 0
            while offset < bytes.count {
                let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
                precondition(sent > 0, "send failed: errno \(errno)")
                offset += sent
            }
        }

        /// One line already buffered (without the newline), if any.
        func takeLine() -> [UInt8]? {
            guard let newline = buffer[start..<pending].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
            let line = Array(buffer[start..<newline])
            start = newline + 1
            return line
        }

        /// One recv(2) into the buffer (call when poll says the socket is readable).
        func receiveAvailable() {
            if start > 0 {
                buffer.replaceSubrange(0..<(pending - start), with: buffer[start..<pending])
                pending -= start
                start = 0
            }
            if pending == buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count)) }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + pending, $0.count - pending, 0) }
            precondition(count > 0, "connection closed while waiting for a reply")
            pending += count
        }

        /// Reads one line (without the newline).
        func readLine() -> [UInt8] {
            while true {
                if let line = takeLine() { return line }
                receiveAvailable()
            }
        }

        /// Reads and discards `count` lines, counting those that start with `prefix`.
        func readLines(_ count: Int, countingPrefix prefix: [UInt8]) -> Int {
            var matched = 0
            for _ in 0..<count where readLine().starts(with: prefix) { matched += 1 }
            return matched
        }
    }

    // MARK: Redis master → replica stream

    static func redisStream() {
        let keys = setting("COMPARE_KEYS", 100_000)
        let master = environment["COMPARE_MASTER"] ?? "127.0.0.1:6379"
        let replica = environment["COMPARE_REPLICA"] ?? "127.0.0.1:6380"
        let writer = LineSocket(master)
        let reader = LineSocket(replica)
        @Sendable func command(_ parts: [String]) -> [UInt8] {
            var text = "*\(parts.count)\r\n"
            for part in parts { text += "$\(part.utf8.count)\r\n\(part)\r\n" }
            return Array(text.utf8)
        }
        reader.write(command(["FLUSHALL"]))
        _ = reader.readLine()   // a replica refuses writes; the reply only keeps the stream in step
        writer.write(command(["FLUSHALL"]))
        precondition(writer.readLine().starts(with: Array("+OK".utf8)), "FLUSHALL failed on the master")
        let lastKey = "stream:\(keys - 1)"
        // A second round must not see the first round's last key: wait until the flush reached
        // the replica.
        let flushDeadline = now() + 10_000_000_000
        while now() < flushDeadline {
            reader.write(command(["EXISTS", lastKey]))
            if reader.readLine() == Array(":0\r".utf8) { break }
            usleep(1_000)
        }
        let chunk = 1_000
        var payloads: [[UInt8]] = []
        var index = 0
        while index < keys {
            var bytes: [UInt8] = []
            for key in index..<min(keys, index + chunk) { bytes += command(["SET", "stream:\(key)", valueText]) }
            payloads.append(bytes)
            index += chunk
        }
        let start = now()
        let seen = Atomic<UInt64>(0)
        let poller = Thread {
            let probe = command(["EXISTS", lastKey])
            let deadline = now() + 120_000_000_000
            while now() < deadline {
                reader.write(probe)
                if reader.readLine() == Array(":1\r".utf8) {
                    seen.store(now(), ordering: .sequentiallyConsistent)
                    return
                }
                usleep(100)
            }
        }
        poller.start()
        let acknowledged = Atomic<Int>(0)
        let repliesDone = Atomic<UInt64>(0)
        let replyThread = Thread {
            var ok = 0
            for _ in 0..<keys where writer.readLine() == Array("+OK\r".utf8) { ok += 1 }
            acknowledged.store(ok, ordering: .sequentiallyConsistent)
            repliesDone.store(now(), ordering: .sequentiallyConsistent)
        }
        replyThread.start()
        for payload in payloads { writer.write(payload) }
        while repliesDone.load(ordering: .sequentiallyConsistent) == 0 && now() < start + 121_000_000_000 { usleep(200) }
        while seen.load(ordering: .sequentiallyConsistent) == 0 && now() < start + 121_000_000_000 { usleep(200) }
        let written = repliesDone.load(ordering: .sequentiallyConsistent)
        let end = seen.load(ordering: .sequentiallyConsistent)
        print("== compare: Redis master → replica, one pipelined connection, \(keys) SETs of a 64-byte value")
        guard written != 0, end != 0, acknowledged.load(ordering: .sequentiallyConsistent) == keys else {
            print("COMPARE redis_stream_incomplete 1")
            return
        }
        let writeRate = Double(keys) / seconds(start, written)
        let replicatedRate = Double(keys) / seconds(start, end)
        let lag = (Double(end) - Double(written)) / 1e6  // negative: held before the last reply was read
        emit("redis_stream_write_per_s", writeRate)
        emit("redis_stream_replicated_per_s", replicatedRate)
        emit("redis_stream_lag_ms", lag)
        emit("redis_stream_total_ms", seconds(start, end) * 1000)
        BenchTable.print(rows: [[CoreBench.format(writeRate), CoreBench.format(replicatedRate), String(format: "%.3f ms", lag)]],
                         header: ["SETs acknowledged /s", "replica holds last: /s", "replica behind last reply by"])
    }
}
