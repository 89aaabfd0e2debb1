import CSQLite
import DecideCore

/// One SQLite connection to a node's store file, and every statement Decide runs on it.
///
/// The file holds two tables:
/// - `entries(name TEXT, element BLOB, ts INTEGER, node BLOB, value BLOB, expires INTEGER,
///   owned INTEGER)`, keyed by (name, element): the newest entry of every key; `value` is NULL
///   for a tombstone, `expires` NULL for a value that never expires (else
///   `Entry.expiresAtMilliseconds`), `owned` 1 for a value its writer owns, else NULL. `ts` is
///   the HLC timestamp with its top bit flipped (`rawValue ^ 1 << 63`), so SQLite's signed
///   integer order is the timestamp order; `node` is the node id's UTF-8 bytes, which SQLite
///   compares as `Version <` does (memcmp, then length).
/// - `meta(key TEXT, value)`: `format` (2; a format-1 store, from before expiring and owned
///   keys, gains the `expires` and `owned` columns when opened), `node_id`, `clock` (the
///   highest timestamp taken or merged, encoded as `ts`).
///
/// Guarantees: `write` applies a group of changes in one transaction, synced to disk
/// (`synchronous=FULL` in WAL mode) before it returns; an upsert keeps the entry that wins
/// under `Entry.wins(over:)`, so replaying any change is idempotent. The connection holds the
/// file exclusively (`locking_mode=EXCLUSIVE`): a second node cannot open it. Not thread-safe:
/// one thread at a time (the opening thread, then the writer thread).
final class SQLiteDatabase: StoreFile {
    let path: String
    private var handle: OpaquePointer?
    private var upsertStatement: OpaquePointer?
    private var deleteStatement: OpaquePointer?
    private var clockStatement: OpaquePointer?
    private var beginStatement: OpaquePointer?
    private var commitStatement: OpaquePointer?
    private var rollbackStatement: OpaquePointer?

    /// 1: entries; 2: with their expiry and owner; 3: with the change feed's records.
    static let format: Int64 = 3
    /// The id of the change feed this file keeps (meta `feed_id`), made with the file (or when
    /// a format 2 file gained the feed).
    private(set) var feedID: UInt64 = 0
    private var feedInsertStatement: OpaquePointer?
    private var feedTrimStatement: OpaquePointer?

