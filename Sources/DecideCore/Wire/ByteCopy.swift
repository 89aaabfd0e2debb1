extension Array where Element == UInt8 {
    /// A copy of `raw` through the copy specialised for `UInt8` buffers, which copies with
    /// `memcpy`. `Array(raw)` iterates an `UnsafeRawBufferPointer` generically, and
    /// `Array(unsafeUninitializedCapacity:)` allocates through an unspecialised runtime call
    /// (callgrind: ~650 instructions a call for a 66-byte value;
    /// docs/design/0015-the-replicated-update.md, "Alternatives tried and not kept"). Binding
    /// bytes to `UInt8` is always allowed: it is a trivial type.
    package init(copying raw: UnsafeRawBufferPointer) {
        self.init(raw.bindMemory(to: UInt8.self))
    }
}
