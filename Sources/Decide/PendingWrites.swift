import DecideCore

/// The writes of the decision running now, one per key (a later write to a key replaces the
/// earlier), in first-write order. Kept as parallel arrays so the commit reads each part without
/// copying the others, and as a value type so each write is one mutation of the transaction.
struct PendingWrites {
    private(set) var keys: [StateKey] = []
    /// The encoded value of each key (nil deletes it).
    private(set) var values: [[UInt8]?] = []
    /// The typed value each write came from, when it had one (for the decoded cache and observers).
    private(set) var decoded: [(any Sendable)?] = []
    /// Each write's expiry and ownership, parallel to `keys`; empty while no write of the
    /// decision expires or is owned (most decisions), so they pay nothing for it.
    private(set) var options: [WriteOptions] = []
    /// Built only for decisions with many writes; small ones search `keys` linearly.
    private var positions: [StateKey: Int] = [:]
    /// `Node.decisionBytes` of these writes without its fixed part, kept as writes arrive so the
    /// size check at commit is one addition.
    private(set) var entryBytes = 0
    private let nodeBytes: Int
    /// The ordered elements of each index this decision placed into, kept current by its own
    /// placements so a decision of many appends sorts once. Any other write of an element of
    /// that name drops it. Kept here, not on the transaction, so the check costs a write nothing
    /// beyond a field test.
    var indexOrders: [String: [(key: StateKey, position: IndexPosition)]] = [:]

    private static let linearSearchLimit = 16

    /// `nodeID`: the id of the node whose decisions these are (its bytes count in every entry).
    init(nodeID: String) {
        nodeBytes = nodeID.utf8.count
    }

    var count: Int { keys.count }
    var isEmpty: Bool { keys.isEmpty }

    /// The bytes `Node.decisionBytes` counts for these writes.
    var decisionBytes: Int { 16 + nodeBytes + entryBytes }

    mutating func removeAll() {
        if !indexOrders.isEmpty { indexOrders.removeAll() }
        guard !keys.isEmpty else { return }
        keys.removeAll(keepingCapacity: true)
        values.removeAll(keepingCapacity: true)
        decoded.removeAll(keepingCapacity: true)
        if !options.isEmpty { options.removeAll(keepingCapacity: true) }
        if !positions.isEmpty { positions.removeAll(keepingCapacity: true) }
        entryBytes = 0
    }

    /// Where `key` was written in this decision, if it was.
    func position(of key: StateKey) -> Int? {
        if keys.count > Self.linearSearchLimit { return positions[key] }
        for index in keys.indices where keys[index].stableHash == key.stableHash && keys[index] == key {
            return index
        }
        return nil
    }

    /// Records a write of `key` (replacing an earlier one of it); false, recording nothing, when
    /// it is a new key and `maxKeys` are already written.
    mutating func set(_ key: StateKey, value: [UInt8]?, decoded typed: (any Sendable)?,
                      options writeOptions: WriteOptions = .plain, maxKeys: Int) -> Bool {
        let existing = position(of: key)
        guard existing != nil || keys.count < maxKeys else { return false }
        if !indexOrders.isEmpty, !key.element.isEmpty { indexOrders[key.name] = nil }
        set(key, value: value, decoded: typed, at: existing)
        setOptions(value == nil ? .plain : writeOptions, at: existing ?? keys.count - 1)
        return true
    }

    /// Whether any write of the decision expires.
    var expires: Bool { !options.isEmpty && options.contains { $0.expiry != .never } }

    /// The entry the write at `index` stores under `version` (its lifetime counted from the
    /// version's timestamp).
    func entry(at index: Int, version: Version) -> Entry {
        guard !options.isEmpty else { return Entry(version: version, value: values[index]) }
        let option = options[index]
        return Entry(version: version, value: values[index],
                     expiresAtMilliseconds: option.expiry.instant(committedAt: version.timestamp), ownedByWriter: option.owned)
    }

    private mutating func setOptions(_ writeOptions: WriteOptions, at index: Int) {
        if options.isEmpty {
            if writeOptions == .plain { return }
            options = [WriteOptions](repeating: .plain, count: keys.count)
        } else if options.count < keys.count {
            options.append(.plain)
        }
        options[index] = writeOptions
    }

    /// Records a write of `key`; `at` is its `position(of:)`, found by the caller.
    mutating func set(_ key: StateKey, value: [UInt8]?, decoded typed: (any Sendable)?, at existing: Int?) {
        func bytes(_ value: [UInt8]?) -> Int {
            WireCodec.maxEncodedEntryBytes(nameBytes: key.name.utf8.count, elementBytes: key.element.count,
                                           nodeBytes: nodeBytes, valueBytes: value?.count ?? 0)
        }
        if let existing {
            entryBytes += bytes(value) - bytes(values[existing])
            values[existing] = value
            decoded[existing] = typed
            return
        }
        entryBytes += bytes(value)
        keys.append(key)
        values.append(value)
        decoded.append(typed)
        if keys.count > Self.linearSearchLimit {
            if positions.isEmpty {
                for (index, item) in keys.enumerated() { positions[item] = index }
            } else {
                positions[key] = keys.count - 1
            }
        }
    }
}

/// What a pending write carries beside its value: when it expires, and whether this node owns it.
struct WriteOptions: Sendable, Equatable {
    var expiry: WriteExpiry = .never
    var owned = false

    static let plain = WriteOptions()
}

/// When a pending write's value expires: never, a lifetime counted from the decision's
/// timestamp, or an instant (hybrid-clock milliseconds).
package enum WriteExpiry: Sendable, Equatable {
    case never
    case after(milliseconds: UInt64)
    case at(milliseconds: UInt64)

    /// The entry's `expiresAtMilliseconds` for a decision at `timestamp` (within the clock's
    /// range, as `Entry` keeps it).
    func instant(committedAt timestamp: HLCTimestamp) -> UInt64? {
        switch self {
        case .never: return nil
        case .after(let lifetime):
            let (sum, overflow) = timestamp.physicalMilliseconds.addingReportingOverflow(lifetime)
            return overflow ? HLCTimestamp.maxPhysicalMilliseconds : min(sum, HLCTimestamp.maxPhysicalMilliseconds)
        case .at(let instant): return instant
        }
    }
}
