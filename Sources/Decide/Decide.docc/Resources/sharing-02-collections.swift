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
