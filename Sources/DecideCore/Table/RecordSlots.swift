/// A 4-byte slot per record of an `EntryTable`, for a structure that names records by their
/// position (the expiry schedule, each node's owned list): the slot + 1 of the record's place
/// there, 0 for none. No slots at all until the first is made (a table that never needs them
/// pays nothing), one per record from then on, following every record the table appends, moves
/// into a hole and removes from its end.
///
/// Guarantees: once made, `count` equals the table's record count (the table calls
/// `recordAppended`, `moveLast(_:to:)` and `removeLast` as its records change); slots of
/// records added after `make` are 0.
struct RecordSlots {
    private var slots = GrowingArray<UInt32>()

    /// Whether the slots exist (made, and the table has records).
    var isMade: Bool { !slots.isEmpty }
    var count: Int { slots.count }

    /// Makes one zero slot per record of a table of `records` records, unless made already: a
    /// fresh mapping past `GrowingArray.mappedMinimumBytes`, whose pages fault in as written.
    @inline(__always)
    mutating func make(records: Int) {
        if slots.isEmpty { slots = GrowingArray(zeroedCount: records) }
    }

    /// The slot of record `position` (the slots must be made).
    subscript(position: Int) -> UInt32 {
        get { slots[position] }
        set { slots[position] = newValue }
    }

    /// The slot of record `position`, 0 when the slots are not made.
    func slot(of position: Int) -> UInt32 { slots.isEmpty ? 0 : slots[position] }

    /// The address of the first slot (the slots must be made), for a caller that writes many
    /// slots in one pass: valid until the slots are next changed or copied.
    mutating func firstAddress() -> UnsafeMutablePointer<UInt32> { slots.address(of: 0) }

    /// The table appended a record: its slot is 0.
    @inline(__always)
    mutating func recordAppended() {
        if !slots.isEmpty { slots.append(0) }
    }

    /// The table moved its last record, `last`, into `position`: the slot moves with it.
    /// Returns the moved slot (0: none, or the slots are not made). Call `removeLast` after.
    mutating func moveLast(_ last: Int, to position: Int) -> UInt32 {
        guard !slots.isEmpty else { return 0 }
        let slot = slots[last]
        slots[position] = slot
        return slot
    }

    /// The table removed its last record.
    mutating func removeLast() {
        if !slots.isEmpty { _ = slots.removeLast() }
    }
}
