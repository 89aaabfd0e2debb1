import Decide
import DecideSimulation
import Testing

@Suite struct FaultTests {
    @Test func lossAndDuplicationMatchTheirProbabilities() throws {
        let world = try World(seed: 11, nodes: ["a", "b"])
        let (ab, _) = world.link("a", "b")
        world.network.faults = SimulatedNetwork.Faults(lossProbability: 0.2, duplicateProbability: 0.1)
        let total = 10_000
        for index in 0..<total {
            #expect(world["a"].send(frame(index), to: ab) == .queued)
            if index % 100 == 0 { world.scheduler.run(forMilliseconds: 5) }
        }
        world.scheduler.run(forMilliseconds: 1_000)
        let counters = world.network.counters
        // Expected: 2,000 lost (sd 40), 800 duplicated of 8,000 kept (sd 27).
        #expect(abs(Int(counters.framesDroppedByLoss) - 2_000) < 200)
        #expect(abs(Int(counters.framesDuplicated) - 800) < 120)
        let numbers = world.recorder("b").received.map(number(of:))
        #expect(numbers.count == total - Int(counters.framesDroppedByLoss) + Int(counters.framesDuplicated))
        #expect(Set(numbers).count == total - Int(counters.framesDroppedByLoss))
        // Without reorder a duplicate arrives right after its original: the sequence never goes back.
        #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(accountedFor(world.network))
        #expect(world.network.framesInFlight == 0)
    }

    @Test func partitionDropsFramesAndRefusesConnectsUntilHealed() throws {
        let world = try World(seed: 3, nodes: ["a", "b", "c"])
        let (ab, ba) = world.link("a", "b")
        let (ac, _) = world.link("a", "c")
        world.network.partition("a", from: "b")
        #expect(world.network.faults.isPartitioned("b", "a"))
        #expect(!world.network.faults.isPartitioned("a", "c"))
        for index in 0..<5 {
            #expect(world["a"].send(frame(index), to: ab) == .queued)
            #expect(world["b"].send(frame(100 + index), to: ba) == .queued)
            #expect(world["a"].send(frame(200 + index), to: ac) == .queued)
        }
        world.recorder("a").api { world["a"].connect(to: "sim://b") }
        world.scheduler.run(forMilliseconds: 2_000)
        #expect(world.recorder("b").received.isEmpty)
        #expect(world.recorder("a").received.isEmpty)
        #expect(world.recorder("c").received.map(number(of:)) == Array(200..<205), "other links are unaffected")
        #expect(world.network.counters.framesDroppedByPartition == 10)
        #expect(world.recorder("a").failures.map(\.1) == [.timedOut("connect to sim://b timed out")])
        // The network never closes a link because of a partition.
        #expect(world.recorder("a").disconnects.isEmpty && world.recorder("b").disconnects.isEmpty)
        #expect(world.network.openLinkCount == 2)

        world.network.heal()
        _ = world["a"].send(frame(9), to: ab)
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("b").received.map(number(of:)) == [9])
        let before = world.recorder("a").connections.count
        _ = world.link("a", "b")
        #expect(world.recorder("a").connections.count == before + 1)
        #expect(accountedFor(world.network))
    }

    @Test func groupPartitionsAndIsolation() throws {
        let world = try World(seed: 3, nodes: ["a", "b", "c", "d"])
        world.network.partition(groups: [["a", "b"], ["c"]])
        let faults = world.network.faults
        #expect(faults.isPartitioned("a", "c") && faults.isPartitioned("c", "b"))
        #expect(!faults.isPartitioned("a", "b") && !faults.isPartitioned("a", "d") && !faults.isPartitioned("c", "d"))
        world.network.heal()
        #expect(!world.network.faults.hasPartitions)
        world.network.isolate("d")
        #expect(["a", "b", "c"].allSatisfy { world.network.faults.isPartitioned("d", $0) })
        #expect(!world.network.faults.isPartitioned("a", "b"))
    }

    @Test func aCloseNoticeWaitsForThePartitionToHeal() throws {
        let world = try World(seed: 8, nodes: ["a", "b"])
        let (ab, ba) = world.link("a", "b")
        world.network.partition("a", from: "b")
        world["a"].close(ab)
        world.scheduler.run(forMilliseconds: 5_000)
        #expect(world.recorder("a").disconnects.map(\.1) == [.closedLocally])
        #expect(world.recorder("b").disconnects.isEmpty, "the FIN cannot cross the partition")
        #expect(world["b"].send(frame(1), to: ba) == .queued, "a half-open link still takes frames")
        world.network.heal()
        world.scheduler.run(forMilliseconds: 1_000)
        #expect(world.recorder("b").disconnects.map(\.1) == [.closedByPeer])
        #expect(world.network.counters.framesDroppedByClosedLink == 1)
    }

    @Test func aStalledReaderFillsTheBoundAndTheSenderIsToldLater() throws {
        let configuration = SimulatedNetwork.Configuration(maxOutboundBytes: 1_000)
        let world = try World(seed: 6, nodes: ["a", "b"], configuration: configuration)
        let (ab, _) = world.link("a", "b")
        world.network.stallReader("b")
        var accepted = 0
        var result = SendResult.queued
        while result == .queued {
            result = world.recorder("a").api { world["a"].send(frame(accepted, size: 96), to: ab) }   // 100 wire bytes
            if result == .queued {
                accepted += 1
                world.scheduler.run(forMilliseconds: 30)   // every frame reaches b and is held
            }
        }
        #expect(result == .overLimit)
        #expect(accepted == 10)
        #expect(world["a"].outboundBytes(for: ab) == 1_000)
        #expect(world.network.inFlightBytes(from: "a", to: "b") == 1_000)
        #expect(world.recorder("a").overLimits.isEmpty, "the notice is never made inside send")
        #expect(world["a"].send(frame(0, size: 96), to: ab) == .overLimit)
        world.scheduler.run(forMilliseconds: 0)
        #expect(world.recorder("a").overLimits == [ab], "one notice per burst of refusals")
        #expect(world.recorder("b").received.isEmpty)
        #expect(world.network.counters.sendsOverLimit == 2)

        world.network.unstallReader("b")
        world.scheduler.run(forMilliseconds: 100)
        #expect(world.recorder("b").received.map(number(of:)) == Array(0..<10))
        #expect(world["a"].outboundBytes(for: ab) == 0)
        #expect(world["a"].send(frame(10, size: 96), to: ab) == .queued)
        #expect(world.synchronousCallbacks == 0)
    }

    @Test func framesSentAfterUnstallDoNotOvertakeHeldOnes() throws {
        let world = try World(seed: 12, nodes: ["a", "b"], faults: .init(delayMilliseconds: 1...50))
        let (ab, _) = world.link("a", "b")
        world.network.stallReader("b")
        for index in 0..<20 { _ = world["a"].send(frame(index), to: ab) }
        world.scheduler.run(forMilliseconds: 30)                   // some arrived and are held
        world.network.unstallReader("b")
        for index in 20..<40 { _ = world["a"].send(frame(index), to: ab) }
        world.scheduler.run(forMilliseconds: 500)
        #expect(world.recorder("b").received.map(number(of:)) == Array(0..<40))
    }

    @Test func anOversizedFrameIsOverLimitOnAnEmptyLink() throws {
        let world = try World(seed: 1, nodes: ["a", "b"], configuration: .init(maxOutboundBytes: 64))
        let (ab, _) = world.link("a", "b")
        #expect(world["a"].send(frame(1, size: 61), to: ab) == .overLimit)
        #expect(world["a"].send(frame(1, size: 60), to: ab) == .queued)
    }
}
