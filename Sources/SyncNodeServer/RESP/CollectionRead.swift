import Decide
import DecideCore
import DecideRESP

/// A read command of a set, hash or sorted set (SMEMBERS, HGET, ZRANGE, …) made ready to run:
/// its key, the kind it reads, and what writes its reply given the reader and what a key holds.
/// Alone it runs against one snapshot (`RESPService.collectionRead`); in a MULTI block against
/// the block's access, so it sees the block's earlier writes. Either way a key holding another
/// kind (a string, a counter, another collection kind) answers WRONGTYPE before `run`.
struct CollectionRead: Sendable {
    let key: StateKey
    let kind: KeyKind
    /// Writes the reply: given the reader and what a key holds (a block's access answers with
    /// the block's own writes).
    let run: @Sendable (StorageReader, (StateKey) -> PackedBytes?, inout RESPWriter) -> Void

    /// Whether `command` is a collection read.
    static func reads(_ command: RESPCommand) -> Bool {
        switch command {
        case .smembers, .sismember, .smismember, .scard,
             .hget, .hmget, .hgetall, .hkeys, .hvals, .hlen, .hexists,
             .zscore, .zmscore, .zcard, .zcount, .zrank, .zrevrank, .zrange, .zrangebyscore, .zrevrange, .zrevrangebyscore:
            return true
        default:
            return false
        }
    }
}

extension RESPService {
    /// The collection read `command` asks for (`CollectionRead.reads`), or nil (with the error
    /// written) when its arguments are wrong.
    func prepareCollectionRead(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) -> CollectionRead? {
        switch command {
        case .smembers, .sismember, .smismember, .scard: return prepareSetRead(command, arguments, into: &writer)
        case .hget, .hmget, .hgetall, .hkeys, .hvals, .hlen, .hexists: return prepareHashRead(command, arguments, into: &writer)
        default: return prepareSortedSetRead(command, arguments, into: &writer)
        }
    }

    /// A collection read alone: from one snapshot.
    func collectionRead(_ command: RESPCommand, _ arguments: [ArraySlice<UInt8>], into writer: inout RESPWriter) {
        guard let read = prepareCollectionRead(command, arguments, into: &writer) else { return }
        node.read { reader in
            let other = KeyCounterChange.value(reader, read.key) != nil || KeyKind.holdsOther(than: read.kind, reader, read.key)
            guard !other else { return writer.error(KeySetChange.wrongType) }
            read.run(reader, { reader.entry($0)?.packedValue }, &writer)
        }
    }
}
