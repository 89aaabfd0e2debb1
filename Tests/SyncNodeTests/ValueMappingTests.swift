import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// `ValueMapping`: what a Redis client's string becomes in Decide's JSON store and back, and
/// that typed Swift states and Redis clients read each other's writes.
extension SyncNodeTests {
    @Suite struct ValueMappingTests {
        static func stored(_ bytes: [UInt8]) throws -> [UInt8] { try ValueMapping.stored(bytes[...]).array }
        static func stored(_ text: String) throws -> [UInt8] { try stored(Array(text.utf8)) }
        static func readBack(_ stored: [UInt8]) -> [UInt8] {
            stored.withUnsafeBytes { raw in ValueMapping.withResp(raw) { [UInt8]($0) } }
        }
        static func isJSON(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { ValueMapping.isJSON($0) } }

        @Test func plainTextIsStoredAsAJSONStringAndReadsBackByteForByte() throws {
            let texts = ["hello", "", " ", "say \"hi\"", "back\\slash", "\\", "\"", "\"unbalanced", "a\"b\"",
                         "tab\there", "line\nbreak\r\n", "\u{0}\u{1}\u{7}\u{8}\u{b}\u{c}\u{1b}\u{1f}\u{7f}",
                         "héllo wörld", "☃ snow", "𝄞 clef", "日本語", "emoji 👩‍👩‍👧", "/slash/", "\u{2028}\u{2029}",
                         "tomato", "nil", "True", "-", "1.", "01", "+1", ".5", "1e", "0x10", "NaN", "[abc", "{a:1}",
                         " 5 x", "hello world ", "  leading"]
            for text in texts {
                let bytes = Array(text.utf8)
                let stored = try Self.stored(bytes)
                #expect(!Self.isJSON(bytes), "\(text.debugDescription) was taken as JSON")
                // A JSON string whose text is the client's.
                let decoded = try JSONSerialization.jsonObject(with: Data(stored), options: [.fragmentsAllowed]) as? String
                #expect(decoded == text, "\(text.debugDescription) stored as \(String(decoding: stored, as: UTF8.self))")
                #expect(stored.first == UInt8(ascii: "\"") && stored.last == UInt8(ascii: "\""))
                #expect(Self.readBack(stored) == bytes, "\(text.debugDescription) did not read back byte for byte")
            }
            // The escapes the library writes: quote, backslash, control characters; nothing else.
            #expect(try Self.stored("a\"b\\c\nd\u{1}é/") == Array("\"a\\\"b\\\\c\\nd\\u0001é/\"".utf8))
            #expect(try Self.stored("") == Array("\"\"".utf8))
        }

        @Test func validJSONIsStoredVerbatimAndReadsBackVerbatim() throws {
            let texts = ["5", "0", "-0", "-12.5e+3", "1E-7", "123456789012345678901234567890", "1e400", "true", "false",
                         "null", "{}", "[]", "{ \"a\" : 1 , \"b\" : [ 1 , 2 ] }", " 5 ", "\n[1]\t",
                         "{\"a\":{\"b\":[{\"c\":null},[[]],\"x\"]}}", "[\"x\",{\"y\":\"\\u00e9\\n\"}]",
                         "{\"a\":1,\"a\":2}", "[1,2,3]", String(repeating: "[", count: ValueMapping.maxJSONDepth)
                             + String(repeating: "]", count: ValueMapping.maxJSONDepth)]
            for text in texts {
                let bytes = Array(text.utf8)
                #expect(Self.isJSON(bytes), "\(text.prefix(40).debugDescription) was not taken as JSON")
                let stored = try Self.stored(bytes)
                #expect(stored == bytes, "\(text.prefix(40).debugDescription) was not stored verbatim")
                #expect(Self.readBack(stored) == bytes, "\(text.prefix(40).debugDescription) did not read back verbatim")
            }
        }

