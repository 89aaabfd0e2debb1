import DecideCore
import Testing

/// Positions of ordered indexes: what `between` and `appending` make always lies where asked,
/// ends with a non-zero digit, survives its text form, and stays short enough under the
/// inserts users make; anything a peer sends is refused or ordered without a trap.
@Suite struct IndexPositionTests {
    static let tagA = IndexPosition.tag(ofNodeHash: 0x1234_5678_9ABC_DEF0)
    static let tagB = IndexPosition.tag(ofNodeHash: 0x0FED_CBA9_8765_4321)

    @Test func betweenLiesStrictlyBetweenAnyTwoOrderedPositions() {
        forEachSeed(0..<200) { seed, gen in
            // Positions as a list grows by random inserts from two writers: every new one lies
            // between its neighbours, so the list stays strictly ordered.
            var list: [IndexPosition] = [.first(writer: Self.tagA)]
            for _ in 0..<200 {
                let tag = gen.bool() ? Self.tagA : Self.tagB
                let slot = gen.int(0...list.count)
                let lower = slot > 0 ? list[slot - 1] : nil
                let upper = slot < list.count ? list[slot] : nil
                let made = upper == nil && lower != nil
                    ? IndexPosition.appending(after: lower!, writer: tag)
                    : IndexPosition.between(lower, upper, writer: tag)
                if let lower { #expect(lower < made, "seed \(seed)") }
                if let upper { #expect(made < upper, "seed \(seed)") }
                #expect(made.digits.last != 0, "seed \(seed)")
                #expect(IndexPosition(encoded: made.encoded) == made, "seed \(seed)")
                list.insert(made, at: slot)
            }
            #expect(list == list.sorted(), "seed \(seed)")
            #expect(list.allSatisfy { $0.digits.count <= 16 }, "seed \(seed): random inserts keep positions short")
        }
    }

    @Test func runsOfAppendsStayTogetherAndShort() {
        // Both append after an element a third writer made: each starts a run of its own.
        let start = IndexPosition.first(writer: IndexPosition.tag(ofNodeHash: 42))
        var a = start, b = start
        var ofA: [IndexPosition] = [], ofB: [IndexPosition] = []
        for _ in 0..<1_000 {
            a = .appending(after: a, writer: Self.tagA)
            b = .appending(after: b, writer: Self.tagB)
            ofA.append(a)
            ofB.append(b)
        }
        #expect(ofA.allSatisfy { $0.digits.count == 3 } && ofB.allSatisfy { $0.digits.count == 3 })
        // Not interleaved: all of one run sorts before all of the other.
        let merged = (ofA + ofB).sorted()
        let aFirst = Self.tagA < Self.tagB
        #expect(merged == (aFirst ? ofA + ofB : ofB + ofA))
        #expect((ofA + ofB).allSatisfy { start < $0 })
    }

    @Test func insertsAtOnePlaceGrowOneDigitPerSixtyOrSo() {
        // The worst case for length: every insert goes right after the same element.
        let first = IndexPosition.first(writer: Self.tagA)
        var upper = IndexPosition.appending(after: first, writer: Self.tagA)
        var made = 0
        while made < 1_000 {
            let next = IndexPosition.between(first, upper, writer: Self.tagB)
            #expect(first < next && next < upper)
            upper = next
            made += 1
        }
        #expect(upper.digits.count <= 40, "\(upper.digits.count) digits after 1,000 inserts at one place")
        // And before the first element, again and again.
        var lowest = first
        for _ in 0..<1_000 {
            let next = IndexPosition.between(nil, lowest, writer: Self.tagB)
            #expect(next < lowest)
            lowest = next
        }
        #expect(lowest.digits.count <= 40)
    }

    @Test func badTextIsRefusedAndDegenerateBoundsNeverTrap() {
        for text in ["", ".", "0", "000000000000000g", "0000000000000001.", "0000000000000001..0000000000000002",
                     "00000000000000001", "000000000000000A",
                     Array(repeating: "0000000000000001", count: IndexPosition.maxDigits + 1).joined(separator: ".")] {
            #expect(IndexPosition(encoded: text) == nil, "\(text)")
        }
        #expect(IndexPosition(encoded: "ffffffffffffffff.0000000000000001")?.digits == [UInt64.max, 1])
        let top = IndexPosition(digits: [UInt64.max, UInt64.max])
        #expect(top < IndexPosition.appending(after: top, writer: Self.tagA))
        #expect(top < IndexPosition.between(top, nil, writer: Self.tagA))
        // Out of order, equal, empty and zero-ended bounds (only bad data makes them): no trap,
        // and the result is after the lower bound.
        let pairs: [(IndexPosition?, IndexPosition?)] = [
            (IndexPosition(digits: [5]), IndexPosition(digits: [3])),
            (IndexPosition(digits: [5]), IndexPosition(digits: [5])),
            (nil, IndexPosition(digits: [])),
            (nil, IndexPosition(digits: [0, 0])),
            (IndexPosition(digits: []), IndexPosition(digits: [0])),
        ]
        for (lower, upper) in pairs {
            let made = IndexPosition.between(lower, upper, writer: Self.tagA)
            if let lower { #expect(lower < made) }
        }
    }
}
