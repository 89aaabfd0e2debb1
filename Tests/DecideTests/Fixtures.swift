import Decide
import DecideTesting
import Foundation
import Synchronization

enum Fixture {
    struct Counter: AtomicState {
        static func defaultValue() -> Int { 0 }
    }
    struct Label: AtomicState {
        static func defaultValue() -> String { "untitled" }
    }
    struct Mirror: AtomicState {
        static func defaultValue() -> Int { 0 }
    }
    struct Quota: CollectionState {
        static func defaultValue(at id: String) -> Int { 100 }
    }
    struct Profile: Codable, Sendable, Equatable {
        var name: String
        var score: Double
    }
    struct Profiles: AtomicState {
        static func defaultValue() -> Profile { Profile(name: "nobody", score: 0) }
    }

    /// Writes `value` into Counter and Mirror: two keys that must always be seen together.
    struct SetPair: Decision {
        let value: Int
        func execute(read: StorageReader, write: StorageWriter) -> Effect {
            write(value, into: Counter.self)
            write(value, into: Mirror.self)
            return .none
        }
    }

    static func node(_ id: String = "a", clock: TestClock = TestClock(), configure: (inout Node.Configuration) -> Void = { _ in }) -> Node {
        var configuration = Node.Configuration(id: id)
        configuration.clock = clock
        configure(&configuration)
        return try! Node(configuration: configuration)
    }
}

/// Collects values handed to callbacks on other threads, and waits for a condition with a deadline.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }

    /// Polls `condition` until it holds or `timeoutSeconds` pass; returns whether it held.
    func wait(timeoutSeconds: Double = 10, until condition: ([Value]) -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while Date() < deadline {
            if condition(all) { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return condition(all)
    }
}
