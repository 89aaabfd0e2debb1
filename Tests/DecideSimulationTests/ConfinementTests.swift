import DecideSimulation
import Foundation
import Testing

@Suite struct ConfinementTests {
    @Test func sequentialUseFromAnotherThreadIsAllowed() {
        let scheduler = SimulatedScheduler(seed: 1)
        scheduler.schedule(afterMilliseconds: 1) {}
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            scheduler.run(forMilliseconds: 5)
            done.signal()
        }
        thread.start()
        done.wait()
        #expect(scheduler.executedEventCount == 1)
    }

    @Test func overlappingUseFromTwoThreadsStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let scheduler = SimulatedScheduler(seed: 1)
            scheduler.schedule(afterMilliseconds: 1) {
                // Inside the run loop, another thread touches the simulation: a data race.
                let done = DispatchSemaphore(value: 0)
                let thread = Thread {
                    _ = scheduler.nextRandomUInt64()
                    done.signal()
                }
                thread.start()
                done.wait()
            }
            scheduler.run(forMilliseconds: 5)
        }
    }
}
