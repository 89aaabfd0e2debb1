import Decide
import DecideRESP
import DecideUV

/// WAIT numreplicas timeout: waits until `numreplicas` peers acknowledged every write this node
/// committed before the call (each applied it at its own durability level and said so on the
/// link it travelled), or `timeout` ms passed, and answers how many did, as Redis does. The
/// client's later commands wait meanwhile; other clients go on. A client whose input ends
/// during the wait is closed at once, unanswered (as Redis frees a blocked client that leaves).
extension RESPService {
    /// The longest WAIT, also for `timeout 0` (Redis's "forever"): a day.
    static let maxWaitMilliseconds: UInt64 = 86_400_000

    func wait(_ arguments: [ArraySlice<UInt8>], session: RESPSession, server: UVStreamServer) {
        guard let required = Self.integer(arguments[1]), required >= 0,
              let timeout = Self.integer(arguments[2]) else {
            session.writer.error("ERR value is not an integer or out of range")
            return
        }
        guard timeout >= 0 else {
            session.writer.error("ERR timeout is negative")
            return
        }
        let milliseconds = timeout == 0 ? Self.maxWaitMilliseconds : min(UInt64(timeout), Self.maxWaitMilliseconds)
        let answer = answerLater(session, server: server)
        session.waitsForAcknowledgements = true
        replicator.waitForAcknowledgements(of: replicator.newestOwnDecisionTimestamp, required: required,
                                           timeoutMilliseconds: milliseconds) { acknowledged in
            answer { writer in writer.integer(acknowledged.acknowledgedBy.count) }
        }
    }
}
