/// A set of members each with a score, read in score order: a leaderboard, a schedule, the
/// most recent sessions. `write(.add("ann", score: 12), into: Board.self)`.
///
/// Guarantees:
/// - each member's score is replaced last-writer-wins, on its own, like an element of a
///   `CollectionState`: two nodes scoring two members at once keep both; two nodes scoring
///   (or one adding and one removing) the same member at once end, on every node, with the
///   change whose version is later (docs/consistency.md, "Sorted sets");
/// - once every node has every change, all read the same members with the same scores, in the
///   same order: by score, then by the member's JSON bytes;
/// - scores are finite doubles: an add with an infinite or NaN score aborts its decision;
/// - a set stores at most `Node.Configuration.maxSetMembers` members (removed ones count until
///   their tombstones are collected): an add of a new member past it aborts its decision.
///
/// How: each member is an element of the collection `name` whose id is `FF 7A 01` and the
/// member's JSON and whose value is the score's JSON (docs/replication.md, "Sorted set
/// members"). A member's score is read by its key, O(1); the whole set is read in
/// O(n log n) of its elements.
public protocol SortedSetState: SendableMetatype {
    /// The type of the set's members, stored as their JSON.
    associatedtype Member: Codable & Sendable & Hashable
    /// The stable wire name; defaults to the type's full name.
    static var name: String { get }
}

extension SortedSetState {
    public static var name: String { String(reflecting: Self.self) }
}

/// A change to a `SortedSetState`.
public enum SortedSetChange<Member: Codable & Sendable & Hashable>: Sendable {
    /// Puts `member` in the set with `score`, replacing the score it had.
    case add(Member, score: Double)
    /// Takes `member` out (nothing happens when it is not in).
    case remove(Member)
    /// Takes every member this node sees out.
    case removeAll
}

/// One member of a `SortedSetState` and its score, as a read returns them in order.
public struct ScoredMember<Member: Sendable & Hashable>: Sendable, Hashable {
    /// The member, decoded from its JSON.
    public let member: Member
    /// Its score: finite, never -0 (stored as 0).
    public let score: Double

    /// `member` with `score` (what a test states, or compares a read with).
    public init(_ member: Member, score: Double) {
        self.member = member
        self.score = score
    }
}
