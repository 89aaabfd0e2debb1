/// What became of a decision.
public enum Commit: Hashable, Sendable {
    /// Its writes are applied on this node's state with this version, visible to every local
    /// reader, and handed to the commit listeners (replication) before `decide` returned.
    case committed(Version)
    /// It wrote nothing; no version was taken. Its effect still runs.
    case unchanged
    /// A value could not be encoded, or a key or value is over `Configuration.limits`;
    /// nothing was written and its effect did not run.
    case aborted(reason: String)

    /// The version of the writes, when there were any.
    public var version: Version? {
        if case .committed(let version) = self { return version }
        return nil
    }
}

/// A delta as the node's commit path hands it to replication: a local decision, a remote
/// delta or catch-up applied here, or values that expired here.
public struct CommittedDelta: Sendable {
    /// Where the delta's writes came from, and so what a listener may do with them.
    public enum Origin: Hashable, Sendable {
        /// A decision made on this node.
        case local
        /// A delta from a peer, applied with `apply(_:)`.
        case remote
        /// Entries of one version that changed this node during a catch-up
        /// (`apply(entries:)`): only the writes that won here, so possibly part of a decision
        /// whose other writes this node already had or had newer.
        case catchUp
        /// Values whose expiry instant this node's clock reached (`Node.expireDue`): each write
        /// names one key, now absent, with the version of the value that expired. Nothing was
        /// written and nothing is replicated; every replica reports its own.
        case expired
        /// Owned values (`Entry.ownedByWriter`) whose writer stopped being a live member as
        /// this node sees it: each write names one key, now absent here, with the version of the
        /// hidden value. Nothing was written; nothing is replicated.
        case ownerGone
        /// Owned values whose writer is a live member here again: each write is the value that
        /// reads again.
        case ownerBack
    }

    /// The writes, under the one version they share.
    public let delta: Delta
    /// Where they came from.
    public let origin: Origin
}

/// One decision a node ran, as `Node.tapDecisions` reports it.
package struct TappedDecision: Sendable {
    package let decision: any Decision
    package let commit: Commit
    /// Its writes, each with the decision's version (empty unless it committed).
    package let writes: [Delta.Write]
}
