import Decide
import DecideSimulation
import Testing

/// Node-owned keys across a cluster in virtual time: a member's owned keys disappear on the
/// others when it crashes or is cut off, within the failure-detection time, and come back with
/// it, whatever order a restart and a partition's healing come in; shared keys and other
/// members' keys never disappear (docs/consistency.md, "Node-owned keys").
@Suite struct OwnedKeyTests {
    struct Publish: Decision {
        let id: String
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.raw(Array("\"up\"".utf8), into: OwnedKeyTests.presence(id), expiringAfter: nil, ownedByThisNode: true)
            write.raw(Array("\"\(id)\"".utf8), into: OwnedKeyTests.shared(id))
            return .none
        }
    }

    static func presence(_ id: String) -> StateKey { StateKey(name: "presence", element: Array("\"\(id)\"".utf8)) }
    static func shared(_ id: String) -> StateKey { StateKey(name: "config", element: Array("\"\(id)\"".utf8)) }
    static let ids = ["a", "b", "c"]

    /// Whether `reader` sees `owner`'s presence key.
    static func sees(_ cluster: SimCluster, _ reader: String, presenceOf owner: String) -> Bool {
        cluster.node(reader).read { $0.entry(presence(owner))?.value } != nil
    }

    /// Every shared key and the reader's own presence are always there.
    static func checkNothingElseHidden(_ cluster: SimCluster, _ readers: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        for reader in readers {
            #expect(sees(cluster, reader, presenceOf: reader), "\(reader) lost its own presence, \(cluster.describe())",
                    sourceLocation: sourceLocation)
            for id in ids {
                #expect(cluster.node(reader).read { $0.entry(shared(id))?.value } != nil,
                        "\(reader) lost \(id)'s shared key, \(cluster.describe())", sourceLocation: sourceLocation)
            }
        }
    }

    /// Runs until `condition` holds, in steps of 10 ms, for at most `limit` ms; returns the
    /// virtual milliseconds it took, or nil.
    static func time(_ cluster: SimCluster, limit: UInt64, until condition: () -> Bool) -> UInt64? {
        var waited: UInt64 = 0
        while !condition() {
            guard waited < limit else { return nil }
            cluster.run(milliseconds: 10)
            waited += 10
        }
        return waited
    }

    @Test(arguments: SimulationTests.seeds(SimulationTests.defaultSeedCount / 20, salt: 0x0E1))
    func ownedKeysFollowTheirOwnerThroughACrashAPartitionAndBothOrdersOfReturn(seed: UInt64) {
        let cluster = SimCluster(seed: seed, ids: Self.ids, seeds: ["b": ["a"], "c": ["a"]])
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000))
        for id in Self.ids { cluster.node(id).decide(Publish(id: id)) }
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())")
        cluster.run(milliseconds: 3_000)  // every link up and reported
        for reader in Self.ids {
            for owner in Self.ids {
                #expect(Self.sees(cluster, reader, presenceOf: owner), "\(reader) misses \(owner), \(cluster.describe())")
            }
        }

        // A crash closes c's connections: a and b hide c's presence within a tick or two.
        cluster.crash("c")
        let crashShows = Self.time(cluster, limit: 2_000) {
            !Self.sees(cluster, "a", presenceOf: "c") && !Self.sees(cluster, "b", presenceOf: "c")
        }
        #expect(crashShows.map { $0 <= 200 } == true, "a crash showed after \(String(describing: crashShows)) ms, \(cluster.describe())")
        #expect(Self.sees(cluster, "a", presenceOf: "b") && Self.sees(cluster, "b", presenceOf: "a"))
        Self.checkNothingElseHidden(cluster, ["a", "b"])

        // A partition is silence: it shows after the failure timeout (1 s here).
        cluster.network.partition("a", from: "b")
        let partitionShows = Self.time(cluster, limit: 5_000) {
            !Self.sees(cluster, "a", presenceOf: "b") && !Self.sees(cluster, "b", presenceOf: "a")
        }
        let timeout = cluster.replicatorConfiguration.failureTimeoutMilliseconds
        #expect(partitionShows.map { $0 <= timeout + 300 } == true,
                "a partition showed after \(String(describing: partitionShows)) ms (failure timeout \(timeout)), \(cluster.describe())")
        Self.checkNothingElseHidden(cluster, ["a", "b"])

        // c returns and the partition heals, in either order.
        if seed % 2 == 0 {
            cluster.restart("c", empty: false)
            cluster.run(milliseconds: 2_000)
            cluster.network.heal()
        } else {
            cluster.network.heal()
            cluster.run(milliseconds: 2_000)
            cluster.restart("c", empty: false)
        }
        let back = Self.time(cluster, limit: 30_000) {
            Self.ids.allSatisfy { reader in Self.ids.allSatisfy { Self.sees(cluster, reader, presenceOf: $0) } }
        }
        #expect(back != nil, "not every presence came back, \(cluster.describe())")
        Self.checkNothingElseHidden(cluster, Self.ids)
        #expect(cluster.runUntilConverged(maxMilliseconds: 30_000), "\(cluster.describe())")
    }
}
