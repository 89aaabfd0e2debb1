import DecideCore

/// Typed values a node decoded from its entries' bytes, kept so the next read of the same
/// entry does not decode again. Bounded: at most `capacity` values (a power of two at most the
/// configured count, `maxCachedDecodedValues`), so a node holding millions of keys keeps decoded
/// only those read lately, not one per entry.
///
/// Each value is kept with the version it was decoded from and handed out only while the key
/// still holds that version, so a remote or catch-up write never needs to touch the cache.
///
/// Two-way set-associative: a key may sit in one of the two slots of the set its stable hash
/// names; a value kept in a full set replaces the one of the two read or kept less lately.
/// Nothing is ever rehashed or cleared whole, so no read waits for the cache: the
/// `Dictionary` this replaced was rehashed as it grew (18 ms at 49,152 values, under the
/// node's lock) and emptied whole when full (1.4–2.9 ms every 65,536 new values;
/// docs/design/0007-growing-without-stalls.md, "Decoded values"). Its slots are allocated at the
/// first value kept (a node that never reads typed values has none) and reach memory as
/// they are first written.
struct DecodedCache {
    private struct Slot {
        var key: StateKey
        var version: Version
        var value: any Sendable
    }

    /// The slots and which of them hold a value. A class for its deinitializer; only ever
    /// reached under the node's lock, and copied before a write when shared.
    private final class Storage: @unchecked Sendable {
        let slots: UnsafeMutablePointer<Slot>
        let slotCount: Int
        let setMask: Int
        /// Bit per slot: it holds a value.
        var occupied: [UInt64]
        /// Bit per set: its second slot was used more lately than its first.
        var secondIsRecent: [UInt64]
        var count = 0

        init(slotCount: Int) {
            slots = .allocate(capacity: slotCount)
            self.slotCount = slotCount
            setMask = slotCount / 2 - 1
            occupied = Array(repeating: 0, count: (slotCount + 63) / 64)
            secondIsRecent = Array(repeating: 0, count: (slotCount / 2 + 63) / 64)
        }

        func isOccupied(_ slot: Int) -> Bool { occupied[slot >> 6] & (1 << UInt64(slot & 63)) != 0 }

        /// The first of the two slots of `key`'s set.
        func firstSlot(of key: StateKey) -> Int { (Int(truncatingIfNeeded: key.stableHash) & setMask) << 1 }

        /// The slot of the two in `first`'s set used less lately.
        func lessRecent(inSetOf first: Int) -> Int {
            let set = first >> 1
            return secondIsRecent[set >> 6] & (1 << UInt64(set & 63)) != 0 ? first : first + 1
        }

        func markRecent(_ slot: Int) {
            let set = slot >> 1, bit: UInt64 = 1 << UInt64(set & 63)
            if slot & 1 == 1 { secondIsRecent[set >> 6] |= bit } else { secondIsRecent[set >> 6] &= ~bit }
        }

        /// The slot of `key` in its set, if it holds one.
        func slot(of key: StateKey) -> Int? {
            let first = firstSlot(of: key)
            for slot in first...(first + 1) where isOccupied(slot) && slots[slot].key == key { return slot }
            return nil
        }

        func copy() -> Storage {
            let copy = Storage(slotCount: slotCount)
            for slot in 0..<slotCount where isOccupied(slot) { (copy.slots + slot).initialize(to: slots[slot]) }
            copy.occupied = occupied
            copy.secondIsRecent = secondIsRecent
            copy.count = count
            return copy
        }

        deinit {
            for slot in 0..<slotCount where isOccupied(slot) { (slots + slot).deinitialize(count: 1) }
            slots.deallocate()
        }
    }

    private var storage: Storage?
    /// The most values kept: `maxCachedDecodedValues` rounded down to a power of two (0 keeps
    /// nothing; 1 keeps two, the smallest set).
    let capacity: Int

    init(capacity: Int) {
        if capacity <= 0 {
            self.capacity = 0
        } else {
            self.capacity = Swift.max(2, 1 << (Int.bitWidth - 1 - capacity.leadingZeroBitCount))
        }
    }

    /// Whether no value is kept (then a write has nothing to refresh).
    var isEmpty: Bool { (storage?.count ?? 0) == 0 }

    /// Values kept.
    var count: Int { storage?.count ?? 0 }

    /// The value decoded from `key` at `version`, if kept.
    func value(of key: StateKey, at version: Version) -> (any Sendable)? {
        guard let storage, storage.count > 0, let slot = storage.slot(of: key), storage.slots[slot].version == version else {
            return nil
        }
        storage.markRecent(slot)
        return storage.slots[slot].value
    }

    /// Keeps `value` as `key`'s decoded value at `version`, in place of the value of its set
    /// used less lately when both slots are taken.
    mutating func keep(_ value: any Sendable, of key: StateKey, at version: Version) {
        guard capacity > 0 else { return }
        let storage = uniqueStorage()
        let slot: Int
        if let existing = storage.slot(of: key) {
            slot = existing
            storage.slots[slot].version = version
            storage.slots[slot].value = value
        } else {
            let first = storage.firstSlot(of: key)
            if !storage.isOccupied(first) {
                slot = first
            } else if !storage.isOccupied(first + 1) {
                slot = first + 1
            } else {
                slot = storage.lessRecent(inSetOf: first)   // both taken: the one not used last goes
            }
            if storage.isOccupied(slot) {
                storage.slots[slot] = Slot(key: key, version: version, value: value)
            } else {
                (storage.slots + slot).initialize(to: Slot(key: key, version: version, value: value))
                storage.occupied[slot >> 6] |= 1 << UInt64(slot & 63)
                storage.count += 1
            }
        }
        storage.markRecent(slot)
    }

    /// A new value written to `key` at `version`: replaces the kept one if the key has one (a
    /// key read before is likely read again); a key never read costs nothing more.
    mutating func written(_ value: any Sendable, of key: StateKey, at version: Version) {
        // No reference to the storage held past this line: `uniqueStorage` would see it shared
        // and copy every slot on every write.
        guard let slot = storage?.slot(of: key) else { return }
        let storage = uniqueStorage()
        storage.slots[slot].version = version
        storage.slots[slot].value = value
    }

    /// The storage, allocated at the first value kept and copied when shared.
    private mutating func uniqueStorage() -> Storage {
        if storage == nil {
            storage = Storage(slotCount: capacity)
        } else if !isKnownUniquelyReferenced(&storage) {
            storage = storage.unsafelyUnwrapped.copy()
        }
        return storage.unsafelyUnwrapped
    }
}
