import DecideCore

/// One request line of the admin protocol (docs/operations.md, "The admin protocol"), parsed
/// and checked. Every malformed line becomes an `Invalid` with a message for the client.
enum AdminRequest: Sendable {
    case put(key: StateKey, value: JSONValue)
    case get(key: StateKey)
    case delete(key: StateKey)
    case watch(prefix: String)
    case status
    case dump
    /// Remove a member from the cluster for good (`Replicator.forget`).
    case forget(nodeID: String)

    /// Why a request line was refused; the text goes back as `{"ok":false,"error":...}`.
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// Parses one request line.
    static func parse(_ line: [UInt8]) throws(Invalid) -> AdminRequest {
        let json: JSONValue
        do {
            json = try JSONValue.parse(line)
        } catch {
            throw Invalid(description: "request is not JSON (\(error)); send one object per line, e.g. {\"op\":\"status\"}")
        }
        guard case .object = json else { throw Invalid(description: "a request is a JSON object, e.g. {\"op\":\"status\"}") }
        guard let op = json["op"]?.stringValue else {
            throw Invalid(description: "missing \"op\": one of put, get, delete, watch, status, dump, forget")
        }
        func key() throws(Invalid) -> StateKey {
            guard let text = json["key"]?.stringValue else { throw Invalid(description: "\(op) needs \"key\" (a string)") }
            do { return try KeySyntax.parse(text) } catch { throw Invalid(description: error.description) }
        }
        switch op {
        case "put":
            let stateKey = try key()
            guard let value = json["value"] else { throw Invalid(description: "put needs \"value\" (any JSON value)") }
            return .put(key: stateKey, value: value)
        case "get": return .get(key: try key())
        case "delete": return .delete(key: try key())
        case "watch":
            guard let prefix = json["prefix"] else { return .watch(prefix: "") }
            guard let text = prefix.stringValue else { throw Invalid(description: "watch's \"prefix\" must be a string") }
            return .watch(prefix: text)
        case "status": return .status
        case "dump": return .dump
        case "forget":
            guard let node = json["node"]?.stringValue, !node.isEmpty else {
                throw Invalid(description: "forget needs \"node\" (the id of the member to remove)")
            }
            return .forget(nodeID: node)
        default:
            throw Invalid(description: "unknown op \(JSONValue.quoted(op)): use put, get, delete, watch, status, dump or forget")
        }
    }
}
