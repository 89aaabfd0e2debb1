@testable import DecideCore
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Serialized: the tests count live elements in one shared counter.
@Suite(.serialized) struct GrowingArrayTests {
    /// Counts the instances alive, so a test sees every element released exactly once.
    final class Tracked: Sendable {
        static let alive = Atomic<Int>(0)
        let value: Int
        init(_ value: Int) {
            self.value = value
            Self.alive.add(1, ordering: .relaxed)
        }
        deinit { Self.alive.subtract(1, ordering: .relaxed) }
    }

    struct Element {
        var number: Int
        var tracked: Tracked
        var bytes: [UInt8]
    }

    /// Past `mappedMinimumBytes` the elements move from `malloc`'s memory into a mapping of the
    /// array's own, which later growths move with `mremap`: every element keeps its value and
    /// its references through each move, a copy taken from a mapped array is independent of it,
    /// and every element is released exactly once when the arrays go.
    @Test func largeArraysMoveIntoAMappingAndKeepTheirElements() {
        let before = Tracked.alive.load(ordering: .relaxed)
        do {
            let perElement = MemoryLayout<Element>.stride
            let count = GrowingArray<Element>.mappedMinimumBytes / perElement * 6
            var growing = GrowingArray<Element>()
            var copy: GrowingArray<Element>?
            var wasMapped = false
            for number in 0..<count {
                growing.append(Element(number: number, tracked: Tracked(number), bytes: [UInt8(truncatingIfNeeded: number)]))
                if growing.count * perElement < GrowingArray<Element>.mappedMinimumBytes / 2 { #expect(!growing.isMapped) }
                if growing.isMapped, !wasMapped {
                    wasMapped = true
                    copy = growing
                }
            }
            #expect(wasMapped && growing.isMapped)
            guard var copy else { return }
            let copied = copy.count
            // Writing the copy copies it (a shared buffer is never written); the original stays.
            copy[0].number = -1
            for number in stride(from: 0, to: count, by: 997) {
                #expect(growing[number].number == number && growing[number].tracked.value == number)
                #expect(growing[number].bytes == [UInt8(truncatingIfNeeded: number)])
            }
            #expect(copy.count == copied && copy[0].number == -1 && copy[copied - 1].number == copied - 1)
            while growing.count > count / 2 { growing.removeLast() }
            #expect(growing.count == count / 2 && growing[count / 2 - 1].number == count / 2 - 1)
        }
        #expect(Tracked.alive.load(ordering: .relaxed) == before, "elements leaked or were released twice")
    }

    /// A zeroed array reads as zeros whatever its size: a mapping past `mappedMinimumBytes`,
    /// `calloc` below; both can be written and grown like any other.
    @Test func zeroedArraysReadAsZerosMappedOrNot() {
        for count in [1, 16, 1_000, GrowingArray<UInt64>.mappedMinimumBytes / 8, GrowingArray<UInt64>.mappedMinimumBytes] {
            var cells = GrowingArray<UInt64>(zeroedCount: count)
            #expect(cells.count == count)
            #expect(cells.isMapped == (count * 8 >= GrowingArray<UInt64>.mappedMinimumBytes))
            #expect(cells.withUnsafeBufferPointer { $0.allSatisfy { $0 == 0 } })
            cells[count - 1] = 7
            cells.append(9)
            #expect(cells[count - 1] == 7 && cells[count] == 9 && cells[0] == (count == 1 ? 7 : 0))
        }
        #expect(GrowingArray<UInt64>(zeroedCount: 0).isEmpty)
    }

    /// Handing back the pages of a zeroed range keeps every element's value, in the array and in
    /// a copy sharing its buffer, and the released pages can be written again.
    @Test func releasedPagesStillReadAsZerosAndTheRestIsKept() {
        let count = GrowingArray<UInt64>.mappedMinimumBytes / 8 * 2
        var cells = GrowingArray<UInt64>(zeroedCount: count)
        #expect(cells.isMapped)
        for index in stride(from: 0, to: count, by: 97) { cells[index] = UInt64(index) + 1 }
        let copy = cells
        // Zero a middle range (as a drain does), then hand it back, page boundaries unaligned.
        let range = 1_000..<(count - 1_000)
        for index in range where cells[index] != 0 { cells[index] = 0 }
        let shared = cells
        cells.releaseZeroedPages(in: range)
        for index in stride(from: 0, to: count, by: 97) {
            #expect(cells[index] == (range.contains(index) ? 0 : UInt64(index) + 1))
            #expect(shared[index] == cells[index])
            #expect(copy[index] == UInt64(index) + 1)
        }
        #expect(cells.withUnsafeBufferPointer { $0[range].allSatisfy { $0 == 0 } })
        cells[range.lowerBound + 4_096] = 5
        #expect(cells[range.lowerBound + 4_096] == 5 && shared[range.lowerBound + 4_096] == 0)
    }

    /// Appends, writes, removals and copies, checked against a Swift array after every step;
    /// a copy taken midway keeps its elements while the original changes (value semantics).
    @Test func behavesAsAnArrayThroughGrowthWritesRemovalsAndCopies() {
        let before = Tracked.alive.load(ordering: .relaxed)
        forEachSeed(0..<4) { seed, gen in
            var growing = GrowingArray<Element>()
            var model: [Element] = []
            var snapshot: (GrowingArray<Element>, [Int])?
            for step in 0..<20_000 {
                switch gen.int(0...9) {
                case 0..<6:
                    let element = Element(number: step, tracked: Tracked(step), bytes: Array(repeating: UInt8(truncatingIfNeeded: step), count: step % 40))
                    growing.append(element)
                    model.append(element)
                case 6..<8 where !model.isEmpty:
                    let position = gen.int(0...(model.count - 1))
                    growing[position].number = -step
                    growing[position].bytes.append(7)
                    model[position].number = -step
                    model[position].bytes.append(7)
                case 8 where !model.isEmpty:
                    #expect(growing.removeLast().number == model.removeLast().number)
                default:
                    if snapshot == nil { snapshot = (growing, model.map(\.number)) }
                }
                #expect(growing.count == model.count, "seed \(seed)")
            }
            #expect(growing.map(\.number) == model.map(\.number), "seed \(seed)")
            #expect(growing.map(\.bytes) == model.map(\.bytes))
            #expect(growing.map(\.tracked.value) == model.map(\.tracked.value))
            if let (copy, numbers) = snapshot { #expect(copy.map(\.number) == numbers) }
            growing.withUnsafeMutableBufferPointer { buffer in
                for index in buffer.indices { buffer[index].number = index }
            }
            #expect(growing.withUnsafeBufferPointer { Array($0.map(\.number)) } == Array(0..<model.count))
        }
        #expect(Tracked.alive.load(ordering: .relaxed) == before, "elements leaked or were released twice")
    }

    #if os(Linux)
    /// Whether the page holding `address` is in memory (`mincore`); false for a page not mapped
    /// at all (past the end of an array's mapping).
    static func isResident(_ address: UnsafeRawPointer) -> Bool {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = UnsafeMutableRawPointer(bitPattern: Int(bitPattern: address) / page * page)!
        var resident: UInt8 = 0
        guard mincore(start, page, &resident) == 0 else {
            #expect(errno == ENOMEM, "mincore failed: errno \(errno)")
            return false
        }
        return resident & 1 != 0
    }

    /// Once mapped, an array appended to faults its pages in ahead, `populateAheadBytes` at a
    /// time: an append that starts a new page finds it in memory already, except the one append
    /// in each run of 16 pages that faults the run in (or a growth that moved the mapping); and
    /// it never runs more than `populateAheadBytes` of pages ahead of its end.
    @Test func appendsFindTheirPagesFaultedInAhead() {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let count = GrowingArray<UInt64>.mappedMinimumBytes / 8 * 3
        var growing = GrowingArray<UInt64>()
        var (newPages, notInMemory) = (0, 0)
        for number in 0..<count {
            let base = growing.withUnsafeBufferPointer { $0.baseAddress }
            let landing = base.map { UnsafeRawPointer($0 + growing.count) }
            let startsAPage = growing.isMapped && landing.map { Int(bitPattern: $0) % page == 0 } == true
            let wasResident = startsAPage && Self.isResident(landing!)
            growing.append(UInt64(number))
            // Counted only within one mapping (no growth moved it).
            if startsAPage, growing.withUnsafeBufferPointer({ $0.baseAddress }) == base {
                newPages += 1
                if !wasResident { notInMemory += 1 }
            }
        }
        let pagesPerCall = GrowingArray<UInt64>.populateAheadBytes / page
        #expect(newPages > 256)
        #expect(notInMemory <= newPages / pagesPerCall + 2, "\(notInMemory) of \(newPages) pages were not faulted in ahead")
        // Not more than `populateAheadBytes` (and the page the next element starts on) ahead.
        let end = growing.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress! + $0.count) }
        #expect(!Self.isResident(end + GrowingArray<UInt64>.populateAheadBytes + 2 * page))
        #expect(growing.indices.allSatisfy { growing[$0] == UInt64($0) })
    }

