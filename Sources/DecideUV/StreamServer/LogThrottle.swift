import Logging

/// Bounds how often one kind of log line is written: at most `maxLinesPerInterval` lines per
/// `intervalMilliseconds` for each message; the lines past that are counted, and the next line
/// written carries the count as `suppressed=N`. A thousand hostile clients refused in one
/// second write a handful of lines that say how many there were, not a thousand.
///
/// One thread only (a stream server's loop owns one for its refusals, the client endpoint's
/// service one for its closes). The peer port's refusals have their own, `RefusalLog`, which
/// also writes the count after a quiet interval on a timer.
package struct LogThrottle {
    /// Lines of one message written per interval before the rest are counted.
    package var maxLinesPerInterval = 10
    /// The interval's length.
    package var intervalMilliseconds: UInt64 = 1_000

    package init() {}

    private struct Window {
        var startMilliseconds: UInt64
        var written = 0
        var suppressed = 0
    }

    /// One window per message, bounded by the messages the code logs through it (a handful of
    /// string literals), not by what clients send.
    private var windows: [String: Window] = [:]

    /// Logs `message` at `level` unless its window is full (then counts it). `now` is the
    /// caller's clock in milliseconds.
    package mutating func log(_ logger: Logger, _ level: Logger.Level, _ message: String, metadata: Logger.Metadata,
                      now: UInt64) {
        var window = windows[message] ?? Window(startMilliseconds: now)
        if now &- window.startMilliseconds >= intervalMilliseconds {
            window.startMilliseconds = now
            window.written = 0
        }
        if window.written >= maxLinesPerInterval {
            window.suppressed += 1
            windows[message] = window
            return
        }
        var metadata = metadata
        if window.suppressed > 0 {
            metadata["suppressed"] = "\(window.suppressed)"
            window.suppressed = 0
        }
        window.written += 1
        windows[message] = window
        logger.log(level: level, "\(message)", metadata: metadata)
    }
}
