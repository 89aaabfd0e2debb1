import DecideCore
import Testing

/// Expiring values in the pure core: the entry's rules, the codec, and the table's sweep and
/// collection (docs/consistency.md, "Expiring keys").
@Suite struct ExpiryTests {
    private func version(_ physical: UInt64, _ node: String = "a") -> Version {
        Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: 0), node: node)
    }

    @Test func anExpiredValueReadsAsAbsentAndATombstoneNeverExpires() {
        let entry = Entry(version: version(100), value: [1], expiresAtMilliseconds: 200)
        #expect(entry.value(atMilliseconds: 199) == [1])
        #expect(!entry.isExpired(atMilliseconds: 199))
        #expect(entry.isExpired(atMilliseconds: 200))
        #expect(entry.value(atMilliseconds: 200) == nil)
        let tombstone = Entry(version: version(100), value: nil, expiresAtMilliseconds: 200)
        #expect(tombstone.expiresAtMilliseconds == nil)
        // Instants outside the clock's range mean the nearest one inside.
        #expect(Entry(version: version(1), value: [1], expiresAtMilliseconds: 0).expiresAtMilliseconds == 1)
        #expect(Entry(version: version(1), value: [1], expiresAtMilliseconds: .max).expiresAtMilliseconds
                == HLCTimestamp.maxPhysicalMilliseconds)
    }

    @Test func expiryNeverDecidesBetweenVersions() {
        // A newer write replaces an expiring one, whether or not it expires itself, and an
        // older one never comes back because the newer expired.
        let old = Entry(version: version(100), value: [1])
        let newer = Entry(version: version(101), value: [2], expiresAtMilliseconds: 150)
        #expect(old.merged(with: newer) == newer)
        #expect(newer.merged(with: old) == newer)
        // Same version, same bytes: the later expiry wins, never-expiring highest.
        let short = Entry(version: version(100), value: [1], expiresAtMilliseconds: 150)
        let long = Entry(version: version(100), value: [1], expiresAtMilliseconds: 300)
        #expect(short.merged(with: long) == long && long.merged(with: short) == long)
        #expect(short.merged(with: old) == old && old.merged(with: short) == old)
    }

    @Test func theCodecCarriesExpiryAndRefusesInstantsOutsideTheClock() throws {
        let codec = WireCodec()
        let key = StateKey(name: "presence", element: Array("\"a\"".utf8))
        let entries = [
            KeyedEntry(key: key, entry: Entry(version: version(100), value: [1, 2], expiresAtMilliseconds: 5_000)),
            KeyedEntry(key: StateKey(name: "plain"), entry: Entry(version: version(100), value: [3])),
            KeyedEntry(key: StateKey(name: "gone"), entry: Entry(version: version(100), value: nil)),
        ]
        #expect(try codec.decodeEntries(codec.encode(entries)) == entries)
        let delta = Delta(version: version(7), writes: [
            Delta.Write(key: key, value: [9], expiresAtMilliseconds: 42), Delta.Write(key: StateKey(name: "x"), value: [1]),
        ])
        #expect(try codec.decodeDelta(codec.encode(delta)) == delta)
        // A value flag of 2 with an instant of 0 or past 2^48 - 1 is refused, not clamped.
        for instant in [UInt64(0), HLCTimestamp.maxPhysicalMilliseconds + 1, .max] {
            var bytes = codec.encode([entries[0]])
            let offset = bytes.count - 8
            for index in 0..<8 { bytes[offset + index] = UInt8(truncatingIfNeeded: instant >> (8 * UInt64(index))) }
            #expect(throws: WireDecodeError.outOfRange(field: "value.expiresAt", value: instant)) {
                try codec.decodeEntries(bytes)
            }
        }
    }

    /// A read by name asks for the instant only when the stored value expires, and then judges
    /// it exactly as the read at a given instant does.
    @Test func aReadByNameAsksTheClockOnlyForAValueThatExpires() {
        var table = EntryTable()
        table.merge(Entry(version: version(10), value: [1], expiresAtMilliseconds: 300), for: StateKey(name: "expiring"))
        table.merge(Entry(version: version(10), value: [2]), for: StateKey(name: "lasting"))
        table.merge(Entry(version: version(10), value: nil), for: StateKey(name: "deleted"))
        for (name, instant) in [("expiring", UInt64(299)), ("expiring", 300), ("lasting", 299), ("deleted", 299), ("absent", 299)] {
            var asked = 0
            let read = Array(name.utf8).withUnsafeBytes { raw in
                table.value(ofAtomicNamed: raw, clock: { asked += 1; return instant })
            }
            #expect(read == Array(name.utf8).withUnsafeBytes { table.value(ofAtomicNamed: $0, atMilliseconds: instant) }, "\(name) at \(instant)")
            #expect(asked == (name == "expiring" ? 1 : 0), "\(name): the clock asked \(asked) times")
        }
    }

    @Test func theTableReportsEachExpiryOnceEarliestFirstAndFollowsRenewals() {
        var table = EntryTable()
        let a = StateKey(name: "a"), b = StateKey(name: "b"), c = StateKey(name: "c")
        table.merge(Entry(version: version(10), value: [1], expiresAtMilliseconds: 300), for: a)
        table.merge(Entry(version: version(10), value: [2], expiresAtMilliseconds: 200), for: b)
        table.merge(Entry(version: version(10), value: [3]), for: c)
        let result1 = table.expire(dueAtMilliseconds: 199).isEmpty
        #expect(result1)
        // b is renewed before it is due: the old instant reports nothing.
        table.merge(Entry(version: version(11), value: [2], expiresAtMilliseconds: 400), for: b)
        let result2 = table.expire(dueAtMilliseconds: 250).isEmpty
        #expect(result2)
        let result3 = table.expire(dueAtMilliseconds: 300).map(\.key)
        #expect(result3 == [a])
        let result4 = table.expire(dueAtMilliseconds: 350).isEmpty
        #expect(result4, "a is reported once")
        #expect(table.expiredCount == 1)
        #expect(table.value(ofAtomicNamed: UnsafeRawBufferPointer(start: nil, count: 0), atMilliseconds: 0) == nil)
        #expect(Array("a".utf8).withUnsafeBytes { table.value(ofAtomicNamed: $0, atMilliseconds: 350) } == .some(nil))
        #expect(Array("b".utf8).withUnsafeBytes { table.value(ofAtomicNamed: $0, atMilliseconds: 350) } == .some(PackedBytes([2])))
        #expect(table.liveKeys(fromBucket: 0, minimumKeys: 10, maximumBuckets: table.bucketCount, atMilliseconds: 350).keys.sorted()
                == [b, c])
        // A new write to an expired key makes it live again and takes it out of the count.
        table.merge(Entry(version: version(12), value: [5]), for: a)
        #expect(table.expiredCount == 0)
        let result5 = table.expire(dueAtMilliseconds: 10_000).map(\.key)
        #expect(result5 == [b])
    }

    @Test func collectionRemovesExpiredValuesAndTombstonesButNeverALiveValue() {
        var table = EntryTable()
        let live = StateKey(name: "live"), expiring = StateKey(name: "expiring"), deleted = StateKey(name: "deleted")
        table.merge(Entry(version: version(10), value: [1]), for: live)
        table.merge(Entry(version: version(10), value: [2], expiresAtMilliseconds: 100), for: expiring)
        table.merge(Entry(version: version(10), value: nil), for: deleted)
        let result6 = table.collect(live, version: version(10))
        #expect(!result6)
        let result7 = table.collect(expiring, version: version(10))
        #expect(!result7, "due, but not reported expired yet")
        _ = table.expire(dueAtMilliseconds: 100)
        #expect(table.expiredCount == 1)
        let result8 = table.collect(expiring, version: version(9))
        #expect(!result8, "another version")
        let result9 = table.collect(expiring, version: version(10))
        #expect(result9)
        #expect(table.expiredCount == 0)
        let result10 = table.collect(deleted, version: version(10))
        #expect(result10)
        #expect(table.count == 1)
    }

    @Test func theDigestDoesNotDependOnWhenANodeNoticedAnExpiry() {
        // Two replicas with the same entries, one of which swept them (its clock is ahead),
        // compare equal: anti-entropy has nothing to repair.
        var ahead = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
        var behind = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
        for index in 0..<200 {
            let entry = Entry(version: version(10), value: [UInt8(index % 256)], expiresAtMilliseconds: UInt64(100 + index))
            ahead.merge(entry, for: StateKey(name: "k\(index)"))
            behind.merge(entry, for: StateKey(name: "k\(index)"))
        }
        #expect(ahead.expire(dueAtMilliseconds: 10_000).count == 200)
        #expect(behind.expire(dueAtMilliseconds: 150).count == 51)
        #expect(ahead.digest == behind.digest)
        // An expiring value and the same value without expiry are different entries.
        var other = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
        other.merge(Entry(version: version(10), value: [0]), for: StateKey(name: "k0"))
        var same = EntryTable(digest: StateDigest(fanoutBits: 2, depth: 3))
        same.merge(Entry(version: version(10), value: [0], expiresAtMilliseconds: 100), for: StateKey(name: "k0"))
        #expect(other.digest != same.digest)
    }

    @Test func aRenewedValueIsReportedAtItsNewInstantAmongTheOthersDue() {
        // `a` was scheduled at 100 and renewed to 300; `b` is due at 200. Swept at 400, both are
        // due: `b` comes first, as its instant does.
        var table = EntryTable()
        let a = StateKey(name: "a"), b = StateKey(name: "b")
        table.merge(Entry(version: version(10), value: [1], expiresAtMilliseconds: 100), for: a)
        table.merge(Entry(version: version(10), value: [2], expiresAtMilliseconds: 200), for: b)
        table.merge(Entry(version: version(11), value: [1], expiresAtMilliseconds: 300), for: a)
        #expect(table.nextExpiryMilliseconds == 100, "a renewal moves nothing until the old instant comes")
        #expect(table.expire(dueAtMilliseconds: 400).map(\.key) == [b, a])
        #expect(table.expiryScheduleCount == 0)
    }

    @Test func theScheduleFollowsARandomHistoryOfWritesDeletesSweepsAndCollections() {
        // Against a model: every value due is reported once, earliest first, whatever was
        // written, deleted, renewed, shortened or collected before; the schedule never holds
        // more items than the table has records (collections renumber records under it).
        struct Model {
            var version: Version
            var live: Bool
            var expiry: UInt64?
            var reported: Bool
        }
        for seed in UInt64(1)...6 {
            var random = SplitMix64(seed: seed)
            var table = EntryTable()
            var model: [Int: Model] = [:]
            var now: UInt64 = 1_000
            var clock: UInt64 = 10
            var sweeps = 0
            for _ in 0..<40_000 {
                let number = Int(random.next() % 1_500)
                let key = StateKey(name: "k\(number)")
                let choice = random.next() % 16
                switch choice {
                case 0..<10:
                    // A write: expiring (due from now to 5 s on: earlier or later than the
                    // key's last), lasting, or a delete.
                    clock += 1
                    let stamp = version(clock)
                    let expiry: UInt64? = choice < 7 ? now + random.next() % 5_000 : nil
                    let value: [UInt8]? = choice == 9 ? nil : [UInt8(number & 0xFF)]
                    table.merge(Entry(version: stamp, value: value, expiresAtMilliseconds: expiry), for: key)
                    model[number] = Model(version: stamp, live: value != nil, expiry: value == nil ? nil : expiry, reported: false)
                case 10, 11:
                    guard let stored = model[number] else { continue }
                    let collected = table.collect(key, version: stored.version)
                    #expect(collected == (!stored.live || stored.reported), "seed \(seed): collect k\(number)")
                    if collected { model[number] = nil }
                default:
                    now += random.next() % 400
                    sweeps += 1
                    let limit = random.next() % 2 == 0 ? Int(1 + random.next() % 40) : .max
                    let reported = table.expire(dueAtMilliseconds: now, limit: limit) + table.expire(dueAtMilliseconds: now)
                    let due = model.filter { $0.value.live && !$0.value.reported && ($0.value.expiry ?? .max) <= now }
                    #expect(Set(reported.map(\.key)) == Set(due.keys.map { StateKey(name: "k\($0)") }) && reported.count == due.count,
                            "seed \(seed), sweep \(sweeps): reported \(reported.count), due \(due.count)")
                    let instants = reported.map { $0.entry.expiresAtMilliseconds ?? 0 }
                    #expect(instants == instants.sorted(), "seed \(seed), sweep \(sweeps): out of order")
                    for number in due.keys { model[number]?.reported = true }
                }
                if table.expiryScheduleCount > table.count {
                    Issue.record("seed \(seed): \(table.expiryScheduleCount) items for \(table.count) records")
                    break
                }
            }
            #expect(table.expiringCount == model.values.filter { $0.live && !$0.reported && $0.expiry != nil }.count, "seed \(seed)")
            let rest = table.expire(dueAtMilliseconds: now + 10_000).map(\.key)
            #expect(Set(rest) == Set(model.filter { $0.value.live && !$0.value.reported && $0.value.expiry != nil }
                .keys.map { StateKey(name: "k\($0)") }) && rest.count == Set(rest).count, "seed \(seed)")
            #expect(table.nextExpiryMilliseconds == nil && table.expiryScheduleCount == 0, "seed \(seed)")
        }
    }

    @Test func renewingOneKeyAMillionTimesSchedulesItOnce() {
        // Presence renews its key every few seconds for weeks: the schedule must not keep an
        // item per renewal. Instants that only move later never add an item; ones that move
        // earlier are rebuilt away.
        var table = EntryTable()
        let key = StateKey(name: "presence")
        for round in 0..<1_000_000 {
            let instant = UInt64(round % 2 == 0 ? 2_000_000 + round : 2_000_000 - round)
            table.merge(Entry(version: version(UInt64(10 + round)), value: [1], expiresAtMilliseconds: instant), for: key)
        }
        let expired = table.expire(dueAtMilliseconds: 10_000_000)
        #expect(expired.count == 1 && expired.first?.key == key)
        #expect(table.nextExpiryMilliseconds == nil)
    }
}

