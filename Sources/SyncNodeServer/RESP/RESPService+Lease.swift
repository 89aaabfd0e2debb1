import Decide
import Dispatch
import DecideCore
import DecideRESP
import DecideUV

/// Leases for clients in any language (docs/consistency.md, "Leases"):
/// - `DECIDE.LEASE RESOURCE MILLISECONDS [WAIT PEERS TIMEOUT-MS] [OWNED]` takes the lease on
///   RESOURCE unless another node holds a live one (renews it when this node does), waiting
///   for PEERS acknowledgements; replies `{"resource","acquired","holder","fencingToken",
///   "expiresAt","acknowledgedBy"}` (`"required"` when too few acknowledged: treat it as not
///   held);
/// - `DECIDE.RELEASE RESOURCE FENCING-TOKEN` ends this node's lease of that token early: 1, or 0
///   when the stored lease is another.
/// The client's later commands wait while a lease waits for acknowledgements. Under strict
/// durability both run off the loop thread (their decisions wait for the disk), so other
/// clients go on meanwhile.
extension RESPService {
    func lease(_ arguments: [ArraySlice<UInt8>], session: RESPSession, server: UVStreamServer) {
        guard let resource = String(validating: arguments[1], as: UTF8.self), !resource.isEmpty else {
            session.writer.error("ERR the resource must be non-empty UTF-8")
            return
        }
        guard let amount = Self.integer(arguments[2]), let lifetime = Self.lifetimeMilliseconds(amount, inSeconds: false) else {
            session.writer.error("ERR invalid expire time in 'decide.lease' command")
            return
        }
        var peers = 0
        var timeout: UInt64 = 0
        var owned = false
        var index = 3
        while index < arguments.count {
            if Self.matches(arguments[index], "OWNED"), !owned {
                owned = true
                index += 1
            } else if Self.matches(arguments[index], "WAIT"), index + 2 < arguments.count,
                      let count = Self.integer(arguments[index + 1]), count >= 0,
                      let milliseconds = Self.integer(arguments[index + 2]), milliseconds >= 0 {
                peers = count
                timeout = min(UInt64(milliseconds), Self.maxWaitMilliseconds)
                index += 3
            } else {
                session.writer.error("ERR syntax error: DECIDE.LEASE RESOURCE MILLISECONDS [WAIT PEERS TIMEOUT-MS] [OWNED]")
                return
            }
        }
        let answer = answerLater(session, server: server)
        offLoopUnderStrictDurability { [replicator, owned, peers, timeout] in
            replicator.acquireLease(resource, for: .milliseconds(lifetime), ownedByHolder: owned, acknowledgedBy: .peers(peers),
                                    timeoutMilliseconds: timeout) { outcome in
                answer { writer in Self.reply(outcome, resource: resource, into: &writer) }
            }
        }
    }

    /// Runs `body` at once, or, when decisions wait for the disk (strict durability), on
    /// another thread: the loop thread never waits for fsync.
    private func offLoopUnderStrictDurability(_ body: @escaping @Sendable () -> Void) {
        guard node.acknowledgesAfterDisk else { return body() }
        DispatchQueue.global().async(execute: body)
    }

    private static func reply(_ outcome: LeaseOutcome, resource: String, into writer: inout RESPWriter) {
        func fields(_ lease: Lease, acquired: Bool) -> [(String, JSONValue)] {
            [("resource", .string(resource)), ("acquired", .bool(acquired)), ("holder", .string(lease.holder)),
             ("fencingToken", .number(String(lease.fencingToken))), ("expiresAt", .number(String(lease.expiresAtMilliseconds)))]
        }
        switch outcome {
        case let .acquired(lease, acknowledgedBy):
            writer.bulk(ReplyJSON.object(fields(lease, acquired: true) + [("acknowledgedBy", .array(acknowledgedBy.map { .string($0) }))]))
        case .heldByOther(let lease):
            writer.bulk(ReplyJSON.object(fields(lease, acquired: false)))
        case let .notAcknowledged(lease, acknowledgedBy, required):
            writer.bulk(ReplyJSON.object(fields(lease, acquired: false) + [
                ("acknowledgedBy", .array(acknowledgedBy.map { .string($0) })), ("required", .number(String(required))),
                ("note", .string("written here, but fewer peers than asked for acknowledged it: treat it as not held")),
            ]))
        case .refused(let reason):
            writer.error("ERR lease refused: \(reason)")
        }
    }

    func release(_ arguments: [ArraySlice<UInt8>], session: RESPSession, server: UVStreamServer) {
        guard let resource = String(validating: arguments[1], as: UTF8.self), !resource.isEmpty,
              let token = UInt64(String(decoding: arguments[2], as: UTF8.self)) else {
            session.writer.error("ERR DECIDE.RELEASE RESOURCE FENCING-TOKEN (a non-empty UTF-8 resource, a whole number)")
            return
        }
        guard let lease = node.lease(on: resource), lease.fencingToken == token, lease.holder == node.id else {
            session.writer.integer(0)
            return
        }
        guard node.acknowledgesAfterDisk else {
            session.writer.integer(replicator.releaseLease(lease) ? 1 : 0)
            return
        }
        let answer = answerLater(session, server: server)
        offLoopUnderStrictDurability { [replicator] in
            let released = replicator.releaseLease(lease)
            answer { writer in writer.integer(released ? 1 : 0) }
        }
    }
}
