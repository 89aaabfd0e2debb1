import Foundation

/// The file that remembers, across restarts, when a node last finished an anti-entropy walk
/// (`Replicator.Configuration.syncMarkerPath`): one decimal number of milliseconds.
///
/// Guarantees: a write replaces the file whole (temporary file, then rename), so a crash leaves
/// the old value or the new one; a missing file reads as nil; a file that is not a number reads
/// as 0 ("long ago": the node treats itself as stale, the safe reading).
struct SyncMarker: Sendable {
    let path: String

    func read() -> UInt64? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return UInt64(text) ?? 0
    }

    func write(_ milliseconds: UInt64) throws {
        let temporary = path + ".tmp"
        try Data("\(milliseconds)\n".utf8).write(to: URL(fileURLWithPath: temporary))
        if rename(temporary, path) != 0 {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
    }
}
