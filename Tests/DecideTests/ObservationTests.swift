import Decide
import Dispatch
import Testing

@Suite struct ObservationTests {
    @Test func currentValueFirstThenChangesSkippingEqualValues() async {
        let node = Fixture.node()
        node.set(1, into: Fixture.Counter.self)
        var iterator = node.observe(Fixture.Counter.self).makeAsyncIterator()
        #expect(await iterator.next() == 1)
        node.set(1, into: Fixture.Counter.self)   // equal: skipped
        node.set(2, into: Fixture.Counter.self)
        #expect(await iterator.next() == 2)
        node.set(2, into: Fixture.Counter.self)
        node.set(3, into: Fixture.Counter.self)
        #expect(await iterator.next() == 3)
    }

    @Test func onlyTheNewestUnreadValueIsKept() async {
        let node = Fixture.node()
        var iterator = node.observe(Fixture.Counter.self).makeAsyncIterator()
        #expect(await iterator.next() == 0)
        for value in 1...1_000 { node.set(value, into: Fixture.Counter.self) }
        #expect(await iterator.next() == 1_000)
        // A value that goes away and comes back while unread is not reported again.
        node.set(5, into: Fixture.Counter.self)
        node.set(1_000, into: Fixture.Counter.self)
        node.set(6, into: Fixture.Counter.self)
        #expect(await iterator.next() == 6)
    }

    @Test func collectionElementsAreObservedOneByOne() async {
        let node = Fixture.node()
        var web = node.observe(Fixture.Quota.self, at: "web").makeAsyncIterator()
        #expect(await web.next() == 100)
        node.decide(DecisionTests.SetQuota(id: "batch", value: 1))
        node.decide(DecisionTests.SetQuota(id: "web", value: 2))
        #expect(await web.next() == 2)
    }

    @Test func replicatedChangesAreObservedAndDeletesReadAsDefault() async throws {
        let origin = Fixture.node("a")
        let replica = Fixture.node("b")
        let deltas = Recorder<Delta>()
        _ = origin.addCommitListener { deltas.append($0.delta) }
        var iterator = replica.observe(Fixture.Label.self).makeAsyncIterator()
        #expect(await iterator.next() == "untitled")
        origin.set("hello", into: Fixture.Label.self)
        try replica.apply(deltas.all[0])
        #expect(await iterator.next() == "hello")
        struct Delete: Decision {
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write.delete(Fixture.Label.self)
                return .none
            }
        }
        origin.decide(Delete())
        try replica.apply(deltas.all[1])
        #expect(await iterator.next() == "untitled")
    }

    @Test func callbacksSeeEveryValueOfASingleWriterAndStopWhenCancelled() {
        let node = Fixture.node()
        let seen = Recorder<Int>()
        let subscription = node.subscribe(Fixture.Counter.self) { seen.append($0) }
        for value in 1...5 { node.set(value, into: Fixture.Counter.self) }
        node.set(5, into: Fixture.Counter.self)
        // One thread commits and delivers: nothing is coalesced, equal values are skipped.
        #expect(seen.all == [0, 1, 2, 3, 4, 5])
        subscription.cancel()
        node.set(9, into: Fixture.Counter.self)
        #expect(seen.all == [0, 1, 2, 3, 4, 5])
    }

    @Test func aCallbackMayMakeADecisionWithoutDeadlock() {
        let node = Fixture.node()
        let subscription = node.subscribe(Fixture.Counter.self) { value in
            if value > 0 && value < 3 { node.set(value + 1, into: Fixture.Counter.self) }
        }
        node.set(1, into: Fixture.Counter.self)
        #expect(node.read(Fixture.Counter.self) == 3)
        subscription.cancel()
    }

    /// Counter + 1 into both Counter and Mirror: values grow in commit order whichever thread
    /// commits, so a later snapshot never holds a smaller one.
    struct IncrementPair: Decision {
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            let next = read(Fixture.Counter.self) + 1
            write(next, into: Fixture.Counter.self)
            write(next, into: Fixture.Mirror.self)
            return .none
        }
    }

    @Test func anObserverNeverSeesHalfADecision() async {
        // Counter and Mirror are always written together; every callback reads both in one
        // snapshot and every observed Counter value must come with an equal or newer Mirror.
        // (Values set by several writers without reading would not grow in commit order: a
        // callback delivering one writer's value could then rightly see another's smaller one.)
        let node = Fixture.node()
        let violations = Recorder<String>()
        let seen = Recorder<Int>()
        let subscription = node.subscribe(Fixture.Counter.self) { counter in
            let (current, mirror) = node.read { ($0(Fixture.Counter.self), $0(Fixture.Mirror.self)) }
            if current != mirror { violations.append("snapshot \(current) vs \(mirror)") }
            if mirror < counter { violations.append("saw counter \(counter) before mirror \(mirror)") }
            seen.append(counter)
        }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<500 { node.decide(IncrementPair()) }
                }
            }
            group.addTask {
                for _ in 0..<2_000 {
                    let (a, b) = node.read { ($0(Fixture.Counter.self), $0(Fixture.Mirror.self)) }
                    if a != b { violations.append("reader saw \(a) vs \(b)") }
                }
            }
        }
        _ = await seen.wait { !$0.isEmpty }
        #expect(violations.all.isEmpty, "\(violations.all.prefix(5))")
        #expect(node.read(Fixture.Mirror.self) == 2_000)
        subscription.cancel()
    }

    @Test(.timeLimit(.minutes(1))) func shutdownEndsObservationsAndDeltaStreams() async {
        let node = Fixture.node()
        let observation = node.observe(Fixture.Counter.self)
        let deltas = node.deltas()
        async let values: [Int] = {
            var all: [Int] = []
            for await value in observation { all.append(value) }
            return all
        }()
        async let deltaCount: Int = {
            var count = 0
            for await _ in deltas { count += 1 }
            return count
        }()
        node.set(1, into: Fixture.Counter.self)
        await node.shutdown()
        // Both loops end (the test would hang otherwise); the newest value and the delta got through.
        let observed = await values
        #expect(observed.last == 1)
        #expect(await deltaCount == 1)
    }
}