        @Test func aQuotedJSONStringReadsBackUnquoted() throws {
            let cases: [(String, String)] = [
                ("\"quoted\"", "quoted"), ("\"\"", ""), ("  \"padded\"\n", "padded"), ("\"a\\\"b\"", "a\"b"),
                ("\"back\\\\slash\"", "back\\slash"), ("\"\\u00e9\\n\\t\\/\"", "é\n\t/"), ("\"\\ud834\\udd1e\"", "𝄞"),
                ("\"\\b\\f\\r\"", "\u{8}\u{c}\r"), ("\"日本\"", "日本"),
                // A lone surrogate escape is valid JSON grammar; it reads back as U+FFFD.
                ("\"\\ud800\"", "\u{FFFD}"), ("\"x\\udc00y\"", "x\u{FFFD}y"),
            ]
            for (written, read) in cases {
                let stored = try Self.stored(written)
                #expect(stored == Array(written.utf8), "\(written.debugDescription) was not stored verbatim")
                #expect(Self.readBack(stored) == Array(read.utf8), "\(written.debugDescription) read back \(String(decoding: Self.readBack(stored), as: UTF8.self).debugDescription)")
            }
        }

        @Test func bytesThatAreNotUTF8AreRefused() {
            let cases: [[UInt8]] = [[0xFF], [0xC3], [0x61, 0x80], [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0xF4, 0x90, 0x80, 0x80],
                                    [0xE2, 0x82], [0x22, 0xFF, 0x22], Array("ok".utf8) + [0xFE], [0xF8, 0x88, 0x80, 0x80, 0x80]]
            for bytes in cases {
                #expect(throws: ValueMapping.Refusal.self, "\(bytes) was accepted") { try Self.stored(bytes) }
            }
            #expect("\(ValueMapping.Refusal.notUTF8)".contains("not valid UTF-8"))
        }

        @Test func almostJSONIsStoredAsAString() throws {
            let deep = ValueMapping.maxJSONDepth + 1
            let texts = ["01", "-01", "1.", "1.e5", "tru", "truE", "nul", "falsey", "{\"a\":}", "{\"a\"}", "{a:1}", "[1,]",
                         "{\"a\":1,}", "[1 2]", "\"", "\"abc", "\"a\\x\"", "\"\\u12\"", "\"tab\there\"", "[1]]", "[[1]",
                         "{\"a\":1}}", "[1] [2]", "1 2", "-", "--1", "1e+", "0x1F", "Infinity", "'single'",
                         String(repeating: "[", count: deep) + String(repeating: "]", count: deep),
                         String(repeating: "{\"a\":", count: deep) + "1" + String(repeating: "}", count: deep)]
            for text in texts {
                let bytes = Array(text.utf8)
                #expect(!Self.isJSON(bytes), "\(text.prefix(40).debugDescription) was taken as JSON")
                let stored = try Self.stored(bytes)
                #expect(stored.first == UInt8(ascii: "\""), "\(text.prefix(40).debugDescription) was not quoted")
                #expect(Self.readBack(stored) == bytes, "\(text.prefix(40).debugDescription) did not read back")
            }
        }

        // MARK: against Foundation

