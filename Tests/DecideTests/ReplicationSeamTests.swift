import Decide
import DecideTesting
import Testing

/// Conflicting decisions made on different nodes, with their deltas applied in every order.
@Suite struct ReplicationSeamTests {
    /// Writes three keys at once with values tagged by its author.
    struct Claim: Decision {
        let author: String
        let round: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("\(author)-\(round)", into: Fixture.Label.self)
            write(round, into: Fixture.Counter.self)
            write(author.count * 1_000 + round, into: Fixture.Quota.self, at: "shared")
            if round % 3 == 0 { write.delete(Fixture.Mirror.self) } else { write(round, into: Fixture.Mirror.self) }
            return .none
        }
    }

    @Test func conflictingDecisionsResolveTheSameWayInEveryOrder() throws {
        for seed in UInt64(0)..<300 {
            var random = SplitMix64(seed: seed)
            let clocks = (0..<3).map { _ in TestClock(startMilliseconds: 1_700_000_000_000 + UInt64.random(in: 0...3, using: &random)) }
            let authors = ["a", "b", "c"].enumerated().map { index, id in Fixture.node(id, clock: clocks[index]) }
            let captured = Recorder<Delta>()
            for author in authors { _ = author.addCommitListener { if $0.origin == .local { captured.append($0.delta) } } }
            for round in 0..<6 {
                let index = Int.random(in: 0...2, using: &random)
                clocks[index].set(milliseconds: clocks[index].nowMilliseconds() + UInt64.random(in: 0...1, using: &random))
                authors[index].decide(Claim(author: authors[index].id, round: round))
            }
            let deltas = captured.all
            // Replicas receive every delta in a different order, some twice.
            var results: [[KeyedEntry]] = []
            var digests: Set<UInt64> = []
            for replicaIndex in 0..<4 {
                let replica = Fixture.node("r\(replicaIndex)")
                var order = deltas.shuffled(using: &random)
                order += order.prefix(Int.random(in: 0...order.count, using: &random))
                for delta in order { try replica.apply(delta) }
                results.append(replica.entries())
                digests.insert(replica.stateSummary.digest)
                // Atomicity on the replica: every key was last written by the same decision.
                let versions = Set(replica.entries().map(\.entry.version))
                #expect(versions.count == 1, "seed \(seed): keys won by different decisions: \(versions)")
                let winner = deltas.max { $0.version < $1.version }!
                #expect(versions.first == winner.version, "seed \(seed)")
            }
            #expect(Set(results.map { $0.map(\.entry) }).count == 1, "seed \(seed): replicas disagree")
            #expect(digests.count == 1, "seed \(seed): digests disagree")
        }
    }

    @Test func aRemoteDeltaTooFarAheadIsRefusedWhole() {
        let clock = TestClock(startMilliseconds: 1_000_000)
        let node = Fixture.node("a", clock: clock) { $0.maxClockSkewMilliseconds = 5_000 }
        let ahead = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_005_001, logical: 0), node: "z")
        let delta = Delta(version: ahead, writes: [
            Delta.Write(key: StateKey(name: Fixture.Counter.name), value: Array("1".utf8)),
            Delta.Write(key: StateKey(name: Fixture.Label.name), value: Array("\"x\"".utf8)),
        ])
        #expect(throws: ClockError.self) { try node.apply(delta) }
        #expect(node.entries().isEmpty)
        #expect(throws: ClockError.self) { try node.apply(entries: delta.entries) }
        #expect(node.entries().isEmpty)
        // Within the bound it applies, and local versions then exceed it.
        clock.set(milliseconds: 1_000_002)
        #expect((try? node.apply(delta)) == 2)
        let next = node.set(5, into: Fixture.Counter.self).version!
        #expect(next > ahead)
    }

    /// The replication engine applies a burst of peers' deltas under one hold of the lock: each
    /// still lands whole, in order, and the clock rule refuses only the delta that breaks it.
    @Test func aBatchOfDeltasAppliesEachWholeAndRefusesOnlyTheOneTooFarAhead() {
        let clock = TestClock(startMilliseconds: 1_000_000)
        let node = Fixture.node("a", clock: clock) { $0.maxClockSkewMilliseconds = 5_000 }
        let heard = Recorder<Delta>()
        _ = node.addCommitListener { heard.append($0.delta) }
        func delta(_ physical: UInt64, _ node: String, _ keys: [String]) -> Delta {
            Delta(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: 0), node: node),
                  writes: keys.map { Delta.Write(key: StateKey(name: $0), value: Array("\(physical)".utf8)) })
        }
        let first = delta(999_000, "x", ["k1", "k2"])
        let ahead = delta(1_005_001, "y", ["k2", "k3"])
        let last = delta(999_500, "z", ["k4"])
        let outcome = node.apply(deltas: [first, ahead, last])
        #expect(outcome.refusals.map(\.index) == [1])
        #expect(outcome.changed == 3)
        #expect(heard.all == [first, last])
        let stored = Dictionary(uniqueKeysWithValues: node.entries().map { ($0.key.name, $0.entry.version) })
        #expect(stored == ["k1": first.version, "k2": first.version, "k4": last.version])
        // The same batch again changes nothing and tells no listener.
        #expect(node.apply(deltas: [first, last]).changed == 0)
        #expect(heard.all.count == 2)
    }

    @Test func theDeltaStreamDeliversInOrderAndReportsGaps() async {
        let node = Fixture.node()
        let stream = node.deltas(maxBuffered: 3)
        for value in 1...10 { node.set(value, into: Fixture.Counter.self) }
        var events: [String] = []
        var iterator = stream.makeAsyncIterator()
        for _ in 0..<4 {
            switch await iterator.next() {
            case .delta(let committed)?: events.append(String(decoding: committed.delta.writes[0].value!, as: UTF8.self))
            case .gap(let dropped)?: events.append("gap \(dropped)")
            case nil: events.append("end")
            }
        }
        #expect(events == ["1", "2", "3", "gap 7"])
        node.set(11, into: Fixture.Counter.self)
        if case .delta(let committed)? = await iterator.next() {
            #expect(committed.delta.writes[0].value == Array("11".utf8))
        } else {
            Issue.record("expected the delta after the gap")
        }
    }

    @Test func remoteDeltasReachCommitListenersOnlyWhenTheyChangeSomething() throws {
        let origin = Fixture.node("a")
        let replica = Fixture.node("b")
        let local = Recorder<Delta>()
        let remote = Recorder<CommittedDelta.Origin>()
        _ = origin.addCommitListener { local.append($0.delta) }
        _ = replica.addCommitListener { remote.append($0.origin) }
        origin.set(1, into: Fixture.Counter.self)
        try replica.apply(local.all[0])
        try replica.apply(local.all[0])
        #expect(remote.all == [.remote])
    }

    /// The size bound counts each key's last write in the decision, kept as writes arrive: a big
    /// value overwritten by a small one fits, the reverse does not, and the bound is exact.
    @Test func theDecisionSizeBoundCountsEachKeysLastWrite() {
        struct Rewrite: Decision {
            let values: [String]
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                for value in values { write(value, into: Fixture.Label.self) }
                return .none
            }
        }
        let node = Fixture.node("a") { $0.maxDecisionBytes = 1_024 }
        let label = StateKey(name: Fixture.Label.name)
        func bytes(_ text: String) -> Int {
            Node.decisionBytes(nodeID: "a", writes: [(label, PackedBytes(Array("\"\(text)\"".utf8)))])
        }
        let fits = String(repeating: "f", count: 1_024 - bytes(""))
        #expect(bytes(fits) == 1_024)
        let tooBig = fits + "!"
        #expect(node.decide(Rewrite(values: [tooBig, "small"])).version != nil)
        #expect(node.decide(Rewrite(values: ["small", tooBig])).version == nil)
        #expect(node.decide(Rewrite(values: [tooBig, fits])).version != nil)
        #expect(node.read(Fixture.Label.self) == fits)
    }

    @Test func oversizedWritesAbortInsteadOfCommittingWhatCannotReplicate() {
        let node = Fixture.node { $0.limits.maxValueBytes = 8 }
        guard case .aborted(let reason) = node.set("a long string value", into: Fixture.Label.self) else {
            Issue.record("expected the decision to abort")
            return
        }
        #expect(reason.contains("maxValueBytes"))
        #expect(node.entries().isEmpty)
    }
}
