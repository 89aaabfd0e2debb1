import Logging
import Synchronization

/// Observing a node's state: async sequences and callbacks for keys, collections and indexes,
/// told through the delivery queue outside the node's lock.
extension Node {
    /// The values of `key`: the current one first, then every change (local or replicated),
    /// skipping equal values and keeping only the newest unread one.
    public func observe<K: AtomicState>(_ key: K.Type) -> Observation<K.Value> {
        let stateKey = core.withLock { $0.key(for: key) }
        return observation(of: stateKey, default: { K.defaultValue() })
    }

    /// The values of element `id` of `collection`, as `observe(_:)` gives them.
    public func observe<C: CollectionState>(_ collection: C.Type, at id: C.ID) -> Observation<C.Value> {
        guard let stateKey = try? core.withLock({ core throws(ValueCoding.Failure) in try core.key(for: collection, at: id) }) else {
            let (stream, continuation) = AsyncStream<C.Value>.makeStream()
            logger.error("cannot observe \(C.name): its element id does not encode as JSON")
            continuation.finish()
            return Observation(stream: stream)
        }
        return observation(of: stateKey, default: { C.defaultValue(at: id) })
    }

    /// Snapshots of every element of `collection`: the current one first, then one after each
    /// batch of changes to its elements (local, replicated, catch-up, expiry, owners coming and
    /// going), skipping equal snapshots; built when the reader asks (see `CollectionObservation`).
    public func observe<C: CollectionState>(_ collection: C.Type) -> CollectionObservation<CollectionSnapshot<C>> {
        let name = core.withLock { $0.name(of: C.self, named: C.name) }
        return collectionObservation(of: name) { node in node.elements(collection) }
    }

    /// The ids of `index` in order: the current list first, then the list after each batch of
    /// changes, skipping equal lists (see `CollectionObservation`).
    public func observe<I: IndexState>(_ index: I.Type) -> CollectionObservation<[I.ID]> {
        let name = core.withLock { $0.name(of: I.self, named: I.name) }
        return collectionObservation(of: name) { node in node.read(index) }
    }

    /// The elements of `set`: the current ones first, then the set after each batch of changes
    /// to it, skipping equal sets (see `CollectionObservation`).
    public func observe<S: SetState>(_ set: S.Type) -> CollectionObservation<Set<S.Element>> {
        let name = core.withLock { $0.name(of: S.self, named: S.name) }
        return collectionObservation(of: name) { node in node.read(set) }
    }

    /// The members of `sortedSet` in order: the current list first, then the list after each
    /// batch of changes to it, skipping equal lists (see `CollectionObservation`).
    public func observe<Z: SortedSetState>(_ sortedSet: Z.Type) -> CollectionObservation<[ScoredMember<Z.Member>]> {
        let name = core.withLock { $0.name(of: Z.self, named: Z.name) }
        return collectionObservation(of: name) { node in node.read(sortedSet) }
    }

    /// The totals of `counter`: the current one first, then the total after each batch of
    /// changes to it (local or replicated), skipping equal totals (see `CollectionObservation`).
    public func observe<C: CounterState>(_ counter: C.Type) -> CollectionObservation<Int64> {
        let name = core.withLock { $0.name(of: C.self, named: C.name) }
        return collectionObservation(of: name) { node in node.read(counter) }
    }

    /// Calls `handler` with a snapshot of `collection`, then with a new one after each batch of
    /// changes to its elements, one call at a time, outside the node's lock; equal snapshots
    /// are skipped. Each call builds a snapshot: O(collection) per batch of changes delivered.
    public func subscribe<C: CollectionState>(
        _ collection: C.Type, handler: @escaping @Sendable (CollectionSnapshot<C>) -> Void
    ) -> Subscription {
        let name = core.withLock { $0.name(of: C.self, named: C.name) }
        return collectionSubscription(of: name, snapshot: { node in node.elements(collection) }, handler: handler)
    }

    /// Calls `handler` with the ids of `index` in order, then with the new list after each batch
    /// of changes, as `subscribe(_:handler:)` does for a collection.
    public func subscribe<I: IndexState>(_ index: I.Type, handler: @escaping @Sendable ([I.ID]) -> Void) -> Subscription {
        let name = core.withLock { $0.name(of: I.self, named: I.name) }
        return collectionSubscription(of: name, snapshot: { node in node.read(index) }, handler: handler)
    }

    /// The callback form of `collectionObservation`: each delivery batch builds a snapshot and
    /// hands it on unless it equals the one before.
    func collectionSubscription<Snapshot: Sendable & Equatable>(
        of name: String, snapshot: @escaping @Sendable (Node) -> Snapshot, handler: @escaping @Sendable (Snapshot) -> Void
    ) -> Subscription {
        let last = Mutex<Snapshot?>(nil)
        return registerCollection(name: name, onFinish: nil) { [weak self] in
            guard let current = self.map(snapshot) else { return }
            let changed = last.withLock { last -> Bool in
                defer { last = current }
                return last != current
            }
            if changed { handler(current) }
        }
    }

