/// An incremental parser of client requests: multibulk commands (`*N\r\n$len\r\n…\r\n`) and
/// inline commands (one line split like Redis's `sdssplitargs`, see `RESPInlineSplitter`).
///
/// Feed it whatever the socket delivered with `append`, then call `next()` until it returns
/// nil. Guarantees:
/// - The commands (and the error, if any) do not depend on how the stream was cut into
///   `append` calls: fed whole, in pieces or byte by byte, it returns the same results.
/// - Work is linear in the bytes received: a command's partial header line is never scanned
///   twice, bulk data is never scanned, consumed bytes are compacted away in amortised O(1)
///   per byte.
/// - Every count and length a peer declares is checked against `limits` before anything is
///   allocated for it, and no capacity beyond min(count, 1024) arguments is reserved up front.
/// - A protocol fault throws a `RESPProtocolError` (never traps). The parser is then poisoned:
///   every later `next()` throws the same error (reply it and close the connection).
///
/// As Redis does, a request starting with `*` is multibulk and anything else is inline;
/// empty inline lines, blank lines and multibulks with a count of 0 or less are skipped.
/// Stricter than Redis, which would ignore the byte after a header's `\r` and the two bytes
/// after bulk data, a `\r` in a header not followed by `\n` is an invalid (multi)bulk length
/// and bulk data not followed by `\r\n` is `.expectedCRLFAfterBulkData`. Size limits are
/// applied to what a line or command declares, not to how much happens to be buffered, so that
/// the outcome cannot depend on read sizes.
public struct RESPRequestParser: Sendable {
    /// The limits in force, each clamped to 0...2^48.
    public private(set) var limits: RESPLimits
    private var buffer: [UInt8] = []
    private var cursor = Cursor()
    private var failure: RESPProtocolError?

    /// A parser with empty buffers.
    public init(limits: RESPLimits = RESPLimits()) {
        self.limits = Self.clamped(limits)
    }

    /// Puts `limits` in force (clamped as in `init`) for every header the parser reads from
    /// now on: a server tightens them while a client is not authenticated and widens them once
    /// it is. Call it between commands (after `next()` returned a command or nil): the lengths
    /// of the command being assembled were already checked against the limits before, and stay
    /// accepted; the next header is judged by the new ones.
    public mutating func setLimits(_ limits: RESPLimits) {
        self.limits = Self.clamped(limits)
    }

    private static func clamped(_ limits: RESPLimits) -> RESPLimits {
        func clamped(_ value: Int) -> Int { min(max(value, 0), 1 << 48) }
        var limits = limits
        limits.maxArguments = clamped(limits.maxArguments)
        limits.maxBulkBytes = clamped(limits.maxBulkBytes)
        limits.maxInlineBytes = clamped(limits.maxInlineBytes)
        limits.maxRequestBytes = clamped(limits.maxRequestBytes)
        return limits
    }

    /// Bytes received but not yet returned as (part of) a command, including the partial
    /// command being assembled: what this connection holds in memory, for backpressure. One
    /// command may need up to `limits.maxRequestBytes` buffered before it completes, so a
    /// reader that pauses on this figure must not pause below that while `next()` is nil.
    public var bufferedBytes: Int { buffer.count - cursor.start }

    /// How many bytes the line scans have examined so far: grows with the bytes received,
    /// never with how often a partial line was looked at (tests assert on it).
    package var scannedByteCount: Int { cursor.scannedByteCount }

    /// Bytes held in the buffer, consumed ones not yet compacted away included (tests).
    package var storedByteCount: Int { buffer.count }