    /// Opens (creating when absent) the store at `path` for node `nodeID`: checks that it is
    /// a healthy Decide store of that node, and takes its lock.
    init(path: String, nodeID: String) throws(StorageError) {
        self.path = path
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &opened, flags, nil)
        handle = opened
        guard rc == SQLITE_OK, handle != nil else {
            let reason = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            close()
            throw .unreadable(path: path, reason: reason)
        }
        do throws(StorageError) {
            sqlite3_extended_result_codes(handle, 1)
            // Exclusive before WAL: no shared-memory index, and one connection owns the file.
            try execute("PRAGMA locking_mode=EXCLUSIVE")
            let mode = try queryText("PRAGMA journal_mode=WAL")
            guard mode?.lowercased() == "wal" else {
                throw .unreadable(path: path, reason: "cannot use write-ahead logging (journal_mode is \(mode ?? "unknown"))")
            }
            try execute("PRAGMA synchronous=FULL")
            // 16 MiB of page cache (SQLite's default is 2 MiB): a large group commit or catch-up
            // batch stays in memory until it is written, instead of spilling and re-reading.
            try execute("PRAGMA cache_size=-16384")
            try checkIntegrity()
            try prepareSchema(nodeID: nodeID)
            upsertStatement = try prepare("""
                INSERT INTO entries(name, element, ts, node, value, expires, owned) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)
                ON CONFLICT(name, element) DO UPDATE
                SET ts = excluded.ts, node = excluded.node, value = excluded.value, expires = excluded.expires,
                    owned = excluded.owned
                WHERE excluded.ts > entries.ts
                   OR (excluded.ts = entries.ts AND excluded.node > entries.node)
                   OR (excluded.ts = entries.ts AND excluded.node = entries.node
                       AND excluded.value IS NOT NULL
                       AND (entries.value IS NULL OR excluded.value > entries.value
                            OR (excluded.value = entries.value
                                AND (coalesce(excluded.expires, 9223372036854775807) > coalesce(entries.expires, 9223372036854775807)
                                     OR (coalesce(excluded.expires, 9223372036854775807) = coalesce(entries.expires, 9223372036854775807)
                                         AND excluded.owned IS NOT NULL AND entries.owned IS NULL)))))
                """)
            deleteStatement = try prepare("""
                DELETE FROM entries WHERE name = ?1 AND element = ?2
                AND (ts < ?3 OR (ts = ?3 AND node <= ?4))
                """)
            clockStatement = try prepare(
                "UPDATE meta SET value = ?1 WHERE key = 'clock' AND value < ?1")
            feedInsertStatement = try prepare("INSERT OR REPLACE INTO feed(position, record) VALUES(?1, ?2)")
            feedTrimStatement = try prepare("DELETE FROM feed WHERE position < ?1")
            beginStatement = try prepare("BEGIN")
            commitStatement = try prepare("COMMIT")
            rollbackStatement = try prepare("ROLLBACK")
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Finalizes every statement and closes the connection (checkpointing the log). Idempotent.
    func close() {
        for statement in [upsertStatement, deleteStatement, clockStatement, beginStatement, commitStatement, rollbackStatement,
                          feedInsertStatement, feedTrimStatement] {
            sqlite3_finalize(statement)
        }
        upsertStatement = nil; deleteStatement = nil; clockStatement = nil
        feedInsertStatement = nil; feedTrimStatement = nil
        beginStatement = nil; commitStatement = nil; rollbackStatement = nil
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    // MARK: start-up

    /// `PRAGMA quick_check`: reads every page, so a truncated or scribbled file is refused
    /// before anything is loaded from it.
    private func checkIntegrity() throws(StorageError) {
        let statement = try prepare("PRAGMA quick_check")
        defer { sqlite3_finalize(statement) }
        var problems: [String] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw failure(rc, "integrity check") }
            let line = text(statement, 0) ?? ""
            if line != "ok" && problems.count < 3 { problems.append(line) }
        }
        if !problems.isEmpty { throw .corrupt(path: path, reason: problems.joined(separator: "; ")) }
    }

