import DecideCore

/// The `StateKey` of each atomic state type a node has seen, by the type's metadata pointer:
/// an open-addressing table with a multiplicative hash, since this lookup runs on every read
/// and write and `Dictionary`'s seeded hashing costs more than the rest of it.
struct TypeKeys {
    private var types: [UInt] = []
    private var keys: [StateKey?] = []
    private(set) var count = 0

    /// The key for the type `id`, if known.
    func key(for id: ObjectIdentifier) -> StateKey? {
        guard count > 0 else { return nil }
        let raw = UInt(bitPattern: id.hashValueBits)
        var slot = Self.slot(of: raw, in: types.count)
        while let key = keys[slot] {
            if types[slot] == raw { return key }
            slot = (slot + 1) & (types.count - 1)
        }
        return nil
    }

    /// Remembers `key` for the type `id` (not known yet).
    mutating func insert(_ key: StateKey, for id: ObjectIdentifier) {
        if (count + 1) * 2 > types.count { grow() }
        let raw = UInt(bitPattern: id.hashValueBits)
        var slot = Self.slot(of: raw, in: types.count)
        while keys[slot] != nil { slot = (slot + 1) & (types.count - 1) }
        types[slot] = raw
        keys[slot] = key
        count += 1
    }

    private mutating func grow() {
        let old = zip(types, keys).compactMap { type, key in key.map { (type, $0) } }
        let capacity = max(16, types.count * 2)
        types = [UInt](repeating: 0, count: capacity)
        keys = [StateKey?](repeating: nil, count: capacity)
        for (type, key) in old {
            var slot = Self.slot(of: type, in: capacity)
            while keys[slot] != nil { slot = (slot + 1) & (capacity - 1) }
            types[slot] = type
            keys[slot] = key
        }
    }

    private static func slot(of raw: UInt, in capacity: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(raw) &* 0x9E37_79B9_7F4A_7C15) >> 32) & (capacity - 1)
    }
}

private extension ObjectIdentifier {
    /// The identifier's pointer bits (unique per type while the process runs).
    var hashValueBits: Int { Int(bitPattern: self) }
}
