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
/// A key the group already holds that a local commit writes again (a counter, a flag, a lease)
/// is not handed over a second time: its row is marked to be re-read from the node's table
/// when the writer takes the group (`reread(from:)`, under the node's lock), since that table
/// then holds the winner of every change the group coalesced for it. At most
/// `maxRereadRows` rows are marked, so the writer's hold of the node's lock stays short;
/// past them, writes are merged as they come (docs/design/0016-group-commit.md, "The
/// technique").
///
/// It is built on the committing thread, under the write queue's lock, so the values a later
/// commit supersedes are released where they were allocated, and the writer thread receives
/// one array of rows per transaction rather than one array per commit.
///
/// Held as rows (`changes`, handed to the store file as they are) and, past a few keys, cells
/// that find a key's row by its stable hash. Not a `Dictionary<StateKey, StoreFileChange>`: that
/// hashed every key again with a seeded `Hasher`, and merging into a value in place went through
/// its index and `Optional`'s generic value witnesses, about 250 instructions for a key written
/// again (docs/design/0016-group-commit.md, "The technique").
struct GroupCommit {
    /// One row per key changed, in the order the keys were first changed.
    private(set) var changes: [(key: StateKey, change: StoreFileChange)] = []
    private(set) var clock = HLCTimestamp.zero
    private(set) var commits = 0
    /// The change feed's records of these commits, and its trim (`FeedRows`).
    var feed = FeedRows()
    /// The row of the key changed last (-1: none): a key written again and again (a counter,
    /// a flag) is found with one comparison.
    private var lastRow = -1
    /// Built once there are more than `linearSearchLimit` rows: where each key's row is, by its
    /// stable hash, with open addressing (a cell holds the row plus one; 0 is empty), at most
    /// half full.
    private var cells: [Int] = []
    private static let linearSearchLimit = 8
    /// Rows whose upsert `reread(from:)` takes from the node's table, in the order marked.
    private var rereadRows: [Int] = []
    /// The row marked last (-1: none): a hot key finds its mark with one comparison.
    private var lastRereadRow = -1
    /// At most this many rows are re-read when the writer takes a group: each is one lookup
    /// in the node's table while the writer holds the node's lock.
    static let maxRereadRows = 64

    var isEmpty: Bool { commits == 0 && feed.isEmpty }

    /// Adds one commit: `count` changes, the i-th being `change(i)`, then the node's clock.
    mutating func add(changeCount count: Int, clock: HLCTimestamp, change: (Int) -> StoreChange) {
        for index in 0..<count {
            switch change(index) {
            case let .upsert(key, entry): upsert(key, entry)
            case let .remove(key, upTo: version): remove(key, upTo: version)
            }
        }
        finish(clock: clock)
    }

    /// Adds one commit of upserts whose entries the node's table holds now (a local decision's,
    /// merged before it is appended), offered one by one: each key lent (copied only when the key
    /// is new to the group), and a way to build its entry. Then the node's clock. A key the group
    /// already holds is marked to be re-read (`reread(from:)`) while there is room for the mark
    /// and the group is `rereading` (its writer reads the node's table), and its entry is not
    /// built; otherwise the entry is merged into its row.
    mutating func addTableUpserts(clock: HLCTimestamp, rereading: Bool, offering upserts: ((borrowing StateKey, () -> Entry) -> Void) -> Void) {
        upserts { key, entry in
            guard let row = self.row(of: key) else {
                self.appendRow(copy key, StoreFileChange(upsert: entry()))
                return
            }
            if !rereading || !self.markReread(row) { self.changes[row].change.mergeUpsert(entry()) }
        }
        finish(clock: clock)
    }

    /// Marks `row` to be re-read; false when it is not marked and there is no room for another mark.
    private mutating func markReread(_ row: Int) -> Bool {
        if row == lastRereadRow || rereadRows.contains(row) {
            lastRereadRow = row
            return true
        }
        guard rereadRows.count < Self.maxRereadRows else { return false }
        rereadRows.append(row)
        lastRereadRow = row
        return true
    }

