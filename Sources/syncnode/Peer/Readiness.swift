/// What `GET /ready` answers (docs/operations.md, "Health and readiness"): whether an
/// orchestrator should send this peer clients now, and why, from what the peer knows.
///
/// Guarantees: a peer is ready once its store is open (it is, before the endpoint exists) and
/// either it has no seeds, or it is linked to a member, or `seedWaitMilliseconds` passed since
/// it started without a seed answering (it then serves alone, as it does without one, and says
/// so); it is not ready while it leaves the cluster. Pure: the same inputs give the same answer.
struct Readiness: Equatable, Sendable {
    let ready: Bool
    /// One line for the response body and the probe's log.
    let reason: String

    /// The answer for a peer with `seeds` configured seeds, `linked` of its `members` other
    /// members linked now, `elapsedMilliseconds` after it started, waiting at most
    /// `seedWaitMilliseconds` for a first link; `leaving` while it stops.
    static func of(seeds: Int, linked: Int, members: Int, elapsedMilliseconds: UInt64,
                   seedWaitMilliseconds: UInt64, leaving: Bool) -> Readiness {
        if leaving { return Readiness(ready: false, reason: "leaving the cluster") }
        if linked > 0 { return Readiness(ready: true, reason: "store open, linked to \(linked) of \(members) members") }
        if seeds == 0 { return Readiness(ready: true, reason: "store open, no seeds: serving alone") }
        if elapsedMilliseconds >= seedWaitMilliseconds {
            return Readiness(ready: true, reason: "store open, no member linked (waited \(seedWaitMilliseconds) ms for a seed): serving alone")
        }
        return Readiness(ready: false, reason: "store open, waiting for a seed to answer (\(elapsedMilliseconds) of \(seedWaitMilliseconds) ms)")
    }
}