/// Node-owned values in the pure core: the flag on the wire and in the digest, hiding by owner,
/// and collection of a removed owner's values (docs/consistency.md, "Node-owned keys").
@Suite struct OwnedValueTests {
    private func version(_ physical: UInt64, _ node: String) -> Version {
        Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: 0), node: node)
    }

    @Test func ownershipTravelsAndEveryFlagsByteOutsideTheKnownOnesIsRefused() throws {
        let codec = WireCodec()
        let owned = KeyedEntry(key: StateKey(name: "presence"), entry: Entry(version: version(5, "a"), value: [1], ownedByWriter: true))
        let both = KeyedEntry(key: StateKey(name: "lease"),
                              entry: Entry(version: version(5, "a"), value: [2], expiresAtMilliseconds: 9, ownedByWriter: true))
        #expect(try codec.decodeEntries(codec.encode([owned, both])) == [owned, both])
        #expect(Entry(version: version(5, "a"), value: nil, ownedByWriter: true).ownedByWriter == false, "a tombstone is nobody's")
        // The flags byte sits right after the key; 0, 1, 3, 5 and 7 mean something, the rest not.
        let plain = codec.encode([KeyedEntry(key: StateKey(name: "k"), entry: Entry(version: version(5, "a"), value: []))])
        let flagsOffset = plain.count - 2
        #expect(plain[flagsOffset] == 1)
        for flags in [UInt8(2), 4, 6, 8, 9, 0x81, 0xFF] {
            var bytes = plain
            bytes[flagsOffset] = flags
            #expect(throws: WireDecodeError.invalidFlag(field: "value.present", value: flags)) { try codec.decodeEntries(bytes) }
        }
        // Owned and shared values of one version and bytes are different entries.
        var a = EntryTable(), b = EntryTable()
        a.merge(Entry(version: version(5, "a"), value: [1]), for: StateKey(name: "k"))
        b.merge(Entry(version: version(5, "a"), value: [1], ownedByWriter: true), for: StateKey(name: "k"))
        #expect(a.digest != b.digest)
    }

    @Test func anAbsentOwnersValuesReadAsAbsentAndReturnWithIt() {
        var table = EntryTable()
        let mine = StateKey(name: "presence-a"), theirs = StateKey(name: "presence-b"), shared = StateKey(name: "config")
        table.merge(Entry(version: version(5, "a"), value: [1], ownedByWriter: true), for: mine)
        table.merge(Entry(version: version(5, "b"), value: [2], ownedByWriter: true), for: theirs)
        table.merge(Entry(version: version(5, "b"), value: [3]), for: shared)
        func read(_ key: StateKey) -> [UInt8]?? {
            Array(key.name.utf8).withUnsafeBytes { table.value(ofAtomicNamed: $0, atMilliseconds: 0) }.map { $0?.array }
        }
        #expect(read(theirs) == .some([2]), "every owner counts as present until told otherwise")
        table.setPresentOwners(["a"])
        #expect(read(mine) == .some([1]))
        #expect(read(theirs) == .some(nil), "b is absent: its owned value reads as absent")
        #expect(read(shared) == .some([3]), "b's shared value is not b's to take away")
        #expect(table.hiddenCount == 1)
        let live = table.liveKeys(fromBucket: 0, minimumKeys: 10, maximumBuckets: table.bucketCount, atMilliseconds: 0).keys
        #expect(Set(live) == [mine, shared])
        #expect(table.ownedEntries(of: ["b"]).map(\.key) == [theirs])
        // A node id first seen after the view was set is absent too, until it is in it.
        table.merge(Entry(version: version(6, "c"), value: [4], ownedByWriter: true), for: StateKey(name: "presence-c"))
        #expect(read(StateKey(name: "presence-c")) == .some(nil))
        table.setPresentOwners(["a", "b", "c"])
        #expect(read(theirs) == .some([2]) && read(StateKey(name: "presence-c")) == .some([4]))
        // A newer shared write by another node replaces an owned value like any write.
        table.merge(Entry(version: version(7, "a"), value: [9]), for: theirs)
        table.setPresentOwners(["a"])
        #expect(read(theirs) == .some([9]))
    }

    @Test func ownedEntriesNameOnlyLiveOwnedValuesOfTheOwnersAsked() {
        var table = EntryTable()
        let live = StateKey(name: "presence-b"), expiring = StateKey(name: "lease-b"), shared = StateKey(name: "config")
        table.merge(Entry(version: version(5, "b"), value: [1], ownedByWriter: true), for: live)
        table.merge(Entry(version: version(5, "b"), value: [2], expiresAtMilliseconds: 100, ownedByWriter: true), for: expiring)
        table.merge(Entry(version: version(5, "c"), value: [3]), for: shared)
        #expect(Set(table.ownedEntries(of: ["b"]).map(\.key)) == [live, expiring])
        #expect(table.ownedEntries(of: ["c"]).isEmpty, "c wrote a shared value only")
        #expect(table.ownedEntries(of: ["x"]).isEmpty, "x never wrote")
        // Once reported expired, a value no longer appears or disappears with its owner.
        #expect(table.expire(dueAtMilliseconds: 100).map(\.key) == [expiring])
        #expect(table.ownedEntries(of: ["b"]).map(\.key) == [live])
        table.merge(Entry(version: version(6, "a"), value: [9]), for: live)
        #expect(table.ownedEntries(of: ["b"]).isEmpty, "a's shared write replaced b's owned value")
    }

    @Test func onlyARemovedOwnersValuesAreCollectedForOwnership() {
        var table = EntryTable()
        let key = StateKey(name: "presence-b")
        table.merge(Entry(version: version(5, "b"), value: [2], ownedByWriter: true), for: key)
        let collected1 = table.collect(key, version: version(5, "b"), isRemovedOwner: { $0 == "c" })
        #expect(!collected1, "b may return: its value stays")
        let collected2 = table.collect(key, version: version(5, "b"), isRemovedOwner: { $0 == "b" })
        #expect(collected2)
        #expect(table.count == 0)
    }
}

