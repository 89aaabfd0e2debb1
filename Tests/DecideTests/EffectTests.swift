import Decide
import DecideTesting
import Synchronization
import Testing


protocol Paging: Sendable {
    func notify(_ reason: String) async throws
}

struct PagingKey: EnvironmentKey {
    static let defaultValue: any Paging = UnconfiguredPaging()
}

struct UnconfiguredPaging: Paging {
    struct NotConfigured: Error {}
    func notify(_ reason: String) async throws { throw NotConfigured() }
}

extension EffectEnvironment {
    var paging: any Paging {
        get { self[PagingKey.self] }
        set { self[PagingKey.self] = newValue }
    }
}

final class RecordingPaging: Paging {
    let sent = Recorder<String>()
    func notify(_ reason: String) async throws { sent.append(reason) }
}

struct FailingPaging: Paging {
    struct Down: Error, Equatable {}
    func notify(_ reason: String) async throws { throw Down() }
}

/// Appends a name to the Label key: follow-up order is visible in the final string.
struct Append: Decision {
    let name: String
    var then: Effect = .none
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        let current = read(Fixture.Label.self)
        write(current == "untitled" ? name : current + "," + name, into: Fixture.Label.self)
        return then
    }
}

@Suite struct EffectTests {
    @Test func followUpDecisionsRunInOrderBeforeDecideReturns() {
        let node = Fixture.node()
        node.decide(Append(name: "first", then: .merge(
            .decide(Append(name: "second", then: .decide(Append(name: "fourth")))),
            .none,
            .decide(Append(name: "third")))))
        // Breadth-first: a follow-up's own follow-ups queue behind its siblings.
        #expect(node.read(Fixture.Label.self) == "first,second,third,fourth")
        #expect(node.stateSummary.committedDecisions == 4)
    }

    // The effect tests below use DecideTesting's TestNode: each state change is stated, and each
    // decision an effect makes is awaited as it commits, without waiting for the pool to drain.

    @Test func runEffectsUseTheEnvironmentAndCanDecide() async {
        let pager = RecordingPaging()
        let store = TestNode { $0.paging = pager }
        struct Page: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(1, into: Fixture.Counter.self)
                return .run { context in
                    try await context.environment.paging.notify("deploy")
                    context.decide(Append(name: "paged"))
                }
            }
        }
        store.decide(Page()) { $0[Fixture.Counter.self] = 1 }
        await store.receive(Append.self) { $0[Fixture.Label.self] = "paged" }
        #expect(pager.sent.all == ["deploy"])
        await store.finish()
    }

    @Test func swappingTheEnvironmentChangesLaterEffectsOnly() async {
        let store = TestNode()
        struct Page: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                .run { context in try await context.environment.paging.notify("x") }
                    .mapError { error in .decide(Append(name: "\(type(of: error))")) }
            }
        }
        store.decide(Page())
        await store.receive(Append.self) { $0[Fixture.Label.self] = "NotConfigured" }
        let replacement = RecordingPaging()
        store.environment.paging = replacement
        store.decide(Page())
        await store.finish()
        #expect(replacement.sent.all == ["x"])
    }

    @Test func thrownErrorsGoToTheNearestMapErrorThenOutward() async {
        let store = TestNode { $0.paging = FailingPaging() }
        struct Nested: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                Effect.run { context in try await context.environment.paging.notify("inner") }
                    .mapError { _ in
                        // The mapped effect fails too: the outer handler gets that error.
                        .run { _ in throw FailingPaging.Down() }
                    }
                    .mapError { error in .decide(Append(name: error is FailingPaging.Down ? "outer-saw-down" : "other")) }
            }
        }
        store.decide(Nested())
        await store.receive(Append.self) { $0[Fixture.Label.self] = "outer-saw-down" }
        await store.finish()
    }

    @Test func unhandledErrorsGoToTheConfiguredMapError() async {
        let store = TestNode(environment: { $0.paging = FailingPaging() }) {
            $0.mapError = { error in .decide(Append(name: "node-level:\(error is FailingPaging.Down)")) }
        }
        struct Page: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                .run { context in try await context.environment.paging.notify("x") }
            }
        }
        store.decide(Page())
        await store.receive(Append.self) { $0[Fixture.Label.self] = "node-level:true" }
        await store.finish()
    }

    @Test func thePoolBoundsConcurrencyAndRefusesPastItsBacklog() async {
        let node = Fixture.node {
            $0.effectConcurrency = 2
            $0.maxQueuedEffects = 3
            $0.mapError = { error in .decide(Append(name: error is EffectPoolSaturated ? "saturated" : "?")) }
        }
        let gate = Gate()
        struct Hold: Decision {
            let gate: Gate
            let counter: RunCounter
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                .run { _ in
                    counter.enter()
                    await gate.wait()
                    counter.leave()
                }
            }
        }
        let counter = RunCounter()
        for _ in 0..<6 { node.decide(Hold(gate: gate, counter: counter)) }
        // 2 running + 3 queued accepted; the sixth was refused and mapped.
        #expect(node.read(Fixture.Label.self) == "saturated")
        #expect(await counter.waitForRunning(2))
        #expect(counter.peak <= 2)
        gate.open()
        await node.effectsIdle()
        #expect(counter.finished == 5)
        #expect(counter.peak == 2)
    }

    @Test func replicasNeverRunEffects() throws {
        let pager = RecordingPaging()
        let origin = Fixture.node("a") { $0.environment.paging = pager }
        let replica = Fixture.node("b") { $0.environment.paging = pager }
        let captured = Recorder<Delta>()
        let token = origin.addCommitListener { captured.append($0.delta) }
        struct Page: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(7, into: Fixture.Counter.self)
                return .run { context in try await context.environment.paging.notify("once") }
            }
        }
        origin.decide(Page())
        origin.removeCommitListener(token)
        for delta in captured.all { try replica.apply(delta) }
        #expect(replica.read(Fixture.Counter.self) == 7)
        #expect(replica.stateSummary.committedDecisions == 0)
    }
}

/// A one-shot barrier effects wait on.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func wait() async {
        await withCheckedContinuation { continuation in
            let proceed = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if proceed { continuation.resume() }
        }
    }
    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Counts effects running now, the most ever running at once, and those finished.
final class RunCounter: Sendable {
    private let state = Mutex<(running: Int, peak: Int, finished: Int)>((0, 0, 0))
    func enter() { state.withLock { $0.running += 1; $0.peak = max($0.peak, $0.running) } }
    func leave() { state.withLock { $0.running -= 1; $0.finished += 1 } }
    var peak: Int { state.withLock { $0.peak } }
    var finished: Int { state.withLock { $0.finished } }
    func waitForRunning(_ count: Int) async -> Bool {
        for _ in 0..<5_000 {
            if state.withLock({ $0.running }) == count { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return false
    }
}
