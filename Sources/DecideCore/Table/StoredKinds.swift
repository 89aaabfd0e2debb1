/// What the records of one collection name are, by kind laid out on a collection
/// (`EntryTable.storedKinds(ofCollectionNamed:)`), tombstones included: a front end tells from
/// it, with one lookup of the name, which kinds a key may hold before it looks for a live one.
/// Counts fit 32 bits, as record numbers do.
public struct StoredKinds: Equatable, Sendable {
    private var compoundRecords: UInt32 = 0
    private var setGroups: UInt32 = 0
    private var scoredRecords: UInt32 = 0
    private var slotRecords: UInt32 = 0
    private var baseRecords: UInt32 = 0
    private var lifetimeRecords: UInt32 = 0
    private var fieldCounterRecordCount: UInt32 = 0
    private var plainRecords: UInt32 = 0

    /// No records of any kind: what a name with nothing stored under it reports.
    public init() {}

    /// Plain elements: a collection's elements, a hash's fields, anything not laid out below.
    public var plain: Int { Int(plainRecords) }
    /// Set members: groups of dots (`FF 73 01`, docs/design/0002-sets.md), a member with only
    /// tombstoned dots left included.
    public var setMembers: Int { Int(setGroups) }
    /// Sorted set members (`FF 7A 01`, docs/design/0003-sorted-sets.md).
    public var scoredMembers: Int { Int(scoredRecords) }
    /// A counter's slots (`FF 63 01`, docs/design/0001-counters.md).
    public var counterSlots: Int { Int(slotRecords) }
    /// A counter's base slots (`FF 62 01`: a string's number taken over by INCR).
    public var counterBases: Int { Int(baseRecords) }
    /// Slots and base slots of a hash's counter fields (`FF 68 01`, `FF 66 01`: HINCRBY,
    /// docs/design/0001-counters.md).
    package var fieldCounterRecords: Int { Int(fieldCounterRecordCount) }
    /// Lifetime markers (`FF 6C 01 00`, docs/design/0004-collection-lifetimes.md), live or not.
    package var lifetimeMarkers: Int { Int(lifetimeRecords) }
    /// Records of any kind laid out on a collection (ids `FF kind 01 …`).
    var compound: Int { Int(compoundRecords) }

    /// No record of any compound kind, nor a set member.
    var isEmpty: Bool { compoundRecords == 0 && setGroups == 0 }

    /// With `records` records stored in all under the name.
    func withPlain(ofRecords records: Int) -> StoredKinds {
        var kinds = self
        kinds.plainRecords = UInt32(records) - compoundRecords
        return kinds
    }

    /// Counts a compound record with id `bytes` in (`step` 1) or out (-1).
    mutating func count(compound bytes: UnsafeRawBufferPointer, by step: Int) {
        func add(_ field: inout UInt32) { field = step > 0 ? field + 1 : field - 1 }
        add(&compoundRecords)
        switch bytes[1] {
        case ElementGroup.scoredMemberKind: add(&scoredRecords)
        case ElementGroup.counterSlotKind: add(&slotRecords)
        case ElementGroup.counterBaseKind: add(&baseRecords)
        case ElementGroup.lifetimeMarkerKind: add(&lifetimeRecords)
        case ElementGroup.fieldSlotKind, ElementGroup.fieldBaseKind: add(&fieldCounterRecordCount)
        default: break
        }
    }

    /// Counts a set member (a group of dots) in (`step` 1) or out (-1).
    mutating func countSetMember(by step: Int) {
        setGroups = step > 0 ? setGroups + 1 : setGroups - 1
    }
}
