/// A map from 64-bit numbers (a transport's connection numbers) to values, for the lookups made
/// once per link on every delta sent: open addressing with linear probing over a multiplicative
/// hash, so a lookup is a multiply, a shift and a compare or two. `Dictionary` runs every key
/// through the seeded SipHash of `Hasher` first: about 100–200 instructions a lookup
/// (docs/design/0015-the-replicated-update.md, "The technique").
///
/// Guarantees: behaves as a `[UInt64: Value]` for every sequence of reads, writes and removals
/// (removal shifts later cells back, so no deleted markers pile up); at most half its cells are
/// used, so a missing key ends its probe at the first empty cell.
///
/// Public only to the package's own modules (`@_spi(Engine) import DecideCore`): its callers sit
/// in Decide and DecideUV, and a generic type's code is specialised across modules only when it
/// is `@inlinable`, which `package` declarations are not by default (a `package` version called
/// the unspecialised code and its metadata lookups: 4.4 k more instructions a delta).
@_spi(Engine) public struct NumberMap<Value> {
    @usableFromInline
    struct Cell {
        @usableFromInline var key: UInt64
        @usableFromInline var value: Value?

        @inlinable init(key: UInt64, value: Value?) {
            self.key = key
            self.value = value
        }
    }

    /// A power of two, at least 8; a cell whose value is nil is empty.
    @usableFromInline var cells: [Cell]
    /// 64 minus log2 of the cell count: the hash's top bits pick the home cell.
    @usableFromInline var shift: UInt64
    @usableFromInline var storedCount = 0
    @inlinable public var count: Int { storedCount }

    @inlinable public init() {
        cells = Array(repeating: Cell(key: 0, value: nil), count: 8)
        shift = 61
    }

    @inlinable public var isEmpty: Bool { count == 0 }

    @inlinable @inline(__always)
    func home(of key: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) &>> shift)
    }

    /// The cell holding `key`, or the empty cell where it would go.
    @inlinable @inline(__always)
    func find(_ key: UInt64) -> (index: Int, found: Bool) {
        let mask = cells.count &- 1
        var index = home(of: key)
        while true {
            guard cells[index].value != nil else { return (index, false) }
            if cells[index].key == key { return (index, true) }
            index = (index &+ 1) & mask
        }
    }

    @inlinable public subscript(key: UInt64) -> Value? {
        get {
            let (index, found) = find(key)
            return found ? cells[index].value : nil
        }
        set {
            if let newValue {
                let index = insertionCell(for: key)
                cells[index].value = newValue
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// The value of `key`, made from `defaultValue` first when absent; changed in place.
    @inlinable public subscript(key: UInt64, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[key] ?? defaultValue() }
        _modify {
            let index = insertionCell(for: key)
            if cells[index].value == nil { cells[index].value = defaultValue() }
            yield &cells[index].value!
        }
    }

    /// Removes `key`'s value and answers it (nil when absent). Later cells of the same run move
    /// back, so every key stays reachable from its home cell without deleted markers.
    @inlinable @discardableResult
    public mutating func removeValue(forKey key: UInt64) -> Value? {
        let (found, present) = find(key)
        guard present else { return nil }
        let removed = cells[found].value
        cells[found].value = nil
        storedCount -= 1
        let mask = cells.count &- 1
        var hole = found
        var index = (found &+ 1) & mask
        while cells[index].value != nil {
            let wanted = home(of: cells[index].key)
            // Move the cell into the hole when its home is not between the hole and it
            // (cyclically): then the hole interrupts its probe.
            let distanceToHole = (hole &- wanted) & mask
            let distanceToIndex = (index &- wanted) & mask
            if distanceToHole < distanceToIndex {
                cells[hole] = cells[index]
                cells[index].value = nil
                hole = index
            }
            index = (index &+ 1) & mask
        }
        return removed
    }

    /// The cell of `key`, claimed (key set, value still nil) when it was absent; grows first
    /// when a new key would fill more than half the cells.
    @inlinable
    mutating func insertionCell(for key: UInt64) -> Int {
        var (index, found) = find(key)
        if found { return index }
        if (count &+ 1) &* 2 > cells.count {
            grow()
            index = find(key).index
        }
        cells[index].key = key
        storedCount += 1
        return index
    }

    @usableFromInline
    mutating func grow() {
        let old = cells
        cells = Array(repeating: Cell(key: 0, value: nil), count: old.count * 2)
        shift -= 1
        storedCount = 0
        for cell in old {
            guard let value = cell.value else { continue }
            let index = find(cell.key).index
            cells[index] = Cell(key: cell.key, value: value)
            storedCount += 1
        }
    }
}

extension NumberMap: Sendable where Value: Sendable {}
extension NumberMap.Cell: Sendable where Value: Sendable {}
