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

let node = try Node(configuration: .init(id: "a"))
node.decide(EnterMaintenance(reason: "deploy"))
print(node.elements(Flags.Quota.self).ids, node.read(Flags.Incidents.self))  // ["batch-jobs"] ["deploy"]
