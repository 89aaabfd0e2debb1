import Decide
import DecideUV
import Foundation
import Testing

/// An ordered index across real DecideUV links on 127.0.0.1: while b is away (stopped, then
/// running alone on its own store), a and b each append 1,000 ids; once b links again, both hold
/// all 2,010 in the same order, each run whole. The simulator covers the same case over many
/// seeds (ReplicationTests.IndexTests); this one runs the real transport and the SQLite store.
extension LoopbackReplicationTests {
    // The index and the appending decision of the simulated case (IndexTests).
    typealias Feed = IndexTests.Feed
    typealias AppendAll = IndexTests.Append

    @Test(.timeLimit(.minutes(2))) func appendsMadeApartOnRealLinksEndInOneOrder() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("decide-index-\(UInt64.random(in: 0...UInt64.max))")
        defer { try? FileManager.default.removeItem(at: directory) }
        func durable(_ id: String) -> (inout Node.Configuration, inout Replicator.Configuration) -> Void {
            { node, _ in
                node.dataDirectory = directory.appendingPathComponent(id).path
                node.durability = .strict
            }
        }
        let a = try Peer("a", seeds: [], configure: durable("a"))
        var b = try Peer("b", seeds: [a.address], configure: durable("b"))
        let shared = (0..<10).map { "shared\($0)" }
        a.node.decide(AppendAll(ids: shared))
        #expect(await eventually { b.node.read(Feed.self) == shared })

        // Apart: b stops; a appends; b starts alone on its store and appends; b stops again.
        await b.stop()
        try b.node.close()
        for start in stride(from: 0, to: 1_000, by: 100) { a.node.decide(AppendAll(ids: (start..<(start + 100)).map { "a\($0)" })) }
        b = try Peer("b", seeds: [], configure: durable("b"))
        #expect(b.node.read(Feed.self) == shared, "b kept its store")
        for index in 0..<1_000 { b.node.decide(AppendAll(ids: ["b\(index)"])) }
        await b.stop()
        try b.node.close()

        // Together again.
        b = try Peer("b", seeds: [a.address], configure: durable("b"))
        #expect(await eventually(60) { a.node.entries() == b.node.entries() },
                "entries: a \(a.node.entries().count) b \(b.node.entries().count)")
        let onA = a.node.read(Feed.self)
        #expect(onA == b.node.read(Feed.self))
        #expect(onA.count == 2_010 && Array(onA.prefix(10)) == shared)
        let runA = (0..<1_000).map { "a\($0)" }, runB = (0..<1_000).map { "b\($0)" }
        let rest = Array(onA.dropFirst(10))
        #expect(rest == runA + runB || rest == runB + runA, "the runs interleave")
        for peer in [a, b] {
            await peer.stop()
            try peer.node.close()
        }
    }
}