    func collectionObservation<Snapshot: Sendable & Equatable>(
        of name: String, snapshot: @escaping @Sendable (Node) -> Snapshot
    ) -> CollectionObservation<Snapshot> {
        let (signals, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let subscription = registerCollection(name: name, onFinish: { continuation.finish() }) { continuation.yield() }
        continuation.onTermination = { _ in subscription.cancel() }
        return CollectionObservation(signals: signals) { [weak self] in self.map(snapshot) }
    }

    /// Registers an observer of every element named `name`; `changed` runs once at once and then
    /// after each delivery batch that touched one.
    func registerCollection(name: String, onFinish: (@Sendable () -> Void)?,
                                    changed: @escaping @Sendable () -> Void) -> Subscription {
        register(in: \.collectionObservers, under: name) { core in
            let observer = CollectionObserver(id: core.makeID(), name: name, onFinish: onFinish, changed: changed)
            return (observer, .init(observer: observer, entry: nil, decoded: nil))
        }
    }

    /// Calls `handler` with the current value of `key`, then with every change, one call at a
    /// time, outside the node's lock (it may make decisions). Equal values are skipped; a
    /// handler that falls behind gets the newest value, not every one.
    public func subscribe<K: AtomicState>(
        _ key: K.Type, handler: @escaping @Sendable (K.Value) -> Void
    ) -> Subscription {
        let stateKey = core.withLock { $0.key(for: key) }
        return register(key: stateKey) { id in
            self.typedObserver(id: id, key: stateKey, default: { K.defaultValue() }, handler: handler)
        }
    }

    /// Calls `handler` with the value of element `id` of `collection`, then with every change,
    /// as `subscribe(_:handler:)` does for an atomic key.
    public func subscribe<C: CollectionState>(
        _ collection: C.Type, at id: C.ID, handler: @escaping @Sendable (C.Value) -> Void
    ) -> Subscription {
        guard let stateKey = try? core.withLock({ core throws(ValueCoding.Failure) in try core.key(for: collection, at: id) }) else {
            logger.error("cannot subscribe to \(C.name): its element id does not encode as JSON")
            return Subscription {}
        }
        return register(key: stateKey) { observerID in
            self.typedObserver(id: observerID, key: stateKey, default: { C.defaultValue(at: id) }, handler: handler)
        }
    }

    /// Calls `handler` with the entry of an untyped key (nil when never written), then with
    /// every new entry of it, tombstones included. For tools.
    public func subscribe(entryOf key: StateKey, handler: @escaping @Sendable (Entry?) -> Void) -> Subscription {
        register(key: key) { id in EntryObserver(id: id, key: key, handler: handler) }
    }

    func observation<Value: Codable & Sendable & Equatable>(
        of key: StateKey, default defaultValue: @escaping @Sendable () -> Value
    ) -> Observation<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let subscription = register(key: key) { id in
            self.typedObserver(id: id, key: key, default: defaultValue, onFinish: { continuation.finish() }) {
                continuation.yield($0)
            }
        }
        continuation.onTermination = { _ in subscription.cancel() }
        return Observation(stream: stream)
    }

    func typedObserver<Value: Codable & Sendable & Equatable>(
        id: UInt64, key: StateKey, default defaultValue: @escaping @Sendable () -> Value,
        onFinish: (@Sendable () -> Void)? = nil,
        handler: @escaping @Sendable (Value) -> Void
    ) -> Observer {
        let logger = self.logger
        return TypedObserver(
            id: id, key: key, defaultValue: defaultValue,
            onDecodeFailure: { key, error in logger.warning("observing \(key) as its default value: \(error)") },
            onFinish: onFinish, handler: handler)
    }

    func register(key: StateKey, make: (UInt64) -> Observer) -> Subscription {
        register(in: \.observers, under: key) { core in
            let observer = make(core.makeID())
            let now = hybridNow(core)
            let entry = core.entry(for: key).flatMap { core.isVisible($0, now: now) ? $0 : nil }
            return (observer, .init(observer: observer, entry: entry,
                                    decoded: entry.flatMap { core.decoded.value(of: key, at: $0.version) }))
        }
    }

    /// Adds the observer `make` builds to `table` (the observers of keys, or of collections by
    /// name) under `key`, with its first notice queued in the same hold of the lock, and returns
    /// the subscription that takes it out again (and `key`'s slot once no observer is left).
    private func register<Key: Hashable & Sendable>(
        in table: ReferenceWritableKeyPath<NodeCore, [Key: [UInt64: Observer]]> & Sendable, under key: Key,
        make: (NodeCore) -> (observer: Observer, first: DeliveryQueue.Notice)
    ) -> Subscription {
        let observer = core.withLock { core -> Observer in
            let (observer, first) = make(core)
            core[keyPath: table][key, default: [:]][observer.id] = observer
            delivery.enqueue(first)
            return observer
        }
        delivery.drain()
        return Subscription { [weak self] in
            observer.cancel()
            self?.core.withLock { core in
                core[keyPath: table][key]?[observer.id] = nil
                if core[keyPath: table][key]?.isEmpty == true { core[keyPath: table][key] = nil }
            }
        }
    }

    /// Call with the lock held.
    /// An entry a reader at `now` does not see (expired, or of an absent owner) is delivered as
    /// absent (nil).
    func notifyObservers(_ core: NodeCore, key: StateKey, entry: Entry?, decoded: (any Sendable)?, now: UInt64) {
        guard core.observing else { return }
        if key.elementCount != 0, !core.collectionObservers.isEmpty, let watchers = core.collectionObservers[key.name] {
            for observer in watchers.values { delivery.enqueue(.init(observer: observer, entry: nil, decoded: nil)) }
        }
        guard !core.observers.isEmpty, let observers = core.observers[key] else { return }
        let entry = entry.flatMap { core.isVisible($0, now: now) ? $0 : nil }
        let decoded = entry == nil ? nil : decoded
        for observer in observers.values {
            delivery.enqueue(.init(observer: observer, entry: entry, decoded: decoded))
        }
    }
}
