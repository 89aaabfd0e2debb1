import Decide
import DecideSimulation
import Testing

@Suite struct NetworkTests {
    @Test func connectReportsBothSidesWithPeerInfo() throws {
        let world = try World(seed: 1, nodes: ["a", "b"])
        let start = world.scheduler.nowMilliseconds
        world.recorder("a").api { world["a"].connect(to: "sim://b") }
        #expect(world.recorder("a").events.isEmpty && world.recorder("b").events.isEmpty)
        world.scheduler.run(forMilliseconds: 20)          // the default delay is 1...20 ms
        let a = world.recorder("a").connections
        let b = world.recorder("b").connections
        #expect(a.count == 1 && b.count == 1)
        #expect(a.first?.value == PeerInfo(nodeID: "b", listenAddress: "sim://b", outbound: true, dialedAddress: "sim://b"))
        #expect(b.first?.value == PeerInfo(nodeID: "a", listenAddress: "sim://a", outbound: false))
        #expect(world.scheduler.nowMilliseconds == start + 20)
        // Connection ids are unique per transport.
        world.recorder("a").api { world["a"].connect(to: "sim://b") }
        world.scheduler.run(forMilliseconds: 20)
        #expect(Set(world.recorder("a").connections.keys).count == 2)
        #expect(Set(world.recorder("b").connections.keys).count == 2)
        #expect(world.network.openLinkCount == 2)
        #expect(world.network.counters.connectsSucceeded == 2)
        #expect(world.synchronousCallbacks == 0)
    }

