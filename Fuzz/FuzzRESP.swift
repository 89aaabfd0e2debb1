// libFuzzer entry for DecideRESP: the request parser, the reply parser and writer, and glob
// patterns. Built by `make fuzz` / `make fuzz-smoke` (mk/transport.mk) with swiftc
// -sanitize=fuzzer,address together with every file under Sources/DecideRESP.
//
// Input: byte 0 picks the limits (small ones half the time, so every limit is reached), bytes 1-2
// a split position, the rest is the stream.
//
// Oracles: nothing traps; a peek ahead sees exactly the next commands and consumes nothing;
// the request stream fed whole, split at the chosen position, and (when
// short) byte by byte gives the same commands and the same error; every command re-encoded as a
// multibulk parses back to itself, and written as an array of bulk strings reads back as one;
// the reply parser is split-invariant the same way; glob matching the input's halves
// terminates, and an escaped text matches itself.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRESP(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard input.count >= 3 else { return 0 }
    let knob = input[0]
    let stream = Array(input[3...])
    let split = stream.isEmpty ? 0 : (Int(input[1]) << 8 | Int(input[2])) % (stream.count + 1)

    // 1. Requests.
    var limits = RESPLimits()
    if knob & 1 == 0 {
        limits.maxArguments = 1 + Int(knob >> 1 & 7)
        limits.maxBulkBytes = Int(knob >> 4 & 7) * 3
        limits.maxInlineBytes = 2 + Int(knob >> 5) * 7
        limits.maxRequestBytes = 8 + Int(knob) / 2
    }
    let whole = fuzzRequests(stream, cuts: [], limits)
    let halves = fuzzRequests(stream, cuts: [split], limits)
    precondition(whole.commands == halves.commands, "split changed the commands")
    precondition(whole.error == halves.error, "split changed the error")
    if stream.count <= 512 {
        let trickled = fuzzRequests(stream, cuts: Array(0..<stream.count), limits)
        precondition(whole.commands == trickled.commands && whole.error == trickled.error, "byte by byte differs")
    }
    for command in whole.commands {
        precondition(!command.isEmpty, "an empty command was returned")
        let reparsed = fuzzRequests(fuzzMultibulk(command), cuts: [], RESPLimits())
        precondition(reparsed.error == nil && reparsed.commands == [command], "re-encoding changed a command")
        var writer = RESPWriter(protocolVersion: Int(knob & 1) + 2)
        writer.arrayHeader(command.count)
        for argument in command { writer.bulk(argument) }
        var replies = RESPReplyParser()
        replies.append(contentsOf: writer.bytes)
        let read = try? replies.next()
        precondition(read == .array(command.map { .bulk($0) }), "written command read back differently")
    }

    // 2. Replies.
    let maxBulkBytes = knob & 2 == 0 ? Int(knob >> 2 & 15) : 512 << 20
    let maxElements = knob & 2 == 0 ? Int(knob >> 4 & 7) : 1 << 24
    let maxDepth = knob & 2 == 0 ? Int(knob >> 5) : 64
    let make = { RESPReplyParser(maxBulkBytes: maxBulkBytes, maxElements: maxElements, maxDepth: maxDepth) }
    let wholeReplies = fuzzReplies(stream, cuts: [], make)
    let splitReplies = fuzzReplies(stream, cuts: [split], make)
    precondition(fuzzSame(wholeReplies.values, splitReplies.values), "split changed the replies")
    precondition(wholeReplies.error == splitReplies.error, "split changed the reply error")
    if stream.count <= 512 {
        let trickled = fuzzReplies(stream, cuts: Array(0..<stream.count), make)
        precondition(fuzzSame(wholeReplies.values, trickled.values) && wholeReplies.error == trickled.error,
                     "byte by byte changed the replies")
    }

    // 3. Globs: must terminate (the matcher is O(pattern × string)); escaping is exact.
    let pattern = stream[..<split]
    let string = stream[split...]
    let glob = RESPGlob(pattern)
    precondition(glob.matches(string) == RESPGlob.matches(pattern, string), "compiled and one-shot globs differ")
    precondition(RESPGlob.matches(RESPGlob.escape(pattern), pattern), "an escaped text does not match itself")
    return 0
}

private func fuzzRequests(
    _ stream: [UInt8], cuts: [Int], _ limits: RESPLimits
) -> (commands: [[[UInt8]]], error: RESPProtocolError?) {
    var parser = RESPRequestParser(limits: limits)
    var commands: [[[UInt8]]] = []
    var from = 0
    for cut in cuts + [stream.count] where cut >= from {
        parser.append(contentsOf: stream[from..<cut])
        from = cut
        do {
            while true {
                // Every peeked command is what `next()` returns next, and peeking consumes nothing.
                var peeked: [[[UInt8]]] = []
                let buffered = parser.bufferedBytes
                parser.peekCommands(maxCommands: 3) { command in
                    peeked.append((0..<command.count).map { Array(command[$0]) })
                    return true
                }
                precondition(parser.bufferedBytes == buffered, "a peek consumed bytes")
                var ahead = parser
                for expected in peeked {
                    precondition((try? ahead.next())?.map({ Array($0) }) == expected, "a peek saw another command")
                }
                guard let command = try parser.next() else { break }
                commands.append(command.map { Array($0) })
            }
        } catch {
            // Poisoned: the same error again, whatever arrives next.
            parser.append(contentsOf: [UInt8(ascii: "\n")])
            do {
                _ = try parser.next()
                preconditionFailure("a poisoned parser returned a command")
            } catch let again {
                precondition(again == error, "a poisoned parser changed its error")
            }
            return (commands, error)
        }
    }
    return (commands, nil)
}

private func fuzzReplies(
    _ stream: [UInt8], cuts: [Int], _ make: () -> RESPReplyParser
) -> (values: [RESPValue], error: RESPProtocolError?) {
    var parser = make()
    var values: [RESPValue] = []
    var from = 0
    for cut in cuts + [stream.count] where cut >= from {
        parser.append(contentsOf: stream[from..<cut])
        from = cut
        do {
            while let value = try parser.next() { values.append(value) }
        } catch {
            return (values, error)
        }
    }
    return (values, nil)
}

private func fuzzMultibulk(_ arguments: [[UInt8]]) -> [UInt8] {
    var out = Array("*\(arguments.count)\r\n".utf8)
    for argument in arguments { out += Array("$\(argument.count)\r\n".utf8) + argument + [13, 10] }
    return out
}

/// Equality where a NaN double equals a NaN double (a parsed `,nan` is not equal to itself).
private func fuzzSame(_ a: [RESPValue], _ b: [RESPValue]) -> Bool {
    guard a.count == b.count else { return false }
    return zip(a, b).allSatisfy(fuzzSame)
}

private func fuzzSame(_ a: RESPValue, _ b: RESPValue) -> Bool {
    switch (a, b) {
    case let (.double(x), .double(y)): return x == y || (x.isNaN && y.isNaN)
    case let (.array(x), .array(y)), let (.map(x), .map(y)), let (.set(x), .set(y)), let (.push(x), .push(y)):
        return fuzzSame(x, y)
    default: return a == b
    }
}
