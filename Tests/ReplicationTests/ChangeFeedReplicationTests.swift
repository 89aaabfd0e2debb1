import Decide
import DecideCore
import DecideSimulation
import Testing

/// The change feed of a replicated node, in virtual time (docs/consistency.md, "The change
/// feed"): a reader that comes and goes while another node writes, and readers under the
/// simulation's faults (loss, duplication, reordering, partitions, crashes, empty restarts,
/// skewed clocks) with a retention small enough to overtake them. Every reader must end with
/// exactly the state of the node it reads, having seen each change once, in the node's order.
@Suite struct ChangeFeedReplicationTests {
    /// A reader that mirrors one node through its feed: resumes from its position, and starts
    /// again from a snapshot when the feed says its position is gone or belongs to another feed.
    final class Reader {
        var feed: ChangeFeedID?
        var cursor = FeedPosition.start
        var mirror: [StateKey: [UInt8]] = [:]
        /// (key, version) of every write delivered since the last snapshot, with the origins that
        /// write a value (expiry and owners reuse a version): none may come twice.
        var delivered = Set<KeyedEntry>()
        var changesRead = 0
        var resynchronisations = 0
        var problems: [String] = []

        /// Reads everything `node`'s feed holds after the reader's position.
        func readAll(_ node: Node) {
            // The first read pins the feed: a position means nothing without it.
            if feed == nil { feed = node.changeFeedBounds!.feed }
            while true {
                let page: (changes: [FeedChange], end: FeedPosition)
                do {
                    page = try node.readChanges(after: cursor, feed: feed, maxChanges: 64)
                } catch .outOfRetention, .otherFeed {
                    resynchronise(node)
                    continue
                } catch {
                    problems.append("unexpected \(error)")
                    return
                }
                if page.end == cursor { return }
                for change in page.changes {
                    if change.position.rawValue != cursor.rawValue + 1 {
                        problems.append("position \(change.position) after \(cursor): a gap or a repeat")
                    }
                    cursor = change.position
                    changesRead += 1
                    for write in change.delta.writes {
                        mirror[write.key] = write.value
                        guard [.local, .remote, .catchUp].contains(change.origin) else { continue }
                        let entry = KeyedEntry(key: write.key, entry: write.entry(at: change.delta.version))
                        if !delivered.insert(entry).inserted { problems.append("\(write.key) at \(change.delta.version) came twice") }
                    }
                }
                cursor = page.end
            }
        }

        func resynchronise(_ node: Node) {
            let snapshot = try! node.changeFeedSnapshot()
            feed = snapshot.feed
            cursor = snapshot.position
            mirror = Dictionary(uniqueKeysWithValues: snapshot.entries.map { ($0.key, $0.entry.value!) })
            delivered = []
            resynchronisations += 1
        }

        /// The differences between the mirror and what `node` holds that reads as present.
        func differences(from node: Node) -> [String] {
            var held: [StateKey: [UInt8]] = [:]
            for entry in try! node.changeFeedSnapshot().entries { held[entry.key] = entry.entry.value }
            var differences: [String] = []
            for (key, value) in held where mirror[key] != value {
                differences.append("\(key): node \(String(decoding: value, as: UTF8.self)), reader \(mirror[key].map { String(decoding: $0, as: UTF8.self) } ?? "absent")")
            }
            for key in mirror.keys where held[key] == nil { differences.append("\(key): absent on the node, held by the reader") }
            return differences
        }
    }

