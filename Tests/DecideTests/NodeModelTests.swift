import Decide
import DecideTesting
import Observation
import Synchronization
import Testing

/// Property wrappers in the seeds' words on Linux: `@Observe`, `@Bind`, `@ObserveCollection`,
/// `@ObserveIndex` and `@MakeDecision` in a `NodeModel`, tracked by Swift's Observation.
@Suite struct NodeModelTests {
    struct Banner: AtomicState {
        static func defaultValue() -> String { "" }
    }
    struct Feed: IndexState {
        typealias ID = Int
    }
    struct Publish: Decision {
        let id: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(id, into: Feed.self, .append)
            write(id * 10, into: Fixture.Quota.self, at: "q\(id)")
            return .none
        }
    }

    final class Dashboard: NodeModel, @unchecked Sendable {
        let node: Node
        @Observe(Fixture.Counter.self) var counter
        @Bind(Banner.self) var banner
        @BindElement(Fixture.Quota.self, at: "web") var webQuota
        @ObserveCollection(Fixture.Quota.self) var quotas
        @ObserveIndex(Feed.self) var feed
        @MakeDecision var makeDecision
        init(node: Node) { self.node = node }
    }

    /// Whether `onChange` of a tracking of `read` fires by the time `change` returns (decisions
    /// deliver their notices before `decide` returns on a node nobody else drains).
    static func fires(_ read: () -> Void, when change: () throws -> Void) rethrows -> Bool {
        let fired = Atomic<Bool>(false)
        withObservationTracking(read) { fired.store(true, ordering: .releasing) }
        try change()
        return fired.load(ordering: .acquiring)
    }

    @Test func observedKeysAreTrackedAndChangeWithTheNode() throws {
        let node = Fixture.node()
        let model = Dashboard(node: node)
        #expect(model.counter == 0)
        #expect(Self.fires({ _ = model.counter }, when: { node.set(3, into: Fixture.Counter.self) }))
        #expect(model.counter == 3)
        // Another key, or the same value again: no change reported.
        #expect(!Self.fires({ _ = model.counter }, when: { node.set("x", into: Banner.self) }))
        #expect(!Self.fires({ _ = model.counter }, when: { node.set(3, into: Fixture.Counter.self) }))
        // A replicated change is reported like a local one.
        let origin = Fixture.node("b", clock: TestClock(startMilliseconds: 1_700_000_001_000))  // a second later: its write wins
        let deltas = Recorder<Delta>()
        _ = origin.addCommitListener { deltas.append($0.delta) }
        origin.set(9, into: Fixture.Counter.self)
        #expect(try Self.fires({ _ = model.counter }, when: { try node.apply(deltas.all[0]) }))
        #expect(model.counter == 9)
    }

    @Test func boundKeysWriteThroughTheNode() {
        let node = Fixture.node()
        let model = Dashboard(node: node)
        let writes = Recorder<Delta>()
        _ = node.addCommitListener { writes.append($0.delta) }
        #expect(model.banner == "")
        #expect(Self.fires({ _ = model.banner }, when: { model.banner = "deploy at 5" }))
        #expect(node.read(Banner.self) == "deploy at 5" && model.banner == "deploy at 5")
        #expect(writes.all.count == 1, "a set is one decision, replicated as any other")
        #expect(model.webQuota == 100)
        #expect(Self.fires({ _ = model.webQuota }, when: { model.webQuota = 7 }))
        #expect(node.read(Fixture.Quota.self, at: "web") == 7 && model.webQuota == 7)
        #expect(!Self.fires({ _ = model.webQuota }, when: { node.set(1, into: Fixture.Quota.self, at: "other") }))
    }

    @Test func collectionsIndexesAndDecisionsFollowTheNode() {
        let node = Fixture.node()
        let model = Dashboard(node: node)
        #expect(model.quotas.isEmpty && model.feed.isEmpty)
        #expect(Self.fires({ _ = model.quotas }, when: { model.makeDecision(Publish(id: 1)) }))
        #expect(Self.fires({ _ = model.feed }, when: { model.makeDecision(Publish(id: 2)) }))
        #expect(model.quotas["q2"] == 20 && model.quotas["absent"] == 100)
        #expect(model.feed == [1, 2])
        // A change elsewhere leaves the collection's tracking alone.
        #expect(!Self.fires({ _ = model.quotas }, when: { node.set(1, into: Fixture.Counter.self) }))
    }

    @Test func aModelThatIsGoneIsNotKeptAlive() {
        let node = Fixture.node()
        weak var gone: Dashboard?
        do {
            let model = Dashboard(node: node)
            _ = model.counter
            _ = model.quotas
            gone = model
        }
        #expect(gone == nil)
        node.set(1, into: Fixture.Counter.self)
        node.decide(Publish(id: 1))
        #expect(node.read(Fixture.Counter.self) == 1)
    }
}
