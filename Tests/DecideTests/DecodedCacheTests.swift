@testable import Decide
import DecideCore
import Testing

/// The node's cache of decoded values: bounded in values, exact in what it hands out, and
/// never emptied whole (docs/design/0007-growing-without-stalls.md, "Decoded values").
@Suite struct DecodedCacheTests {
    private func version(_ physical: UInt64, _ node: String = "a") -> Version {
        Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: 0), node: node)
    }

    /// Keys whose stable hashes name the same set of a cache of `capacity` values.
    private func keysSharingASet(_ count: Int, capacity: Int) -> [StateKey] {
        let sets = UInt64(capacity / 2)
        var bySet: [UInt64: [StateKey]] = [:]
        var index = 0
        while true {
            let key = StateKey(name: "shared", element: Array("\(index)".utf8))
            bySet[key.stableHash % sets, default: []].append(key)
            if let keys = bySet[key.stableHash % sets], keys.count == count { return keys }
            index += 1
        }
    }

    @Test func aValueIsHandedOutOnlyForTheVersionItWasDecodedFrom() {
        var cache = DecodedCache(capacity: 64)
        let key = StateKey(name: "k")
        #expect(cache.value(of: key, at: version(1)) == nil)
        cache.keep("one", of: key, at: version(1))
        #expect(cache.value(of: key, at: version(1)) as? String == "one")
        #expect(cache.value(of: key, at: version(2)) == nil)
        #expect(cache.value(of: key, at: version(1, "b")) == nil)
        cache.written("two", of: key, at: version(2))
        #expect(cache.value(of: key, at: version(1)) == nil)
        #expect(cache.value(of: key, at: version(2)) as? String == "two")
        // A write to a key never read adds nothing.
        cache.written("other", of: StateKey(name: "unread"), at: version(3))
        #expect(cache.value(of: StateKey(name: "unread"), at: version(3)) == nil && cache.count == 1)
    }

    @Test func aMillionDistinctValuesKeepTheCountWithinCapacityAndTheLatestReadable() {
        var cache = DecodedCache(capacity: 65_536)
        #expect(cache.capacity == 65_536)
        var present = 0
        for index in 0..<1_000_000 {
            let key = StateKey(name: "k", element: Array("\(index)".utf8))
            cache.keep(index, of: key, at: version(UInt64(index + 1)))
            #expect(cache.value(of: key, at: version(UInt64(index + 1))) as? Int == index)
            if index % 100_000 == 99_999 {
                #expect(cache.count <= cache.capacity)
            }
        }
        // The last thousand kept: nearly all still there (a set holds the two latest of its keys).
        for index in 999_000..<1_000_000 {
            let key = StateKey(name: "k", element: Array("\(index)".utf8))
            if cache.value(of: key, at: version(UInt64(index + 1))) as? Int == index { present += 1 }
        }
        #expect(cache.count <= 65_536 && cache.count > 60_000)
        #expect(present > 990, "\(present) of the last 1,000 values kept")
    }

    @Test func twoKeysOfOneSetAreBothKeptAndAThirdReplacesTheOneReadLessLately() {
        var cache = DecodedCache(capacity: 1_024)
        let keys = keysSharingASet(3, capacity: 1_024)
        cache.keep("a", of: keys[0], at: version(1))
        cache.keep("b", of: keys[1], at: version(1))
        #expect(cache.value(of: keys[0], at: version(1)) as? String == "a")
        #expect(cache.value(of: keys[1], at: version(1)) as? String == "b")
        // keys[0] read last but one, keys[1] last... read keys[0] again: keys[1] is now the older.
        _ = cache.value(of: keys[0], at: version(1))
        cache.keep("c", of: keys[2], at: version(1))
        #expect(cache.value(of: keys[0], at: version(1)) as? String == "a")
        #expect(cache.value(of: keys[1], at: version(1)) == nil)
        #expect(cache.value(of: keys[2], at: version(1)) as? String == "c")
        #expect(cache.count == 2)
    }

    @Test func aCopyIsIndependentOfTheOriginal() {
        var original = DecodedCache(capacity: 16)
        let key = StateKey(name: "k")
        original.keep("one", of: key, at: version(1))
        var copy = original
        copy.keep("two", of: key, at: version(2))
        #expect(original.value(of: key, at: version(1)) as? String == "one")
        #expect(copy.value(of: key, at: version(2)) as? String == "two")
        #expect(original.value(of: key, at: version(2)) == nil)
    }

    @Test func noCapacityKeepsNothing() {
        var cache = DecodedCache(capacity: 0)
        cache.keep("one", of: StateKey(name: "k"), at: version(1))
        #expect(cache.isEmpty && cache.value(of: StateKey(name: "k"), at: version(1)) == nil)
    }
}