    /// Creates the tables in a new file; in an existing one, checks the format and the node id.
    private func prepareSchema(nodeID: String) throws(StorageError) {
        let tables = try queryTexts("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        if tables.isEmpty {
            try execute("BEGIN")
            do throws(StorageError) {
                try execute("CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID")
                try execute("""
                    CREATE TABLE entries(name TEXT NOT NULL, element BLOB NOT NULL, ts INTEGER NOT NULL,
                                         node BLOB NOT NULL, value BLOB, expires INTEGER, owned INTEGER,
                                         PRIMARY KEY(name, element)) WITHOUT ROWID
                    """)
                try createFeed()
                let insert = try prepare("INSERT INTO meta(key, value) VALUES(?1, ?2)")
                defer { sqlite3_finalize(insert) }
                for (key, value) in [("format", Self.format), ("clock", Self.encode(HLCTimestamp.zero))] {
                    bindText(insert, 1, key)
                    sqlite3_bind_int64(insert, 2, value)
                    try stepDone(insert, "creating the store")
                }
                bindText(insert, 1, "node_id")
                bindText(insert, 2, nodeID)
                try stepDone(insert, "creating the store")
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
            try readFeedID()
            return
        }
        guard tables.contains("entries"), tables.contains("meta") else {
            throw .corrupt(path: path, reason: "not a Decide store: tables \(tables.joined(separator: ", "))")
        }
        var format = try queryInteger("SELECT value FROM meta WHERE key = 'format'")
        if format == 1 {
            // Before expiring and owned keys: every stored value never expires and is shared (NULL).
            try execute("BEGIN")
            do throws(StorageError) {
                try execute("ALTER TABLE entries ADD COLUMN expires INTEGER")
                try execute("ALTER TABLE entries ADD COLUMN owned INTEGER")
                try execute("UPDATE meta SET value = \(Self.format) WHERE key = 'format'")
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
            format = 2
        }
        if format == 2 {
            // Before the change feed: its table, and a feed id of its own from now on.
            try execute("BEGIN")
            do throws(StorageError) {
                try createFeed()
                try execute("UPDATE meta SET value = \(Self.format) WHERE key = 'format'")
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
            format = Self.format
        }
        guard format == Self.format else {
            throw .corrupt(path: path, reason: "store format \(format.map(String.init) ?? "missing"); this build reads format \(Self.format)")
        }
        guard let stored = try queryText("SELECT value FROM meta WHERE key = 'node_id'") else {
            throw .corrupt(path: path, reason: "no node id in meta")
        }
        guard stored == nodeID else {
            throw .nodeIDMismatch(path: path, stored: stored, configured: nodeID)
        }
        try readFeedID()
    }

    /// Inside a transaction: the feed's table and a fresh feed id in meta.
    private func createFeed() throws(StorageError) {
        try execute("CREATE TABLE feed(position INTEGER PRIMARY KEY NOT NULL, record BLOB NOT NULL)")
        try insertNewFeedID()
    }

    /// Inside a transaction: a fresh feed id in meta, where none is.
    private func insertNewFeedID() throws(StorageError) {
        try execute("INSERT INTO meta(key, value) VALUES('feed_id', \(Int64(bitPattern: ChangeFeedID.random().rawValue)))")
    }

    func startNewFeed() throws(StorageError) {
        try execute("BEGIN")
        do throws(StorageError) {
            try execute("DELETE FROM feed")
            try execute("DELETE FROM meta WHERE key = 'feed_id'")
            try insertNewFeedID()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        try readFeedID()
    }

    private func readFeedID() throws(StorageError) {
        guard let stored = try queryInteger("SELECT value FROM meta WHERE key = 'feed_id'"), stored != 0 else {
            throw .corrupt(path: path, reason: "no feed id in meta")
        }
        feedID = UInt64(bitPattern: stored)
    }

    /// Calls `body` with every stored feed record and its position, in position order. Refuses
    /// (as corrupt) a record too short to be one or whose length disagrees with its row.
    func loadFeed(_ body: (UInt64, UnsafeRawBufferPointer) -> Void) throws(StorageError) {
        let statement = try prepare("SELECT position, record FROM feed ORDER BY position")
        defer { sqlite3_finalize(statement) }
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw failure(rc, "reading the change feed") }
            let position = sqlite3_column_int64(statement, 0)
            let count = Int(sqlite3_column_bytes(statement, 1))
            guard position >= 1, count >= 5, let bytes = sqlite3_column_blob(statement, 1) else {
                throw .corrupt(path: path, reason: "feed row \(position) is not a change feed record")
            }
            let record = UnsafeRawBufferPointer(start: bytes, count: count)
            guard Int(UInt32(littleEndian: record.loadUnaligned(as: UInt32.self))) == count else {
                throw .corrupt(path: path, reason: "feed row \(position)'s length disagrees with its record")
            }
            body(UInt64(position), record)
        }
    }

    /// Calls `body` with every stored entry; returns the stored clock. Refuses (as corrupt) any
    /// row a Decide store never holds.
    func load(_ body: (StateKey, Entry) -> Void) throws(StorageError) -> HLCTimestamp {
        guard let clock = try queryInteger("SELECT value FROM meta WHERE key = 'clock'") else {
            throw .corrupt(path: path, reason: "no clock in meta")
        }
        let statement = try prepare("SELECT name, element, ts, node, value, expires, owned FROM entries")
        defer { sqlite3_finalize(statement) }
        var row = 0
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw failure(rc, "reading entries") }
            row += 1
            guard sqlite3_column_type(statement, 0) == SQLITE_TEXT,
                  let name = String(validating: bytes(statement, 0), as: UTF8.self),
                  sqlite3_column_type(statement, 1) == SQLITE_BLOB,
                  sqlite3_column_type(statement, 2) == SQLITE_INTEGER,
                  sqlite3_column_type(statement, 3) == SQLITE_BLOB,
                  let node = String(validating: bytes(statement, 3), as: UTF8.self), !node.isEmpty
            else {
                throw .corrupt(path: path, reason: "entry row \(row) has a column of the wrong type")
            }
            let valueType = sqlite3_column_type(statement, 4)
            guard valueType == SQLITE_BLOB || valueType == SQLITE_NULL else {
                throw .corrupt(path: path, reason: "entry row \(row) has a value that is not a blob")
            }
            let expiresType = sqlite3_column_type(statement, 5)
            let expires = sqlite3_column_int64(statement, 5)
            guard expiresType == SQLITE_NULL
                    || (expiresType == SQLITE_INTEGER && valueType == SQLITE_BLOB
                        && expires >= 1 && UInt64(expires) <= HLCTimestamp.maxPhysicalMilliseconds) else {
                throw .corrupt(path: path, reason: "entry row \(row) has an expiry that is not an instant of a value")
            }
            let ownedType = sqlite3_column_type(statement, 6)
            guard ownedType == SQLITE_NULL || (ownedType == SQLITE_INTEGER && valueType == SQLITE_BLOB && sqlite3_column_int64(statement, 6) == 1) else {
                throw .corrupt(path: path, reason: "entry row \(row) has an owned mark that is not 1 on a value")
            }
            let version = Version(timestamp: Self.decode(sqlite3_column_int64(statement, 2)), node: node)
            let value = valueType == SQLITE_NULL ? nil : bytes(statement, 4)
            body(StateKey(name: name, element: bytes(statement, 1)),
                 Entry(version: version, value: value, expiresAtMilliseconds: expiresType == SQLITE_NULL ? nil : UInt64(expires),
                       ownedByWriter: ownedType != SQLITE_NULL))
        }
        return Self.decode(clock)
    }

