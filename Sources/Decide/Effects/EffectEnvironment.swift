/// A key into `EffectEnvironment`: the type of a dependency and the value used until a node or
/// a test sets another.
public protocol EnvironmentKey {
    /// The dependency's type.
    associatedtype Value: Sendable
    /// The value effects get until a node or test sets another.
    static var defaultValue: Value { get }
}

/// The dependencies effects reach (services, clients, constants), swappable per node so a test
/// replaces a service without subclassing anything.
///
/// Add a dependency with an `EnvironmentKey` and a computed property:
/// ```swift
/// private enum PagerKey: EnvironmentKey { static let defaultValue: any Pager = LivePager() }
/// extension EffectEnvironment {
///     var pager: any Pager { get { self[PagerKey.self] } set { self[PagerKey.self] = newValue } }
/// }
/// ```
public struct EffectEnvironment: Sendable {
    private var values: [ObjectIdentifier: any Sendable] = [:]

    /// An environment in which every key reads as its `defaultValue`.
    public init() {}

    /// The value set for `key`, or its default.
    public subscript<Key: EnvironmentKey>(key: Key.Type) -> Key.Value {
        get { values[ObjectIdentifier(key)] as? Key.Value ?? Key.defaultValue }
        set { values[ObjectIdentifier(key)] = newValue }
    }
}
