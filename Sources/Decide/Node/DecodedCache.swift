import DecideCore

/// Typed values a node decoded from its entries' bytes, kept so the next read of the same
/// entry does not decode again. Bounded by `capacity` values: when full it starts over, so a
/// node holding millions of keys keeps decoded only those read lately, not one per entry.
///
/// Each value is kept with the version it was decoded from and handed out only while the key
/// still holds that version, so a remote or catch-up write never needs to touch the cache.
struct DecodedCache {
    private var values: [StateKey: (version: Version, value: any Sendable)] = [:]
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Whether no value is kept (then a write has nothing to refresh).
    var isEmpty: Bool { values.isEmpty }

    /// The value decoded from `key` at `version`, if kept.
    func value(of key: StateKey, at version: Version) -> (any Sendable)? {
        guard !values.isEmpty, let kept = values[key], kept.version == version else { return nil }
        return kept.value
    }

    /// Keeps `value` as `key`'s decoded value at `version`.
    mutating func keep(_ value: any Sendable, of key: StateKey, at version: Version) {
        guard capacity > 0 else { return }
        if values.count >= capacity, values[key] == nil { values.removeAll(keepingCapacity: true) }
        values[key] = (version, value)
    }

    /// A new value written to `key` at `version`: replaces the kept one if the key has one (a
    /// key read before is likely read again); a key never read costs nothing more.
    mutating func written(_ value: any Sendable, of key: StateKey, at version: Version) {
        guard !values.isEmpty, let kept = values.index(forKey: key) else { return }
        values.values[kept] = (version, value)
    }
}
