/// A hash tree over the key space, updated incrementally on every write, that two nodes compare
/// to find where their states differ (anti-entropy).
///
/// Each key falls in one leaf bucket by its `StateKey.stableHash`; a bucket holds the XOR of
/// the hashes of its (key, version, value bytes or tombstone) (`DigestHash`); every inner node holds the XOR of its
/// children, so one write costs `depth + 1` XORs. Two tables with the same entries have equal
/// digests at every node of the tree, whatever order the entries arrived in; a difference in
/// one key shows in exactly one leaf and its ancestors.
@usableFromInline
package struct StateDigest: Hashable, Sendable {
    /// Children per inner node, as a power of two.
    public let fanoutBits: Int
    /// Levels below the root; there are `1 << (fanoutBits * depth)` leaves.
    public let depth: Int
    /// Level 0 is the root; level `depth` the leaves; all levels stored one after another.
    private var nodes: [UInt64]
    /// Where the leaves start in `nodes`, found once: every write needs it, and computing it
    /// takes an integer division.
    private let leafOffset: Int
    /// `bucket(of:)`'s shift and mask, found once: it runs on every write.
    private let bucketShift: Int
    private let leafMask: Int

    /// Trees must match in shape to be compared; the default has 65,536 leaves (69,905 nodes, 546 KiB).
    public init(fanoutBits: Int = 4, depth: Int = 4) {
        precondition(fanoutBits >= 1 && depth >= 0 && fanoutBits * depth <= 24, "digest shape too large")
        self.fanoutBits = fanoutBits
        self.depth = depth
        var total = 0
        for level in 0...depth { total += 1 << (fanoutBits * level) }
        nodes = [UInt64](repeating: 0, count: total)
        leafOffset = ((1 << (fanoutBits * depth)) - 1) / ((1 << fanoutBits) - 1)
        bucketShift = 64 - fanoutBits * depth
        leafMask = (1 << (fanoutBits * depth)) - 1
    }

    /// The digest of the whole state: equal on two nodes (up to hash collisions) iff their
    /// entries are equal.
    public var root: UInt64 { nodes[0] }

    /// Number of nodes at `level` (0 = root).
    public func width(ofLevel level: Int) -> Int { 1 << (fanoutBits * level) }

    /// The node hashes of one level, left to right.
    public func level(_ level: Int) -> ArraySlice<UInt64> {
        let start = offset(ofLevel: level)
        return nodes[start..<start + width(ofLevel: level)]
    }

    /// The hash of node `index` at `level`.
    public func node(level: Int, index: Int) -> UInt64 { nodes[offset(ofLevel: level) + index] }

    /// The leaf bucket a key falls in.
    public func bucket(of key: StateKey) -> Int {
        bucket(ofHash: key.stableHash)
    }

    /// `bucket(of:)` of the key whose `stableHash` is `hash`.
    @inline(__always)
    package func bucket(ofHash hash: UInt64) -> Int {
        // `&>>` by a shift below 64 (the shape is at most 24 bits): one instruction, where `>>`
        // by a computed amount also handles shifts of 64 and more with branches.
        Int(truncatingIfNeeded: hash &>> UInt64(bucketShift)) & leafMask
    }

    /// The hash one entry contributes to its bucket: of the key (its stable hash), the version
    /// (timestamp and node), and the value with its flags and expiry or the tombstone mark
    /// (`DigestHash`, protocol version 3).
    public static func contribution(of key: StateKey, _ entry: Entry) -> UInt64 {
        contribution(keyHash: key.stableHash, timestamp: entry.version.timestamp, nodeHash: entry.version.nodeHash,
                     value: entry.packedValue, expiresAtMilliseconds: entry.expiresAtMilliseconds, ownedByWriter: entry.ownedByWriter)
    }

    /// `contribution(of:_:)` of an entry given by its parts (normalised as `Entry` keeps them).
    package static func contribution(keyHash: UInt64, timestamp: HLCTimestamp, nodeHash: UInt64, value: borrowing PackedBytes?,
                                     expiresAtMilliseconds: UInt64?, ownedByWriter: Bool) -> UInt64 {
        // The value's flags as the wire has them: 1, plus 2 when it expires, 4 when owned.
        let flags: UInt64 = 1 | (expiresAtMilliseconds == nil ? 0 : 2) | (ownedByWriter ? 4 : 0)
        return DigestHash.entry(keyHash: keyHash, timestamp: timestamp.rawValue, nodeHash: nodeHash, value: value, flags: flags,
                                expiresAt: expiresAtMilliseconds)
    }

    /// Replaces `old` (nil when the key was absent) by `new` for `key`.
    public mutating func update(key: StateKey, from old: Entry?, to new: Entry) {
        var delta = Self.contribution(of: key, new)
        if let old { delta ^= Self.contribution(of: key, old) }
        apply(delta: delta, bucket: bucket(of: key))
    }

    /// Hands `hint` the address of the leaf a key of stable hash `hash` falls in, for a caller
    /// about to toggle it (`EntryTable.hintHomeCell`): the leaf level of the default shape is
    /// 512 KiB, and a write's leaf missed the cache (docs/design/0010-prefetch.md, "A single
    /// write hints its lines early").
    package func hintLeaf(ofHash hash: UInt64, hint: (UnsafeRawPointer) -> Void) {
        nodes.withUnsafeBufferPointer { nodes in
            guard let base = nodes.baseAddress else { return }
            hint(UnsafeRawPointer(base + leafOffset + bucket(ofHash: hash)))
        }
    }

    /// XORs a precomputed `contribution(of:_:)` of `key` into its leaf and ancestors: adds it
    /// when absent, takes it out when present.
    public mutating func toggle(contribution: UInt64, of key: StateKey) {
        toggle(contribution: contribution, ofHash: key.stableHash)
    }

    /// `toggle(contribution:of:)` for the key whose `stableHash` is `hash`.
    package mutating func toggle(contribution: UInt64, ofHash hash: UInt64) {
        apply(delta: contribution, bucket: bucket(ofHash: hash))
    }

    /// Takes `entry` of `key` out (used when a tombstone is collected).
    public mutating func remove(key: StateKey, entry: Entry) {
        apply(delta: Self.contribution(of: key, entry), bucket: bucket(of: key))
    }

    private mutating func apply(delta: UInt64, bucket: Int) {
        // The leaf's offset, then each parent's: the offset of level l - 1 is (offset(l) - 1) >> fanoutBits,
        // since offset(l) = 1 + F * offset(l - 1). One bounds check for the leaf covers the rest:
        // every parent's position is smaller than its child's. Masking shifts (`&>>`, the shape
        // keeps them below 64) and wrapping arithmetic keep the loop at a handful of instructions
        // a level, without the overflow and shift-range branches of the checked forms.
        let shift = fanoutBits
        var levelOffset = leafOffset
        var index = bucket
        // The leaf level holds `leafMask + 1` nodes at the end of `nodes`, so a bucket in range
        // is a position in range.
        precondition(bucket >= 0 && bucket <= leafMask, "bucket outside the digest")
        assert(levelOffset &+ index < nodes.count)
        nodes.withUnsafeMutableBufferPointer { nodes in
            let base = nodes.baseAddress!
            var level = depth
            while level >= 0 {
                base[levelOffset &+ index] ^= delta
                index = index &>> shift
                levelOffset = (levelOffset &- 1) &>> shift
                level &-= 1
            }
        }
    }

    /// Whether every inner node on the path from leaf `bucket` to the root holds the XOR of its
    /// children: what `apply` keeps true, checked after merges in debug builds.
    package func pathIsConsistent(toBucket bucket: Int) -> Bool {
        let fanout = 1 << fanoutBits
        var index = bucket
        var level = depth
        while level > 0 {
            index >>= fanoutBits
            level -= 1
            let first = offset(ofLevel: level + 1) + index * fanout
            var children: UInt64 = 0
            for child in first..<first + fanout { children ^= nodes[child] }
            if nodes[offset(ofLevel: level) + index] != children { return false }
        }
        return true
    }

    private func offset(ofLevel level: Int) -> Int {
        // 1 + F + F^2 + ... + F^(level-1), F = 1 << fanoutBits
        ((1 << (fanoutBits * level)) - 1) / ((1 << fanoutBits) - 1)
    }
}
