import Decide
import DecideCore

/// The lifetime of a set, hash or sorted set as a whole (EXPIRE of its key), as Redis gives
/// one to a key of any kind (docs/operations.md, "Lifetimes of sets, hashes and sorted sets";
/// why this technique: docs/design/0004-collection-lifetimes.md).
///
/// How: the lifetime is a marker element of the key's collection (`CollectionLifetime`, id
/// `FF 6C 01 00`), expiring at the key's instant; and every
/// element of the key (a set's member, a hash's field, a sorted set's member) is written again
/// to expire at that same instant, so on every node the key's elements and its marker expire
/// together, by the expiry every entry already has. A later SADD, HSET or ZADD of the key, on a
/// node that holds the marker, writes its elements to expire then too.
///
/// Each element is written as its kind writes it: a set's member gets a fresh dot (an insert,
/// so a concurrent SREM elsewhere that had not seen it leaves the member in until the instant,
/// as add-wins says), a field or sorted set member its value again (last-writer-wins), a
/// counter field's slots as a counter's are (`StorageWriter.giveLifetime`). What a
/// node adds concurrently with the EXPIRE, without having seen it, keeps no lifetime: an
/// observed expiry, as a remove is observed.
enum KeyLifetime {
    /// The marker key of plain key `key` (`CollectionLifetime`).
    static func marker(of key: StateKey) -> StateKey {
        CollectionLifetime.marker(ofCollectionNamed: key.name)
    }

    /// When the set, hash or sorted set plain key `key` names expires, as `access` reads it:
    /// nil when it has no lifetime.
    static func instant(_ access: KeyAccess, _ key: StateKey) -> UInt64? {
        guard access.read.holdsCompounds else { return nil }
        return access.read.lifetime(ofCollectionNamed: key.name)
    }

    /// The expiry a new element of `key` (of kind `kind`) is written with: the key's lifetime
    /// when it holds that kind now; none for a key that holds nothing (a stale marker, left by
    /// a key emptied before its instant, is deleted: a new key starts without a lifetime, as
    /// in Redis).
    static func inherited(_ access: inout KeyAccess, _ key: StateKey, kind: KeyKind) -> WriteExpiry {
        guard let instant = instant(access, key) else { return .never }
        guard access.kind(key) == kind else {
            access.set(nil, into: marker(of: key), resettingCounter: false)
            return .never
        }
        return .at(milliseconds: instant)
    }

    /// Gives the set, hash or sorted set `key` (of kind `kind`) the lifetime `expiry` (`.never`:
    /// none, PERSIST): the marker, and every element written again with it.
    static func set(_ expiry: WriteExpiry, of key: StateKey, kind: KeyKind, _ access: inout KeyAccess) {
        if expiry == .never {
            access.set(nil, into: marker(of: key), resettingCounter: false)
        } else {
            access.set(CollectionLifetime.value, into: marker(of: key), expiry: expiry, resettingCounter: false)
        }
        let name = key.name
        switch kind {
        case .set:
            for member in access.read.members(ofSetNamed: name) { access.write.insert(member: member, intoSetNamed: name, expiry: expiry) }
        case .hash:
            for (field, value) in access.read.plainFields(ofHashNamed: name) {
                access.set(value, into: field, expiry: expiry, resettingCounter: false)
            }
            // Counter fields (HINCRBY's) as a counter takes one: the slots this node may write
            // again, every other node following for its own from the marker.
            access.write.giveLifetime(expiry, toCounterFieldsOfHashNamed: name)
        case .sortedSet:
            for item in access.read.scoredMembers(ofSortedSetNamed: name) {
                access.write.add(member: item.member, score: item.score, intoSortedSetNamed: name, expiry: expiry)
            }
        }
    }
}
