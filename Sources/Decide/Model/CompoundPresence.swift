import DecideCore
import Synchronization

/// Whether a node's table has ever held an element of a kind laid out on a collection (a
/// counter's slot, a set's dot), readable without the node's lock: a front end skips its
/// counter and set checks (a plain SET resetting a counter or emptying a set of the same name)
/// until one exists. Never goes back to false.
package final class CompoundPresence: Sendable {
    private let flag = Atomic<Bool>(false)
    package var exists: Bool { flag.load(ordering: .relaxed) }

    /// Whether `key` belongs to a kind laid out on a collection (`CounterSlot`, `SetDot`): its
    /// id starts `FF kind 01`, which no JSON text does, so it is no element of a
    /// `CollectionState` or `IndexState` of the same name.
    package static func isCompound(_ key: StateKey) -> Bool {
        key.elementCount > 3 && key.packedElement.withUnsafeBytes { ElementGroup.isCompound($0) }
    }

    /// Marks that `key` was merged, when it is a compound element.
    @inline(__always)
    func note(_ key: StateKey) {
        if !exists, Self.isCompound(key) { flag.store(true, ordering: .relaxed) }
    }

    func noteWritten() { if !exists { flag.store(true, ordering: .relaxed) } }
}
