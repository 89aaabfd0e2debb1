#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An array that grows with `realloc`, for the entry table's records: a table grows by
/// appending, one record per new key, to millions.
///
/// A Swift array grows by allocating a buffer twice the size and copying into it. For a large
/// buffer each growth touches every page of the new one (page faults, then the copy) and hands
/// the old one back to the system, so a table grown to N records had faulted in about 2N
/// records' pages and copied N: on a cold heap, a fifth of the deciding thread's time
/// (docs/benchmarks.md, "Records grown in place"). glibc's `realloc` of a block that large
/// moves its pages with `mremap` instead: nothing copied, and only the new tail faults.
///
/// Guarantees: value semantics (a copy is made when a shared buffer is written); elements are
/// moved bitwise, which every Swift type without weak references allows (the records hold
/// none); indices are checked on every access.
package struct GrowingArray<Element>: RandomAccessCollection, MutableCollection {
    package typealias Index = Int

    /// The elements' memory (`capacity` of them, the first `count` initialized). Reached only
    /// through `GrowingArray`, whose value semantics keep one writer per storage: no dynamic
    /// exclusivity checks (they cost ~80 instructions an access in a class).
    private final class Storage: @unchecked Sendable {
        @exclusivity(unchecked) var base: UnsafeMutablePointer<Element>?
        @exclusivity(unchecked) var count = 0
        @exclusivity(unchecked) var capacity = 0

        init() {}

        /// A copy holding the same elements, with room for exactly them.
        func copy() -> Storage {
            let copy = Storage()
            guard count > 0, let base else { return copy }
            copy.grow(toAtLeast: count)
            copy.base!.initialize(from: base, count: count)
            copy.count = count
            return copy
        }

        /// Makes room for at least `minimum` elements, moving them with `realloc`.
        func grow(toAtLeast minimum: Int) {
            guard minimum > capacity else { return }
            var newCapacity = Swift.max(16, capacity)
            while newCapacity < minimum { newCapacity = newCapacity.multipliedReportingOverflow(by: 2).partialValue }
            let (bytes, overflow) = MemoryLayout<Element>.stride.multipliedReportingOverflow(by: newCapacity)
            precondition(!overflow && newCapacity >= minimum, "GrowingArray: \(minimum) elements do not fit the address space")
            precondition(MemoryLayout<Element>.alignment <= 16, "GrowingArray: malloc aligns to 16 bytes")
            guard let raw = realloc(base.map(UnsafeMutableRawPointer.init), bytes) else {
                fatalError("GrowingArray: out of memory growing to \(bytes) bytes")
            }
            base = raw.bindMemory(to: Element.self, capacity: newCapacity)
            capacity = newCapacity
        }

        deinit {
            guard let base else { return }
            base.deinitialize(count: count)
            free(base)
        }
    }

    private var storage = Storage()

    package init() {}

    package var startIndex: Int { 0 }
    package var endIndex: Int { storage.count }
    package var count: Int { storage.count }

    /// Addressors, not `_read` and `_modify`: a field read through a yielded element was a copy
    /// of it (`records[i].value == nil` copied the value).
    package subscript(position: Int) -> Element {
        unsafeAddress {
            precondition(position >= 0 && position < storage.count, "GrowingArray: index \(position) out of 0..<\(storage.count)")
            return UnsafePointer(storage.base.unsafelyUnwrapped + position)
        }
        unsafeMutableAddress { address(of: position) }
    }

    /// The address of element `position`, made unique first: valid until the array is next
    /// changed or copied, for a caller that writes several fields of one element.
    @inline(__always)
    package mutating func address(of position: Int) -> UnsafeMutablePointer<Element> {
        precondition(position >= 0 && position < storage.count, "GrowingArray: index \(position) out of 0..<\(storage.count)")
        makeUnique()
        return storage.base.unsafelyUnwrapped + position
    }

    /// Adds `element` at the end, growing the storage in place where the allocator can.
    package mutating func append(_ element: consuming Element) {
        makeUnique()
        let storage = self.storage
        if storage.count == storage.capacity { storage.grow(toAtLeast: storage.count + 1) }
        (storage.base.unsafelyUnwrapped + storage.count).initialize(to: element)
        storage.count += 1
    }

    /// Removes and returns the last element (there must be one).
    @discardableResult
    package mutating func removeLast() -> Element {
        precondition(storage.count > 0, "GrowingArray: removeLast of an empty array")
        makeUnique()
        storage.count -= 1
        return (storage.base.unsafelyUnwrapped + storage.count).move()
    }

    @inline(__always)
    package func withUnsafeBufferPointer<Result>(_ body: (UnsafeBufferPointer<Element>) throws -> Result) rethrows -> Result {
        try body(UnsafeBufferPointer(start: storage.base, count: storage.count))
    }

    @inline(__always)
    package mutating func withUnsafeMutableBufferPointer<Result>(
        _ body: (inout UnsafeMutableBufferPointer<Element>) throws -> Result
    ) rethrows -> Result {
        makeUnique()
        var buffer = UnsafeMutableBufferPointer(start: storage.base, count: storage.count)
        return try body(&buffer)
    }

    @inline(__always)
    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
    }
}

extension GrowingArray: @unchecked Sendable where Element: Sendable {}
