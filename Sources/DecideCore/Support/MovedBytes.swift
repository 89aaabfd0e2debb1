/// `count` bytes at `base` (nil: nothing allocated yet) moved into a new allocation of
/// `capacity` bytes (at least `count`), the old allocation freed: the growth step of the byte
/// buffers that own their memory (`ReceivedDeltas`' held bytes, DecideUV's `FrameBuffer`).
/// The caller frees the result with `deallocate()`.
package func movedBytes(from base: UnsafeMutableRawPointer?, count: Int, toCapacity capacity: Int) -> UnsafeMutableRawPointer {
    precondition(capacity >= count, "movedBytes: a capacity below the bytes to move")
    let memory = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    if let base {
        memory.copyMemory(from: base, byteCount: count)
        base.deallocate()
    }
    return memory
}
