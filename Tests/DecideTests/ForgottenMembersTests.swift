@testable import Decide
import DecideCore
import DecideTesting
import Foundation
import Testing

/// The removals a node remembers by id hash past its `maxMembers` full records, and how the
/// member file keeps them across restarts.
@Suite struct ForgottenMembersTests {
    @Test func holdsTheNewestRemovalsUpToItsCapacityOldestDroppedFirst() {
        var forgotten = ForgottenMembers(capacity: 3)
        for id in ["m1", "m2", "m3"] { forgotten.insert(id) }
        #expect(forgotten.count == 3)
        forgotten.insert("m2")   // held already: nothing moves
        forgotten.insert("m4")
        #expect(!forgotten.contains("m1"))
        #expect(["m2", "m3", "m4"].allSatisfy(forgotten.contains))
        forgotten.insert("m5")
        forgotten.insert("m6")
        #expect(forgotten.count == 3)
        #expect(forgotten.oldestFirst == ["m4", "m5", "m6"].map(ForgottenMembers.hash))
        // Read back in that order, the same removals are dropped next.
        var restored = ForgottenMembers(capacity: 3, oldestFirst: forgotten.oldestFirst)
        restored.insert("m7")
        #expect(!restored.contains("m4") && restored.contains("m5") && restored.contains("m7"))
    }

    @Test func aMillionRemovalsStayWithinTheCapacity() {
        var forgotten = ForgottenMembers(capacity: 65_536)
        for index in 0..<1_000_000 { forgotten.insert("node-\(index)") }
        #expect(forgotten.count == 65_536)
        #expect(forgotten.oldestFirst.count == 65_536)
        #expect(forgotten.contains("node-999999") && forgotten.contains("node-934464"))
        #expect(!forgotten.contains("node-934463") && !forgotten.contains("node-0"))
        // A smaller capacity at the next start keeps the newest.
        let smaller = ForgottenMembers(capacity: 10, oldestFirst: Array(forgotten.oldestFirst.suffix(10)))
        #expect(smaller.contains("node-999999") && !smaller.contains("node-999989"))
    }

    @Test func capacityZeroRemembersNothing() {
        var forgotten = ForgottenMembers(capacity: 0)
        forgotten.insert("m1")
        #expect(forgotten.count == 0 && !forgotten.contains("m1") && forgotten.oldestFirst.isEmpty)
    }

    @Test func theMemberFileKeepsRecordsAndForgottenHashesAndNamesWhatIsWrong() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("decide-members-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = MembershipFile(path: path)
        #expect(try file.read() == MembershipFile.Contents())
        let contents = MembershipFile.Contents(
            records: [.init(nodeID: "a", address: "127.0.0.1:7000", status: .alive, incarnation: 5),
                      .init(nodeID: "c", address: "127.0.0.1:7002", status: .removed, incarnation: 2)],
            forgotten: [0, 1, UInt64.max, ForgottenMembers.hash("old")])
        try file.write(contents)
        #expect(try file.read() == contents)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\"ffffffffffffffff\"") && text.contains("\"0000000000000001\""))

        // A file written before forgotten hashes existed still reads.
        try Data(#"[{"id":"a","address":"x","status":"alive","incarnation":"1"}]"#.utf8).write(to: URL(fileURLWithPath: path))
        #expect(try file.read() == MembershipFile.Contents(records: [.init(nodeID: "a", address: "x", status: .alive, incarnation: 1)]))

        // Full at the default capacity: about 26 bytes a hash, read back whole.
        let full = MembershipFile.Contents(records: contents.records, forgotten: (0..<65_536).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 })
        try file.write(full)
        let bytes = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        #expect(bytes <= 27 * 65_536, "\(bytes) bytes")
        #expect(try file.read() == full)

        for bad in [#"[{"status":"forgotten","idHashes":["xyz"]}]"#, #"[{"status":"forgotten","idHashes":["123"]}]"#,
                    #"[{"status":"forgotten"}]"#] {
            try Data(bad.utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: MembershipFile.Problem.self, "\(bad)") { try file.read() }
        }
    }
}

/// Owned values of a member removed past `maxMembers` records (remembered by id hash only) are
/// gone for good like those of any removed member: collected, not kept forever.
@Suite struct ForgottenOwnerCollectionTests {
    @Test func aForgottenMembersOwnedValuesAreCollected() throws {
        let node = Fixture.node("a", clock: TestClock(startMilliseconds: 1_700_000_000_000))
        try node.apply(entries: [
            OwnedKeyTests.remote("b", OwnedKeyTests.presenceKey("api@b"), "up", owned: true),
            OwnedKeyTests.remote("c", OwnedKeyTests.presenceKey("api@c"), "up", owned: true),
        ])
        var forgotten = ForgottenMembers(capacity: 4)
        forgotten.insert("c")
        node.setPresentOwners([], removed: [], forgotten: forgotten)
        let horizon = HLCTimestamp(physicalMilliseconds: 1_800_000_000_000, logical: 0)
        #expect(node.collectTombstones(olderThan: horizon) == 1, "c is gone for good (by id hash); b may return")
        #expect(node.entry(for: OwnedKeyTests.presenceKey("api@c")) == nil)
        #expect(node.entry(for: OwnedKeyTests.presenceKey("api@b")) != nil)
    }
}
