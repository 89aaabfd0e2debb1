/// Datagrams between addresses, on a simulation's scheduler: what SWIM-style membership runs
/// over (`SWIMState`), beside `SimulatedNetwork`'s ordered links.
///
/// Guarantees: a datagram is delivered at most once, after a delay drawn from
/// `delayMilliseconds` (so datagrams reorder), or lost: by `lossProbability`, by a partition
/// between the two addresses, or because either endpoint is unbound (crashed) when it is sent
/// or delivered. Every draw comes from the scheduler's seed, so a run replays exactly.
package final class SimulatedDatagrams: @unchecked Sendable {
    /// How datagrams travel.
    package struct Configuration: Sendable {
        /// The one-way delay of a datagram, drawn uniformly.
        package var delayMilliseconds: ClosedRange<UInt64> = 1...5
        /// The chance each datagram is lost.
        package var lossProbability = 0.0

        package init() {}
    }

    /// What happened to the datagrams sent so far.
    package struct Counters: Hashable, Sendable {
        package var sent: UInt64 = 0
        package var delivered: UInt64 = 0
        package var lost: UInt64 = 0
        package var bytesSent: UInt64 = 0
    }

    package let scheduler: SimulatedScheduler
    package var configuration: Configuration
    package private(set) var counters = Counters()

    private var endpoints: [String: (_ bytes: [UInt8], _ from: String) -> Void] = [:]
    /// The partition group of each address; datagrams between different groups are lost.
    private var groups: [String: Int] = [:]

    package init(scheduler: SimulatedScheduler, configuration: Configuration = Configuration()) {
        self.scheduler = scheduler
        self.configuration = configuration
    }

    /// Delivers datagrams sent to `address` to `receive` from now on.
    package func bind(_ address: String, _ receive: @escaping (_ bytes: [UInt8], _ from: String) -> Void) {
        scheduler.confinement.run { endpoints[address] = receive }
    }

    /// Nothing more reaches `address`, including datagrams already on their way (a crash).
    package func unbind(_ address: String) {
        scheduler.confinement.run { _ = endpoints.removeValue(forKey: address) }
    }

    /// Splits the addresses into `groups` that cannot reach each other; addresses in no group
    /// reach everyone, and everyone them.
    package func partition(groups: [[String]]) {
        scheduler.confinement.run {
            self.groups = [:]
            for (index, group) in groups.enumerated() { for address in group { self.groups[address] = index } }
        }
    }

    /// Ends every partition.
    package func heal() {
        scheduler.confinement.run { groups = [:] }
    }

    /// Sends `bytes` from `from` to `to`.
    package func send(_ bytes: [UInt8], from: String, to: String) {
        scheduler.confinement.run {
            counters.sent += 1
            counters.bytesSent += UInt64(bytes.count)
            guard endpoints[from] != nil, endpoints[to] != nil, reachable(from, to),
                  !scheduler.randomChance(configuration.lossProbability) else {
                counters.lost += 1
                return
            }
            let delay = scheduler.randomUInt64(in: configuration.delayMilliseconds)
            scheduler.schedule(afterMilliseconds: delay) { [self] in
                guard let receive = endpoints[to], reachable(from, to) else {
                    counters.lost += 1
                    return
                }
                counters.delivered += 1
                receive(bytes, from)
            }
        }
    }

    private func reachable(_ a: String, _ b: String) -> Bool {
        guard let first = groups[a], let second = groups[b] else { return true }
        return first == second
    }
}
