import CustomDump
import Decide
import DecideCore
import IssueReporting
import Synchronization

/// A node for testing decisions and effects, in the manner of TCA's TestStore: send a decision
/// and state how the state changed; await each decision an effect makes and state its change;
/// swap the environment's services, as the seeds' Substate and AsyncStore tests do.
///
/// ```swift
/// let store = TestNode { $0.fetcher = FixedFetcher(number: 10) }
/// store.decide(Load()) { $0[Status.self] = .loading }
/// await store.receive(Loaded.self) {
///     $0[Status.self] = .done
///     $0[Numbers.self, at: 1] = 10
/// }
/// await store.finish()
/// ```
///
/// Guarantees (while `exhaustive`, the default):
/// - after each `decide` and `receive`, every key the decision changed must be stated in the
///   closure, and nothing else may change: a difference fails the test with a line-by-line diff
///   (swift-custom-dump), at the caller's line, in Swift Testing and XCTest alike;
/// - every decision an effect makes must be `receive`d, in the order they committed: one the
///   test did not receive before its next `decide`, or by `finish`, fails the test;
/// - `receive` waits for the effect, it does not sleep: it returns as soon as the decision
///   commits, and fails after `timeout` if none does.
/// With `exhaustive` off, only the keys a closure states are checked, and decisions the test
/// does not receive are skipped.
public final class TestNode: @unchecked Sendable {
    /// The node under test (in memory, on `clock`).
    public let node: Node
    /// The node's physical clock: it stands still until the test moves it.
    public let clock: TestClock
    /// Whether every change and every decision of an effect must be stated (default true).
    public var exhaustive = true
    private let inbox = Inbox()
    /// The entries as of the last decision the test has accounted for.
    private var entries: [StateKey: Entry] = [:]
    private var nextToken: UInt64 = 0

    /// A node with id `id` on `clock`; `environment` sets the services effects get (swap a live
    /// service for a fixed one here), `configure` anything else of its configuration.
    public init(id: String = "test", clock: TestClock = TestClock(),
                environment: (inout EffectEnvironment) -> Void = { _ in },
                configure: (inout Node.Configuration) -> Void = { _ in }) {
        self.clock = clock
        var configuration = Node.Configuration(id: id)
        configuration.clock = clock
        environment(&configuration.environment)
        configure(&configuration)
        do {
            node = try Node(configuration: configuration)
        } catch {
            preconditionFailure("TestNode: the configuration is refused: \(error)")
        }
        let inbox = self.inbox
        node.tapDecisions { inbox.push($0) }
    }

    deinit { node.tapDecisions(nil) }

    /// The services effects get from now on (effects already running keep theirs).
    public var environment: EffectEnvironment {
        get { node.environment }
        set { node.environment = newValue }
    }

    /// The state as of the last decision the test accounted for.
    public var state: TestState { TestState(entries: entries, nowMilliseconds: node.nowMilliseconds) }

    /// Makes `decision` and checks the state it leaves: `update` turns the state before it into
    /// the state expected after it (no closure: nothing may change). Returns what became of it.
    @discardableResult
    public func decide<D: Decision>(
        _ decision: D,
        fileID: StaticString = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column,
        _ update: ((inout TestState) throws -> Void)? = nil
    ) -> Commit {
        nextToken += 1
        let token = nextToken
        let commit = node.decide(Sent(decision: decision, token: token))
        var skipped: [String] = []
        while let record = inbox.pop() {
            if let sent = record.decision as? any SentDecision, sent.token == token {
                check(record, named: "\(D.self)", update, fileID: fileID, filePath: filePath, line: line, column: column)
                break
            }
            skipped.append(Self.name(of: record.decision))
            account(record)
        }
        if exhaustive && !skipped.isEmpty {
            reportIssue("""
                \(D.self) was decided while \(skipped.count) decision(s) made by effects were not received: \
                \(skipped.joined(separator: ", ")). Receive them first (or set exhaustive = false).
                """, fileID: fileID, filePath: filePath, line: line, column: column)
        }
        return commit
    }

    /// Waits for the next decision an effect makes, checks that it is a `D` and the state it
    /// leaves (`update` as in `decide`), and returns it. Fails the test (and returns nil) when
    /// none commits within `timeout`, or another kind does.
    @discardableResult
    public func receive<D: Decision>(
        _ type: D.Type, timeout: Duration = .seconds(5),
        fileID: StaticString = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column,
        _ update: ((inout TestState) throws -> Void)? = nil
    ) async -> D? {
        guard let record = await inbox.next(timeout: timeout) else {
            reportIssue("expected an effect to decide \(D.self) within \(timeout); none did",
                        fileID: fileID, filePath: filePath, line: line, column: column)
            return nil
        }
        guard let decision = record.decision as? D else {
            reportIssue("expected an effect to decide \(D.self), but it decided \(Self.name(of: record.decision))",
                        fileID: fileID, filePath: filePath, line: line, column: column)
            account(record)
            return nil
        }
        check(record, named: "\(D.self)", update, fileID: fileID, filePath: filePath, line: line, column: column)
        return decision
    }

