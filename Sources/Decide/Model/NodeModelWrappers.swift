/// A read-only property of a `NodeModel` that is the value of `K` on the model's node (the seed's
/// `@Observe`), tracked by Observation.
///
/// Guarantees: each read is the node's value now (`node.read(K.self)`); after a change of the
/// key, observers tracking the property are told once (Observation's `onChange`).
@propertyWrapper
public struct Observe<K: AtomicState>: Sendable {
    let link = ModelLink<K.Value>()

    /// The property for `key` on the model's node.
    public init(_ key: K.Type) {}

    @available(*, unavailable, message: "@Observe works in a class that conforms to NodeModel")
    public var wrappedValue: K.Value { fatalError("unavailable") }

    public static subscript<Model: NodeModel>(
        _enclosingInstance model: Model, wrapped wrapped: KeyPath<Model, K.Value>, storage storage: KeyPath<Model, Self>
    ) -> K.Value {
        let node = model.node
        _ = model[keyPath: storage].link.access(model, keyPath: wrapped) { changed in node.subscribe(K.self, handler: changed) }
        return node.read(K.self)
    }
}

/// A read-write property of a `NodeModel` bound to `K` on the model's node (the seed's `@Bind`):
/// reading it is `@Observe`; setting it writes the key as a decision of its own.
///
/// Guarantees: a set commits before it returns (`Node.set`), so the next read sees it; it
/// replicates like any decision.
@propertyWrapper
public struct Bind<K: AtomicState>: Sendable {
    let link = ModelLink<K.Value>()

    /// The property for `key` on the model's node.
    public init(_ key: K.Type) {}

    @available(*, unavailable, message: "@Bind works in a class that conforms to NodeModel")
    public var wrappedValue: K.Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") }
    }

    public static subscript<Model: NodeModel>(
        _enclosingInstance model: Model, wrapped wrapped: ReferenceWritableKeyPath<Model, K.Value>,
        storage storage: ReferenceWritableKeyPath<Model, Self>
    ) -> K.Value {
        get {
            let node = model.node
            _ = model[keyPath: storage].link.access(model, keyPath: wrapped) { changed in node.subscribe(K.self, handler: changed) }
            return node.read(K.self)
        }
        set { model.node.set(newValue, into: K.self) }
    }
}

/// A read-write property of a `NodeModel` bound to element `id` of collection `C` on the
/// model's node: reading it is the element's value (or its default), tracked by Observation;
/// setting it writes the element as a decision of its own.
@propertyWrapper
public struct BindElement<C: CollectionState>: Sendable {
    let link = ModelLink<C.Value>()
    let id: C.ID

    /// The property for element `id` of `collection` on the model's node.
    public init(_ collection: C.Type, at id: C.ID) { self.id = id }

    @available(*, unavailable, message: "@BindElement works in a class that conforms to NodeModel")
    public var wrappedValue: C.Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") }
    }

    public static subscript<Model: NodeModel>(
        _enclosingInstance model: Model, wrapped wrapped: ReferenceWritableKeyPath<Model, C.Value>,
        storage storage: ReferenceWritableKeyPath<Model, Self>
    ) -> C.Value {
        get {
            let node = model.node
            let this = model[keyPath: storage]
            let id = this.id
            _ = this.link.access(model, keyPath: wrapped) { changed in node.subscribe(C.self, at: id, handler: changed) }
            return node.read(C.self, at: id)
        }
        set { model.node.set(newValue, into: C.self, at: model[keyPath: storage].id) }
    }
}

/// A read-only property of a `NodeModel` that is every element of `C` on the model's node (the
/// seed's `@ObserveCollection`: `quotas["web"]`, `quotas.ids`), tracked by Observation.
///
/// Guarantees: the snapshot is the one last delivered to the property, so reading it again is
/// O(1); a change made on another thread reaches it as soon as its observers are told.
@propertyWrapper
public struct ObserveCollection<C: CollectionState>: Sendable {
    let link = ModelLink<CollectionSnapshot<C>>()

    /// The property for every element of `collection` on the model's node.
    public init(_ collection: C.Type) {}

    @available(*, unavailable, message: "@ObserveCollection works in a class that conforms to NodeModel")
    public var wrappedValue: CollectionSnapshot<C> { fatalError("unavailable") }

    public static subscript<Model: NodeModel>(
        _enclosingInstance model: Model, wrapped wrapped: KeyPath<Model, CollectionSnapshot<C>>, storage storage: KeyPath<Model, Self>
    ) -> CollectionSnapshot<C> {
        let node = model.node
        return model[keyPath: storage].link.access(model, keyPath: wrapped) { changed in node.subscribe(C.self, handler: changed) }
            ?? node.elements(C.self)
    }
}

/// A read-only property of a `NodeModel` that is the ids of index `I` on the model's node, in
/// order, tracked by Observation (the seed's `@Observe(MessagesIndex)`).
@propertyWrapper
public struct ObserveIndex<I: IndexState>: Sendable {
    let link = ModelLink<[I.ID]>()

    /// The property for the ids of `index` on the model's node.
    public init(_ index: I.Type) {}

    @available(*, unavailable, message: "@ObserveIndex works in a class that conforms to NodeModel")
    public var wrappedValue: [I.ID] { fatalError("unavailable") }

    public static subscript<Model: NodeModel>(
        _enclosingInstance model: Model, wrapped wrapped: KeyPath<Model, [I.ID]>, storage storage: KeyPath<Model, Self>
    ) -> [I.ID] {
        let node = model.node
        return model[keyPath: storage].link.access(model, keyPath: wrapped) { changed in node.subscribe(I.self, handler: changed) }
            ?? node.read(I.self)
    }
}

/// A property of a `NodeModel` that makes decisions on the model's node (the seed's
/// `@MakeDecision`): `makeDecision(LoadMessages())`.
@propertyWrapper
public struct MakeDecision: Sendable {
    /// The property; it decides on the node of the model that declares it.
    public init() {}

    @available(*, unavailable, message: "@MakeDecision works in a class that conforms to NodeModel")
    public var wrappedValue: DecisionMaker { fatalError("unavailable") }

    public static subscript<Model: NodeModel>(
        _enclosingInstance model: Model, wrapped wrapped: KeyPath<Model, DecisionMaker>, storage storage: KeyPath<Model, Self>
    ) -> DecisionMaker {
        DecisionMaker(node: model.node)
    }
}

/// Makes decisions on one node: `makeDecision(SomeDecision())` is `node.decide(SomeDecision())`.
public struct DecisionMaker: Sendable {
    let node: Node

    /// Runs `decision` on the node (`Node.decide`) and returns how it ended.
    @discardableResult
    public func callAsFunction(_ decision: some Decision) -> Commit {
        node.decide(decision)
    }
}