@Suite struct CatchUpDeltaTests {
    @Test func catchUpChangesReachTheDeltaStreamOneVersionAtATime() async throws {
        let origin = Fixture.node("a")
        origin.decide(Fixture.SetPair(value: 1))
        origin.set("later", into: Fixture.Label.self)
        let replica = Fixture.node("b")
        replica.set(9, into: Fixture.Counter.self)   // newer than a's Counter: keeps it
        var events = replica.deltas().makeAsyncIterator()
        try replica.apply(entries: origin.entries())
        var seen: [(CommittedDelta.Origin, [String])] = []
        for _ in 0..<2 {
            guard case .delta(let committed)? = await events.next() else { Issue.record("expected a delta"); return }
            seen.append((committed.origin, committed.delta.writes.map(\.key.name).sorted()))
        }
        #expect(seen.map(\.0) == [.catchUp, .catchUp])
        // Only what changed here: Counter stayed at b's newer 9, so the pair's version carries Mirror alone.
        #expect(seen.map(\.1) == [[Fixture.Mirror.name], [Fixture.Label.name]])
    }

    /// Eight threads decide at once, each into its own element with a callback on it: once
    /// every `decide` has returned, every callback has seen its writer's last value. A drain
    /// that returned on its "nothing queued" fast path while a notice waited would leave a
    /// callback behind.
    @Test func everyChangeIsDeliveredWhileManyThreadsDecideAtOnce() {
        let node = Fixture.node()
        let writers = 8, values = 2_000
        let seen = (0..<writers).map { _ in Recorder<Int>() }
        let subscriptions = (0..<writers).map { writer in
            node.subscribe(Fixture.Quota.self, at: "w\(writer)") { seen[writer].append($0) }
        }
        DispatchQueue.concurrentPerform(iterations: writers) { writer in
            for value in 1...values { node.set(value, into: Fixture.Quota.self, at: "w\(writer)") }
        }
        for writer in 0..<writers {
            // The value at subscribing (the default) first, then this writer's, in order.
            let all = Array(seen[writer].all.dropFirst())
            #expect(all.last == values, "writer \(writer) was last seen at \(all.last ?? -1)")
            #expect(all == all.sorted(), "writer \(writer)'s values arrived out of order")
        }
        for subscription in subscriptions { subscription.cancel() }
    }
}
