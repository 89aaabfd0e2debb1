import DecideCore

/// The transaction a `StorageReader` or `StorageWriter` was handed, held without a reference
/// count: making the pair for every decision and calling through it costs no atomic retain or
/// release (two of each a decision before, about a tenth of a one-write decision's time:
/// docs/design/0009-atomics-off-the-hot-paths.md, "The technique").
///
/// Sound because a reader or writer is only valid during the call it was handed to, while the
/// node, which owns the transaction, is running that call: `open` checks the generation first,
/// so one kept past its call stops at a precondition while the node lives. One kept past the
/// node's own end is outside that contract.
@usableFromInline
struct TransactionReference {
    @usableFromInline let transaction: Unmanaged<Transaction>
    @usableFromInline let generation: UInt64

    init(_ transaction: Transaction, generation: UInt64) {
        self.transaction = .passUnretained(transaction)
        self.generation = generation
    }

    /// Calls `body` with the transaction, borrowed (no retain), after checking that it still
    /// runs the call this reference was made for.
    @inlinable @inline(__always)
    func open<Result>(_ body: (Transaction) -> Result) -> Result {
        transaction.lend { transaction in
            transaction.check(generation)
            return body(transaction)
        }
    }
}
