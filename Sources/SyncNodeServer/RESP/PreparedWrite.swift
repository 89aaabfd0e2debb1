import Decide
import DecideCore
import DecideRESP

/// A keyspace write command read from its arguments, not yet run (`RESPService.prepareWrite`):
/// its reads and writes, and the reply they earn. Alone it is one decision (this type's
/// `execute`); between MULTI and EXEC, one step of the block's (`BlockDecision`).
struct PreparedWrite: Decision {
    /// The command (its name, upper-cased, starts a refusal: "SET refused, nothing written: …").
    let command: RESPCommand
    /// Its reads and writes, inside a decision.
    let apply: @Sendable (inout KeyAccess) -> Void
    /// The key and value of a SET without options: alone, it commits as a `RawWrite`.
    var plainSet: (key: StateKey, value: PackedBytes)? = nil
    /// Its reply, once the decision that ran `apply` committed.
    let reply: @Sendable (inout RESPWriter) -> Void

    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        var access = KeyAccess(read: read, write: write, tracking: false)
        apply(&access)
        return .none
    }
}
