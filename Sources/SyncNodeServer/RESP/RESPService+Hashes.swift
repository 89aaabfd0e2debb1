import Decide
import DecideCore
import DecideRESP

/// The hash commands: HSET, HMSET, HSETNX, HDEL (writes, `KeyHashChange`), HINCRBY
/// (`KeyHashCounterChange`), HGET, HMGET,
/// HGETALL, HKEYS, HVALS, HLEN and HEXISTS (reads, `CollectionRead`), on the fields a plain key names, with
/// Redis's replies in RESP2 and RESP3 (docs/operations.md, "Hashes").
extension RESPService {
    /// HSET key field value [field value …] (the fields added), HMSET (OK), HSETNX key field
    /// value (1 when the field was absent and is now set, judged on this node), HDEL key field …
    /// (the fields deleted).
    func prepareHashChange(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        guard let key = plainKey(command, arguments[1], kind: "a hash", into: &writer) else { return nil }
        var writes: [(field: [UInt8], value: PackedBytes?)] = []
        if command == .hdel {
            for argument in arguments.dropFirst(2) {
                guard let field = hashField(argument, into: &writer) else { return nil }
                writes.append((field, nil))
            }
        } else {
            guard arguments.count % 2 == 0 else {
                writer.error("ERR wrong number of arguments for '\(command.name)' command")
                return nil
            }
            var index = 2
            while index < arguments.count {
                guard let field = hashField(arguments[index], into: &writer),
                      let value = storedValue(arguments[index + 1], into: &writer) else { return nil }
                writes.append((field, value))
                index += 2
            }
        }
        if command == .hsetnx {
            let change = KeyHashChange(key: key, writes: writes, onlyAbsent: true)
            return PreparedWrite(command: command, apply: change.apply) { writer in
                if let error = change.outcome.error { writer.error(error) } else { writer.integer(change.outcome.changed) }
            }
        }
        let change = KeyHashChange(key: key, writes: writes)
        let repliesOK = command == .hmset
        return PreparedWrite(command: command, apply: change.apply) { writer in
            if let error = change.outcome.error { writer.error(error) } else if repliesOK { writer.simpleString("OK") } else { writer.integer(change.outcome.changed) }
        }
    }

    /// HINCRBY key field increment: the field's total after it (`KeyHashCounterChange`).
    func prepareHashCounterChange(_ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> PreparedWrite? {
        guard let key = plainKey(.hincrby, arguments[1], kind: "a hash", into: &writer),
              let field = hashField(arguments[2], into: &writer) else { return nil }
        guard let amount = Self.integer(arguments[3]).flatMap({ Int64(exactly: $0) }) else {
            writer.error(KeyCounterChange.notAnInteger)
            return nil
        }
        let change = KeyHashCounterChange(key: key, field: field, amount: amount)
        return PreparedWrite(command: .hincrby, apply: change.apply) { writer in
            if let error = change.outcome.error { writer.error(error) } else { writer.integer(Int(change.outcome.total)) }
        }
    }

    /// HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN or HEXISTS made ready to run, or nil (with the
    /// error written) when its arguments are wrong.
    func prepareHashRead(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> CollectionRead? {
        guard let key = plainKey(command, arguments[1], kind: "a hash", into: &writer) else { return nil }
        var fields: [StateKey] = []
        if command == .hget || command == .hmget || command == .hexists {
            for argument in arguments.dropFirst(2) {
                guard let field = hashField(argument, into: &writer) else { return nil }
                fields.append(StateKey(name: key.name, element: field))
            }
        }
        let probes = fields
        let maxReplyBytes = configuration.maxReplyBytes
        return CollectionRead(key: key, kind: .hash) { read, plainValue, writer in
            // A field with no plain value may be a counter field (HINCRBY's).
            func value(_ field: StateKey) -> PackedBytes? { plainValue(field) ?? KeyHashCounterChange.value(read, field: field) }
            switch command {
            case .hget: ValueMapping.reply(value(probes[0]), into: &writer)
            case .hexists: writer.integer(value(probes[0]) == nil ? 0 : 1)
            case .hmget: Self.replyValues(probes.map(value), maxReplyBytes: maxReplyBytes, into: &writer)
            case .hlen: writer.integer(read.fields(ofHashNamed: key.name).count)
            default:
                let fields = read.fields(ofHashNamed: key.name).sorted { $0.field < $1.field }
                let replyBytes = fields.reduce(0) { $0 + 32 + $1.field.elementCount + $1.value.count }
                guard replyBytes <= maxReplyBytes else {
                    return writer.error("ERR \(command.name.uppercased()) would reply about \(replyBytes) bytes, more than maxReplyBytes \(maxReplyBytes)")
                }
                switch command {
                case .hgetall: writer.mapHeader(fields.count)
                default: writer.arrayHeader(fields.count)
                }
                for (field, fieldValue) in fields {
                    if command != .hvals {
                        field.packedElement.withUnsafeBytes { raw in ValueMapping.withResp(raw) { writer.bulk($0) } }
                    }
                    if command != .hkeys { ValueMapping.reply(fieldValue, into: &writer) }
                }
            }
        }
    }

    /// A field as its element id, or nil (with the error written) when it is not UTF-8.
    private func hashField(_ argument: ArraySlice<UInt8>, into writer: inout RESPWriter) -> [UInt8]? {
        storedText(argument, refusal: "ERR hash field is not valid UTF-8: Decide stores a field as a JSON string, which holds text only", into: &writer)
    }
}