    // MARK: group commit

    /// Applies `changes` and raises the stored clock to `clock`, in one transaction synced to
    /// disk. On failure the transaction is rolled back and nothing of it is stored.
    func write(_ changes: [(key: StateKey, change: StoreFileChange)], clock: HLCTimestamp, feed: FeedRows) throws(StorageError) {
        try run(beginStatement, "beginning a transaction")
        do throws(StorageError) {
            for (key, change) in changes {
                if let version = change.removeUpTo {
                    let statement = deleteStatement
                    bindText(statement, 1, key.name)
                    key.withElementBytes { bindBlob(statement, 2, $0) }
                    sqlite3_bind_int64(statement, 3, Self.encode(version.timestamp))
                    bindBlob(statement, 4, version.node)
                    try run(statement, "deleting a tombstone")
                }
                if let entry = change.upsert {
                    let statement = upsertStatement
                    bindText(statement, 1, key.name)
                    key.withElementBytes { bindBlob(statement, 2, $0) }
                    sqlite3_bind_int64(statement, 3, Self.encode(entry.version.timestamp))
                    bindBlob(statement, 4, entry.version.node)
                    if let value = entry.packedValue { value.withUnsafeBytes { bindBlob(statement, 5, $0) } } else { sqlite3_bind_null(statement, 5) }
                    if let expires = entry.expiresAtMilliseconds {
                        sqlite3_bind_int64(statement, 6, Int64(expires))
                    } else {
                        sqlite3_bind_null(statement, 6)
                    }
                    if entry.ownedByWriter { sqlite3_bind_int64(statement, 7, 1) } else { sqlite3_bind_null(statement, 7) }
                    try run(statement, "writing an entry")
                }
            }
            try feed.forEach { position, record throws(StorageError) in
                sqlite3_bind_int64(feedInsertStatement, 1, Int64(position))
                bindBlob(feedInsertStatement, 2, record)
                try run(feedInsertStatement, "writing a change feed record")
            }
            if feed.trimBelow > 0 {
                sqlite3_bind_int64(feedTrimStatement, 1, Int64(feed.trimBelow))
                try run(feedTrimStatement, "trimming the change feed")
            }
            sqlite3_bind_int64(clockStatement, 1, Self.encode(clock))
            try run(clockStatement, "writing the clock")
            try run(commitStatement, "committing")
        } catch {
            sqlite3_reset(rollbackStatement)
            sqlite3_step(rollbackStatement)
            sqlite3_reset(rollbackStatement)
            throw error
        }
    }

    // MARK: helpers

