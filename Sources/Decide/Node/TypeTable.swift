/// A value per state type a node has seen, by the type's metadata pointer: an open-addressing
/// table with a multiplicative hash, since this lookup runs on every read and write and
/// `Dictionary`'s seeded hashing costs more than the rest of it. A type slot of 0 is free (no
/// type's metadata lives at address 0).
struct TypeTable<Value> {
    private var types: [UInt] = []
    private var values: [Value?] = []
    private(set) var count = 0

    /// The value for the type `id`, if known.
    func value(for id: ObjectIdentifier) -> Value? {
        guard count > 0 else { return nil }
        let raw = UInt(bitPattern: id)
        // Types first: a slot's value is copied (retained) only for the one that matches.
        var slot = Self.slot(of: raw, in: types.count)
        while types[slot] != 0 {
            if types[slot] == raw { return values[slot] }
            slot = (slot + 1) & (types.count - 1)
        }
        return nil
    }

    /// Remembers `value` for the type `id` (not known yet).
    mutating func insert(_ value: Value, for id: ObjectIdentifier) {
        if (count + 1) * 2 > types.count { grow() }
        place(value, for: UInt(bitPattern: id))
        count += 1
    }

    private mutating func grow() {
        let old = zip(types, values).compactMap { type, value in value.map { (type, $0) } }
        let capacity = max(16, types.count * 2)
        types = [UInt](repeating: 0, count: capacity)
        values = [Value?](repeating: nil, count: capacity)
        for (type, value) in old { place(value, for: type) }
    }

    /// Puts `value` in the first free slot of `type`'s probe sequence.
    private mutating func place(_ value: Value, for type: UInt) {
        var slot = Self.slot(of: type, in: types.count)
        while types[slot] != 0 { slot = (slot + 1) & (types.count - 1) }
        types[slot] = type
        values[slot] = value
    }

    private static func slot(of raw: UInt, in capacity: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(raw) &* 0x9E37_79B9_7F4A_7C15) >> 32) & (capacity - 1)
    }
}
