import Decide
import DecideTesting
import Foundation
import Testing

/// Node-owned values on one node: what the replication engine's view of the members hides and
/// brings back, who hears of it, and what collection may remove (docs/consistency.md,
/// "Node-owned keys").
@Suite struct OwnedKeyTests {
    struct Presence: CollectionState {
        static func defaultValue(at id: String) -> String { "" }
        static var ownedByWriter: Bool { true }
    }

    struct Announce: Decision {
        let service: String
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write("up", into: Presence.self, at: service)
            return .none
        }
    }

    /// The entries another node `writer` would have replicated here.
    static func remote(_ writer: String, _ key: StateKey, _ value: String, owned: Bool, at physical: UInt64 = 1_700_000_000_000) -> KeyedEntry {
        KeyedEntry(key: key, entry: Entry(version: Version(timestamp: HLCTimestamp(physicalMilliseconds: physical, logical: 0), node: writer),
                                          value: Array("\"\(value)\"".utf8), ownedByWriter: owned))
    }

    static func presenceKey(_ id: String) -> StateKey { StateKey(name: Presence.name, element: Array("\"\(id)\"".utf8)) }

    @Test func anAbsentMembersOwnedKeysReadAsAbsentUntilItReturns() async throws {
        let node = Fixture.node("a")
        node.decide(Announce(service: "api@a"))
        try node.apply(entries: [
            Self.remote("b", Self.presenceKey("api@b"), "up", owned: true),
            Self.remote("b", StateKey(name: "config"), "b's shared value", owned: false),
        ])
        let seen = Recorder<String>()
        let subscription = node.subscribe(entryOf: Self.presenceKey("api@b")) { entry in
            seen.append(entry.flatMap { $0.value.map { String(decoding: $0, as: UTF8.self) } } ?? "absent")
        }
        defer { subscription.cancel() }
        let origins = Recorder<CommittedDelta.Origin>()
        _ = node.addCommitListener { origins.append($0.origin) }
        #expect(node.read(Presence.self, at: "api@b") == "up", "no view yet: every owner counts as present")

        node.setPresentOwners([], removed: [])
        #expect(node.read(Presence.self, at: "api@b") == "")
        #expect(node.read(Presence.self, at: "api@a") == "up", "this node's own keys never hide here")
        #expect(node.read { $0.entry(StateKey(name: "config")) }?.value != nil, "b's shared key stays")
        #expect(node.entry(for: Self.presenceKey("api@b")) != nil, "hidden, still stored")

        node.setPresentOwners(["b"], removed: [])
        #expect(node.read(Presence.self, at: "api@b") == "up")
        node.setPresentOwners(["b"], removed: [])  // no change: nobody hears anything
        #expect(await seen.wait { $0 == ["\"up\"", "absent", "\"up\""] }, "\(seen.all)")
        #expect(origins.all == [.ownerGone, .ownerBack])
    }

    @Test func aNewerSharedWriteReplacesAnOwnedValueAndAnOwnedWriteCanBeRenewedByItsOwner() throws {
        let node = Fixture.node("a")
        node.setPresentOwners([], removed: [])
        try node.apply(entries: [Self.remote("b", Self.presenceKey("x"), "b's", owned: true)])
        #expect(node.read(Presence.self, at: "x") == "")
        // a writes the same key, not owned: it is a's now, visible whatever b does.
        struct Claim: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write("a's", into: Presence.self, at: "x", ownedByThisNode: false)
                return .none
            }
        }
        node.decide(Claim())
        #expect(node.read(Presence.self, at: "x") == "a's")
        #expect(node.entry(for: Self.presenceKey("x"))?.ownedByWriter == false)
    }

    @Test func onlyARemovedMembersOwnedValuesAreCollected() throws {
        let clock = TestClock(startMilliseconds: 1_700_000_000_000)
        let node = Fixture.node("a", clock: clock)
        try node.apply(entries: [
            Self.remote("b", Self.presenceKey("api@b"), "up", owned: true),
            Self.remote("c", Self.presenceKey("api@c"), "up", owned: true),
        ])
        node.setPresentOwners([], removed: ["c"])
        let horizon = HLCTimestamp(physicalMilliseconds: 1_800_000_000_000, logical: 0)
        #expect(node.collectTombstones(olderThan: horizon) == 1, "c is gone for good; b may return")
        #expect(node.entry(for: Self.presenceKey("api@c")) == nil)
        #expect(node.entry(for: Self.presenceKey("api@b")) != nil)
        // A peer that has not collected it sends it back: not stored again.
        #expect((try? node.apply(entries: [Self.remote("c", Self.presenceKey("api@c"), "up", owned: true)])) == 0)
    }

    @Test func theStoreKeepsOwnership() throws {
        let scratch = StorageTests.Scratch()
        defer { scratch.remove() }
        let node = try StorageTests.open(scratch, durability: .strict)
        node.decide(Announce(service: "api@a"))
        let before = node.entries()
        #expect(before.first?.entry.ownedByWriter == true)
        try node.close()
        let reopened = try StorageTests.open(scratch, durability: .strict)
        #expect(reopened.entries() == before)
        try reopened.close()
    }
}