    /// Replaces the upsert of every row marked by `addTableUpserts` with `key`'s entry in the
    /// node's table (`entry(key)`), which holds the winner of every change this group coalesced
    /// for it. Call holding the node's lock, with every commit since the mark in the group. A
    /// key the table no longer holds was collected after its last write, and the group holds
    /// that removal: its upsert is dropped, as the removal would have dropped it.
    mutating func reread(from entry: (borrowing StateKey) -> Entry?) {
        for row in rereadRows {
            if let found = lendKey(at: row, entry) {
                changes[row].change.upsert = found
            } else {
                assert(changes[row].change.removeUpTo != nil, "a re-read key left the table without a removal in its group")
                if changes[row].change.removeUpTo != nil { changes[row].change.upsert = nil }
            }
        }
        rereadRows = []
        lastRereadRow = -1
    }

    /// Whether some row waits for `reread(from:)`.
    var needsReread: Bool { !rereadRows.isEmpty }

    /// Rows waiting for `reread(from:)` (at most `maxRereadRows`).
    var rereadRowCount: Int { rereadRows.count }

    private mutating func finish(clock: HLCTimestamp) {
        if clock > self.clock { self.clock = clock }
        commits += 1
    }

    private mutating func upsert(_ key: borrowing StateKey, _ entry: consuming Entry) {
        if let row = row(of: key) {
            changes[row].change.mergeUpsert(entry)
        } else {
            appendRow(copy key, StoreFileChange(upsert: entry))
        }
    }

    private mutating func remove(_ key: borrowing StateKey, upTo version: Version) {
        guard let row = row(of: key) else {
            appendRow(copy key, StoreFileChange(removeUpTo: version))
            return
        }
        if let upsert = changes[row].change.upsert {
            // A pending upsert newer than the tombstone survives the removal.
            guard upsert.version <= version else { return }
            changes[row].change.upsert = nil
        }
        if let earlier = changes[row].change.removeUpTo, earlier > version {} else { changes[row].change.removeUpTo = version }
    }

    /// The row of `key`, or nil when the group has none; the row found becomes `lastRow`.
    private mutating func row(of key: borrowing StateKey) -> Int? {
        if lastRow >= 0 && hasKey(key, at: lastRow) { return lastRow }
        var found: Int?
        if cells.isEmpty {
            for row in changes.indices where hasKey(key, at: row) {
                found = row
                break
            }
        } else {
            let mask = cells.count - 1
            var cell = Int(truncatingIfNeeded: key.stableHash) & mask
            while cells[cell] != 0 {
                let row = cells[cell] - 1
                if hasKey(key, at: row) {
                    found = row
                    break
                }
                cell = (cell + 1) & mask
            }
        }
        if let found { lastRow = found }
        return found
    }

    /// Whether row `row` is `key`'s, compared where the row's key lies (a tuple's first element
    /// is at its start), lent (`lendPointee`) under the queue's lock: `changes[row].key` copied
    /// the whole row out and destroyed it through generic tuple witnesses, about 370
    /// instructions, and a key copied on its own retains its name.
    private func hasKey(_ key: borrowing StateKey, at row: Int) -> Bool {
        lendKey(at: row) { $0 == key }
    }

    /// Lends the key of row `row` to `body` where it lies (`hasKey` says why).
    private func lendKey<Result>(at row: Int, _ body: (borrowing StateKey) -> Result) -> Result {
        changes.withUnsafeBufferPointer { rows in
            UnsafeMutableRawPointer(mutating: rows.baseAddress! + row).assumingMemoryBound(to: StateKey.self)
                .lendPointee(body)
        }
    }

    /// Adds a row for `key` (not in the group yet) and makes it `lastRow`.
    private mutating func appendRow(_ key: consuming StateKey, _ change: consuming StoreFileChange) {
        changes.append((key: key, change: change))
        lastRow = changes.count - 1
        guard changes.count > Self.linearSearchLimit else { return }
        if changes.count * 2 > cells.count {
            // Four times the rows, a power of two: rebuilt whole (rarely, as it doubles).
            var size = 64
            while size < changes.count * 4 { size *= 2 }
            cells = [Int](repeating: 0, count: size)
            for row in changes.indices { insertCell(row: row) }
        } else {
            insertCell(row: lastRow)
        }
    }

    /// Places `row` (a key not in the cells yet) in the first free cell of its probe sequence.
    private mutating func insertCell(row: Int) {
        let mask = cells.count - 1
        var cell = Int(truncatingIfNeeded: changes[row].key.stableHash) & mask
        while cells[cell] != 0 { cell = (cell + 1) & mask }
        cells[cell] = row + 1
    }
}
