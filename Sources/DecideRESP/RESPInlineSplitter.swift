/// Splits one inline command line into arguments the way Redis's `sdssplitargs` does.
///
/// - Arguments are separated by runs of C `isspace` bytes (space, `\t`, `\n`, `\v`, `\f`, `\r`);
///   an unquoted argument ends at space, `\t`, `\n` or `\r` (so `\v` and `\f` inside one stay).
/// - `"double quotes"` take the escapes `\n \r \t \b \a`, `\xHH` (two hex digits) and `\c` for
///   any other byte c (so `\\` and `\"`); `'single quotes'` take only `\'`.
/// - A quote may open in the middle of an argument (`a"b c"` is `ab c`); a closing quote must
///   be followed by whitespace or the end of the line, and every quote must close, otherwise
///   the line is refused with `.unbalancedQuotes`.
/// - Unlike C, a NUL byte is an ordinary byte, not the end of the line.
enum RESPInlineSplitter {
    /// The arguments of `line[range]` (a line without its `\n` and trailing `\r`), each a
    /// slice of one fresh array; none for a blank line. Reads only indices inside `range`.
    static func split(
        _ line: UnsafeBufferPointer<UInt8>, _ range: Range<Int>
    ) throws(RESPProtocolError) -> [ArraySlice<UInt8>] {
        var storage: [UInt8] = []
        storage.reserveCapacity(range.count)
        var bounds: [Range<Int>] = []
        var p = range.lowerBound
        let end = range.upperBound
        while true {
            while p < end && isSpace(line[p]) { p += 1 }
            if p == end { break }
            let tokenStart = storage.count
            var inDoubleQuotes = false
            var inSingleQuotes = false
            token: while true {
                if inDoubleQuotes {
                    guard p < end else { throw .unbalancedQuotes }
                    let byte = line[p]
                    if byte == UInt8(ascii: "\\"), p + 3 < end, line[p + 1] == UInt8(ascii: "x"),
                       let high = hexValue(line[p + 2]), let low = hexValue(line[p + 3]) {
                        storage.append(high << 4 | low)
                        p += 4
                    } else if byte == UInt8(ascii: "\\"), p + 1 < end {
                        storage.append(unescaped(line[p + 1]))
                        p += 2
                    } else if byte == UInt8(ascii: "\"") {
                        if p + 1 < end && !isSpace(line[p + 1]) { throw .unbalancedQuotes }
                        p += 1
                        break token
                    } else {
                        storage.append(byte)
                        p += 1
                    }
                } else if inSingleQuotes {
                    guard p < end else { throw .unbalancedQuotes }
                    let byte = line[p]
                    if byte == UInt8(ascii: "\\"), p + 1 < end, line[p + 1] == UInt8(ascii: "'") {
                        storage.append(UInt8(ascii: "'"))
                        p += 2
                    } else if byte == UInt8(ascii: "'") {
                        if p + 1 < end && !isSpace(line[p + 1]) { throw .unbalancedQuotes }
                        p += 1
                        break token
                    } else {
                        storage.append(byte)
                        p += 1
                    }
                } else {
                    guard p < end else { break token }
                    let byte = line[p]
                    p += 1
                    switch byte {
                    case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                        break token
                    case UInt8(ascii: "\""): inDoubleQuotes = true
                    case UInt8(ascii: "'"): inSingleQuotes = true
                    default: storage.append(byte)
                    }
                }
            }
            bounds.append(tokenStart..<storage.count)
        }
        return bounds.map { storage[$0] }
    }

    /// C `isspace` in the "C" locale.
    @inline(__always)
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || (byte >= 0x09 && byte <= 0x0D)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// The byte `\c` stands for inside double quotes.
    static func unescaped(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "n"): return UInt8(ascii: "\n")
        case UInt8(ascii: "r"): return UInt8(ascii: "\r")
        case UInt8(ascii: "t"): return UInt8(ascii: "\t")
        case UInt8(ascii: "b"): return 0x08
        case UInt8(ascii: "a"): return 0x07
        default: return byte
        }
    }
}
