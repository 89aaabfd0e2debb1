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
