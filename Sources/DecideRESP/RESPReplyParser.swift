/// An incremental parser of replies, RESP2 and RESP3 (not streamed aggregates or strings).
///
/// Feed it bytes with `append`, call `next()` until it returns nil. Guarantees:
/// - The values (and the error, if any) do not depend on how the stream was cut into appends.
/// - Bounded: a bulk or verbatim length over `maxBulkBytes`, a reply line over
///   max(`maxBulkBytes`, 64) bytes, an aggregate
///   of more than `maxElements` elements (a map or attribute of n pairs counts 2n), or
///   aggregates nested deeper than `maxDepth` throw before anything is allocated for them;
///   capacity is reserved for at most 1024 elements up front. Parsing uses an explicit stack,
///   never recursion.
/// - Resumable: a partially received aggregate is kept between calls (its finished elements
///   are not parsed again), a partial line resumes its scan where it stopped, bulk data is not
///   scanned.
/// - A protocol fault throws a `RESPProtocolError`; the parser is then poisoned and every
///   later `next()` throws the same error.
///
/// Attributes (`|n`) are parsed and dropped; the value after them is returned in their place.
public struct RESPReplyParser: Sendable {
    /// Most bytes in one bulk string, blob error, verbatim string or reply line.
    public let maxBulkBytes: Int
    /// Most elements in one aggregate (a map or attribute of n pairs has 2n).
    public let maxElements: Int
    /// Most aggregates nested inside one another, counting the outermost.
    public let maxDepth: Int

    private var buffer: [UInt8] = []
    /// The first byte of the element being parsed; everything before it has been consumed.
    private var position = 0
    /// Where the search for the current line's `\r` resumes.
    private var scanFrom = 0
    /// A bulk-like element whose header was read: its type, length and where its data starts.
    private var pendingBulk: (type: UInt8, length: Int, dataStart: Int)?
    /// The aggregates being filled, innermost last.
    private var stack: [Frame] = []
    private var failure: RESPProtocolError?

    private struct Frame {
        var type: UInt8
        var remaining: Int
        var elements: [RESPValue]
    }

    /// A parser with empty buffers; negative limits count as 0.
    public init(maxBulkBytes: Int = 512 << 20, maxElements: Int = 1 << 24, maxDepth: Int = 64) {
        self.maxBulkBytes = min(max(maxBulkBytes, 0), 1 << 48)
        self.maxElements = min(max(maxElements, 0), 1 << 48)
        self.maxDepth = max(maxDepth, 0)
    }

    /// Bytes received but not yet consumed by a returned value or a partial aggregate.
    public var bufferedBytes: Int { buffer.count - position }

