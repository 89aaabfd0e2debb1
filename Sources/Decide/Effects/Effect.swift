/// What a decision asks to happen after it commits. Effects are values: a decision returns one
/// and never does the work itself. They run only on the node that made the decision; replicas
/// apply the decision's writes and never re-run its effects.
///
/// Guarantees on one node:
/// - `.decide` follow-ups run after the decision that returned them commits, in the order
///   given, before `Node.decide` returns;
/// - `.run` operations start in the order given on the node's task pool (at most
///   `Configuration.effectConcurrency` at once), so they may finish in any order;
/// - an error thrown by an operation goes to the nearest `mapError` around it, else to
///   `Configuration.mapError`; it is logged either way, and the effect returned is performed.
public struct Effect: Sendable {
    indirect enum Operation: Sendable {
        case none
        case run(@Sendable (EffectContext) async throws -> Void)
        case decide(any Decision)
        case merge([Effect])
        case mapError(Effect, @Sendable (any Error) -> Effect)
    }

    let operation: Operation

    init(_ operation: Operation) { self.operation = operation }

    /// Nothing to do.
    public static var none: Effect { Effect(.none) }

    /// Runs `operation` on the node's task pool.
    public static func run(_ operation: @escaping @Sendable (EffectContext) async throws -> Void) -> Effect {
        Effect(.run(operation))
    }

    /// Makes `decision` right after the current one commits.
    public static func decide(_ decision: some Decision) -> Effect {
        Effect(.decide(decision))
    }

    /// Performs every effect, in order.
    public static func merge(_ effects: Effect...) -> Effect {
        merge(effects)
    }

    /// Performs every effect, in order.
    public static func merge(_ effects: [Effect]) -> Effect {
        Effect(.merge(effects))
    }

    /// Turns an error thrown inside this effect into the effect `transform` returns (for
    /// example a decision that records the failure). Errors thrown by that effect go to the
    /// handlers outside this one.
    public func mapError(_ transform: @escaping @Sendable (any Error) -> Effect) -> Effect {
        Effect(.mapError(self, transform))
    }
}

/// What a running effect can use: the node's environment at the time the effect started, and
/// the node itself to read state and make further decisions.
public struct EffectContext: Sendable {
    /// The dependencies this effect uses (`Node.environment` when the effect was scheduled).
    public let environment: EffectEnvironment
    let node: Node

    /// Makes a decision on the node that ran this effect.
    @discardableResult
    public func decide(_ decision: some Decision) -> Commit {
        node.decide(decision)
    }

    /// Reads a consistent snapshot of the node's state.
    public func read<T>(_ body: (StorageReader) -> T) -> T {
        node.read(body)
    }
}
