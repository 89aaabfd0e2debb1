import DecideCore

/// The KEY syntax of syncnode's commands and its Redis-protocol endpoint (docs/operations.md, "Keys and values"):
///
/// - `NAME` is an atomic state: `StateKey(name: NAME)`, element empty;
/// - `NAME[ID]` is element ID of a collection, ID written as JSON (`quota["batch-jobs"]`,
///   `quota[7]`); an ID that is not valid JSON is taken as a JSON string, so
///   `quota[batch-jobs]` is `quota["batch-jobs"]`.
///
/// The element bytes are the compact JSON of ID with object members in key order, the same bytes
/// the library writes for a `CollectionState` id, so both address the same element.
package enum KeySyntax {
    /// Why a KEY was refused.
    package struct Invalid: Error, CustomStringConvertible {
        package let key: String
        package let reason: String
        package var description: String { "invalid key '\(key)': \(reason)" }
    }

    /// Parses a KEY given as bytes (a Redis-protocol argument): the same rules as `parse(_:)`,
    /// with a plain NAME (no brackets, the common case) taken without going through `String`'s
    /// searching. Not UTF-8: refused.
    package static func parse(bytes: ArraySlice<UInt8>) throws(Invalid) -> StateKey {
        var brackets = false
        var ascii = true
        for byte in bytes {
            if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]") { brackets = true }
            if byte >= 0x80 { ascii = false }
        }
        if ascii && !brackets && !bytes.isEmpty {
            // ASCII is UTF-8: no validation pass (String(validating:) on a slice goes through
            // generic code, a few percent of a SET).
            return StateKey(name: bytes.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) })
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw Invalid(key: String(decoding: bytes, as: UTF8.self), reason: "a key must be UTF-8 text")
        }
        guard brackets else {
            guard !bytes.isEmpty else { throw Invalid(key: text, reason: "a key needs a name") }
            return StateKey(name: text)
        }
        return try parse(text)
    }

    /// Parses a KEY into the state key it addresses.
    package static func parse(_ text: String) throws(Invalid) -> StateKey {
        guard !text.isEmpty else { throw Invalid(key: text, reason: "a key needs a name") }
        guard text.hasSuffix("]"), let open = text.firstIndex(of: "[") else {
            guard !text.contains("[") && !text.contains("]") else {
                throw Invalid(key: text, reason: "write a collection element as NAME[ID], e.g. quota[\"batch-jobs\"]")
            }
            return StateKey(name: text)
        }
        let name = String(text[..<open])
        guard !name.isEmpty else { throw Invalid(key: text, reason: "a key needs a name before '['") }
        let idText = String(text[text.index(after: open) ..< text.index(before: text.endIndex)])
        guard !idText.isEmpty else { throw Invalid(key: text, reason: "the element id between [ and ] is empty") }
        let id = (try? JSONValue.parse(idText)) ?? .string(idText)
        return StateKey(name: name, element: Array(id.compact(sortedKeys: true).utf8))
    }

    /// The element id of `key` as JSON, nil for an atomic state or an element that is not JSON.
    package static func elementID(of key: StateKey) -> JSONValue? {
        guard key.elementCount != 0 else { return nil }
        return try? JSONValue.parse(key.element)
    }
}
