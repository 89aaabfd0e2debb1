import Decide
import DecideCore
import DecideRESP

/// The set commands: SADD, SREM (writes, `KeySetChange`), SMEMBERS, SISMEMBER, SMISMEMBER and
/// SCARD (reads, `CollectionRead`), on the `SetState` a plain key names, with Redis's replies in RESP2 and RESP3
/// (docs/operations.md, "Sets").
extension RESPService {
    /// SADD key member…, SREM key member…: answered with how many members were added (not in
    /// the set before) or removed (in it before).
    func prepareSetChange(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        guard let key = plainKey(command, arguments[1], kind: "a set", into: &writer), let members = setMembers(arguments.dropFirst(2), into: &writer) else {
            return nil
        }
        let change = KeySetChange(key: key, members: members, inserting: command == .sadd)
        return PreparedWrite(command: command, apply: change.apply) { writer in
            if let error = change.outcome.error { writer.error(error) } else { writer.integer(change.outcome.changed) }
        }
    }

    /// SMEMBERS, SISMEMBER, SMISMEMBER or SCARD made ready to run, or nil (with the error
    /// written) when its arguments are wrong.
    func prepareSetRead(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> CollectionRead? {
        guard let key = plainKey(command, arguments[1], kind: "a set", into: &writer) else { return nil }
        let probes: [[UInt8]]
        if command == .sismember || command == .smismember {
            guard let members = setMembers(arguments.dropFirst(2), into: &writer) else { return nil }
            probes = members
        } else {
            probes = []
        }
        let maxReplyBytes = configuration.maxReplyBytes
        return CollectionRead(key: key, kind: .set) { read, _, writer in
            switch command {
            case .sismember:
                writer.integer(read.contains(member: probes[0], inSetNamed: key.name) ? 1 : 0)
            case .smismember:
                writer.arrayHeader(probes.count)
                for probe in probes { writer.integer(read.contains(member: probe, inSetNamed: key.name) ? 1 : 0) }
            case .scard:
                writer.integer(read.hasMembers(ofSetNamed: key.name) ? read.members(ofSetNamed: key.name).count : 0)
            default:
                let members = read.hasMembers(ofSetNamed: key.name) ? read.members(ofSetNamed: key.name) : []
                let replyBytes = members.reduce(0) { $0 + 16 + $1.count }
                guard replyBytes <= maxReplyBytes else {
                    return writer.error("ERR SMEMBERS would reply about \(replyBytes) bytes, more than maxReplyBytes \(maxReplyBytes)")
                }
                writer.setHeader(members.count)
                for member in members.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                    member.withUnsafeBytes { raw in ValueMapping.withResp(raw) { writer.bulk($0) } }
                }
            }
        }
    }

    /// The plain key a set, hash or sorted set command names, or nil (with the error written).
    func plainKey(_ command: RESPCommand, _ argument: ArraySlice<UInt8>, kind: String, into writer: inout RESPWriter) -> StateKey? {
        guard let key = key(argument, into: &writer) else { return nil }
        guard key.elementCount == 0 else {
            writer.error("ERR \(command.name.uppercased()) needs a plain key: \(key) names an element of a collection, and \(kind) is a key of its own")
            return nil
        }
        return key
    }

    /// A set member, hash field or sorted set member as stored (a JSON string of its text,
    /// `KeySetChange.member`), or nil with `refusal` written when it is not UTF-8.
    func storedText(_ argument: ArraySlice<UInt8>, refusal: @autoclosure () -> String, into writer: inout RESPWriter) -> [UInt8]? {
        guard let text = KeySetChange.member(argument) else {
            writer.error(refusal())
            return nil
        }
        return text
    }

    /// The members given, as stored, or nil (with the error written) at the first that is not UTF-8.
    private func setMembers(_ arguments: ArraySlice<ArraySlice<UInt8>>, into writer: inout RESPWriter) -> [[UInt8]]? {
        var members: [[UInt8]] = []
        members.reserveCapacity(arguments.count)
        for argument in arguments {
            guard let member = storedText(argument, refusal: "ERR set member is not valid UTF-8: Decide stores members as JSON strings, which hold text only",
                                          into: &writer) else { return nil }
            members.append(member)
        }
        return members
    }
}
