import DecideTesting

/// The replication tests' name for DecideTesting's `TestCluster`: the same production engines
/// on the seeded simulator that users' tests get.
typealias SimCluster = TestCluster
