extension Unmanaged {
    /// Calls `body` with the instance, borrowed: no retain before the call and no release after.
    /// For a hot path whose owner keeps the instance alive for the call by other means, where
    /// Swift would otherwise retain a class reference read from memory around every call on it
    /// (an atomic each way: docs/design/0009-atomics-off-the-hot-paths.md, "The technique").
    /// `_withUnsafeGuaranteedRef` with `body`'s own error type.
    @inlinable @inline(__always)
    package func lend<Result, Failure: Error>(_ body: (Instance) throws(Failure) -> Result) throws(Failure) -> Result {
        // `_withUnsafeGuaranteedRef` rethrows untyped: what it throws is `body`'s, a `Failure`.
        do {
            return try _withUnsafeGuaranteedRef { instance in try body(instance) }
        } catch let error as Failure { throw error } catch { preconditionFailure("\(error)") }
    }
}

extension Unmanaged {
    /// `lend` for a `body` that does not throw: no error path to carry (the throwing form's
    /// cast of the error cost about 25 instructions a call even when nothing threw).
    @inlinable @inline(__always)
    package func lend<Result>(_ body: (Instance) -> Result) -> Result {
        _withUnsafeGuaranteedRef(body)
    }
}

extension UnsafeMutablePointer {
    /// Calls `body` with the pointee as a value of its own: moved out, passed, moved back (the
    /// memory holds the same bits after). Swift hands a value read from memory to an opaque call
    /// as a copy, every reference in it retained before and released after; a moved-out local
    /// is handed on as it is. The pointee must not be read or written by anyone else during
    /// the call: the caller's own discipline (a lock, one owning thread) must say so.
    @inlinable @inline(__always)
    package func lendPointee<Result>(_ body: (borrowing Pointee) -> Result) -> Result {
        let value = move()
        let result = body(value)
        initialize(to: consume value)
        return result
    }
}
