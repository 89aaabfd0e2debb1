import Decide
import DecideCore

/// The kinds of key laid out on a collection that a plain key may name beside a string or
/// counter: a set (`KeySetChange`), a hash (`KeyHashChange`) or a sorted set
/// (`KeySortedSetChange`). A key holds one kind: a command of another kind answers WRONGTYPE,
/// and SET or DEL over the key replaces it.
enum KeyKind: Equatable {
    case set, hash, sortedSet

    /// What TYPE answers.
    var typeName: String {
        switch self {
        case .set: "set"
        case .hash: "hash"
        case .sortedSet: "zset"
        }
    }

    /// The kind plain key `key` names as `read` sees it (its decision's writes applied), nil
    /// for none or for a key with an element. O(1) for a name that never stored a set, hash or
    /// sorted set.
    static func of(_ read: StorageReader, _ key: StateKey) -> KeyKind? {
        first(read, key, skipping: nil)
    }

    /// Whether plain key `key` holds, as `access` reads it, a kind other than `kind`: a string
    /// or counter value, or another collection kind. What a set, hash or sorted set command
    /// answers WRONGTYPE for.
    static func holdsOther(than kind: KeyKind, _ access: KeyAccess, _ key: StateKey) -> Bool {
        if access.entry(key)?.value != nil { return true }
        return holdsOther(than: kind, access.read, key)
    }

    /// Whether plain key `key` names, as `read` sees it, a collection kind other than `kind`.
    /// Only the other kinds are looked for: a command on a large hash does not test whether it
    /// is one.
    static func holdsOther(than kind: KeyKind, _ read: StorageReader, _ key: StateKey) -> Bool {
        first(read, key, skipping: kind) != nil
    }

    /// The first kind plain key `key` names, `skipped` left unlooked-for: one lookup of the
    /// name says which kinds may be there, and only those are checked for a live element.
    private static func first(_ read: StorageReader, _ key: StateKey, skipping skipped: KeyKind?) -> KeyKind? {
        guard key.elementCount == 0 else { return nil }
        let may = read.mayHoldKinds(ofCollectionNamed: key.name)
        if skipped != .set, may.set, read.hasMembers(ofSetNamed: key.name) { return .set }
        if skipped != .hash, may.hash, read.hasFields(ofHashNamed: key.name) { return .hash }
        if skipped != .sortedSet, may.sortedSet, read.hasScoredMembers(ofSortedSetNamed: key.name) { return .sortedSet }
        return nil
    }
}
