import SyncNodeServer
import Configuration
import Foundation

/// The settings a `--config` file gives (docs/operations.md, "Config file"). Two forms:
///
///     # key = value lines; '#' starts a comment; `peer` may repeat
///     id = a
///     listen = 127.0.0.1:7401
///     peer = 127.0.0.1:7402
///
/// or one JSON object (`{"id":"a","peer":["127.0.0.1:7402"]}`); a file whose first
/// non-blank character is `{` is read as JSON. Keys are the `run` flags without their dashes.
struct ConfigFile: Sendable {
    /// Keys a config file may set: the `run` flags without dashes (`SettingKey`).
    static let knownKeys: Set<String> = Set(SettingKey.allCases.filter(\.isFileKey).map(\.rawValue))

    /// Why a config file was refused: the file, the line (0 for JSON) and what is wrong.
    struct Invalid: Error, CustomStringConvertible {
        let path: String
        let line: Int
        let reason: String
        var description: String {
            line > 0 ? "\(path):\(line): \(reason)" : "\(path): \(reason)"
        }
    }

    /// Every value per key, in file order (only `peer` may have several).
    private(set) var values: [String: [String]] = [:]

    /// The file's settings as a provider of the settings reader holds them: `peer` as a list,
    /// every other key as its text.
    var configValues: [AbsoluteConfigKey: ConfigValue] {
        var result: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, texts) in values {
            let content: ConfigContent = key == SettingKey.peer.rawValue ? .stringArray(texts) : .string(texts[texts.count - 1])
            result[AbsoluteConfigKey([key])] = ConfigValue(content, isSecret: false)
        }
        return result
    }

    /// Reads and checks `path`.
    init(path: String) throws(Invalid) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw Invalid(path: path, line: 0, reason: "cannot read it (\(error.localizedDescription))")
        }
        if text.first(where: { !$0.isWhitespace }) == "{" {
            try self.init(json: text, path: path)
        } else {
            try self.init(lines: text, path: path)
        }
    }

    private init(lines text: String, path: String) throws(Invalid) {
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw Invalid(path: path, line: index + 1, reason: "expected `key = value`, got `\(trimmed)`")
            }
            let key = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            let value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            try add(key: key, value: value, path: path, line: index + 1)
        }
    }

    private init(json text: String, path: String) throws(Invalid) {
        let parsed: JSONValue
        do { parsed = try JSONValue.parse(text) } catch { throw Invalid(path: path, line: 0, reason: error.description) }
        guard case .object(let members) = parsed else { throw Invalid(path: path, line: 0, reason: "expected one JSON object") }
        for (rawKey, value) in members {
            let key = rawKey == "peers" ? "peer" : rawKey
            switch value {
            case .string(let text): try add(key: key, value: text, path: path, line: 0)
            case .bool(let flag): try add(key: key, value: flag ? "true" : "false", path: path, line: 0)
            case .number(let text): try add(key: key, value: text, path: path, line: 0)
            case .array(let items):
                for item in items {
                    guard let text = item.stringValue else {
                        throw Invalid(path: path, line: 0, reason: "\"\(rawKey)\" must hold strings")
                    }
                    try add(key: key, value: text, path: path, line: 0)
                }
            default:
                throw Invalid(path: path, line: 0, reason: "\"\(rawKey)\" must be a string, number, boolean or array of strings")
            }
        }
    }

    private mutating func add(key: String, value: String, path: String, line: Int) throws(Invalid) {
        guard Self.knownKeys.contains(key) else {
            throw Invalid(path: path, line: line, reason: "unknown key `\(key)` (known: \(Self.knownKeys.sorted().joined(separator: ", ")))")
        }
        if key != "peer", values[key] != nil {
            throw Invalid(path: path, line: line, reason: "`\(key)` is set twice")
        }
        values[key, default: []].append(value)
    }
}
