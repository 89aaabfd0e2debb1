extension Array {
    /// Removes every element and keeps the storage for the next ones, one `removeLast` at a
    /// time. `removeAll(keepingCapacity: true)` calls the standard library's `replaceSubrange`
    /// unspecialised, through witness tables, however few the elements (docs/benchmarks.md,
    /// "Runtime calls off syncnode's request loop"). For short arrays emptied once a request;
    /// a long array of bytes is better emptied by `removeAll(keepingCapacity:)`, whose cost does
    /// not grow with its count.
    @inlinable
    package mutating func removeAllKeepingStorage() {
        while !isEmpty { removeLast() }
    }
}
