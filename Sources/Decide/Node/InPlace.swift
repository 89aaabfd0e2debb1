/// A value the node's locked state touches on every decision or write, kept where reading and
/// changing it costs no dynamic exclusivity check in release builds.
///
/// A stored `var` of a class costs a dynamic exclusivity check on every access
/// (`swift_beginAccess`, about 80 instructions with its thread-local lookup: a quarter of a
/// write's own work in the core benchmark, docs/design/0008-in-place-access.md, "InPlace"). In
/// release builds an `InPlace` is a `let` holding the value's heap address, reached through
/// addressors; in debug builds (every test run) it is a class box whose stored `var` keeps
/// Swift's checks, so an overlapping access is still caught where it can be.
///
/// Guarantees nothing about exclusivity itself: every `InPlace` in Decide belongs to `NodeCore`
/// or its `Transaction` and is touched only while the node's lock is held, to the store's
/// `StoreWriteQueue` and is touched only under its lock, or to a `Replicator` and is touched
/// only inside its transport's delegate calls, which come one at a time. That is what makes
/// the unchecked access sound. The owner calls `release()` exactly once, in its `deinit`.
struct InPlace<Value>: @unchecked Sendable {
    #if DEBUG
    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }
    private let box: Box

    init(_ value: Value) { box = Box(value) }

    /// The value, in place: `inPlace.value.mutate()` changes it without a copy.
    var value: Value {
        _read { yield box.value }
        nonmutating _modify { yield &box.value }
    }

    /// Calls `body` with the value's address (see the release variant).
    func withAddress<R>(_ body: (UnsafeMutablePointer<Value>) throws -> R) rethrows -> R {
        try withUnsafeMutablePointer(to: &box.value, body)
    }

    /// Moves the value out, leaving the storage uninitialized until `put` (see the release
    /// variant).
    func take() -> Value {
        withUnsafeMutablePointer(to: &box.value) { $0.move() }
    }

    /// Moves `value` into storage that `take` left uninitialized.
    func put(_ value: consuming Value) {
        var value = Optional(value)
        withUnsafeMutablePointer(to: &box.value) { $0.initialize(to: value.take()!) }
    }

    /// Ends the value's life (a no-op in debug builds, where the box does).
    func release() {}
    #else
    private let address: UnsafeMutablePointer<Value>

    init(_ value: Value) {
        address = .allocate(capacity: 1)
        address.initialize(to: value)
    }

    /// The value, in place: `inPlace.value.mutate()` changes it without a copy.
    var value: Value {
        unsafeAddress { UnsafePointer(address) }
        nonmutating unsafeMutableAddress { address }
    }

    /// Calls `body` with the value's address. A non-mutating method of a field called through
    /// it (`$0.pointee.table.entry(for:)`) reads in place: through `value`'s accessors, a
    /// method of another module gets a copy of the field, every reference in it retained and
    /// released (a third of a Redis-protocol GET, docs/design/0008-in-place-access.md, "Reads that
    /// borrow the table").
    func withAddress<R>(_ body: (UnsafeMutablePointer<Value>) throws -> R) rethrows -> R {
        try body(address)
    }

    /// Moves the value out, leaving the storage uninitialized until `put`: nothing may read
    /// it, nor `release` run, in between. A move, not a copy: no reference in the value is
    /// retained.
    func take() -> Value {
        address.move()
    }

    /// Moves `value` into storage that `take` left uninitialized.
    func put(_ value: consuming Value) {
        address.initialize(to: value)
    }

    /// Ends the value's life and frees its storage; nothing may touch it afterwards.
    func release() {
        address.deinitialize(count: 1)
        address.deallocate()
    }
    #endif
}