    struct Put: Decision {
        let key: StateKey
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.raw(Array(String(value).utf8), into: key)
            return .none
        }
    }

    @Test func aReaderAwayDuring100000WritesOnAnotherNodeResumesWithEachOnceInOrder() throws {
        let cluster = SimCluster(seed: 61, ids: ["a", "b"], configureNode: { $0.changeFeed = ChangeFeedConfiguration() })
        cluster.run(milliseconds: 1_000)
        let reader = Reader()
        var versions: [Version] = []
        for index in 0..<1_000 { versions.append(try #require(cluster.node("a").decide(Put(key: StateKey(name: "early\(index)"), value: index)).version)) }
        #expect(cluster.runUntilConverged())
        reader.readAll(cluster.node("b"))
        let left = reader.cursor
        #expect(reader.changesRead == 1_000 && left == FeedPosition(rawValue: 1_000))
        // Away: 100,000 writes of distinct keys on a, replicated to b meanwhile.
        for round in 0..<100 {
            for index in 0..<1_000 {
                let key = StateKey(name: "k\(round * 1_000 + index)")
                versions.append(try #require(cluster.node("a").decide(Put(key: key, value: index)).version))
            }
            cluster.run(milliseconds: 20)
        }
        #expect(cluster.runUntilConverged(maxMilliseconds: 120_000))
        reader.readAll(cluster.node("b"))
        #expect(reader.problems.isEmpty, "\(reader.problems.prefix(5))")
        #expect(reader.resynchronisations == 0)
        // Every one of a's writes came to b's reader exactly once (distinct keys: each version
        // changed b once, by delta or by catch-up), and the reader holds what b holds.
        #expect(reader.changesRead >= 1_000 && reader.delivered.count == 101_000)
        #expect(Set(reader.delivered.map(\.entry.version)) == Set(versions))
        #expect(reader.cursor == cluster.node("b").changeFeedBounds?.newest)
        #expect(reader.differences(from: cluster.node("b")).isEmpty)
    }

    @Test(arguments: [false, true])
    func readersUnderFaultsEndWithExactlyTheirNodesState(smallRetention: Bool) {
        var resynchronised = 0
        for seed in SimulationTests.seeds(SimulationTests.defaultSeedCount / 10, salt: 0xFEED_0000 | (smallRetention ? 1 : 0)) {
            var random = SplitMix64(seed: seed ^ 0xFEED)
            let ids = ["a", "b", "c", "d", "e"]
            let cluster = SimCluster(seed: seed, ids: ids, configureNode: { configuration in
                configuration.changeFeed = smallRetention ? ChangeFeedConfiguration(maxRetainedChanges: 30, maxRetainedBytes: 64 * 1024)
                    : ChangeFeedConfiguration()
            })
            cluster.run(milliseconds: 1_000)
            // One reader on each of two nodes; each is away two steps in three.
            let readers = [("a", Reader()), ("c", Reader())]
            var counter = 0
            for _ in 0..<60 {   // 6 s of faults, in 100 ms steps
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    if let id = cluster.aliveIDs.randomElement(using: &random) {
                        cluster.node(id).decide(SimulationTests.randomDecision(&random, counter: &counter))
                    }
                }
                SimulationTests.nemesis(Int.random(in: 0..<40, using: &random), cluster, ids: ids, random: &random,
                                        restartsEmpty: { Int.random(in: 0..<3, using: &$0) == 0 })
                cluster.run(milliseconds: 100)
                for (id, reader) in readers where cluster.members[id]!.alive && Int.random(in: 0..<3, using: &random) == 0 {
                    reader.readAll(cluster.node(id))
                }
            }
            let converged = SimulationTests.healAndConverge(cluster, ids: ids)
            #expect(converged, "seed \(seed) did not converge: \(cluster.describe())")
            for (id, reader) in readers {
                reader.readAll(cluster.node(id))
                resynchronised += reader.resynchronisations
                #expect(reader.problems.isEmpty, "seed \(seed) reader of \(id): \(reader.problems.prefix(5))")
                let differences = reader.differences(from: cluster.node(id))
                #expect(differences.isEmpty, "seed \(seed) reader of \(id): \(differences.prefix(5))")
                if !reader.problems.isEmpty || !differences.isEmpty { return }
            }
            if !converged { return }
        }
        // The small retention overtakes readers; empty restarts start new feeds: both paths ran.
        #expect(resynchronised > 0)
    }
}
