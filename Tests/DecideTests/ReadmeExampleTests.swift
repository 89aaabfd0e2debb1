// The README's library example, compiled and run. `scripts/check-readme-example.sh` (part of
// `make test`) fails when the README block and the region below differ, ignoring indentation
// and the lines marked `// test-only`.
import Decide
import DecideTesting
import Testing

// README-EXAMPLE-BEGIN
import Decide

enum Flags {
    struct Maintenance: AtomicState {                // one replicated property
        static func defaultValue() -> Bool { false }
    }
    struct Quota: CollectionState {                  // one property per element id
        static func defaultValue(at id: String) -> Int { 100 }
    }
    struct Incidents: IndexState {                   // ordered ids: concurrent appends all kept
        typealias ID = String
    }
}

struct EnterMaintenance: Decision {                  // the only way state changes
    let reason: String
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        guard !read(Flags.Maintenance.self) else { return .none }
        write(true, into: Flags.Maintenance.self)
        write(0, into: Flags.Quota.self, at: "batch-jobs")
        write(reason, into: Flags.Incidents.self, .append)
        return .run { context in                     // runs on this node's task pool
            try await context.environment.pager.notify(reason)
        }
    }
}

// Effects reach services through the environment; a test swaps them.
protocol Pager: Sendable { func notify(_ reason: String) async throws }
struct LogPager: Pager { func notify(_ reason: String) async throws { print("paging:", reason) } }
enum PagerKey: EnvironmentKey { static let defaultValue: any Pager = LogPager() }
extension EffectEnvironment {
    var pager: any Pager { get { self[PagerKey.self] } set { self[PagerKey.self] = newValue } }
}

func readmeExample(started: @Sendable (Node) -> Void) async throws { // test-only
let node = try Node(configuration: .init(id: "a"))
started(node) // test-only
node.decide(EnterMaintenance(reason: "deploy"))
print(node.elements(Flags.Quota.self).ids, node.read(Flags.Incidents.self))  // ["batch-jobs"] ["deploy"]
for await on in node.observe(Flags.Maintenance.self) { print("maintenance:", on) }
} // test-only
// README-EXAMPLE-END

// README-TESTING-BEGIN
import DecideTesting
import Testing

struct QuietPager: Pager { func notify(_ reason: String) async throws {} }

@Test func maintenanceStopsBatchJobsOnce() async {
    let store = TestNode { $0.pager = QuietPager() }   // swap the service
    store.decide(EnterMaintenance(reason: "deploy")) {
        $0[Flags.Maintenance.self] = true              // every change, or the test fails with a diff
        $0[Flags.Quota.self, at: "batch-jobs"] = 0
        $0[Flags.Incidents.self] = ["deploy"]
    }
    store.decide(EnterMaintenance(reason: "again"))    // already on: nothing may change
    await store.finish()                               // effects done, none left unaccounted
}
// README-TESTING-END

// README-MODEL-BEGIN
final class MaintenanceBanner: NodeModel {
    let node: Node
    @Observe(Flags.Maintenance.self) var on           // read-only, follows the key on every node
    @ObserveCollection(Flags.Quota.self) var quotas   // quotas["web"], quotas.ids
    @ObserveIndex(Flags.Incidents.self) var incidents
    @MakeDecision var makeDecision                    // makeDecision(EnterMaintenance(reason: "x"))
    init(node: Node) { self.node = node }
}
// README-MODEL-END

@Suite struct ReadmeExampleTests {
    @Test(.timeLimit(.minutes(1))) func theReadmeExampleRuns() async throws {
        let nodes = Recorder<Node>()
        let example = Task { try await readmeExample { nodes.append($0) } }
        #expect(await nodes.wait { !$0.isEmpty })
        let node = nodes.all[0]
        _ = await Recorder<Bool>().wait(timeoutSeconds: 10) { _ in node.read(Flags.Maintenance.self) }
        #expect(node.read(Flags.Maintenance.self))
        #expect(node.read(Flags.Quota.self, at: "batch-jobs") == 0)
        #expect(node.read(Flags.Quota.self, at: "web") == 100)
        #expect(node.read(Flags.Incidents.self) == ["deploy"])
        let banner = MaintenanceBanner(node: node)
        #expect(banner.on && banner.quotas["batch-jobs"] == 0 && banner.incidents == ["deploy"])
        #expect(banner.makeDecision(EnterMaintenance(reason: "again")) == .unchanged)
        // Ends the example's observation loop.
        await node.shutdown()
        try await example.value
    }
}

// README-COUNTER-BEGIN
struct JobsStarted: CounterState {}                  // .increment(by:), .decrement(by:), .reset

struct StartJob: Decision {
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        write(.increment(by: 1), into: JobsStarted.self)
        return .none
    }
}

@Test func readmeCounterExample() { // test-only
let cluster = TestCluster(seed: 1, ids: ["a", "b"])  // two nodes on the simulator
cluster.node("a").decide(StartJob())                 // at the same moment, on both
cluster.node("b").decide(StartJob())
_ = cluster.runUntilConverged()
print(cluster.node("a").read(JobsStarted.self), cluster.node("b").read(JobsStarted.self))  // 2 2
#expect(cluster.node("a").read(JobsStarted.self) == 2 && cluster.node("b").read(JobsStarted.self) == 2) // test-only
} // test-only
// README-COUNTER-END
