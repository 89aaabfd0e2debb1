/// Writes state inside a decision. Valid only during `Decision.execute`.
///
/// Guarantees: writes are invisible to every other reader until the decision returns, then all
/// become visible together with one version. Writing a key twice keeps the last value.
public struct StorageWriter {
    let transaction: Transaction
    let generation: UInt64

    public func callAsFunction<K: AtomicState>(_ value: K.Value, into key: K.Type) {
        transaction.check(generation)
        transaction.write(value, into: key)
    }

    public func callAsFunction<C: CollectionState>(_ value: C.Value, into collection: C.Type, at id: C.ID) {
        transaction.check(generation)
        transaction.write(value, into: collection, at: id)
    }

    /// Deletes `key`: a tombstone is written, and the key reads as its default again.
    public func delete<K: AtomicState>(_ key: K.Type) {
        transaction.check(generation)
        transaction.delete(key)
    }

    /// Deletes element `id` of `collection`.
    public func delete<C: CollectionState>(_ collection: C.Type, at id: C.ID) {
        transaction.check(generation)
        transaction.delete(collection, at: id)
    }

    /// Writes raw value bytes to an untyped key (`nil` deletes it). For tools such as syncnode;
    /// the bytes should be JSON so typed readers can decode them.
    public func raw(_ value: [UInt8]?, into key: StateKey) {
        transaction.check(generation)
        transaction.writeRaw(value, into: key)
    }
}