    /// `populateAhead(bytes:)` faults in a mapped array's pages from its front, that many bytes
    /// a call, until it says none are left; the elements keep their values (zeros, and those
    /// written); an array in `malloc`'s memory, or one whose buffer a copy shares, answers false
    /// at once.
    @Test func populatingAheadFaultsPagesInFromTheFrontAndChangesNothing() {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let chunk = 16 * page
        let count = GrowingArray<UInt64>.mappedMinimumBytes / 8 * 2
        var cells = GrowingArray<UInt64>(zeroedCount: count)
        #expect(cells.isMapped)
        for index in stride(from: 0, to: count, by: 4_099) { cells[index] = UInt64(index) + 1 }
        let base = cells.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!) }
        let perPage = page / 8
        // Pages nobody wrote are not in memory until the call whose chunk holds them: the last
        // one, and the last one of the first chunk.
        func untouched(_ pages: Range<Int>) -> Int {
            pages.last { pageNumber in !(pageNumber * perPage..<(pageNumber + 1) * perPage).contains { $0 % 4_099 == 0 } }!
        }
        let (untouched, untouchedFirst) = (untouched(0..<(count / perPage)), untouched(0..<(chunk / page)))
        #expect(untouched * page > count * 8 / 2)
        #expect(!Self.isResident(base + untouched * page) && !Self.isResident(base + untouchedFirst * page))
        // A buffer a copy shares is left as it is (the copy's thread may be reading it).
        var copy: GrowingArray<UInt64>? = cells
        let populatedShared = cells.populateAhead(bytes: chunk)
        #expect(!populatedShared)
        #expect(!Self.isResident(base + untouchedFirst * page))
        #expect(copy?[4_099] == 4_100)
        copy = nil
        var calls = 0
        while cells.populateAhead(bytes: chunk) {
            calls += 1
            #expect(Self.isResident(base + calls * chunk - page))
            #expect(Self.isResident(base + untouched * page) == (untouched * page < calls * chunk))
        }
        #expect(calls + 1 == count * 8 / chunk)
        #expect((0..<(count * 8 / page)).allSatisfy { Self.isResident(base + $0 * page) })
        for index in stride(from: 0, to: count, by: 997) {
            #expect(cells[index] == (index % 4_099 == 0 ? UInt64(index) + 1 : 0))
        }
        let populatedPastTheEnd = cells.populateAhead(bytes: chunk)
        var small = GrowingArray<UInt64>(zeroedCount: 1_000)
        let populatedSmall = small.populateAhead(bytes: chunk)
        #expect(!populatedPastTheEnd && !populatedSmall)
    }
    #endif

    /// A million small records, the size a node holds: every one reads back.
    @Test func holdsAMillionElements() {
        var growing = GrowingArray<(UInt64, UInt64)>()
        for index in 0..<1_000_000 { growing.append((UInt64(index), UInt64(index) &* 31)) }
        #expect(growing.count == 1_000_000)
        #expect(growing.indices.allSatisfy { growing[$0].0 == UInt64($0) && growing[$0].1 == UInt64($0) &* 31 })
    }
}
