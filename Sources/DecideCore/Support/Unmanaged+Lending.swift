extension Unmanaged {
    /// Calls `body` with the instance, borrowed: no retain before the call and no release after.
    /// For a hot path whose owner keeps the instance alive for the call by other means, where
    /// Swift would otherwise retain a class reference read from memory around every call on it
    /// (an atomic each way: docs/benchmarks.md, "Atomics off the decision path").
    /// `_withUnsafeGuaranteedRef` with `body`'s own error type.
    @inline(__always)
    package func lend<Result, Failure: Error>(_ body: (Instance) throws(Failure) -> Result) throws(Failure) -> Result {
        // `_withUnsafeGuaranteedRef` rethrows untyped: what it throws is `body`'s, a `Failure`.
        do {
            return try _withUnsafeGuaranteedRef { instance in try body(instance) }
        } catch let error as Failure { throw error } catch { preconditionFailure("\(error)") }
    }
}
