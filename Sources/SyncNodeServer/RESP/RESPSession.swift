import DecideCore
import DecideRESP
import DecideUV

/// One client of the Redis-protocol endpoint: its parser, its protocol version and name, its
/// subscriptions, and a reply that is still being written. Lives on the server's loop thread
/// only, from accept to close.
///
/// The fields every request touches skip the dynamic exclusivity checks of class properties:
/// one thread uses them, and no code holding an access to one calls back into code that
/// touches it (the service's request loop, `RESPService.process`).
final class RESPSession {
    let connection: UVStreamServer.Connection
    @exclusivity(unchecked) var parser: RESPRequestParser
    /// Replies of the commands handled now; swapped with `connection.output` around each batch.
    @exclusivity(unchecked) var writer = RESPWriter()
    /// The array `RESPService.process` parses each command's arguments into, kept for its
    /// storage (empty between calls).
    @exclusivity(unchecked) var arguments: [ArraySlice<UInt8>] = []
    @exclusivity(unchecked) var authenticated: Bool
    var name: String?
    var libraryName: String?
    var libraryVersion: String?
    /// Exact channels and glob patterns this client subscribed to, in subscription order.
    @exclusivity(unchecked) var channels: [[UInt8]] = []
    var channelSet: Set<[UInt8]> = []
    @exclusivity(unchecked) var patterns: [[UInt8]] = []
    /// `patterns` compiled once at PSUBSCRIBE, in the same order, and as a set for lookups.
    @exclusivity(unchecked) var compiledPatterns: [RESPGlob] = []
    var patternSet: Set<[UInt8]> = []
    /// A command answered off the loop, or a long reply written as the socket drains: later
    /// commands wait.
    @exclusivity(unchecked) var busy = false
    var dump: DumpCursor?
    /// A WAIT is pending: ending the input closes the session then, unanswered.
    var waitsForAcknowledgements = false
    /// A DECIDE.CHANGES BLOCK is pending (`FeedBlock`): ending the input closes the session
    /// then, unanswered, as for WAIT.
    var blocksOnFeed = false
    /// That DECIDE.CHANGES BLOCK, let go of when the connection closes.
    var feedBlock: FeedBlock?
    /// QUIT or a protocol error: nothing more is read or answered.
    @exclusivity(unchecked) var finished = false
    /// Its connection's `didClose` came: nothing of it is charged any more.
    var closed = false
    /// The commands received since MULTI, run by EXEC as one decision (nil: no block open).
    @exclusivity(unchecked) var block: QueuedBlock?
    /// Its writes waiting in the service's turn batch (`WriteBatch`), answered when that commits.
    @exclusivity(unchecked) var waitingWrites = 0
    let createdMilliseconds: UInt64
    @exclusivity(unchecked) var commandsProcessed: UInt64 = 0
    /// When it last sent bytes (the idle timeout's clock; kept only while there is one).
    @exclusivity(unchecked) var lastReadMilliseconds: UInt64
    /// The bytes `RESPService.charge` last counted for it (`heldBytes`), in the service's total.
    @exclusivity(unchecked) var chargedBytes = 0
    /// Bytes its channel and pattern names hold, each with `RESPService.subscriptionOverheadBytes`.
    @exclusivity(unchecked) var subscriptionBytes = 0
    /// Since when its unwritten replies have stood above half the read pause without shrinking
    /// below `stallMarkBytes` and without a command run (nil: they do not).
    var stallSinceMilliseconds: UInt64?
    var stallMarkBytes = 0
    /// `commandsProcessed` at that mark: a command run since is progress too.
    var stallMarkCommands: UInt64 = 0
    /// Closed by a bound (`RESPService.evict`): when its connection is closed even if the
    /// error it was sent is still unwritten.
    var forceCloseAtMilliseconds: UInt64?

    /// A dump reply in progress: the snapshot, where it stands.
    struct DumpCursor {
        var entries: [KeyedEntry]
        /// When the dump was taken: entries expired by then say so.
        let now: UInt64
        var index = 0
    }

    init(connection: UVStreamServer.Connection, limits: RESPLimits, authenticated: Bool, now: UInt64) {
        self.connection = connection
        self.parser = RESPRequestParser(limits: limits)
        self.authenticated = authenticated
        self.createdMilliseconds = now
        self.lastReadMilliseconds = now
    }

    /// What this client holds in memory now, in bytes: its parser's buffer (partial requests
    /// and pipelined ones not yet run), its replies not yet written (queued and handed to the
    /// socket), its subscriptions' names, and the arguments kept by its open MULTI block. One
    /// figure for every per-client bound (`RESPService.charge`).
    var heldBytes: Int {
        parser.storedByteCount + writer.bytes.count + connection.output.count + connection.bytesInFlight
            + subscriptionBytes + (block?.argumentBytes ?? 0)
    }

    var subscriptionCount: Int { channels.count + patterns.count }
    var isSubscribed: Bool { subscriptionCount > 0 }
    var protocolVersion: Int {
        get { writer.protocolVersion }
        set { writer.protocolVersion = newValue }
    }
}

/// A loop-thread object carried through a `@Sendable` closure that runs on the same loop
/// (`UVStreamServer.execute`): never touched on another thread.
struct LoopBound<Value>: @unchecked Sendable {
    let value: Value
}
