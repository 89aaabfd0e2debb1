import Decide
import DecideCore
import DecideTesting
import Testing

/// DecideTesting's TestNode: exhaustive state assertions with a readable diff, effects and their
/// decisions awaited without sleeping, services swapped per test, and the failures it must
/// report when a test leaves something unstated.
@Suite struct TestNodeTests {
    struct Numbers: CollectionState {
        static func defaultValue(at id: Int) -> Int { 0 }
    }
    struct Status: AtomicState {
        static func defaultValue() -> String { "idle" }
    }
    struct Queue: IndexState {
        typealias ID = String
    }

    protocol Fetching: Sendable {
        func fetch(_ id: Int) async throws -> Int
    }
    struct FetcherKey: EnvironmentKey {
        static let defaultValue: any Fetching = Unreachable()
    }
    struct Unreachable: Fetching {
        struct Offline: Error {}
        func fetch(_ id: Int) async throws -> Int { throw Offline() }
    }
    struct Fixed: Fetching {
        let number: Int
        func fetch(_ id: Int) async throws -> Int { number }
    }

    /// Marks the load, then fetches on the task pool and records the result or the failure.
    struct Load: Decision {
        let id: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("loading", into: Status.self)
            let id = self.id
            return Effect.run { context in
                let number = try await context.environment[FetcherKey.self].fetch(id)
                context.decide(Loaded(id: id, number: number))
            }.mapError { error in .decide(Failed(reason: "\(type(of: error))")) }
        }
    }
    struct Loaded: Decision, Equatable {
        let id: Int
        let number: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("done", into: Status.self)
            write(number, into: Numbers.self, at: id)
            write("\(id)", into: Queue.self, .append)
            return .none
        }
    }
    struct Failed: Decision {
        let reason: String
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("failed: \(reason)", into: Status.self)
            return .none
        }
    }
    /// A follow-up made at once by a `.decide` effect.
    struct Reset: Decision {
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.delete(Status.self)
            return .decide(Clear())
        }
    }
    struct Clear: Decision {
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write.deleteAll(Numbers.self)
            return .none
        }
    }

    @Test func aDecisionAndTheDecisionsItsEffectMakesAreStatedStepByStep() async {
        let store = TestNode { $0[FetcherKey.self] = Fixed(number: 42) }
        store.decide(Load(id: 7)) { $0[Status.self] = "loading" }
        await store.receive(Loaded(id: 7, number: 42)) {
            $0[Status.self] = "done"
            $0[Numbers.self, at: 7] = 42
            $0[Queue.self] = ["7"]
        }
        store.decide(Reset()) { $0.delete(Status.self) }
        await store.receive(Clear.self) { $0[Numbers.self, at: 7] = nil }
        #expect(store.state[Queue.self] == ["7"])
        await store.finish()
    }

    @Test func swappingAServiceChangesWhatTheEffectDecides() async {
        let store = TestNode()   // the default fetcher is offline
        store.decide(Load(id: 1)) { $0[Status.self] = "loading" }
        await store.receive(Failed.self) { $0[Status.self] = "failed: Offline" }
        store.environment[FetcherKey.self] = Fixed(number: 5)
        store.decide(Load(id: 2)) { $0[Status.self] = "loading" }
        await store.receive(Loaded.self) {
            $0[Status.self] = "done"
            $0[Numbers.self, at: 2] = 5
            $0[Queue.self] = ["2"]
        }
        await store.finish()
    }

    @Test func aWrongOrMissingStatementFailsWithADiff() async {
        let store = TestNode { $0[FetcherKey.self] = Fixed(number: 1) }
        withKnownIssue {
            store.decide(Load(id: 3)) { $0[Status.self] = "done" }
        } matching: { issue in
            let text = "\(issue)"
            return text.contains("Load") && text.contains("\"done\"") && text.contains("\"loading\"")
        }
        // A change the closure does not state fails too: here Numbers[3] and the queue.
        await withKnownIssue {
            await store.receive(Loaded.self) { $0[Status.self] = "done" }
        } matching: { issue in
            let text = "\(issue)"
            return text.contains("Numbers[3]") && text.contains("+")
        }
        await store.finish()
    }

    struct Visits: CounterState {}

    struct Visit: Decision {
        let count: Int64
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(.increment(by: count), into: Visits.self)
            return .none
        }
    }

    /// A counter is stated by its total, not by its slots, and a wrong total fails with a diff
    /// that names the counter.
    @Test func countersAreStatedByTheirTotals() async {
        let store = TestNode()
        store.decide(Visit(count: 2)) { $0[Visits.self] = 2 }
        store.decide(Visit(count: 3)) { $0[Visits.self] = 5 }
        #expect(store.state.counters == [Visits.name: 5] && store.state.values.isEmpty)
        withKnownIssue {
            store.decide(Visit(count: 1)) { $0[Visits.self] = 7 }
        } matching: { issue in
            let text = "\(issue)"
            return text.contains(Visits.name) && text.contains("7") && text.contains("6")
        }
        store.decide(Visit(count: -6)) { $0[Visits.self] = 0 }
        await store.finish()
    }

    @Test func decisionsLeftUnreceivedOrOfAnotherKindFail() async {
        let store = TestNode { $0[FetcherKey.self] = Fixed(number: 1) }
        store.decide(Load(id: 1)) { $0[Status.self] = "loading" }
        await withKnownIssue {
            await store.receive(Failed.self)
        } matching: { "\($0)".contains("expected an effect to decide Failed, but it decided Loaded") }

        store.decide(Load(id: 2)) { $0[Status.self] = "loading" }
        await withKnownIssue {
            await store.finish()
        } matching: { "\($0)".contains("never received: Loaded") }

        await withKnownIssue {
            await store.receive(Loaded.self, timeout: .milliseconds(50))
        } matching: { "\($0)".contains("none did") }
    }

    @Test func sendingBeforeReceivingFailsWhenExhaustive() async {
        let store = TestNode { $0[FetcherKey.self] = Fixed(number: 1) }
        store.decide(Load(id: 1)) { $0[Status.self] = "loading" }
        await store.node.effectsIdle()
        withKnownIssue {
            store.decide(Reset()) { $0.delete(Status.self) }
        } matching: { "\($0)".contains("not received: Loaded") }
        // The skipped decision's writes were still taken into account.
        await store.receive(Clear.self) { $0[Numbers.self, at: 1] = nil }
        await store.finish()
    }

    @Test func nonExhaustiveChecksOnlyWhatIsStated() async {
        let store = TestNode { $0[FetcherKey.self] = Fixed(number: 9) }
        store.exhaustive = false
        store.decide(Load(id: 4))
        await store.receive(Loaded.self) { $0[Numbers.self, at: 4] = 9 }
        store.decide(Reset())
        await store.finish()
        withKnownIssue {
            store.decide(Load(id: 5)) { $0[Status.self] = "wrong" }
        }
    }

    @Test func expiryFollowsTheTestClock() {
        struct Hold: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write("held", into: Status.self, expiringAfter: .seconds(10))
                return .none
            }
        }
        let store = TestNode()
        store.decide(Hold()) { $0[Status.self] = "held" }
        // The read by name (a Redis-protocol GET) asks the clock for the instant only for an
        // expiring value, from inside the table's lookup: it must see the same instant.
        let byName = { Array(Status.name.utf8).withUnsafeBytes { store.node.value(ofAtomicNamed: $0) } }
        #expect(byName() == .some(PackedBytes(Array(#""held""#.utf8))))
        store.clock.advance(by: .seconds(10))
        #expect(byName() == .some(nil))
        #expect(store.state[Status.self] == "idle")
        #expect(store.node.read(Status.self) == "idle")
    }
}