        /// `isJSON` against Foundation's `JSONSerialization` (fragments allowed) over seeded random
        /// byte strings and mutated JSON texts. They agree except where Foundation departs from
        /// RFC 8259, which `isJSON` follows; each difference is neutralised and re-checked:
        /// - Foundation accepts a trailing comma in arrays and objects (`[1,]`): isJSON refuses;
        /// - Foundation detects UTF-16/UTF-32 (any NUL byte) and skips a UTF-8 BOM: isJSON takes
        ///   UTF-8 only, as Redis values here are UTF-8 JSON;
        /// - Foundation refuses numbers out of Double's range (`1e400`): the grammar allows them;
        /// - Foundation refuses escapes of lone surrogates (`"\ud800"`): the grammar allows them
        ///   (the mapping reads them as U+FFFD).
        @Test func isJSONAgreesWithJSONSerializationUpToDocumentedDifferences() throws {
            func foundation(_ bytes: [UInt8]) -> Bool {
                (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) != nil
            }
            let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
            /// `bytes` without commas that only whitespace separates from a closing bracket.
            func withoutTrailingCommas(_ bytes: [UInt8]) -> [UInt8]? {
                var out: [UInt8] = []
                var changed = false
                for (index, byte) in bytes.enumerated() {
                    if byte == UInt8(ascii: ",") {
                        let next = bytes[(index + 1)...].first { !whitespace.contains($0) }
                        if next == UInt8(ascii: "]") || next == UInt8(ascii: "}") {
                            changed = true
                            continue
                        }
                    }
                    out.append(byte)
                }
                return changed ? out : nil
            }
            /// `bytes` with lone-surrogate escapes replaced by `\u0041` and exponents of 3+
            /// digits by `e0`.
            func withoutRangeOrSurrogateIssues(_ bytes: [UInt8]) -> [UInt8] {
                var text = String(decoding: bytes, as: UTF8.self)
                text = text.replacingOccurrences(of: "\\\\u[dD][89a-fA-F][0-9a-fA-F]{2}", with: "\\\\u0041", options: .regularExpression)
                text = text.replacingOccurrences(of: "(?<=[eE])[+-]?[0-9]{3,}", with: "0", options: .regularExpression)
                return Array(text.utf8)
            }
            var random = SeededRandom(seed: 20_240_601)
            let alphabet = Array("{}[]\",:0123456789.eE+-truefalsn \\u/\tabcdD8".utf8)
                + [0x00, 0x0A, 0x0D, 0x1F, 0x7F, 0x80, 0xC3, 0xA9, 0xFF, 0xED, 0xA0, 0xEF, 0xBB, 0xBF]
            let corpus = ["{\"a\":[1,2,{\"b\":null}],\"c\":\"x\\n\"}", "[true,false,null,-1.5e3,\"\\u00e9\"]", "\"hello\"",
                          "0", "-12.5E-3", "{}", "[]", " [ 1 , 2 ] ", "{\"a\":1,}", "\"\\ud83d\\ude00\"", "123456789e-5",
                          "{\"k\":{\"k\":{\"k\":[[\"v\"]]}}}", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "1e100"]
            var differences: [String: Int] = [:]
            var agreed = 0
            for round in 0 ..< 60_000 {
                var bytes: [UInt8]
                if round % 3 == 0 {
                    bytes = (0 ..< Int.random(in: 0 ... 12, using: &random)).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
                } else if round % 3 == 1 {
                    bytes = (0 ..< Int.random(in: 0 ... 10, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
                } else {
                    bytes = Array(corpus.randomElement(using: &random)!.utf8)
                    for _ in 0 ..< Int.random(in: 1 ... 3, using: &random) {
                        let position = Int.random(in: 0 ... bytes.count, using: &random)
                        switch Int.random(in: 0 ... 3, using: &random) {
                        case 0: if position < bytes.count { bytes.remove(at: position) }
                        case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: position)
                        case 2: if position < bytes.count { bytes[position] = alphabet.randomElement(using: &random)! }
                        default: bytes.insert(contentsOf: bytes[position...].prefix(4), at: position)
                        }
                    }
                }
                let ours = Self.isJSON(bytes), theirs = foundation(bytes)
                if ours == theirs {
                    agreed += 1
                    continue
                }
                let shown = "\(String(decoding: bytes, as: UTF8.self).debugDescription) \(bytes)"
                if !ours {
                    if bytes.contains(0) || bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
                        differences["Foundation decodes UTF-16/32 or a BOM", default: 0] += 1
                    } else if let fixed = withoutTrailingCommas(bytes), Self.isJSON(fixed) == foundation(fixed) {
                        differences["Foundation accepts trailing commas", default: 0] += 1
                    } else {
                        Issue.record("isJSON refuses what Foundation accepts, unexplained: \(shown)")
                    }
                } else {
                    let fixed = withoutRangeOrSurrogateIssues(bytes)
                    if fixed != bytes, foundation(fixed) == Self.isJSON(fixed) {
                        differences["Foundation refuses huge numbers or lone surrogates", default: 0] += 1
                    } else {
                        Issue.record("isJSON accepts what Foundation refuses, unexplained: \(shown)")
                    }
                }
                // Whatever isJSON decides, the client's bytes read back unchanged (or are refused).
                if let stored = try? Self.stored(bytes), !ours {
                    #expect(Self.readBack(stored) == bytes, "\(shown) did not read back")
                }
            }
            #expect(agreed > 55_000, "agreed on only \(agreed) inputs; differences \(differences)")
            // The accepted/refused split exercises both sides.
            #expect(differences.keys.count >= 2, "\(differences)")
        }

