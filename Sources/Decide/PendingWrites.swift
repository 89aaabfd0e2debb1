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
    /// Each write's expiry, parallel to `keys`; empty while no write of the decision expires
    /// (most decisions), so they pay nothing for it.
    private(set) var expiries: [WriteExpiry] = []
    /// Built only for decisions with many writes; small ones search `keys` linearly.
    private var positions: [StateKey: Int] = [:]
    /// `Node.decisionBytes` of these writes without its fixed part, kept as writes arrive so the
    /// size check at commit is one addition.
    private(set) var entryBytes = 0
    private let nodeBytes: Int

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
        guard !keys.isEmpty else { return }
        keys.removeAll(keepingCapacity: true)
        values.removeAll(keepingCapacity: true)
        decoded.removeAll(keepingCapacity: true)
        if !expiries.isEmpty { expiries.removeAll(keepingCapacity: true) }
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
                      expiry: WriteExpiry = .never, maxKeys: Int) -> Bool {
        let existing = position(of: key)
        guard existing != nil || keys.count < maxKeys else { return false }
        set(key, value: value, decoded: typed, at: existing)
        setExpiry(value == nil ? .never : expiry, at: existing ?? keys.count - 1)
        return true
    }

    /// The expiry of the write at `index`.
    func expiry(at index: Int) -> WriteExpiry {
        expiries.isEmpty ? .never : expiries[index]
    }

    private mutating func setExpiry(_ expiry: WriteExpiry, at index: Int) {
        if expiries.isEmpty {
            if case .never = expiry { return }
            expiries = [WriteExpiry](repeating: .never, count: keys.count)
        } else if expiries.count < keys.count {
            expiries.append(.never)
        }
        expiries[index] = expiry
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

/// When a pending write's value expires: never, a lifetime counted from the decision's
/// timestamp, or an instant (hybrid-clock milliseconds).
enum WriteExpiry: Sendable, Equatable {
    case never
    case after(milliseconds: UInt64)
    case at(milliseconds: UInt64)

    /// The entry's `expiresAtMilliseconds` for a decision at `timestamp`.
    func instant(committedAt timestamp: HLCTimestamp) -> UInt64? {
        switch self {
        case .never: return nil
        case .after(let lifetime):
            let (sum, overflow) = timestamp.physicalMilliseconds.addingReportingOverflow(lifetime)
            return overflow ? HLCTimestamp.maxPhysicalMilliseconds : sum
        case .at(let instant): return instant
        }
    }
}
