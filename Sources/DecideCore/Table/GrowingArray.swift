import CDecideMemory
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An array that grows without copying its elements once it is large, for the entry table's
/// records and per-record lists and its index: a table grows by appending, one record per new
/// key, to millions, and every growth happens inside a merge, under the node's lock.
///
/// A Swift array grows by allocating a buffer twice the size and copying into it. For a large
/// buffer each growth touches every page of the new one (page faults, then the copy) and hands
/// the old one back to the system, so a table grown to N records had faulted in about 2N
/// records' pages and copied N: on a cold heap, a fifth of the deciding thread's time
/// (docs/design/0007-growing-without-stalls.md, "Large arrays in mappings of their own"). Below
/// `mappedMinimumBytes` it grows with `realloc`; from there on its memory is a mapping of its
/// own, which grows with `mremap`:
/// the pages move, nothing is copied, only the new tail faults. (`realloc` does that for glibc's
/// own mappings, but glibc maps only blocks above a threshold that rises to 32 MiB as blocks
/// are freed, and jemalloc, syncnode's allocator, copies: a 2 M-key table's growth copied
/// 8 MiB lists in the merge that filled them; docs/design/0007-growing-without-stalls.md, "The
/// index drains a few cells per insert".)
///
/// A mapped array also faults its pages in ahead of use, `populateAheadBytes` at a time, with one
/// `madvise(MADV_POPULATE_WRITE)` call: appending at its end (the records), or from its front
/// on request (`populateAhead(bytes:)`, the entry table's new index). A page faulted in by a
/// write costs this machine about 1.8 µs, by that call 1.1 µs; a page *read* before it is ever
/// written (an index probe) maps the shared zero page first and then faults again on the write,
/// which also interrupts the other processors to flush their TLBs: 3.8 µs and more
/// (docs/design/0007-growing-without-stalls.md, "Pages faulted in ahead").
///
/// Guarantees: value semantics (a copy is made when a shared buffer is written); elements are
/// moved bitwise, which every Swift type without weak references allows (the records hold
/// none); indices are checked on every access; faulting pages in ahead never changes an
/// element, and an append faults in at most `populateAheadBytes` and a page past the end of a
/// mapped array's elements.
package struct GrowingArray<Element>: RandomAccessCollection, MutableCollection {
    package typealias Index = Int

    /// The elements' memory (`capacity` of them, the first `count` initialized). Reached only
    /// through `GrowingArray`, whose value semantics keep one writer per storage: no dynamic
    /// exclusivity checks (they cost ~80 instructions an access in a class).
    private final class Storage: @unchecked Sendable {
        @exclusivity(unchecked) var base: UnsafeMutablePointer<Element>?
        @exclusivity(unchecked) var count = 0
        @exclusivity(unchecked) var capacity = 0
        /// The bytes of the mapping that holds the elements (`decide_memory_map`), or 0 when
        /// `malloc` holds them.
        @exclusivity(unchecked) var mappedBytes = 0
        /// Bytes of the mapping, from its start, whose pages were faulted in ahead (or need not
        /// be: nothing below them is appended to again). 0 when `malloc` holds the elements.
        @exclusivity(unchecked) var populatedBytes = 0
        /// How many elements an append may hold without the slow path: `capacity`, or for a
        /// mapped array only as far as its pages were faulted in ahead. Never above `capacity`.
        @exclusivity(unchecked) var appendLimit = 0

        init() {}

        /// `bytes` rounded up to whole pages.
        static func pageRounded(_ bytes: Int) -> Int {
            let page = Int(decide_memory_page_bytes())
            let (padded, overflow) = bytes.addingReportingOverflow(page - 1)
            guard !overflow else { fatalError("GrowingArray: \(bytes) bytes do not fit the address space") }
            return padded / page * page
        }

        /// A fresh mapping of zeroed memory for at least `bytes`, and its size (whole pages).
        static func mapZeroed(_ bytes: Int) -> (memory: UnsafeMutableRawPointer, bytes: Int) {
            let pages = pageRounded(bytes)
            guard let mapped = decide_memory_map(pages) else { fatalError("GrowingArray: out of memory mapping \(pages) bytes") }
            return (mapped, pages)
        }

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
            if bytes >= GrowingArray.mappedMinimumBytes, decide_memory_maps() != 0 {
                let raw: UnsafeMutableRawPointer
                if mappedBytes > 0 {
                    let pages = Self.pageRounded(bytes)
                    guard let moved = decide_memory_remap(base, mappedBytes, pages) else {
                        fatalError("GrowingArray: out of memory growing a mapping to \(pages) bytes")
                    }
                    (raw, mappedBytes) = (moved, pages)
                } else {
                    // Leaving `malloc`'s memory: one last copy, of less than `mappedMinimumBytes`.
                    let mapped = Self.mapZeroed(bytes)
                    // The pages the copy lands on, faulted in one call, not one by one inside it
                    // (160 faults, 0.6 ms, when the records array filled at 8,192).
                    let copiedBytes = Self.pageRounded(count * MemoryLayout<Element>.stride)
                    if let base {
                        decide_memory_populate(mapped.memory, copiedBytes)
                        mapped.memory.bindMemory(to: Element.self, capacity: newCapacity).moveInitialize(from: base, count: count)
                        free(base)
                    }
                    (raw, mappedBytes) = mapped
                    populatedBytes = copiedBytes
                }
                base = raw.bindMemory(to: Element.self, capacity: newCapacity)
                capacity = newCapacity
                updateAppendLimit()
                return
            }
            guard let raw = realloc(base.map(UnsafeMutableRawPointer.init), bytes) else {
                fatalError("GrowingArray: out of memory growing to \(bytes) bytes")
            }
            base = raw.bindMemory(to: Element.self, capacity: newCapacity)
            capacity = newCapacity
            updateAppendLimit()
        }

        /// Faults in the pages of bytes from `start` (or from `populatedBytes`, if later) to
        /// `end` (page-rounded, within the mapping) and records every page below `end` as
        /// populated. Only for a mapped array.
        func populate(from start: Int, to end: Int) {
            let end = Swift.min(Self.pageRounded(end), mappedBytes)
            let page = Int(decide_memory_page_bytes())
            let start = Swift.max(populatedBytes, start / page * page)
            guard end > start, let base else { return }
            decide_memory_populate(UnsafeMutableRawPointer(base) + start, end - start)
            populatedBytes = end
            updateAppendLimit()
        }

        /// Makes room for one more element: grows the storage when it is full, and for a mapped
        /// array faults in the pages the next appends will write.
        func prepareAppend() {
            if count == capacity { grow(toAtLeast: count + 1) }
            guard mappedBytes > 0 else { return }
            let stride = MemoryLayout<Element>.stride
            // From the page the next element starts in: pages below it are either faulted in
            // or (in an array made zeroed, never appended to) not this path's business.
            populate(from: count * stride, to: (count + 1) * stride + GrowingArray.populateAheadBytes)
        }

        func updateAppendLimit() {
            guard mappedBytes > 0 else {
                appendLimit = capacity
                return
            }
            appendLimit = Swift.min(capacity, populatedBytes / MemoryLayout<Element>.stride)
        }

        deinit {
            guard let base else { return }
            base.deinitialize(count: count)
            if mappedBytes > 0 {
                decide_memory_unmap(base, mappedBytes)
            } else {
                free(base)
            }
        }
    }

    private var storage = Storage()

    package init() {}

    /// From this many bytes on, the elements live in a mapping of their own, grown by `mremap`.
    /// Below it `realloc` copies at most this much (about a tenth of a millisecond; the pages
    /// it lands on when leaving `malloc` are faulted in one call first). 64 KiB was tried: the
    /// library's replicated row lost up to a third of its rate while a table grew through the
    /// mapped sizes below 1 MiB (docs/design/0007-growing-without-stalls.md, "Alternatives tried
    /// and not kept").
    package static var mappedMinimumBytes: Int { 1 << 20 }

    /// `count` elements whose memory is all zero bits: a large array is a fresh mapping (and a
    /// smaller one comes from `calloc`), pages nobody touched yet, so making it costs no pass
    /// over its memory (each page faults in when it is first written, spread over the writes).
    /// Only for element types whose zero bits are a value (integers).
    package init(zeroedCount count: Int) where Element: FixedWidthInteger {
        precondition(count >= 0, "GrowingArray: a negative count")
        guard count > 0 else { return }
        precondition(MemoryLayout<Element>.alignment <= 16, "GrowingArray: calloc aligns to 16 bytes")
        let (bytes, overflow) = MemoryLayout<Element>.stride.multipliedReportingOverflow(by: count)
        precondition(!overflow, "GrowingArray: \(count) elements do not fit the address space")
        let raw: UnsafeMutableRawPointer
        if bytes >= Self.mappedMinimumBytes, decide_memory_maps() != 0 {
            (raw, storage.mappedBytes) = Storage.mapZeroed(bytes)
        } else {
            guard let allocated = calloc(count, MemoryLayout<Element>.stride) else {
                fatalError("GrowingArray: out of memory making \(count) zeroed elements")
            }
            raw = allocated
        }
        storage.base = raw.bindMemory(to: Element.self, capacity: count)
        storage.capacity = count
        storage.count = count
        storage.updateAppendLimit()
    }

    /// Bytes of pages a mapped array faults in with one call ahead of its appends (and of
    /// `populateAhead(bytes:)`'s callers, who pick their own): 16 pages, about 18 µs here.
    package static var populateAheadBytes: Int { 64 << 10 }

    /// Faults in the next `bytes` (rounded up to whole pages) of a mapped array's pages not yet
    /// faulted in, counted from its start, so that the first read or write of them takes no
    /// fault; returns whether pages remain that were not. Returns false at once for an array
    /// that is not mapped, or whose buffer a copy shares (whose thread may be reading it; the
    /// buffer is not copied for this). The elements are not changed.
    @discardableResult
    package mutating func populateAhead(bytes: Int) -> Bool {
        guard storage.mappedBytes > 0, isKnownUniquelyReferenced(&storage) else { return false }
        let storage = self.storage
        storage.populate(from: storage.populatedBytes, to: storage.populatedBytes + bytes)
        return storage.populatedBytes < storage.mappedBytes
    }

    /// Whether the elements live in a mapping of their own (`mappedMinimumBytes`).
    package var isMapped: Bool { storage.mappedBytes > 0 }

    /// Elements to a page of memory (elements of a mapped array start on a page boundary).
    package static var elementsPerPage: Int { Swift.max(1, Int(decide_memory_page_bytes()) / MemoryLayout<Element>.stride) }

    /// Hands the memory of the whole pages within elements `range`, which must all be zero,
    /// back to the system (they still read as zero); does nothing for an array not mapped or a
    /// range without a whole page. A large array emptied bit by bit (the entry table's old
    /// index, as it drains) is then cheap to free at once: unmapping its populated pages cost
    /// 1.6 ms at 16 MiB, under the node's lock. Zeros read as zeros after it, so a buffer shared
    /// with a copy is released in place, not copied first.
    package func releaseZeroedPages(in range: Range<Int>) where Element: FixedWidthInteger {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "GrowingArray: range \(range) out of 0..<\(count)")
        guard storage.mappedBytes > 0, let base = storage.base else { return }
        let page = Int(decide_memory_page_bytes())
        let start = UnsafeMutableRawPointer(base + range.lowerBound)
        let end = UnsafeMutableRawPointer(base + range.upperBound)
        let firstPage = (Int(bitPattern: start) + page - 1) / page * page
        let lastPage = Int(bitPattern: end) / page * page
        guard lastPage > firstPage else { return }
        decide_memory_release(UnsafeMutableRawPointer(bitPattern: firstPage), lastPage - firstPage)
    }

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
        if storage.count >= storage.appendLimit { storage.prepareAppend() }
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
