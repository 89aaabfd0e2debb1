/// The change feed's records of one group commit (`ChangeFeedLog`'s records, back to back, the
/// first at position `first`) and the position below which retention dropped them: written in
/// the same transaction as the group's entries, so a restarted node's feed ends exactly where
/// its stored state does (docs/design/0020-the-change-feed.md, "Durable retention").
package struct FeedRows: Sendable {
    package private(set) var records: [UInt8] = []
    package private(set) var first: UInt64 = 0
    package private(set) var count = 0
    /// Rows below this position are deleted (0: none).
    package private(set) var trimBelow: UInt64 = 0

    package init() {}

    package var isEmpty: Bool { count == 0 && trimBelow == 0 }

    /// The position of the last record (meaningful when `count > 0`).
    package var last: UInt64 { first + UInt64(count) - 1 }

    /// Adds the record of the change at `position` (the next after the last one added).
    package mutating func append(_ record: UnsafeRawBufferPointer, position: UInt64) {
        if count == 0 { first = position }
        precondition(position == first + UInt64(count), "feed rows out of order")
        records.append(contentsOf: record)
        count += 1
    }

    /// Rows below `position` go.
    package mutating func trim(below position: UInt64) {
        trimBelow = max(trimBelow, position)
    }

    /// Calls `body` with each record and its position, in order.
    package func forEach(_ body: (UInt64, UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError) {
        var failure: StorageError?
        records.withUnsafeBytes { raw in
            var offset = 0
            var position = first
            while offset < raw.count {
                let length = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                do throws(StorageError) {
                    try body(position, UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)]))
                } catch {
                    failure = error
                    return
                }
                offset += length
                position += 1
            }
        }
        if let failure { throw failure }
    }
}