    /// `receive(D.self)`, also checking that the decision equals `expected`.
    @discardableResult
    public func receive<D: Decision & Equatable>(
        _ expected: D, timeout: Duration = .seconds(5),
        fileID: StaticString = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column,
        _ update: ((inout TestState) throws -> Void)? = nil
    ) async -> D? {
        let received = await receive(D.self, timeout: timeout, fileID: fileID, filePath: filePath, line: line, column: column, update)
        if let received, received != expected {
            expectNoDifference(expected, received, "the decision an effect made", fileID: fileID, filePath: filePath, line: line, column: column)
        }
        return received
    }

    /// Waits until no effect runs (at most `timeout`), then fails the test for every decision an
    /// effect made that was not received (when `exhaustive`). Call at the end of a test.
    public func finish(
        timeout: Duration = .seconds(5),
        fileID: StaticString = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
    ) async {
        let node = self.node
        let idle = await Self.within(timeout) { await node.effectsIdle() }
        if !idle {
            reportIssue("effects were still running \(timeout) after the last step",
                        fileID: fileID, filePath: filePath, line: line, column: column)
        }
        var left: [String] = []
        while let record = inbox.pop() {
            left.append(Self.name(of: record.decision))
            account(record)
        }
        if exhaustive && !left.isEmpty {
            reportIssue("\(left.count) decision(s) made by effects were never received: \(left.joined(separator: ", "))",
                        fileID: fileID, filePath: filePath, line: line, column: column)
        }
    }

    // MARK: checking

    private func check(_ record: TappedDecision, named name: String, _ update: ((inout TestState) throws -> Void)?,
                       fileID: StaticString, filePath: StaticString, line: UInt, column: UInt) {
        let now = node.nowMilliseconds
        let before = TestState(entries: entries, nowMilliseconds: now)
        account(record)
        let after = TestState(entries: entries, nowMilliseconds: now)
        var expected = before
        do {
            try update?(&expected)
        } catch {
            reportIssue(error, "the state closure of \(name) threw", fileID: fileID, filePath: filePath, line: line, column: column)
            return
        }
        if !exhaustive {
            // Only what the closure stated: keys it set or removed, indexes it set.
            expected = Self.overlay(expected, changedFrom: before, onto: after)
        }
        expectNoDifference(expected, after, "the state after \(name) (expected -, actual +)",
                           fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// The actual state with only the keys, indexes, counters, sets and sorted sets the test
    /// changed taken from `expected`.
    private static func overlay(_ expected: TestState, changedFrom before: TestState, onto after: TestState) -> TestState {
        var result = after
        overlay(\.values, expected, before, &result)
        overlay(\.indexes, expected, before, &result)
        overlay(\.counters, expected, before, &result)
        overlay(\.sets, expected, before, &result)
        overlay(\.sortedSets, expected, before, &result)
        return result
    }

    /// `overlay` of one part of the state: each entry `expected` changed from `before`.
    private static func overlay<Value: Equatable>(_ part: WritableKeyPath<TestState, [String: Value]>, _ expected: TestState,
                                                  _ before: TestState, _ result: inout TestState) {
        for name in Set(before[keyPath: part].keys).union(expected[keyPath: part].keys)
        where before[keyPath: part][name] != expected[keyPath: part][name] {
            result[keyPath: part][name] = expected[keyPath: part][name]
        }
    }

    /// Applies a decision's writes to the accounted state (last writer wins, as the node does).
    private func account(_ record: TappedDecision) {
        for write in record.writes {
            let entry = write.entry(at: record.commit.version ?? Version(timestamp: .zero, node: node.id))
            entries[write.key] = entries[write.key].map { $0.merged(with: entry) } ?? entry
        }
    }

    private static func name(of decision: any Decision) -> String {
        if let sent = decision as? any SentDecision { return sent.innerName }
        return "\(type(of: decision))"
    }

    /// Runs `body`; false when it had not finished after `timeout` (it is then left running).
    private static func within(_ timeout: Duration, _ body: @escaping @Sendable () async -> Void) async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = Inbox.Once(continuation)
            let deadline = Task {
                try? await Task.sleep(for: timeout)  // a deadline, not a wait for the work
                answer.resume(false)
            }
            Task {
                await body()
                answer.resume(true)
                deadline.cancel()
            }
        }
    }
}

/// A decision the test sent, marked so the tap tells it from the ones effects make.
protocol SentDecision {
    var token: UInt64 { get }
    var innerName: String { get }
}

struct Sent<D: Decision>: Decision, SentDecision {
    let decision: D
    let token: UInt64
    var innerName: String { "\(D.self)" }
    func execute(read: StorageReader, write: StorageWriter) -> Effect {
        decision.execute(read: read, write: write)
    }
}
