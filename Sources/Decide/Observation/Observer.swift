import Synchronization

/// One registration to hear the changes of one key. Its `deliver` is called only by the
/// node's `DeliveryQueue`, which never runs two deliveries at once, so the state a subclass
/// keeps between deliveries needs no lock of its own.
class Observer: @unchecked Sendable {
    let id: UInt64
    let key: StateKey
    private let cancelled = Atomic<Bool>(false)
    /// Ends the consumer's sequence when the node shuts down (nil for callbacks).
    let onFinish: (@Sendable () -> Void)?

    init(id: UInt64, key: StateKey, onFinish: (@Sendable () -> Void)? = nil) {
        self.id = id
        self.key = key
        self.onFinish = onFinish
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() { cancelled.store(true, ordering: .releasing) }

    /// The key now holds `entry` (nil: never written); `decoded` is its value when the node had
    /// it decoded already.
    func deliver(entry: Entry?, decoded: (any Sendable)?) {}
}

/// An observer of a typed key: decodes, skips values equal to the last one it passed on, and
/// hands the rest to `handler`.
final class TypedObserver<Value: Decodable & Sendable & Equatable>: Observer, @unchecked Sendable {
    private let defaultValue: @Sendable () -> Value
    private let handler: @Sendable (Value) -> Void
    private let onDecodeFailure: @Sendable (StateKey, String) -> Void
    private var last: Value?

    init(id: UInt64, key: StateKey,
         defaultValue: @escaping @Sendable () -> Value,
         onDecodeFailure: @escaping @Sendable (StateKey, String) -> Void,
         onFinish: (@Sendable () -> Void)? = nil,
         handler: @escaping @Sendable (Value) -> Void) {
        self.defaultValue = defaultValue
        self.handler = handler
        self.onDecodeFailure = onDecodeFailure
        super.init(id: id, key: key, onFinish: onFinish)
    }

    override func deliver(entry: Entry?, decoded: (any Sendable)?) {
        let value: Value
        if let decoded = decoded as? Value {
            value = decoded
        } else if let bytes = entry?.packedValue {
            do {
                value = try ValueCoding.decode(Value.self, from: bytes)
            } catch {
                onDecodeFailure(key, "\(error)")
                value = defaultValue()
            }
        } else {
            value = defaultValue()
        }
        if let last, last == value { return }
        last = value
        handler(value)
    }
}

/// An observer of an untyped key: every change of its entry, tombstones included.
final class EntryObserver: Observer, @unchecked Sendable {
    private let handler: @Sendable (Entry?) -> Void
    private var lastVersion: Version?

    init(id: UInt64, key: StateKey, handler: @escaping @Sendable (Entry?) -> Void) {
        self.handler = handler
        super.init(id: id, key: key)
    }

    override func deliver(entry: Entry?, decoded: (any Sendable)?) {
        if let entry, entry.version == lastVersion { return }
        lastVersion = entry?.version
        handler(entry)
    }
}
