import Observation
import Synchronization

/// An object whose properties follow a node's state, in the seeds' words: `@Observe` and
/// `@ObserveCollection` read a key or a collection, `@Bind` reads and writes one, `@MakeDecision`
/// makes decisions. They work on Linux and with Swift's Observation: reading one inside
/// `withObservationTracking` (or a SwiftUI body, where SwiftUI exists) tracks it, and any change
/// of the key on the node (local, replicated, expired) calls the `onChange`.
///
/// ```swift
/// final class Dashboard: NodeModel {
///     let node: Node
///     @Observe(Flags.Maintenance.self) var maintenance
///     @ObserveCollection(Flags.Quota.self) var quotas
///     @Bind(Flags.Banner.self) var banner
///     @MakeDecision var makeDecision
///     init(node: Node) { self.node = node }
/// }
/// ```
///
/// Guarantees: a property starts following its key the first time it is read, and stops when the
/// object is deallocated; the object is held weakly, so following never keeps it alive.
public protocol NodeModel: AnyObject, Observable, SendableMetatype {
    /// The node whose state the properties follow.
    var node: Node { get }
}

/// What one wrapped property keeps: its registrar, its subscription to the node, and (for
/// collections and indexes) the snapshot last delivered. Shared by the wrappers' copies.
final class ModelLink<Cached: Sendable>: @unchecked Sendable {
    let registrar = ObservationRegistrar()
    private let state = Mutex<(subscription: Subscription?, cached: Cached?)>((nil, nil))

    /// Registers `keyPath` of `model` as read, follows the node on first use, and returns the
    /// cached value (nil for links that read the node instead). `follow` subscribes with a handler
    /// that must call `changed(_:)` on each new value (the first call, the current value, only primes it).
    func access<Model: NodeModel, Value>(
        _ model: Model, keyPath: KeyPath<Model, Value>,
        follow: (_ changed: @escaping @Sendable (Cached) -> Void) -> Subscription
    ) -> Cached? {
        registrar.access(model, keyPath: keyPath)
        let (following, cached) = state.withLock { ($0.subscription != nil, $0.cached) }
        if following { return cached }
        let target = ModelProperty(model: model, keyPath: keyPath)
        let primed = Atomic<Bool>(false)
        let subscription = follow { [weak self] value in
            guard let self else { return }
            self.state.withLock { $0.cached = value }
            guard primed.exchange(true, ordering: .acquiringAndReleasing) else { return }
            guard let model = target.model else { return }
            self.registrar.withMutation(of: model, keyPath: target.keyPath) {}
        }
        return state.withLock { state -> Cached? in
            if state.subscription == nil { state.subscription = subscription }
            return state.cached
        }
    }
}

/// One property of a model, the model held weakly, handed across threads: the registrar is
/// thread-safe, and the model and key path are only named, never read, off the model's thread.
struct ModelProperty<Model: AnyObject, Value>: @unchecked Sendable {
    weak var model: Model?
    let keyPath: KeyPath<Model, Value>
}
