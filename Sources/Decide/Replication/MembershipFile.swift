import Foundation

/// The file where a node keeps the members it knows across restarts
/// (`Replicator.Configuration.membershipPath`): one JSON object per member, this node first.
/// A node restarted from its data directory must count every member it counted before, or it
/// could collect a tombstone a member that is down still needs.
///
/// Guarantees: a write replaces the file whole (temporary file, fsync, rename), so a crash
/// leaves the old list or the new one; a missing file reads as no member; a file that cannot
/// be read or parsed throws, naming the problem.
struct MembershipFile: Sendable {
    let path: String

    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    /// What the file holds: member records, and the forgotten id hashes oldest first.
    struct Contents: Equatable {
        var records: [ReplicationMessage.MemberRecord] = []
        var forgotten: [UInt64] = []
    }

    func read() throws -> Contents {
        guard let data = FileManager.default.contents(atPath: path) else { return Contents() }
        guard let list = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            throw Problem(description: "\(path) is not a JSON list of members")
        }
        var contents = Contents()
        for object in list {
            if object["status"] as? String == Self.forgottenStatus {
                guard let hashes = object["idHashes"] as? [String] else {
                    throw Problem(description: "\(path) has a forgotten entry without a list of idHashes")
                }
                for text in hashes {
                    guard text.utf8.count == 16, let hash = UInt64(text, radix: 16) else {
                        throw Problem(description: "\(path) has a forgotten id hash that is not 16 hex digits: \(text.prefix(40))")
                    }
                    contents.forgotten.append(hash)
                }
                continue
            }
            guard let id = object["id"] as? String, let address = object["address"] as? String,
                  let statusName = object["status"] as? String, let incarnation = object["incarnation"] as? String,
                  let status = Self.statuses[statusName], let number = UInt64(incarnation) else {
                throw Problem(description: "\(path) has a member entry without id, address, status or incarnation")
            }
            contents.records.append(.init(nodeID: id, address: address, status: status, incarnation: number))
        }
        return contents
    }

    func write(_ contents: Contents) throws {
        var list: [[String: Any]] = contents.records.map { record in
            ["id": record.nodeID, "address": record.address,
             "status": Self.statuses.first { $0.value == record.status }!.key,
             "incarnation": "\(record.incarnation)"]
        }
        if !contents.forgotten.isEmpty {
            list.append(["status": Self.forgottenStatus, "idHashes": contents.forgotten.map(Self.hex)])
        }
        let data = try JSONSerialization.data(withJSONObject: list, options: [.prettyPrinted, .sortedKeys])
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else {
            throw Problem(description: "cannot write \(temporary)")
        }
        let descriptor = open(temporary, O_RDONLY)
        if descriptor >= 0 {
            _ = fsync(descriptor)
            _ = Foundation.close(descriptor)
        }
        guard rename(temporary, path) == 0 else { throw Problem(description: "cannot rename \(temporary) to \(path)") }
    }

    private static let forgottenStatus = "forgotten"

    private static func hex(_ hash: UInt64) -> String {
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    private static let statuses: [String: ReplicationMessage.MemberRecord.Status] = [
        "alive": .alive, "left": .left, "removed": .removed,
    ]
}
