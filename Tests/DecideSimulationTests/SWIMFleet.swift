@testable import DecideCore
import DecideSimulation

/// Many `SWIMState` members on one `SimulatedDatagrams` network: every message encoded and
/// decoded with `SWIMCodec`, every member woken at its own `nextWakeAt`. Records what the
/// tests measure: when each member was first and last seen dead, false suspicions and deaths
/// (about members that never crashed), and the messages sent.
final class SWIMFleet {
    let scheduler: SimulatedScheduler
    let network: SimulatedDatagrams
    let configuration: SWIMConfiguration
    let codec = SWIMCodec()
    private(set) var states: [String: SWIMState] = [:]
    private var wakeAt: [String: UInt64] = [:]
    /// Members crashed and not restarted (ids).
    private(set) var crashed: Set<String> = []
    /// Members partitioned away from some others: suspicions of them are not false.
    var unreachable: Set<String> = []
    /// How many running members see each member as dead or left.
    private(set) var deadViews: [String: Int] = [:]
    /// When some member first saw each crashed member dead.
    private(set) var firstDeathSeen: [String: UInt64] = [:]
    private(set) var crashedAt: [String: UInt64] = [:]
    /// Suspicions raised (by their origin) of members that were up and reachable.
    private(set) var falseSuspicions = 0
    private(set) var falseDeaths = 0
    private(set) var decodeErrors = 0
    /// How many members `startFleet` starts: views are not exact before all have.
    private(set) var expectedMembers = 0

    init(seed: UInt64, configuration: SWIMConfiguration = SWIMConfiguration(), lossProbability: Double = 0) {
        scheduler = SimulatedScheduler(seed: seed, maxPendingEvents: 1 << 22)
        var datagrams = SimulatedDatagrams.Configuration()
        datagrams.lossProbability = lossProbability
        network = SimulatedDatagrams(scheduler: scheduler, configuration: datagrams)
        self.configuration = configuration
    }

    deinit { scheduler.discardPendingEvents() }

    static func id(_ index: Int) -> String { "m\(index)" }
    static func address(_ id: String) -> String { "\(id):7946" }

    var now: UInt64 { scheduler.nowMilliseconds }
    var running: [String] { states.keys.filter { !crashed.contains($0) }.sorted() }

    /// Starts member `id`, joining through `seeds` (ids), at incarnation `now`.
    func start(_ id: String, seeds: [String]) {
        let address = Self.address(id)
        crashed.remove(id)
        var state = SWIMState(id: id, address: address, incarnation: now, seeds: seeds.map(Self.address), configuration: configuration,
                              randomSeed: scheduler.nextRandomUInt64(), now: now)
        let out = state.tick(now: now)
        states[id] = state
        network.bind(address) { [unowned self] bytes, _ in self.deliver(bytes, to: id) }
        perform(out, by: id)
        wake(id)
    }

    /// Starts `count` members m0..., each joining through m0.
    func startFleet(_ count: Int, spreadMilliseconds: UInt64 = 2_000) {
        expectedMembers = count
        start(Self.id(0), seeds: [])
        for index in 1..<count {
            let delay = spreadMilliseconds * UInt64(index) / UInt64(count)
            scheduler.schedule(afterMilliseconds: delay) { [unowned self] in self.start(Self.id(index), seeds: [Self.id(0)]) }
        }
    }

    /// Stops `id` at once, as `kill -9` would: its view is no longer counted.
    func crash(_ id: String) {
        guard let state = states[id], !crashed.contains(id) else { return }
        crashed.insert(id)
        crashedAt[id] = now
        network.unbind(Self.address(id))
        for (member, known) in state.members where known.status.isGone { deadViews[member, default: 0] -= 1 }
    }

    /// `id` says it leaves; it keeps answering until crashed.
    func leave(_ id: String) {
        guard var state = states[id] else { return }
        let out = state.leave(now: now)
        states[id] = state
        perform(out, by: id)
    }

    /// Removes a crashed member's state altogether (a member that never comes back).
    func forget(_ id: String) {
        states[id] = nil
        wakeAt[id] = nil
    }

    func run(forMilliseconds milliseconds: UInt64) { scheduler.run(forMilliseconds: milliseconds) }

    /// Runs until `condition` holds, checking every `stepMilliseconds`; answers the virtual
    /// milliseconds it took, nil when `limitMilliseconds` passed first.
    func run(until condition: () -> Bool, stepMilliseconds: UInt64 = 100, limitMilliseconds: UInt64) -> UInt64? {
        let start = now
        while !condition() {
            if now - start >= limitMilliseconds { return nil }
            scheduler.run(forMilliseconds: stepMilliseconds)
        }
        return now - start
    }

    /// Whether every running member sees exactly the other running members as alive or
    /// suspect (and every crashed member as dead or unknown).
    var everyViewIsExact: Bool {
        guard states.count >= expectedMembers else { return false }
        let live = Set(running)
        for id in live {
            guard let state = states[id], state.liveMemberCount == live.count - 1 else { return false }
            if Set(state.liveMembers) != live.subtracting([id]) { return false }
        }
        return true
    }

    /// Running members that see `member` dead or left.
    func deadViewCount(of member: String) -> Int { deadViews[member, default: 0] }

    var messagesSent: UInt64 { states.values.reduce(0) { $0 + $1.counters.messagesSent } }

    // MARK: driving

    private func deliver(_ bytes: [UInt8], to id: String) {
        guard !crashed.contains(id), var state = states[id] else { return }
        let envelope: SWIMEnvelope
        do { envelope = try codec.decode(bytes) } catch {
            decodeErrors += 1
            return
        }
        let out = state.receive(envelope, now: now)
        states[id] = state
        perform(out, by: id)
        wake(id)
    }

    private func tick(_ id: String) {
        guard !crashed.contains(id), var state = states[id] else { return }
        wakeAt[id] = nil
        let out = state.tick(now: now)
        states[id] = state
        perform(out, by: id)
        wake(id)
    }

    private func wake(_ id: String) {
        guard let state = states[id] else { return }
        let at = max(state.nextWakeAt, now + 1)
        if let pending = wakeAt[id], pending <= at { return }
        wakeAt[id] = at
        scheduler.schedule(afterMilliseconds: at - now) { [unowned self] in
            if self.wakeAt[id] == at { self.tick(id) }
        }
    }

    private func perform(_ directives: [SWIMDirective], by id: String) {
        for directive in directives {
            switch directive {
            case let .send(address, envelope):
                network.send(codec.encode(envelope), from: Self.address(id), to: address)
            case let .changed(update, previous):
                let subject = update.member
                let wasGone = previous?.isGone ?? false
                if update.status.isGone != wasGone { deadViews[subject, default: 0] += update.status.isGone ? 1 : -1 }
                let innocent = !crashed.contains(subject) && !unreachable.contains(subject) && !(states[subject]?.leaving ?? false)
                // A suspicion counts once, where it is raised (its origin), not in every view it reaches.
                if update.status == .suspect, update.origin == id, innocent { falseSuspicions += 1 }
                if update.status == .dead, !wasGone {
                    if innocent { falseDeaths += 1 }
                    if crashed.contains(subject), firstDeathSeen[subject] == nil { firstDeathSeen[subject] = now }
                }
            }
        }
    }
}
