extension Array {
    /// Storage of more elements than this is released by `removeAllKeepingStorage`, not kept:
    /// one command of a million arguments must not leave the arrays every later command uses
    /// (a session's arguments, 32 bytes a slice; the parser's ranges) holding its memory.
    @inlinable package static var maxKeptCount: Int { 4096 }

    /// Removes every element and keeps the storage for the next ones, one `removeLast` at a
    /// time, unless it holds room for more than `maxKeptCount` (then it is released).
    /// `removeAll(keepingCapacity: true)` calls the standard library's `replaceSubrange`
    /// unspecialised, through witness tables, however few the elements
    /// (docs/design/0014-syncnode-loop-turn.md, "The rest of a request's cost"): for the short
    /// arrays emptied once a request (a command's arguments and their ranges). A long array of
    /// bytes is better emptied by `removeAll(keepingCapacity:)`, whose cost does not grow with
    /// its count.
    @inlinable
    package mutating func removeAllKeepingStorage() {
        guard capacity <= Self.maxKeptCount else {
            self = []
            return
        }
        while !isEmpty { removeLast() }
    }
}