        // MARK: typed states and the endpoint

        struct Greeting: AtomicState {
            static func defaultValue() -> String { "default" }
            static var name: String { "greeting" }
        }
        struct Count: AtomicState {
            static func defaultValue() -> Int { -1 }
            static var name: String { "count" }
        }
        struct Enabled: AtomicState {
            static func defaultValue() -> Bool { false }
            static var name: String { "enabled" }
        }
        struct Profile: Codable, Sendable, Equatable {
            var name: String
            var tags: [String]
            var limit: Double?
        }
        struct Profiles: AtomicState {
            static func defaultValue() -> Profile { Profile(name: "", tags: []) }
            static var name: String { "profile" }
        }
        struct Quota: CollectionState {
            static func defaultValue(at id: String) -> Int { 0 }
            static var name: String { "quota" }
        }

        @Test func aTypedStateReadsWhatARedisClientWrote() throws {
            let node = try Node(configuration: .init(id: "typed"))
            func write(_ key: String, _ text: String) throws {
                let commit = node.decide(RawWrite(key: try KeySyntax.parse(key), value: PackedBytes(try Self.stored(text))))
                if case .aborted(let reason) = commit { Issue.record("write of \(key) aborted: \(reason)") }
            }
            for text in ["hello", "", "say \"hi\"\n\tback\\slash", "héllo ☃ 𝄞", "\u{1}\u{1f}", "tomato"] {
                try write("greeting", text)
                #expect(node.read(Greeting.self) == text)
            }
            try write("greeting", "\"quoted\"")
            #expect(node.read(Greeting.self) == "quoted")
            try write("count", "5")
            #expect(node.read(Count.self) == 5)
            try write("count", "-42")
            #expect(node.read(Count.self) == -42)
            try write("enabled", "true")
            #expect(node.read(Enabled.self) == true)
            try write("profile", "{ \"tags\": [\"a\", \"b\"], \"name\": \"ops\", \"limit\": 2.5 }")
            #expect(node.read(Profiles.self) == Profile(name: "ops", tags: ["a", "b"], limit: 2.5))
            try write("quota[batch-jobs]", "7")
            #expect(node.read(Quota.self, at: "batch-jobs") == 7)
        }

        @Test func aRedisClientReadsWhatATypedStateWrote() async throws {
            try await withPeer("typed") { peer in
                let client = try peer.client()
                peer.node.set("hello", into: Greeting.self)
                #expect(try client.call("GET", "greeting") == bulk("hello"))
                peer.node.set("say \"hi\"\n\\ é", into: Greeting.self)
                #expect(try client.call("GET", "greeting") == bulk("say \"hi\"\n\\ é"))
                peer.node.set(5, into: Count.self)
                #expect(try client.call("GET", "count") == bulk("5"))
                peer.node.set(true, into: Enabled.self)
                #expect(try client.call("GET", "enabled") == bulk("true"))
                peer.node.set(Profile(name: "ops", tags: ["x"]), into: Profiles.self)
                #expect(try client.call("GET", "profile") == bulk("{\"name\":\"ops\",\"tags\":[\"x\"]}"))
                peer.node.decide(SetQuota(id: "batch-jobs", value: 3))
                #expect(try client.call("GET", "quota[batch-jobs]") == bulk("3"))
                #expect(try client.call("GET", "quota[\"batch-jobs\"]") == bulk("3"))
                // And the stored bytes of a Redis write equal the library's own for the same String.
                #expect(try client.call("SET", "greeting", "a\"b\u{1}") == ok)
                let redisBytes = peer.node.entry(for: StateKey(name: "greeting"))?.value
                peer.node.set("a\"b\u{1}", into: Greeting.self)
                #expect(peer.node.entry(for: StateKey(name: "greeting"))?.value == redisBytes)
            }
        }

        struct SetQuota: Decision {
            let id: String
            let value: Int
            func execute(read: StorageReader, write: StorageWriter) -> Effect {
                write(value, into: Quota.self, at: id)
                return .none
            }
        }
    }
}