    /// Adds bytes received from the client.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Adds bytes received from the client.
    public mutating func append<C: Collection>(contentsOf bytes: C) where C.Element == UInt8 {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// The next whole command's arguments (never empty), or nil when more bytes are needed.
    ///
    /// The slices may share the parser's storage; as values they never change (copy on
    /// write), but holding them across the next `append` makes that append copy the buffer,
    /// so copy what must outlive the command (`Array(slice)`). Their indices are not 0-based:
    /// use `startIndex` / `first`.
    public mutating func next() throws(RESPProtocolError) -> [ArraySlice<UInt8>]? {
        var arguments: [ArraySlice<UInt8>] = []
        return try next(into: &arguments) ? arguments : nil
    }

    /// `next()` into `arguments`, whose storage is reused: replaced by the next whole
    /// command's arguments (true), or emptied when more bytes are needed (false). A caller that
    /// keeps one array for every command saves an allocation per command; it must empty the
    /// array (`removeAllKeepingStorage()`, which also releases the storage of a huge command)
    /// before the next `append`, which otherwise copies the buffer its slices share.
    public mutating func next(into arguments: inout [ArraySlice<UInt8>]) throws(RESPProtocolError) -> Bool {
        arguments.removeAllKeepingStorage()
        if let failure { throw failure }
        let limits = self.limits
        let outcome = buffer.withUnsafeBufferPointer { bytes in
            Result { () throws(RESPProtocolError) in try cursor.advance(bytes, limits) }
        }
        switch outcome {
        case .failure(let error):
            failure = error
            throw error
        case .success(.needMoreBytes):
            return false
        case .success(.inline(let inline)):
            arguments = inline
            return true
        case .success(.multibulk(let commandStart)):
            for range in cursor.argumentRanges {
                arguments.append(buffer[(commandStart + range.lowerBound)..<(commandStart + range.upperBound)])
            }
            cursor.argumentRanges.removeAllKeepingStorage()
            return true
        }
    }

    /// A whole command `peekCommands` found ahead: its arguments as bytes of the parser's
    /// buffer, valid only inside the `body` call that received it.
    public struct PeekedCommand {
        fileprivate let bytes: UnsafeBufferPointer<UInt8>
        fileprivate let start: Int
        fileprivate let ranges: [Range<Int>]

        /// How many arguments the command has (at least one).
        public var count: Int { ranges.count }

        /// Argument `index` (0 is the command's name).
        public subscript(index: Int) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: bytes[(start + ranges[index].lowerBound)..<(start + ranges[index].upperBound)])
        }
    }

    /// Looks at up to `maxCommands` whole multibulk commands already received after those
    /// `next()` returned, without consuming them or building their arguments, and hands each to
    /// `body`, in order, until it returns false. It stops early at an inline command, a command
    /// not wholly received, or a protocol fault (which `next()` then throws in its turn). What
    /// `next()` returns afterwards is unchanged. For hints, such as prefetching the keys a
    /// pipelined run of reads will look up.
    public func peekCommands(maxCommands: Int, _ body: (PeekedCommand) -> Bool) {
        guard failure == nil, maxCommands > 0 else { return }
        var ahead = cursor
        let limits = self.limits
        buffer.withUnsafeBufferPointer { bytes in
            for _ in 0..<maxCommands {
                let outcome: Outcome
                do { outcome = try ahead.advance(bytes, limits) } catch { return }
                guard case .multibulk(let commandStart) = outcome else { return }
                guard body(PeekedCommand(bytes: bytes, start: commandStart, ranges: ahead.argumentRanges)) else { return }
                ahead.argumentRanges.removeAllKeepingStorage()
            }
        }
    }

    /// Drops consumed bytes when that is cheap relative to what was consumed: at once when
    /// everything was consumed, otherwise only once the consumed prefix is at least 4 KB and
    /// at least as long as the rest, so each byte is moved at most once on average. Gives
    /// a large buffer back once it is mostly empty.
    private mutating func compact() {
        let consumed = cursor.start
        guard consumed > 0 else { return }
        let remaining = buffer.count - consumed
        if remaining == 0 {
            if buffer.capacity > Self.retainedCapacityBytes {
                buffer = []
            } else {
                buffer.removeAll(keepingCapacity: true)
            }
        } else if consumed >= 4096 && consumed >= remaining {
            if buffer.capacity > Self.retainedCapacityBytes && remaining * 4 < buffer.capacity {
                buffer = Array(buffer[consumed...])
            } else {
                buffer.removeSubrange(0..<consumed)
            }
        } else {
            return
        }
        cursor.start = 0
    }

    /// Buffer capacity kept for reuse once its bytes are consumed; more is released.
    private static let retainedCapacityBytes = 1 << 20
}

extension RESPRequestParser {
    /// What `Cursor.advance` found.
    private enum Outcome {
        case needMoreBytes
        /// A multibulk command starting at this buffer index; its arguments are
        /// `Cursor.argumentRanges`, relative to that index.
        case multibulk(commandStart: Int)
        case inline([ArraySlice<UInt8>])
    }

    /// Where the parser is inside the current command.
    private enum Phase {
        case commandStart
        case inline
        case countLine
        case bulkHeaderLine
        case bulkData(length: Int)
    }

    /// The parser's position and partial command: everything except the bytes, so it can be
    /// advanced while the bytes are borrowed. Offsets (`lineStart`, `scanFrom`,
    /// `argumentRanges`) are relative to `start`, the current command's first byte, so
    /// compaction only resets `start`.
    private struct Cursor {
        var start = 0
        var phase = Phase.commandStart
        /// Where the current line (or bulk data) begins.
        var lineStart = 0
        /// Where the search for the current line's end resumes: bytes before it were examined.
        var scanFrom = 0
        var argumentsLeft = 0
        var argumentRanges: [Range<Int>] = []
        var scannedByteCount = 0

