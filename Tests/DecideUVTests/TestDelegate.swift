import Decide
import Foundation
import Logging
@testable import DecideUV

/// One event a transport reported.
enum TransportEvent: Sendable {
    case connected(ConnectionID, PeerInfo)
    case received(ConnectionID, [UInt8])
    case overLimit(ConnectionID)
    case disconnected(ConnectionID, DisconnectReason)
    case failed(String, DisconnectReason)
}

/// Records every delegate call; tests wait on it with deadlines (never bare sleeps).
final class TestDelegate: TransportDelegate, @unchecked Sendable {
    private let condition = NSCondition()
    private var recorded: [TransportEvent] = []
    private var received: [ConnectionID: [[UInt8]]] = [:]
    /// For each `didFinishReading`, how many frames the link had delivered by then.
    private var finishedReads: [ConnectionID: [Int]] = [:]

    var events: [TransportEvent] { condition.lock(); defer { condition.unlock() }; return recorded }

    private func record(_ event: TransportEvent) {
        condition.lock()
        if case .received(let id, let frame) = event {
            received[id, default: []].append(frame)   // kept apart: the 10k test would flood `recorded`
        } else {
            recorded.append(event)
        }
        condition.broadcast()
        condition.unlock()
    }

    func transport(_ transport: any Transport, didConnect connection: ConnectionID, peer: PeerInfo) {
        record(.connected(connection, peer))
    }
    func transport(_ transport: any Transport, didReceive frame: UnsafeRawBufferPointer, from connection: ConnectionID) {
        record(.received(connection, Array(frame)))
    }
    func transport(_ transport: any Transport, didFinishReading connection: ConnectionID) {
        condition.lock()
        finishedReads[connection, default: []].append(received[connection]?.count ?? 0)
        condition.broadcast()
        condition.unlock()
    }

    /// The frame counts at each end of a read on `connection`, once a read ended after
    /// `frames` frames (or the timeout passed).
    func readEnds(on connection: ConnectionID, through frames: Int, timeoutSeconds: Double = 5) -> [Int] {
        waitUntil(timeoutSeconds) { (finishedReads[connection]?.last ?? 0) >= frames }
        return readEndsSoFar(on: connection)
    }

    private func readEndsSoFar(on connection: ConnectionID) -> [Int] {
        condition.lock(); defer { condition.unlock() }
        return finishedReads[connection] ?? []
    }

    /// Waits, at most `timeoutSeconds`, until `done` (read under the lock) holds.
    private func waitUntil(_ timeoutSeconds: Double, _ done: () -> Bool) {
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        condition.lock()
        defer { condition.unlock() }
        while !done() {
            if !condition.wait(until: deadline) { break }
        }
    }

    func transport(_ transport: any Transport, outboundLimitExceeded connection: ConnectionID) {
        record(.overLimit(connection))
    }
    func transport(_ transport: any Transport, didDisconnect connection: ConnectionID, reason: DisconnectReason) {
        record(.disconnected(connection, reason))
    }
    func transport(_ transport: any Transport, didFailToConnect address: String, reason: DisconnectReason) {
        record(.failed(address, reason))
    }

    /// Waits until `predicate` holds over the recorded events, at most `timeoutSeconds`.
    /// Returns its last value (nil on timeout).
    func wait<T>(timeoutSeconds: Double = 5, _ predicate: ([TransportEvent]) -> T?) -> T? {
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let value = predicate(recorded) { return value }
            if !condition.wait(until: deadline) { return predicate(recorded) }
        }
    }

    /// Waits until `connection` has received at least `count` frames; returns them (maybe fewer on timeout).
    func waitForFrames(on connection: ConnectionID, count: Int, timeoutSeconds: Double = 5) -> [[UInt8]] {
        waitUntil(timeoutSeconds) { (received[connection]?.count ?? 0) >= count }
        return frames(from: connection)
    }

    /// Frames received from `connection` so far.
    func frames(from connection: ConnectionID) -> [[UInt8]] {
        condition.lock(); defer { condition.unlock() }
        return received[connection] ?? []
    }

    /// The first connection reported up, waiting for it.
    func waitForConnection(timeoutSeconds: Double = 5) -> (ConnectionID, PeerInfo)? {
        wait(timeoutSeconds: timeoutSeconds) { events in
            for case .connected(let id, let peer) in events { return (id, peer) }
            return nil
        }
    }

    /// The first connect failure, waiting for it.
    func waitForFailure(timeoutSeconds: Double = 5) -> DisconnectReason? {
        wait(timeoutSeconds: timeoutSeconds) { events in
            for case .failed(_, let reason) in events { return reason }
            return nil
        }
    }

    /// The disconnect of `connection`, waiting for it.
    func waitForDisconnect(_ connection: ConnectionID, timeoutSeconds: Double = 5) -> DisconnectReason? {
        wait(timeoutSeconds: timeoutSeconds) { events in
            for case .disconnected(let id, let reason) in events where id == connection { return reason }
            return nil
        }
    }
}

/// Collects log lines of one logger, thread-safe.
final class LogCapture: @unchecked Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
        var text: String { "\(message) \(metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))" }
    }
    private let condition = NSCondition()
    private var stored: [Line] = []
    var lines: [Line] { condition.lock(); defer { condition.unlock() }; return stored }

    func append(_ line: Line) {
        condition.lock()
        stored.append(line)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until `predicate` holds over the lines, at most `timeoutSeconds`; its last value.
    func wait<T>(timeoutSeconds: Double = 5, _ predicate: ([Line]) -> T?) -> T? {
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let value = predicate(stored) { return value }
            if !condition.wait(until: deadline) { return predicate(stored) }
        }
    }

    /// Waits for the first link-end line, then briefly for a second one that must not come.
    func waitForLinkEndLines() -> [Line] {
        _ = wait { lines in Self.linkEnds(lines).isEmpty ? nil : true }
        return Self.linkEnds(lines)
    }

    private static func linkEnds(_ lines: [Line]) -> [Line] {
        lines.filter { ["link refused", "link closed", "connect failed"].contains($0.message) }
    }

    /// A logger writing here (and nowhere else).
    func logger(_ label: String) -> Logger {
        Logger(label: label) { _ in CaptureHandler(capture: self) }
    }

    /// Lines about links ending or being refused: the "one clear log line" per bad connection.
    var linkEndLines: [Line] { Self.linkEnds(lines) }
}

struct CaptureHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        capture.append(.init(level: event.level, message: "\(event.message)",
                             metadata: all.mapValues { "\($0)" }))
    }
}