/// Expiry at a user's size: many keys expiring over a long stretch, swept tick by tick.
@Suite struct ExpiryAtSizeTests {
    @Test func twoHundredThousandKeysExpireOnceEachInOrderAndAreCollected() {
        let keys = 200_000
        var table = EntryTable()
        let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1, logical: 0), node: "a")
        // Instants spread over a simulated day, in an order unrelated to the keys'.
        var random = SplitMix64(seed: 7)
        var instants: [UInt64] = []
        instants.reserveCapacity(keys)
        for index in 0..<keys {
            let instant = 1_000 + random.next() % 86_400_000
            instants.append(instant)
            table.merge(Entry(version: version, value: [UInt8(index & 0xFF)], expiresAtMilliseconds: instant), for: StateKey(name: "k\(index)"))
        }
        #expect(table.expiringCount == keys)
        var reported = 0
        var last: UInt64 = 0
        var inOrder = true
        // Sweeps every simulated minute, as a replication tick would (far more often).
        var now: UInt64 = 0
        while now <= 86_401_000 {
            now += 60_000
            for item in table.expire(dueAtMilliseconds: now) {
                let instant = item.entry.expiresAtMilliseconds ?? 0
                if instant < last || instant > now { inOrder = false }
                last = instant
                reported += 1
            }
        }
        #expect(reported == keys && inOrder)
        #expect(table.expiredCount == keys && table.expiringCount == 0)
        #expect(table.nextExpiryMilliseconds == nil)
        for index in 0..<keys { table.collect(StateKey(name: "k\(index)"), version: version) }
        #expect(table.count == 0 && table.expiredCount == 0)
        #expect(table.digest == EntryTable().digest)
    }

    @Test func slotsMadeLateForATableOfHundredsOfThousandsFollowEveryRecordMove() {
        // The per-record slot arrays of the expiry schedule and the owned lists are made when
        // the first value with a lifetime, or the first owned one, arrives: here in a table of
        // 300,000 records (past a mebibyte of slots, so they are mappings of their own), then
        // grown by inserts and renumbered by collections.
        let plain = 300_000
        var table = EntryTable()
        let writer = Version(timestamp: HLCTimestamp(physicalMilliseconds: 1, logical: 0), node: "a")
        for index in 0..<plain { table.merge(Entry(version: writer, value: [1]), for: StateKey(name: "k\(index)")) }
        var random = SplitMix64(seed: 11)
        var expiring: [Int: UInt64] = [:]
        var owned = Set<Int>()
        var clock: UInt64 = 2
        // Lifetimes and ownership given to existing keys and to new ones, some keys deleted.
        for step in 0..<120_000 {
            clock += 1
            let index = step % 3 == 0 ? plain + step : Int(random.next() % UInt64(plain + step))
            let version = Version(timestamp: HLCTimestamp(physicalMilliseconds: clock, logical: 0), node: step % 2 == 0 ? "a" : "b")
            switch random.next() % 4 {
            case 0:
                table.merge(Entry(version: version, value: nil), for: StateKey(name: "k\(index)"))
                expiring[index] = nil
                owned.remove(index)
            case 1:
                table.merge(Entry(version: version, value: [2], ownedByWriter: true), for: StateKey(name: "k\(index)"))
                expiring[index] = nil
                owned.insert(index)
            default:
                let instant = 1_000_000 + random.next() % 1_000_000
                table.merge(Entry(version: version, value: [3], expiresAtMilliseconds: instant), for: StateKey(name: "k\(index)"))
                expiring[index] = instant
                owned.remove(index)
            }
        }
        #expect(table.expiringCount == expiring.count)
        #expect(table.expiryScheduleCount <= table.count)
        // Collect every tombstone: records move into the freed places, with their slots.
        var cursor = EntryTable.SweepCursor.start
        var collected = 0
        while !cursor.isFinished {
            collected += table.collectAbsent(below: HLCTimestamp(physicalMilliseconds: clock + 1, logical: 0),
                                             isRemovedOwner: { _ in false }, from: &cursor, budget: 10_000).count
        }
        #expect(collected > 20_000 && table.tombstoneCount == 0)
        let listed = Set(table.ownedEntries(of: ["a", "b"]).map(\.key))
        #expect(listed == Set(owned.map { StateKey(name: "k\($0)") }))
        // Half the lifetimes come due, then the rest: each once, in order.
        var last: UInt64 = 0
        var reported = 0
        var inOrder = true
        for now in [UInt64(1_500_000), 2_000_000] {
            for item in table.expire(dueAtMilliseconds: now) {
                let instant = item.entry.expiresAtMilliseconds ?? 0
                let number = Int(item.key.name.dropFirst()) ?? -1
                if instant < last || instant > now || expiring[number] != instant { inOrder = false }
                last = instant
                reported += 1
            }
        }
        #expect(reported == expiring.count && inOrder)
        #expect(table.expiryScheduleCount == 0 && table.expiringCount == 0)
    }
}
