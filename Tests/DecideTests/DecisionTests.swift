import Decide
import Testing

@Suite struct DecisionTests {
    struct Transfer: Decision {
        let amount: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            let from = read(Fixture.Quota.self, at: "batch")
            write(from - amount, into: Fixture.Quota.self, at: "batch")
            write(read(Fixture.Quota.self, at: "web") + amount, into: Fixture.Quota.self, at: "web")
            // Reads see this decision's own writes.
            write(read(Fixture.Quota.self, at: "batch") * 0 + read(Fixture.Counter.self) + 1, into: Fixture.Counter.self)
            return .none
        }
    }

    @Test func writesOfOneDecisionCommitTogetherWithOneVersion() throws {
        let node = Fixture.node()
        let commit = node.decide(Transfer(amount: 30))
        let version = try #require(commit.version)
        #expect(node.read(Fixture.Quota.self, at: "batch") == 70)
        #expect(node.read(Fixture.Quota.self, at: "web") == 130)
        #expect(node.read(Fixture.Counter.self) == 1)
        let versions = Set(node.entries().map(\.entry.version))
        #expect(versions == [version])
        #expect(node.entries().count == 3)
    }

    @Test func aDecisionThatWritesNothingTakesNoVersion() {
        struct Nothing: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect { .none }
        }
        let node = Fixture.node()
        #expect(node.decide(Nothing()) == .unchanged)
        #expect(node.stateSummary.highestVersion == nil)
    }

    @Test func deleteWritesATombstoneAndReadsTheDefault() {
        struct Delete: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write.delete(Fixture.Label.self)
                write.delete(Fixture.Quota.self, at: "batch")
                return .none
            }
        }
        let node = Fixture.node()
        node.set("release", into: Fixture.Label.self)
        #expect(node.read(Fixture.Label.self) == "release")
        node.decide(Delete())
        #expect(node.read(Fixture.Label.self) == "untitled")
        #expect(node.read(Fixture.Quota.self, at: "batch") == 100)
        #expect(node.stateSummary.tombstoneCount == 2)
        #expect(node.entries().allSatisfy { $0.entry.isTombstone })
    }

    @Test func aValueThatCannotBeEncodedAbortsTheWholeDecision() {
        struct Broken: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(5, into: Fixture.Counter.self)
                write(Fixture.Profile(name: "x", score: .nan), into: Fixture.Profiles.self)
                return .decide(SetLabel(text: "effect ran"))
            }
        }
        struct SetLabel: Decision {
            let text: String
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(text, into: Fixture.Label.self)
                return .none
            }
        }
        let node = Fixture.node()
        guard case .aborted = node.decide(Broken()) else {
            Issue.record("a NaN in JSON must abort the decision")
            return
        }
        #expect(node.read(Fixture.Counter.self) == 0)
        #expect(node.read(Fixture.Label.self) == "untitled")
        #expect(node.entries().isEmpty)
    }

    @Test func codableValuesRoundTripThroughJSON() {
        let node = Fixture.node()
        let profile = Fixture.Profile(name: "ada \"quoted\" / \u{1}", score: 2.5)
        node.set(profile, into: Fixture.Profiles.self)
        node.set("line\nbreak \\ and \u{7f} é", into: Fixture.Label.self)
        node.set(-9_223_372_036_854_775_808, into: Fixture.Counter.self)
        // A second node decodes the bytes (no cached typed value there).
        let replica = Fixture.node("b")
        try! replica.apply(entries: node.entries())
        #expect(replica.read(Fixture.Profiles.self) == profile)
        #expect(replica.read(Fixture.Label.self) == "line\nbreak \\ and \u{7f} é")
        #expect(replica.read(Fixture.Counter.self) == Int.min)
        let stored = node.entry(for: StateKey(name: Fixture.Label.name))?.value
        #expect(stored.map { String(decoding: $0, as: UTF8.self) } == "\"line\\nbreak \\\\ and \u{7f} é\"")
        // Integers are stored as their decimal digits, exactly (the fast path beside JSONEncoder).
        for number in [0, 7, 9, 10, -1, -9, -10, 99, 100, 1_000_000, Int.max, Int.min] {
            node.set(number, into: Fixture.Counter.self)
            let bytes = node.entry(for: StateKey(name: Fixture.Counter.name))?.value
            #expect(bytes == Array(String(number).utf8), "\(number)")
        }
    }

    @Test func bytesThatDoNotDecodeReadAsTheDefault() throws {
        let node = Fixture.node()
        let key = StateKey(name: Fixture.Counter.name)
        let delta = Delta(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0), node: "z"),
                          writes: [Delta.Write(key: key, value: Array("\"not a number\"".utf8))])
        try node.apply(delta)
        #expect(node.read(Fixture.Counter.self) == 0)
    }

    @Test func wireNamesAreStableAndOverridable() {
        struct Renamed: AtomicState {
            static func defaultValue() -> Int { 0 }
            static var name: String { "flags.legacy-name" }
        }
        #expect(Fixture.Counter.name == "DecideTests.Fixture.Counter")
        #expect(Renamed.name == "flags.legacy-name")
        let node = Fixture.node()
        node.set(3, into: Renamed.self)
        #expect(node.entry(for: StateKey(name: "flags.legacy-name")) != nil)
        // Collection elements are addressed by the JSON of their id.
        node.decide(SetQuota(id: "web", value: 5))
        #expect(node.entry(for: StateKey(name: Fixture.Quota.name, element: Array("\"web\"".utf8))) != nil)
    }

    struct SetQuota: Decision {
        let id: String
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(value, into: Fixture.Quota.self, at: id)
            return .none
        }
    }

    @Test func untypedKeysAreReadableAndWritable() {
        struct RawWrite: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write.raw(Array("42".utf8), into: StateKey(name: Fixture.Counter.name))
                write.raw(nil, into: StateKey(name: "tool.only"))
                return .none
            }
        }
        let node = Fixture.node()
        node.decide(RawWrite())
        #expect(node.read(Fixture.Counter.self) == 42)
        #expect(node.entry(for: StateKey(name: "tool.only"))?.isTombstone == true)
        #expect(node.read { $0.entry(StateKey(name: Fixture.Counter.name))?.value } == Array("42".utf8))
    }

    @Test func decisionsRunOneAtATimeFromManyThreads() async {
        struct Increment: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(read(Fixture.Counter.self) + 1, into: Fixture.Counter.self)
                return .none
            }
        }
        let node = Fixture.node()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<1_000 { node.decide(Increment()) } }
            }
        }
        #expect(node.read(Fixture.Counter.self) == 8_000)
        #expect(node.stateSummary.committedDecisions == 8_000)
    }

    @Test func invalidConfigurationIsRefused() {
        #expect(throws: NodeConfigurationError.invalidNodeID("")) { try Node(configuration: .init(id: "")) }
        #expect(throws: NodeConfigurationError.self) {
            var configuration = Node.Configuration(id: "a")
            configuration.effectConcurrency = 0
            return try Node(configuration: configuration)
        }
    }

    /// Hands out the writer it was given, so a test can keep it past its call.
    struct KeepWriter: Decision {
        let kept: KeptWriter
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            kept.writer = write
            return .none
        }
    }
    /// Touched by one thread at a time: the decision's, then the test's after `decide` returns.
    final class KeptWriter: @unchecked Sendable {
        var writer: StorageWriter?
    }

    /// Readers and writers hold their transaction without a reference count; the generation
    /// check is what stops one kept past its decision, before it touches a later decision's
    /// writes.
    @Test func aWriterKeptPastItsDecisionStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let node = Fixture.node()
            let kept = KeptWriter()
            node.decide(KeepWriter(kept: kept))
            let writer = kept.writer!
            writer(7, into: Fixture.Counter.self)
        }
    }
}
