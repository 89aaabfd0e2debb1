/// A short byte string held in place, or a longer one on the heap: how the entry table keeps
/// each key's element id (or an atomic key's name) and each stored value, and how a value
/// travels from a decision's pending write through its entry, delta and frame into a peer's
/// table. Most are short — an integer id, a short string id, a Redis-style key name, a flag, a
/// counter — and then cost no allocation, no reference count and no memory load beyond the
/// record that holds them (docs/design/0006-entry-table-layout.md, "Values and short ids held in
/// place").
///
/// An enum: `Optional<PackedBytes>` (a value or a tombstone) is then as small as the enum, 18
/// bytes, and is tested without a call. A struct of plain fields (two words, an optional array,
/// a count) measured worse on every path: 25 bytes, so 16 more per stored record, and its
/// optional went through run-time value witnesses for every test and copy
/// (docs/design/0006-entry-table-layout.md, "Alternatives tried and not kept").
///
/// Guarantees: `equals` and `withUnsafeBytes` see exactly the bytes it was made from, whatever
/// their length; equal byte strings make equal values.
@usableFromInline
package enum PackedBytes: Hashable, Sendable {
    /// Up to `inlineCapacity` bytes, little-endian in two words (zero past `count`).
    case inline(UInt64, UInt64, count: UInt8)
    case heap([UInt8])

    package static let inlineCapacity = 16

    package init(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count <= Self.inlineCapacity {
            let words = Self.words(bytes)
            self = .inline(words.0, words.1, count: UInt8(bytes.count))
        } else {
            self = .heap([UInt8](copying: bytes))
        }
    }

    /// Shares `bytes`' storage when it is too long to hold in place.
    @usableFromInline
    package init(_ bytes: [UInt8]) {
        if bytes.count <= Self.inlineCapacity {
            self = bytes.withUnsafeBytes { PackedBytes($0) }
        } else {
            self = .heap(bytes)
        }
    }

    /// The UTF-8 bytes of `text` (a native string's lent where they lie).
    package init(utf8 text: String) {
        self = text.utf8.withContiguousStorageIfAvailable { PackedBytes(UnsafeRawBufferPointer($0)) } ?? PackedBytes(Array(text.utf8))
    }

    @inlinable
    package var count: Int {
        switch self {
        case .inline(_, _, let count): return Int(count)
        case .heap(let bytes): return bytes.count
        }
    }

    /// Whether these are exactly `bytes`.
    package func equals(_ bytes: UnsafeRawBufferPointer) -> Bool {
        switch self {
        case let .inline(low, high, count):
            guard bytes.count == Int(count) else { return false }
            let words = Self.words(bytes)
            return words.0 == low && words.1 == high
        case .heap(let stored):
            guard stored.count == bytes.count else { return false }
            return stored.withUnsafeBytes { sameBytes($0, bytes) }
        }
    }

    /// Whether these are exactly the bytes of `array`.
    package func equals(_ array: [UInt8]) -> Bool {
        array.withUnsafeBytes { equals($0) }
    }

    /// Whether these are exactly the UTF-8 bytes of `text`.
    package func equals(utf8 text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { equals(UnsafeRawBufferPointer($0)) } ?? equals(Array(text.utf8))
    }

    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch self {
        case let .inline(low, high, count):
            return try Swift.withUnsafeBytes(of: (low.littleEndian, high.littleEndian)) {
                try body(UnsafeRawBufferPointer(rebasing: $0[0 ..< Int(count)]))
            }
        case .heap(let bytes):
            return try bytes.withUnsafeBytes(body)
        }
    }

    /// The address of the array object that holds bytes too long to keep in place, nil for
    /// bytes held in place: for a processor prefetch hint, so the array is neither retained
    /// nor read.
    package var heapObjectAddress: UnsafeRawPointer? {
        guard case .heap(let bytes) = self else { return nil }
        return unsafeBitCast(bytes, to: UnsafeRawPointer.self)
    }

    /// Whether these bytes order before `other`'s, byte by byte (a prefix first).
    package func lexicographicallyPrecedes(_ other: PackedBytes) -> Bool {
        withUnsafeBytes { mine in other.withUnsafeBytes { theirs in mine.lexicographicallyPrecedes(theirs) } }
    }

    /// The bytes as an array (allocated for the ones held in place).
    package var array: [UInt8] {
        switch self {
        case .inline: return withUnsafeBytes { [UInt8](copying: $0) }
        case .heap(let bytes): return bytes
        }
    }

    /// Up to 16 bytes as two little-endian words, zero-padded. Loaded in place, never past the
    /// end (a `copyMemory` into a zeroed pair was a `memcpy` call for every key and short value
    /// built or compared).
    @inline(__always)
    private static func words(_ bytes: UnsafeRawBufferPointer) -> (UInt64, UInt64) {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return (0, 0) }
        if count < 8 { return (littleEndianTail(base, count: count), 0) }
        let low = UInt64(littleEndian: base.loadUnaligned(as: UInt64.self))
        if count == 16 { return (low, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 8, as: UInt64.self))) }
        return (low, littleEndianTail(base + 8, count: count &- 8))
    }
}
