import SyncNodeServer
import Foundation
import Logging
import Synchronization

/// A swift-log handler that writes one line per event to stderr:
///
///     2025-01-31T12:00:00.123Z info     [a] peer joined address=127.0.0.1:7402 peer=b
///
/// timestamp (UTC, ms), level, the node id in brackets, the message, then the metadata sorted
/// by key. Values with spaces are quoted. Lines from several threads never interleave.
struct CompactLogHandler: LogHandler {
    private static let output = Mutex(())

    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, level: Logger.Level) {
        logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        let node = all.removeValue(forKey: "node").map { "[\($0)] " } ?? ""
        var line = Self.timestamp() + " " + event.level.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0) + node
        line += "\(event.message)"
        for key in all.keys.sorted() {
            line += " \(key)=\(Self.quotedIfNeeded("\(all[key]!)"))"
        }
        line += "\n"
        Self.output.withLock { _ in
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    private static func quotedIfNeeded(_ text: String) -> String {
        guard text.isEmpty || text.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }) else { return text }
        return JSONValue.quoted(text)
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = time_t(now.tv_sec)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                      Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(now.tv_nsec / 1_000_000))
    }
}