    /// Adds bytes received from the server.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Adds bytes received from the server.
    public mutating func append<C: Collection>(contentsOf bytes: C) where C.Element == UInt8 {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// The next whole reply, or nil when more bytes are needed.
    public mutating func next() throws(RESPProtocolError) -> RESPValue? {
        if let failure { throw failure }
        do {
            return try parse()
        } catch {
            failure = error
            throw error
        }
    }

    private mutating func parse() throws(RESPProtocolError) -> RESPValue? {
        while true {
            guard var value = try element() else { return nil }
            // Hand the value to the innermost aggregate; close aggregates that are full.
            while true {
                guard !stack.isEmpty else { return value }
                let top = stack.count - 1
                stack[top].elements.append(value)
                stack[top].remaining -= 1
                if stack[top].remaining > 0 { break }
                let frame = stack.removeLast()
                guard let aggregate = Self.aggregate(frame.type, frame.elements) else { break }
                value = aggregate
            }
        }
    }

    /// The next complete scalar or empty aggregate at `position`, advancing past it; pushes a
    /// frame for a non-empty aggregate header and reads on. Nil when more bytes are needed.
    private mutating func element() throws(RESPProtocolError) -> RESPValue? {
        while true {
            if let bulk = pendingBulk {
                guard buffer.count - bulk.dataStart >= bulk.length + 2 else { return nil }
                let end = bulk.dataStart + bulk.length
                guard buffer[end] == UInt8(ascii: "\r"), buffer[end + 1] == UInt8(ascii: "\n") else {
                    throw .expectedCRLFAfterBulkData
                }
                let data = Array(buffer[bulk.dataStart..<end])
                pendingBulk = nil
                position = end + 2
                scanFrom = position
                switch bulk.type {
                case UInt8(ascii: "!"): return .error(String(decoding: data, as: UTF8.self))
                case UInt8(ascii: "="):
                    guard data.count >= 4, data[3] == UInt8(ascii: ":") else { throw .invalidVerbatimString }
                    return .verbatim(format: String(decoding: data[..<3], as: UTF8.self), text: Array(data[4...]))
                default: return .bulk(data)
                }
            }

            guard position < buffer.count else { return nil }
            let type = buffer[position]
            guard Self.isType(type) else { throw .invalidReplyType(type) }
            guard let cr = try lineEnd() else { return nil }
            guard buffer[cr + 1] == UInt8(ascii: "\n") else { throw .invalidReplyLine(type: type) }
            let line = buffer[(position + 1)..<cr]
            let next = cr + 2
            switch type {
            case UInt8(ascii: "$"), UInt8(ascii: "!"), UInt8(ascii: "="):
                guard let length = RESPDecimal.parse(line), length >= -1 else { throw .invalidReplyLine(type: type) }
                if length == -1 {
                    guard type == UInt8(ascii: "$") else { throw .invalidReplyLine(type: type) }
                    advance(to: next)
                    return .null
                }
                guard length <= Int64(maxBulkBytes) else { throw .replyLengthOverLimit(type: type, limit: maxBulkBytes) }
                pendingBulk = (type, Int(length), next)
                advance(to: next)

            case UInt8(ascii: "*"), UInt8(ascii: "%"), UInt8(ascii: "~"), UInt8(ascii: ">"), UInt8(ascii: "|"):
                guard let count = RESPDecimal.parse(line), count >= -1 else { throw .invalidReplyLine(type: type) }
                if count == -1 {
                    guard type == UInt8(ascii: "*") else { throw .invalidReplyLine(type: type) }
                    advance(to: next)
                    return .null
                }
                let pairs = type == UInt8(ascii: "%") || type == UInt8(ascii: "|")
                guard count <= Int64(pairs ? maxElements / 2 : maxElements) else {
                    throw .replyLengthOverLimit(type: type, limit: maxElements)
                }
                guard stack.count < maxDepth else { throw .replyTooDeep(maxDepth: maxDepth) }
                let elements = Int(count) * (pairs ? 2 : 1)
                advance(to: next)
                if elements == 0 {
                    guard let empty = Self.aggregate(type, []) else { continue }
                    return empty
                }
                var frame = Frame(type: type, remaining: elements, elements: [])
                frame.elements.reserveCapacity(min(elements, 1024))
                stack.append(frame)

            default:
                let value = try Self.scalar(type, line)
                advance(to: next)
                return value
            }
        }
    }

    private mutating func advance(to index: Int) {
        position = index
        scanFrom = index
    }

    /// Most bytes in a reply line after its type byte: `maxBulkBytes`, but at least 64 so
    /// that numbers and lengths always fit.
    private var maxLineBytes: Int { max(maxBulkBytes, 64) }

    /// The index of the `\r` ending the line at `position` when the byte after it has arrived
    /// too, else nil. Throws once more than `maxLineBytes` bytes follow the type byte
    /// without a `\r`.
    private mutating func lineEnd() throws(RESPProtocolError) -> Int? {
        let searchEnd = min(buffer.count, position + 1 + maxLineBytes + 1)
        var index = max(scanFrom, position + 1)
        while index < searchEnd && buffer[index] != UInt8(ascii: "\r") { index += 1 }
        scanFrom = index
        guard index < searchEnd else {
            if buffer.count - (position + 1) > maxLineBytes { throw .replyLineTooLong(limit: maxLineBytes) }
            return nil
        }
        return index + 1 < buffer.count ? index : nil
    }

    private static func isType(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "$"), UInt8(ascii: "*"),
             UInt8(ascii: "_"), UInt8(ascii: ","), UInt8(ascii: "#"), UInt8(ascii: "("), UInt8(ascii: "!"),
             UInt8(ascii: "="), UInt8(ascii: "%"), UInt8(ascii: "~"), UInt8(ascii: ">"), UInt8(ascii: "|"):
            return true
        default:
            return false
        }
    }

    /// The value of a one-line reply of `type` whose text is `line`.
    private static func scalar(_ type: UInt8, _ line: ArraySlice<UInt8>) throws(RESPProtocolError) -> RESPValue {
        switch type {
        case UInt8(ascii: "+"): return .simple(String(decoding: line, as: UTF8.self))
        case UInt8(ascii: "-"): return .error(String(decoding: line, as: UTF8.self))
        case UInt8(ascii: ":"):
            let unsigned = line.first == UInt8(ascii: "+") && line.dropFirst().first != UInt8(ascii: "-")
            guard let value = RESPDecimal.parse(unsigned ? line.dropFirst() : line) else {
                throw .invalidReplyLine(type: type)
            }
            return .integer(value)
        case UInt8(ascii: "_"):
            guard line.isEmpty else { throw .invalidReplyLine(type: type) }
            return .null
        case UInt8(ascii: "#"):
            if line.elementsEqual([UInt8(ascii: "t")]) { return .boolean(true) }
            if line.elementsEqual([UInt8(ascii: "f")]) { return .boolean(false) }
            throw .invalidReplyLine(type: type)
        case UInt8(ascii: ","):
            guard line.count <= 64, let value = Double(String(decoding: line, as: UTF8.self)) else {
                throw .invalidReplyLine(type: type)
            }
            return .double(value)
        case UInt8(ascii: "("):
            let digits = line.first == UInt8(ascii: "-") || line.first == UInt8(ascii: "+") ? line.dropFirst() : line
            guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                throw .invalidReplyLine(type: type)
            }
            return .bigNumber(String(decoding: line, as: UTF8.self))
        default:
            throw .invalidReplyType(type)
        }
    }

    /// The value of a finished aggregate of `type`, or nil for an attribute (dropped).
    private static func aggregate(_ type: UInt8, _ elements: [RESPValue]) -> RESPValue? {
        switch type {
        case UInt8(ascii: "%"): return .map(elements)
        case UInt8(ascii: "~"): return .set(elements)
        case UInt8(ascii: ">"): return .push(elements)
        case UInt8(ascii: "|"): return nil
        default: return .array(elements)
        }
    }

    /// Drops consumed bytes when that is cheap relative to what was consumed (see
    /// `RESPRequestParser`): everything before `position` is already parsed into values.
    private mutating func compact() {
        let consumed = position
        guard consumed > 0 else { return }
        let remaining = buffer.count - consumed
        if remaining == 0 {
            if buffer.capacity > 1 << 20 { buffer = [] } else { buffer.removeAll(keepingCapacity: true) }
        } else if consumed >= 4096 && consumed >= remaining {
            buffer.removeSubrange(0..<consumed)
        } else {
            return
        }
        position = 0
        scanFrom -= consumed
        if let bulk = pendingBulk { pendingBulk = (bulk.type, bulk.length, bulk.dataStart - consumed) }
    }
}
