import Decide

enum Flags {
    struct Maintenance: AtomicState {                // one replicated property
        static func defaultValue() -> Bool { false }
    }
}
