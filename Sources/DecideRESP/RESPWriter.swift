/// Appends replies, in RESP2 or RESP3, to `bytes`.
///
/// Guarantees: every method appends exactly one well-framed reply (or aggregate header) in the
/// connection's protocol version, so a reply parser reads back what was written (RESP3 types
/// degrade to their RESP2 forms as Redis does). Text that must fit on one line (simple strings,
/// errors) has its CR and LF bytes replaced by spaces. Integers are formatted straight into the
/// buffer, without `String`.
public struct RESPWriter: Sendable {
    /// The replies written so far, ready to send.
    public var bytes: [UInt8] = []
    /// 3 for RESP3 (after `HELLO 3`); any other value writes RESP2.
    public var protocolVersion: Int

    /// An empty writer for the given protocol version (2 or 3).
    public init(protocolVersion: Int = 2) {
        self.protocolVersion = protocolVersion
    }

    private var isRESP3: Bool { protocolVersion == 3 }

    /// Empties `bytes` (after they were sent), keeping the capacity unless told otherwise.
    public mutating func removeAll(keepingCapacity: Bool = true) {
        bytes.removeAll(keepingCapacity: keepingCapacity)
    }

    /// `+text\r\n`, CR and LF in `text` replaced by spaces.
    public mutating func simpleString(_ text: String) {
        bytes.append(UInt8(ascii: "+"))
        appendLine(text)
    }

    /// `-text\r\n`, CR and LF in `text` replaced by spaces. `text` starts with its own error
    /// code, e.g. "ERR unknown command" or "WRONGPASS invalid username-password pair".
    public mutating func error(_ text: String) {
        bytes.append(UInt8(ascii: "-"))
        appendLine(text)
    }

    /// `:value\r\n`.
    public mutating func integer(_ value: Int) {
        bytes.append(UInt8(ascii: ":"))
        RESPDecimal.append(value, to: &bytes)
        appendCRLF()
    }

    /// `$count\r\n` + the bytes + `\r\n`: a binary-safe string.
    ///
    /// The contiguous forms below are what a GET reply takes: a caller in another module reaches
    /// this generic one unspecialised, through its witness tables and the standard library's
    /// unspecialised `append(contentsOf:)` (0.24 µs of each GET at pipeline 1 in syncnode's profile).
    public mutating func bulk(_ value: some Collection<UInt8>) {
        header(UInt8(ascii: "$"), value.count)
        bytes.append(contentsOf: value)
        appendCRLF()
    }

    /// `$count\r\n` + the bytes + `\r\n`, copied from contiguous memory.
    public mutating func bulk(_ value: UnsafeRawBufferPointer) {
        header(UInt8(ascii: "$"), value.count)
        bytes.append(contentsOf: value)
        appendCRLF()
    }

    /// `$count\r\n` + the bytes + `\r\n`.
    public mutating func bulk(_ value: ArraySlice<UInt8>) {
        value.withUnsafeBytes { bulk($0) }
    }

    /// `$count\r\n` + the bytes + `\r\n`.
    public mutating func bulk(_ value: [UInt8]) {
        value.withUnsafeBytes { bulk($0) }
    }

    /// The UTF-8 of `text` as a bulk string.
    public mutating func bulk(_ text: String) {
        bulk(text.utf8)
    }

    /// The null reply: RESP2 `$-1\r\n` (null bulk string), RESP3 `_\r\n`.
    public mutating func null() {
        if isRESP3 { appendASCII("_\r\n") } else { appendASCII("$-1\r\n") }
    }

    /// The null array: RESP2 `*-1\r\n`, RESP3 `_\r\n`.
    public mutating func nullArray() {
        if isRESP3 { appendASCII("_\r\n") } else { appendASCII("*-1\r\n") }
    }

    /// `*count\r\n`; the `count` elements follow.
    public mutating func arrayHeader(_ count: Int) {
        header(UInt8(ascii: "*"), count)
    }

    /// RESP3 `%pairs\r\n`, RESP2 `*(2 × pairs)\r\n`; keys and values follow, alternating.
    public mutating func mapHeader(_ pairs: Int) {
        if isRESP3 { header(UInt8(ascii: "%"), pairs) } else { header(UInt8(ascii: "*"), 2 * pairs) }
    }

    /// RESP3 `~count\r\n`, RESP2 `*count\r\n`.
    public mutating func setHeader(_ count: Int) {
        header(isRESP3 ? UInt8(ascii: "~") : UInt8(ascii: "*"), count)
    }

    /// RESP3 `>count\r\n` (an out-of-band push), RESP2 `*count\r\n`.
    public mutating func pushHeader(_ count: Int) {
        header(isRESP3 ? UInt8(ascii: ">") : UInt8(ascii: "*"), count)
    }

    /// RESP3 `#t\r\n` / `#f\r\n`, RESP2 `:1\r\n` / `:0\r\n`.
    public mutating func boolean(_ value: Bool) {
        if isRESP3 {
            appendASCII(value ? "#t\r\n" : "#f\r\n")
        } else {
            appendASCII(value ? ":1\r\n" : ":0\r\n")
        }
    }

    /// RESP3 `,text\r\n`, RESP2 the same text as a bulk string; the text as Redis spells
    /// doubles (`inf`, `-inf`, `nan`, `3`, `1.5`, `1e+300`, see `RESPDouble`).
    public mutating func double(_ value: Double) {
        let text = RESPDouble.text(value)
        if isRESP3 {
            bytes.append(UInt8(ascii: ","))
            bytes.append(contentsOf: text)
            appendCRLF()
        } else {
            bulk(text)
        }
    }

    /// RESP3 `=length\r\nfmt:text\r\n` (`format` cut or space-padded to 3 bytes, like "txt"
    /// or "mkd"), RESP2 `text` as a bulk string.
    public mutating func verbatim(_ text: String, format: String = "txt") {
        guard isRESP3 else { return bulk(text) }
        let formatBytes = Array(format.utf8.prefix(3)) + Array(repeating: UInt8(ascii: " "), count: max(0, 3 - format.utf8.count))
        header(UInt8(ascii: "="), 4 + text.utf8.count)
        bytes.append(contentsOf: formatBytes)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: text.utf8)
        appendCRLF()
    }

    // MARK: - Bytes

    private mutating func header(_ type: UInt8, _ count: Int) {
        bytes.append(type)
        RESPDecimal.append(count, to: &bytes)
        appendCRLF()
    }

    private mutating func appendLine(_ text: String) {
        for byte in text.utf8 {
            bytes.append(byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") ? UInt8(ascii: " ") : byte)
        }
        appendCRLF()
    }

    @inline(__always)
    private mutating func appendCRLF() {
        bytes.append(UInt8(ascii: "\r"))
        bytes.append(UInt8(ascii: "\n"))
    }

    private mutating func appendASCII(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }
}
