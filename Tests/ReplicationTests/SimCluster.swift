import DecideTesting
import Decide

/// The replication tests' name for DecideTesting's `TestCluster`: the same production engines
/// on the seeded simulator that users' tests get.
typealias SimCluster = TestCluster

extension SimCluster {
    /// The instant `node`'s hybrid clock reads now (Unix milliseconds).
    static func now(_ node: Node) -> UInt64 { node.read { $0.nowMilliseconds } }

    /// After a heal: lets the lifetime follows the last merges asked for run and spread (5 s,
    /// then until converged), so that every node's own slots carry their marker's instant.
    func spreadLifetimeFollows() {
        run(milliseconds: 5_000)
        _ = runUntilConverged(maxMilliseconds: 30_000)
    }

    /// Runs until the clock of every node of `ids` (skewed ones included) is past `instant`,
    /// at most 200 s, then one second more.
    func run(pastInstant instant: UInt64, ids: [String]) {
        var waited: UInt64 = 0
        while ids.contains(where: { Self.now(node($0)) < instant + 1 }), waited < 200_000 {
            run(milliseconds: 1_000)
            waited += 1_000
        }
        run(milliseconds: 1_000)
    }
}