        mutating func advance(
            _ bytes: UnsafeBufferPointer<UInt8>, _ limits: RESPLimits
        ) throws(RESPProtocolError) -> Outcome {
            while true {
                switch phase {
                case .commandStart:
                    guard start < bytes.count else { return .needMoreBytes }
                    phase = bytes[start] == UInt8(ascii: "*") ? .countLine : .inline
                    lineStart = 0
                    scanFrom = 0

                case .inline:
                    let searchEnd = min(bytes.count, start + limits.maxInlineBytes + 1)
                    guard let newline = find(UInt8(ascii: "\n"), in: bytes, upTo: searchEnd) else {
                        if bytes.count - start > limits.maxInlineBytes { throw .tooBigInlineRequest }
                        return .needMoreBytes
                    }
                    var lineEnd = newline
                    if lineEnd > start && bytes[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
                    scannedByteCount += lineEnd - start
                    let arguments = try RESPInlineSplitter.split(bytes, start..<lineEnd)
                    start = newline + 1
                    phase = .commandStart
                    if !arguments.isEmpty { return .inline(arguments) }

                case .countLine:
                    guard let cr = try headerLineEnd(bytes, limits, tooLong: .tooBigMultibulkCountString) else {
                        return .needMoreBytes
                    }
                    guard bytes[cr + 1] == UInt8(ascii: "\n"),
                          let count = RESPDecimal.parse(bytes, (start + 1)..<cr),
                          count <= Int64(limits.maxArguments)
                    else { throw .invalidMultibulkLength }
                    let next = cr + 2 - start
                    if count <= 0 {
                        start += next
                        phase = .commandStart
                        continue
                    }
                    if next > limits.maxRequestBytes { throw .requestTooLarge(maxRequestBytes: limits.maxRequestBytes) }
                    argumentsLeft = Int(count)
                    argumentRanges.removeAllKeepingStorage()
                    argumentRanges.reserveCapacity(min(argumentsLeft, 1024))
                    lineStart = next
                    scanFrom = next
                    phase = .bulkHeaderLine

                case .bulkHeaderLine:
                    guard let cr = try headerLineEnd(bytes, limits, tooLong: .tooBigBulkCountString) else {
                        return .needMoreBytes
                    }
                    let line = start + lineStart
                    guard bytes[line] == UInt8(ascii: "$") else { throw .expectedDollar(got: bytes[line]) }
                    guard bytes[cr + 1] == UInt8(ascii: "\n"),
                          let length = RESPDecimal.parse(bytes, (line + 1)..<cr),
                          length >= 0, length <= Int64(limits.maxBulkBytes)
                    else { throw .invalidBulkLength }
                    let dataStart = cr + 2 - start
                    if dataStart + Int(length) + 2 > limits.maxRequestBytes {
                        throw .requestTooLarge(maxRequestBytes: limits.maxRequestBytes)
                    }
                    lineStart = dataStart
                    phase = .bulkData(length: Int(length))

                case .bulkData(let length):
                    let data = start + lineStart
                    guard bytes.count - data >= length + 2 else { return .needMoreBytes }
                    guard bytes[data + length] == UInt8(ascii: "\r"), bytes[data + length + 1] == UInt8(ascii: "\n")
                    else { throw .expectedCRLFAfterBulkData }
                    argumentRanges.append(lineStart..<(lineStart + length))
                    argumentsLeft -= 1
                    let next = lineStart + length + 2
                    if argumentsLeft == 0 {
                        let commandStart = start
                        start += next
                        phase = .commandStart
                        return .multibulk(commandStart: commandStart)
                    }
                    lineStart = next
                    scanFrom = next
                    phase = .bulkHeaderLine
                }
            }
        }

        /// The index of the first `byte` in `bytes[start + scanFrom ..< searchEnd]`, or nil;
        /// either way `scanFrom` moves past what was examined (up to the byte found).
        private mutating func find(_ byte: UInt8, in bytes: UnsafeBufferPointer<UInt8>, upTo searchEnd: Int) -> Int? {
            var index = start + scanFrom
            let from = index
            while index < searchEnd && bytes[index] != byte { index += 1 }
            scannedByteCount += index - from
            scanFrom = index - start
            return index < searchEnd ? index : nil
        }

        /// The index of the `\r` ending the header line at `lineStart` when the byte after it
        /// has arrived too; nil when more bytes are needed. Throws `tooLong` once more than
        /// `maxInlineBytes` bytes precede the `\r`.
        private mutating func headerLineEnd(
            _ bytes: UnsafeBufferPointer<UInt8>, _ limits: RESPLimits, tooLong: RESPProtocolError
        ) throws(RESPProtocolError) -> Int? {
            let line = start + lineStart
            let searchEnd = min(bytes.count, line + limits.maxInlineBytes + 1)
            guard let cr = find(UInt8(ascii: "\r"), in: bytes, upTo: searchEnd) else {
                if bytes.count - line > limits.maxInlineBytes { throw tooLong }
                return nil
            }
            return cr + 1 < bytes.count ? cr : nil
        }
    }
}
