extension Array {
    /// Removes every element and keeps the storage for the next ones, one `removeLast` at a
    /// time. `removeAll(keepingCapacity: true)` calls the standard library's `replaceSubrange`
    /// unspecialised, through witness tables, however few the elements (docs/benchmarks.md,
    /// "Runtime calls off syncnode's request loop"): for the short arrays emptied once a
    /// request (a command's arguments and their ranges). A long array of bytes is better
    /// emptied by `removeAll(keepingCapacity:)`, whose cost does not grow with its count.
    @inlinable
    package mutating func removeAllKeepingStorage() {
        while !isEmpty { removeLast() }
    }
}