    /// The order-preserving map from an unsigned timestamp to SQLite's signed integers.
    static func encode(_ timestamp: HLCTimestamp) -> Int64 {
        Int64(bitPattern: timestamp.rawValue ^ (1 << 63))
    }

    static func decode(_ stored: Int64) -> HLCTimestamp {
        HLCTimestamp(rawValue: UInt64(bitPattern: stored) ^ (1 << 63))
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private func bindText(_ statement: OpaquePointer?, _ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { buffer in
            if let base = buffer.baseAddress, buffer.count > 0 {
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    _ = sqlite3_bind_text(statement, index, $0, Int32(buffer.count), Self.transient)
                }
            } else {
                _ = sqlite3_bind_text(statement, index, "", 0, Self.transient)
            }
        }
    }

    private func bindBlob(_ statement: OpaquePointer?, _ index: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { bindBlob(statement, index, $0) }
    }

    private func bindBlob(_ statement: OpaquePointer?, _ index: Int32, _ buffer: UnsafeRawBufferPointer) {
        if let base = buffer.baseAddress, buffer.count > 0 {
            _ = sqlite3_bind_blob(statement, index, base, Int32(buffer.count), Self.transient)
        } else {
            _ = sqlite3_bind_zeroblob(statement, index, 0)  // a NULL pointer would bind NULL
        }
    }

    /// Binds the UTF-8 bytes of `text` as a blob (node ids compare as bytes).
    private func bindBlob(_ statement: OpaquePointer?, _ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { buffer in
            if let base = buffer.baseAddress, buffer.count > 0 {
                _ = sqlite3_bind_blob(statement, index, base, Int32(buffer.count), Self.transient)
            } else {
                _ = sqlite3_bind_zeroblob(statement, index, 0)
            }
        }
    }

    private func bytes(_ statement: OpaquePointer?, _ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let base = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }

    private func text(_ statement: OpaquePointer?, _ column: Int32) -> String? {
        guard sqlite3_column_type(statement, column) == SQLITE_TEXT,
              let pointer = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: pointer)
    }

    private func prepare(_ sql: String) throws(StorageError) -> OpaquePointer? {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK else {
            sqlite3_finalize(statement)
            throw failure(rc, "preparing \(sql.prefix(40))")
        }
        return statement
    }

    /// Steps a prepared statement that returns no rows, then resets it for the next use.
    private func run(_ statement: OpaquePointer?, _ context: String) throws(StorageError) {
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try stepDone(statement, context)
    }

    private func stepDone(_ statement: OpaquePointer?, _ context: String) throws(StorageError) {
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else {
            sqlite3_reset(statement)
            throw failure(rc, context)
        }
        sqlite3_reset(statement)
    }

    private func execute(_ sql: String) throws(StorageError) {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        try stepDone(statement, sql)
    }

    private func queryTexts(_ sql: String) throws(StorageError) -> [String] {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        var result: [String] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return result }
            guard rc == SQLITE_ROW else { throw failure(rc, sql) }
            if let text = text(statement, 0) { result.append(text) }
        }
    }

    private func queryText(_ sql: String) throws(StorageError) -> String? {
        try queryTexts(sql).first
    }

    private func queryInteger(_ sql: String) throws(StorageError) -> Int64? {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        let rc = sqlite3_step(statement)
        if rc == SQLITE_DONE { return nil }
        guard rc == SQLITE_ROW else { throw failure(rc, sql) }
        guard sqlite3_column_type(statement, 0) == SQLITE_INTEGER else { return nil }
        return sqlite3_column_int64(statement, 0)
    }

    /// The typed error for SQLite result code `rc`: damage is `corrupt`, a held lock is
    /// `inUse`, anything else `unreadable` (at start-up) — `write`'s caller turns errors into
    /// `writeFailed`.
    private func failure(_ rc: Int32, _ context: String) -> StorageError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        switch rc & 0xff {
        case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT:
            return .corrupt(path: path, reason: "\(message) (\(context))")
        case SQLITE_BUSY, SQLITE_LOCKED:
            return .inUse(path: path)
        default:
            return .unreadable(path: path, reason: "\(message) (\(context), SQLite code \(rc))")
        }
    }
}