    @Test func aNodeThatDoesNotListenAdvertisesNoAddress() throws {
        let world = try World(seed: 1, nodes: ["b"])
        let client = world.network.makeTransport(nodeID: "c", address: "sim://c")
        let recorder = Recorder(name: "c", scheduler: world.scheduler)
        try client.start(delegate: recorder)
        client.connect(to: "sim://b")
        world.scheduler.run(forMilliseconds: 50)
        #expect(recorder.connections.first?.value.nodeID == "b")
        #expect(world.recorder("b").connections.first?.value == PeerInfo(nodeID: "c", listenAddress: "", outbound: false))
        #expect(throws: SimulatedTransportError.addressNotOwned(requested: "sim://b", owned: "sim://c")) {
            try client.listen(on: "sim://b")
        }
        #expect(throws: SimulatedTransportError.alreadyStarted) { try client.start(delegate: recorder) }
    }

    @Test func connectToNobodyFailsWithARefusal() throws {
        let world = try World(seed: 1, nodes: ["a"])
        world.recorder("a").api { world["a"].connect(to: "sim://nowhere") }
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("a").failures.map(\.0) == ["sim://nowhere"])
        #expect(world.recorder("a").failures.first?.1 == .networkError("connection refused"))
        #expect(world.network.counters.connectsFailed == 1)
        #expect(world.network.openLinkCount == 0)
    }

    /// The frames delivered on one link at one instant are one read: exactly one read end
    /// follows them, at that instant, before anything of a later instant; none without a frame.
    @Test func eachInstantsFramesOnALinkEndWithOneReadEnd() throws {
        let faults = SimulatedNetwork.Faults(delayMilliseconds: 1...3)
        let world = try World(seed: 9, nodes: ["a", "b"], faults: faults)
        let (ab, _) = world.link("a", "b")
        #expect(world["b"].reportsReadEnds)
        let before = world.recorder("b").events.count
        for index in 0..<300 {
            _ = world.recorder("a").api { world["a"].send(frame(index, size: 8), to: ab) }
            if index % 20 == 0 { world.scheduler.run(forMilliseconds: 1) }
        }
        world.scheduler.run(forMilliseconds: 50)
        let log = Array(world.recorder("b").timedLog.dropFirst(before))
        let events = Array(world.recorder("b").events.dropFirst(before))
        #expect(events.filter { if case .received = $0 { return true } else { return false } }.count == 300)
        var framesInRead = 0
        var reads = 0, largest = 0
        var instant: Substring?
        for (event, line) in zip(events, log) {
            let at = line.prefix { $0 != " " }
            switch event {
            case .received:
                if framesInRead > 0 { #expect(at == instant, "a read spans two instants: \(line)") }
                instant = at
                framesInRead += 1
            case .readEnd:
                #expect(framesInRead > 0 && at == instant, "a read end without frames of its instant: \(line)")
                reads += 1
                largest = max(largest, framesInRead)
                framesInRead = 0
            default:
                break
            }
        }
        #expect(framesInRead == 0, "frames left without a read end")
        #expect(reads < 300 && largest > 1, "frames of one instant share a read (\(reads) reads, largest \(largest))")
    }

    @Test func framesArriveWholeInOrderWithoutReorderEvenWithWideDelays() throws {
        let faults = SimulatedNetwork.Faults(delayMilliseconds: 1...200)
        let world = try World(seed: 5, nodes: ["a", "b"], faults: faults)
        let (ab, _) = world.link("a", "b")
        for index in 0..<2_000 {
            let result = world.recorder("a").api { world["a"].send(frame(index, size: 8 + index % 50), to: ab) }
            #expect(result == .queued)
            if index % 10 == 0 { world.scheduler.run(forMilliseconds: 1) }
        }
        world.scheduler.run(forMilliseconds: 1_000)
        let received = world.recorder("b").received
        #expect(received.map(number(of:)) == Array(0..<2_000))
        #expect(received.enumerated().allSatisfy { $0.element.count == 8 + $0.offset % 50 })
        let counters = world.network.counters
        #expect(counters.framesDelivered == 2_000)
        #expect(counters.bytesDelivered == counters.bytesSent)
        #expect(world["a"].outboundBytes(for: ab) == 0)
        #expect(world.synchronousCallbacks == 0)
    }

    @Test func reorderLetsLaterFramesOvertake() throws {
        let faults = SimulatedNetwork.Faults(reorder: true, delayMilliseconds: 1...200)
        let world = try World(seed: 5, nodes: ["a", "b"], faults: faults)
        let (ab, _) = world.link("a", "b")
        for index in 0..<500 { _ = world["a"].send(frame(index), to: ab) }
        world.scheduler.run(forMilliseconds: 1_000)
        let numbers = world.recorder("b").received.map(number(of:))
        #expect(numbers.sorted() == Array(0..<500), "nothing lost or duplicated")
        #expect(numbers != Array(0..<500), "with reorder on and wide delays, order changes")
    }

    @Test func closeTellsBothSidesOnceAndDropsFramesInFlight() throws {
        let world = try World(seed: 2, nodes: ["a", "b"])
        let (ab, ba) = world.link("a", "b")
        for index in 0..<10 { _ = world["a"].send(frame(index), to: ab) }
        _ = world["b"].send(frame(99), to: ba)
        world.recorder("a").api { world["a"].close(ab) }
        world.recorder("a").api { world["a"].close(ab) }              // twice: ignored
        #expect(world.recorder("a").api { world["a"].send(frame(1), to: ab) } == .notConnected)
        #expect(world["a"].outboundBytes(for: ab) == 0)
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("a").disconnects.map(\.1) == [.closedLocally])
        #expect(world.recorder("b").disconnects.map(\.1) == [.closedByPeer])
        #expect(world.recorder("a").disconnects.first?.0 == ab)
        #expect(world.recorder("b").disconnects.first?.0 == ba)
        #expect(world.recorder("b").received.isEmpty && world.recorder("a").received.isEmpty)
        #expect(world.network.counters.framesDroppedByClosedLink == 11)
        #expect(world.network.openLinkCount == 0)
        #expect(world["b"].send(frame(1), to: ba) == .notConnected)
        #expect(accountedFor(world.network))
        #expect(world.synchronousCallbacks == 0)
    }

    @Test func bothSidesClosingAtOnceAreEachToldOnce() throws {
        let world = try World(seed: 2, nodes: ["a", "b"])
        let (ab, ba) = world.link("a", "b")
        world["a"].close(ab)
        world["b"].close(ba)
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("a").disconnects.map(\.1) == [.closedLocally])
        #expect(world.recorder("b").disconnects.map(\.1) == [.closedLocally])
    }

    @Test func aDelegateMayCloseInsideItsCallback() throws {
        let world = try World(seed: 4, nodes: ["a", "b"])
        world.recorder("b").onConnect = { connection, _ in world["b"].close(connection) }
        world["a"].connect(to: "sim://b")
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("a").events.count == 2)
        if case .connected = world.recorder("a").events.first {} else { Issue.record("didConnect must come first") }
        #expect(world.recorder("a").disconnects.map(\.1) == [.closedByPeer])
        #expect(world.recorder("b").disconnects.map(\.1) == [.closedLocally])
    }

    @Test func selfConnectionsWork() throws {
        let world = try World(seed: 4, nodes: ["a"])
        world["a"].connect(to: "sim://a")
        world.scheduler.run(forMilliseconds: 100)
        let connections = world.recorder("a").connections
        #expect(connections.count == 2)
        let outbound = try #require(connections.first { $0.value.outbound }?.key)
        _ = world["a"].send(frame(7), to: outbound)
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("a").received.map(number(of:)) == [7])
    }
}
