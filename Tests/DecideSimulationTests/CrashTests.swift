import Decide
import DecideSimulation
import Testing

@Suite struct CrashTests {
    @Test func crashClosesPeersLinksAndTheCrashedSideNeverCallsBack() throws {
        let world = try World(seed: 21, nodes: ["a", "b", "c"])
        let (ab, ba) = world.link("a", "b")
        let (cb, _) = world.link("c", "b")
        let (ac, _) = world.link("a", "c")
        let crashed = world["b"]
        let crashedRecorder = world.recorder("b")
        for index in 0..<5 { _ = world["a"].send(frame(index), to: ab) }
        _ = crashed.send(frame(50), to: ba)
        crashed.connect(to: "sim://a")                                   // pending handshake
        let eventsAtCrash = crashedRecorder.events.count
        world.network.crash("b")
        #expect(!crashed.isRunning)
        world.scheduler.run(forMilliseconds: 500)
        #expect(crashedRecorder.events.count == eventsAtCrash, "a crashed transport makes no delegate call")
        #expect(world.recorder("a").disconnects.map(\.0) == [ab])
        #expect(world.recorder("c").disconnects.map(\.0) == [cb])
        #expect(world.recorder("a").disconnects.first?.1 == .networkError("connection reset by peer"))
        #expect(world.recorder("a").received.isEmpty, "b's frame died with it")
        #expect(world.network.counters.framesDroppedByClosedLink == 6)
        #expect(world.network.openLinkCount == 1)
        _ = world["a"].send(frame(1), to: ac)                           // the a–c link is fine
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("c").received.map(number(of:)) == [1])

        // The dead object is inert forever.
        #expect(crashed.send(frame(1), to: ba) == .notConnected)
        #expect(crashed.outboundBytes(for: ba) == 0)
        #expect(throws: SimulatedTransportError.notRunning) { try crashed.listen(on: "sim://b") }
        crashed.connect(to: "sim://a")
        crashed.close(ba)
        crashed.shutdown()

        // Nobody listens at b's address until it restarts.
        world["a"].connect(to: "sim://b")
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("a").failures.map(\.1) == [.networkError("connection refused")])

        try world.boot("b")                                             // restart: a new transport
        let (ab2, _) = world.link("a", "b")
        _ = world["a"].send(frame(77), to: ab2)
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("b").received.map(number(of:)) == [77])
        #expect(crashedRecorder.events.count == eventsAtCrash)
        #expect(accountedFor(world.network))
    }

    @Test func shutdownLeaksNoCallbacks() throws {
        let world = try World(seed: 22, nodes: ["a", "b", "c"])
        let (ab, ba) = world.link("a", "b")
        let (ca, _) = world.link("c", "a")
        for index in 0..<5 {
            _ = world["a"].send(frame(index), to: ab)                  // a's frames in flight
            _ = world["b"].send(frame(index), to: ba)                  // frames towards a in flight
        }
        world["a"].close(ab)                                           // a notice pending for a
        world.network.stallReader("c")
        world.network.unstallReader("c")
        world["a"].connect(to: "sim://c")                              // a handshake pending
        world["c"].connect(to: "sim://a")                              // an inbound handshake pending
        world.network.faults.reorder = true
        let eventsAtShutdown = world.recorder("a").events.count
        world.recorder("a").api { world["a"].shutdown() }
        world["a"].shutdown()                                          // idempotent
        world.scheduler.run(forMilliseconds: 2_000)
        #expect(world.recorder("a").events.count == eventsAtShutdown)
        #expect(world.recorder("b").disconnects.map(\.1) == [.closedByPeer])
        #expect(world.recorder("c").disconnects.map { $0.0 } == [ca])
        #expect(world.recorder("c").failures.map(\.1) == [.networkError("connection refused")])
        #expect(world.network.openLinkCount == 0)
        #expect(world["a"].send(frame(1), to: ab) == .notConnected)
        #expect(throws: SimulatedTransportError.notRunning) { try world["a"].start(delegate: world.recorder("a")) }
        #expect(accountedFor(world.network))
        // The node may come back with a new transport.
        try world.boot("a")
        _ = world.link("c", "a")
    }
}
