import DecideCore

/// The commits queued for the store's next transaction, coalesced as they are appended: one
/// change per key, equivalent to applying every change in commit order.
///
/// Guarantees:
/// - upserts of a key merge last-writer-wins, so only the winner is kept (and written);
/// - a removal (`remove(key, upTo:)`) cancels a pending upsert it covers and keeps the highest
///   removal version; an upsert newer than the removal survives it;
/// - `clock` is the highest clock of the commits added; `commits` counts them (the write
///   queue's bound is in commits, as before coalescing).
///
/// It is built on the committing thread, under the write queue's lock, so the values a later
/// commit supersedes are released where they were allocated, and the writer thread receives
/// one dictionary per transaction rather than one array per commit.
struct GroupCommit {
    private(set) var changes: [StateKey: StoreFileChange] = [:]
    private(set) var clock = HLCTimestamp.zero
    private(set) var commits = 0
    /// The key of the last upsert (when `hasLastKey`), and (from its second upsert in a row)
    /// its place in `changes`: a key written again and again — a counter, a flag — is merged
    /// without hashing. Only an insertion moves places, and an insertion replaces `lastKey`.
    /// Not an optional: comparing with one copied the key out first (a retain and release).
    private var lastKey = StateKey(name: "")
    private var hasLastKey = false
    private var lastIndex: Dictionary<StateKey, StoreFileChange>.Index?

    var isEmpty: Bool { commits == 0 }

    /// Adds one commit: `count` changes, the i-th being `change(i)`, then the node's clock.
    mutating func add(changeCount count: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) {
        for index in 0..<count { add(change(index)) }
        if clock > self.clock { self.clock = clock }
        commits += 1
    }

    private mutating func add(_ change: consuming StoreChange) {
        switch consume change {
        case let .upsert(key, entry):
            if hasLastKey && key == lastKey {
                if lastIndex == nil { lastIndex = changes.index(forKey: key) }
                changes.values[lastIndex!].upsert.merge(entry)
            } else {
                changes[key, default: .init()].upsert.merge(entry)
                lastKey = key
                hasLastKey = true
                lastIndex = nil
            }
        case let .remove(key, upTo: version):
            var pending = changes[key, default: .init()]
            if let upsert = pending.upsert {
                // A pending upsert newer than the tombstone survives the removal.
                guard upsert.version <= version else { return }
                pending.upsert = nil
            }
            if let earlier = pending.removeUpTo, earlier > version {} else { pending.removeUpTo = version }
            changes[key] = pending
            if !hasLastKey || key != lastKey { (hasLastKey, lastIndex) = (false, nil) }
        }
    }
}

private extension Optional where Wrapped == Entry {
    /// Keeps the last-writer-wins winner of the held entry and `entry` (`Entry.merged`): the
    /// held one is compared where it lies, not copied out and back.
    mutating func merge(_ entry: consuming Entry) {
        if case .some(let held) = self, held.wins(over: entry) { return }
        self = entry
    }
}
