import Decide
import Foundation

/// `DecideBench memory`: the bytes a node holds per entry beyond the entry's own key and value
/// bytes, at `BENCH_MEMORY_KEYS` keys (default 1,000,000) of `BENCH_MEMORY_VALUE_BYTES`-byte
/// values (default 24, a value on the heap), and of 8-byte values (a counter, a short string:
/// held in the entry's record). Each case runs in a child process (this binary, `memory-child`), which
/// reads its resident set (VmRSS, after `malloc_trim`) before and after filling one in-memory
/// node; the baseline is the keys' and values' own bytes.
///
/// Two cases: the node's own typed writes (the value is also kept decoded, for reads), and the
/// same entries arriving from a peer (bytes only, as replication and catch-up store them); and,
/// at the first value size, the peer's entries each with a lifetime (an hour), which the node
/// also schedules to expire (presence, leases, sessions).
enum MemoryBench {
    /// The goal: at most this many bytes per entry beyond its key and value.
    static let goalBytesPerEntry = 150.0

    struct Item: CollectionState {
        static func defaultValue(at id: Int) -> String { "" }
        static var name: String { "bench.memory" }
    }

    /// Writes `range` of `Item`, each a string that encodes to `valueBytes` bytes of JSON.
    struct Fill: Decision {
        let range: Range<Int>
        let valueBytes: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            for index in range { write(MemoryBench.text(index, valueBytes), into: Item.self, at: index) }
            return .none
        }
    }

    /// A string of `valueBytes` - 2 characters (its JSON adds the quotes), distinct per index.
    static func text(_ index: Int, _ valueBytes: Int) -> String {
        let digits = String(index)
        return String(repeating: "v", count: max(0, valueBytes - 2 - digits.count)) + digits
    }

    static func run() {
        let environment = ProcessInfo.processInfo.environment
        let keys = Int(environment["BENCH_MEMORY_KEYS"] ?? "") ?? 1_000_000
        let valueBytes = max(2, Int(environment["BENCH_MEMORY_VALUE_BYTES"] ?? "") ?? 24)
        let sizes = valueBytes == 8 ? [8] : [valueBytes, 8]
        print("== memory: bytes per entry beyond its key and value, \(keys) keys of \(sizes.map(String.init).joined(separator: " and "))-byte values, one node in memory (RSS of a child process)")
        var rows: [[String]] = []
        for size in sizes {
            for mode in size == sizes[0] ? ["local", "remote", "expiring"] : ["local", "remote"] {
                let label = ["local": "own typed writes", "remote": "entries from a peer",
                             "expiring": "entries from a peer, each expiring"][mode]! + ", \(size)-byte values"
                guard let result = measure(mode: mode, keys: keys, valueBytes: size) else {
                    rows.append([label, "failed", "", "", ""])
                    continue
                }
                let overhead = (result.grownBytes - result.payloadBytes) / Double(keys)
                    rows.append([label, String(format: "%.0f MB", result.grownBytes / 1e6),
                             String(format: "%.0f MB", result.payloadBytes / 1e6),
                             String(format: "%.0f B", overhead),
                             "\(BenchTable.verdict(overhead <= goalBytesPerEntry)) (≤ \(Int(goalBytesPerEntry)) B)"])
            }
        }
        BenchTable.print(rows: rows, header: ["entries", "node grew by", "keys + values", "overhead per entry", "goal"])
    }

    private static func measure(mode: String, keys: Int, valueBytes: Int) -> (grownBytes: Double, payloadBytes: Double)? {
        guard let (status, _, fields) = try? BenchChild.run(["memory-child", mode, "\(keys)", "\(valueBytes)"]) else { return nil }
        guard status == 0, let before = fields["beforeKB"], let after = fields["afterKB"],
              let payload = fields["payloadBytes"] else { return nil }
        return ((after - before) * 1024, payload)
    }

    /// The child: fills one node and prints `beforeKB= afterKB= payloadBytes=`.
    static func child(_ arguments: [String]) -> Never {
        guard arguments.count == 3, let keys = Int(arguments[1]), let valueBytes = Int(arguments[2]) else {
            print("usage: memory-child local|remote|expiring KEYS VALUE_BYTES")
            exit(2)
        }
        let node = try! Node(configuration: .init(id: "memory"))
        // Everything the node allocates once (caches, tables) is in `before`.
        node.decide(Fill(range: 0..<1, valueBytes: valueBytes))
        let before = ProcessMemory.kilobytes("VmRSS")
        var payload = 0
        var start = 0
        // An hour from now, for the `expiring` case: nothing expires while the child runs.
        let expiry = UInt64(Date().timeIntervalSince1970 * 1_000) + 3_600_000
        while start < keys {
            let end = min(keys, start + 1_000)
            if arguments[0] == "local" {
                precondition(node.decide(Fill(range: start..<end, valueBytes: valueBytes)).version != nil, "fill refused")
            } else {
                let batch = (start..<end).map { index in
                    KeyedEntry(key: StateKey(name: Item.name, element: Array(String(index).utf8)),
                               entry: Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_000 + UInt64(index), logical: 0),
                                                             node: "peer-\(index % 3)"),
                                            value: Array("\"\(text(index, valueBytes))\"".utf8),
                                            expiresAtMilliseconds: arguments[0] == "expiring" ? expiry : nil))
                }
                _ = try! node.apply(entries: batch)
            }
            for index in start..<end { payload += Item.name.utf8.count + String(index).utf8.count + valueBytes }
            start = end
        }
        precondition(node.stateSummary.entryCount >= keys, "the node holds \(node.stateSummary.entryCount) of \(keys)")
        let after = ProcessMemory.kilobytes("VmRSS")
        print("beforeKB=\(before) afterKB=\(after) payloadBytes=\(payload)")
        withExtendedLifetime(node) {}
        exit(0)
    }
}
