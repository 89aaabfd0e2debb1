import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// The keyspace commands through a real socket, in RESP2 and RESP3: GET/SET and SET's
/// options, SETNX, GETSET, GETDEL, MGET, MSET (one decision), DEL/UNLINK, EXISTS, TYPE, DBSIZE.
extension SyncNodeTests {
    @Suite struct KeyCommandTests {
        /// A client speaking `protocolVersion` (HELLO 3 for RESP3).
        static func client(_ peer: TestPeer, protocolVersion: Int) throws -> TestClient {
            let client = try peer.client()
            if protocolVersion == 3 {
                guard case .map = try client.call("HELLO", "3") else { throw TestFailure("HELLO 3 did not answer a map") }
            }
            return client
        }

        @Test(arguments: [2, 3]) func getAndSet(protocolVersion: Int) async throws {
            try await withPeer("kv") { peer in
                let client = try Self.client(peer, protocolVersion: protocolVersion)
                #expect(try client.call("GET", "missing") == .null)
                #expect(try client.call("SET", "k", "hello world") == ok)
                #expect(try client.call("GET", "k") == bulk("hello world"))
                #expect(try client.call("SET", "k", "") == ok)
                #expect(try client.call("GET", "k") == bulk(""))
                #expect(try client.call("SET", "n", "42") == ok)
                #expect(peer.node.entry(for: StateKey(name: "n"))?.value == Array("42".utf8))
                #expect(try client.call("SET", "k", "say \"hi\"") == ok)
                #expect(peer.node.entry(for: StateKey(name: "k"))?.value == Array("\"say \\\"hi\\\"\"".utf8))
                #expect(try client.call("GET", "k") == bulk("say \"hi\""))
                // Keys: NAME[ID] is a collection element, the ID as JSON or a bare string.
                #expect(try client.call("SET", "quota[batch-jobs]", "3") == ok)
                #expect(try client.call("GET", "quota[\"batch-jobs\"]") == bulk("3"))
                #expect(try client.call("GET", "bad]key").errorText?.hasPrefix("ERR invalid key 'bad]key'") == true)
                let badKey = try client.call(bytes: [Array("GET".utf8), [0xFF]])
                #expect(badKey.errorText.map { $0.hasPrefix("ERR invalid key") && $0.contains("UTF-8") } == true, "\(badKey)")
                // A value that is not UTF-8 is refused, and nothing is written.
                let refused = try client.call(bytes: [Array("SET".utf8), Array("k".utf8), [0x61, 0xFF]])
                #expect(refused.errorText?.hasPrefix("ERR value is not valid UTF-8") == true, "\(refused)")
                #expect(try client.call("GET", "k") == bulk("say \"hi\""))
                // Inline commands work too.
                try client.send(raw: "SET inline 'two words'\r\nGET inline\r\n")
                #expect(try client.reply() == ok)
                #expect(try client.reply() == bulk("two words"))
            }
        }

        @Test(arguments: [2, 3]) func setOptions(protocolVersion: Int) async throws {
            try await withPeer("set") { peer in
                let client = try Self.client(peer, protocolVersion: protocolVersion)
                // NX: only when absent; the refusal is a null reply.
                #expect(try client.call("SET", "k", "1", "NX") == ok)
                #expect(try client.call("SET", "k", "2", "nx") == .null)
                #expect(try client.call("GET", "k") == bulk("1"))
                // XX: only when present.
                #expect(try client.call("SET", "other", "1", "XX") == .null)
                #expect(peer.node.entry(for: StateKey(name: "other")) == nil)
                #expect(try client.call("SET", "k", "3", "XX") == ok)
                #expect(try client.call("GET", "k") == bulk("3"))
                // GET: the previous value (null when none), and the write is made.
                #expect(try client.call("SET", "k", "4", "GET") == bulk("3"))
                #expect(try client.call("SET", "fresh", "a", "GET") == .null)
                #expect(try client.call("GET", "fresh") == bulk("a"))
                // NX GET: previous value; written only when absent (Redis 7).
                #expect(try client.call("SET", "k", "5", "NX", "GET") == bulk("4"))
                #expect(try client.call("GET", "k") == bulk("4"))
                #expect(try client.call("SET", "new1", "x", "GET", "NX") == .null)
                #expect(try client.call("GET", "new1") == bulk("x"))
                // XX GET
                #expect(try client.call("SET", "k", "6", "XX", "GET") == bulk("4"))
                #expect(try client.call("GET", "k") == bulk("6"))
                #expect(try client.call("SET", "new2", "x", "XX", "GET") == .null)
                #expect(peer.node.entry(for: StateKey(name: "new2")) == nil)
                // Syntax errors: both NX and XX, a repeated option, an unknown one; nothing written.
                for options in [["NX", "XX"], ["XX", "NX"], ["NX", "NX"], ["GET", "GET"], ["BOGUS"], ["NX", "whatever"]] {
                    let reply = try client.call(bytes: [Array("SET".utf8), Array("k".utf8), Array("7".utf8)] + options.map { Array($0.utf8) })
                    #expect(reply == .error("ERR syntax error"), "SET k 7 \(options): \(reply)")
                }
                #expect(try client.call("GET", "k") == bulk("6"))
                // Expiry options in the wrong shape are refused, and nothing is written
                // (ExpiryCommandTests has the rest).
                for options in [["EX"], ["EX", "ten"], ["EX", "0"], ["PX", "-5"], ["EX", "10", "PX", "10"], ["KEEPTTL", "EX", "1"]] {
                    let reply = try client.call(bytes: [Array("SET".utf8), Array("k".utf8), Array("8".utf8)] + options.map { Array($0.utf8) })
                    #expect(reply.errorText != nil, "SET k 8 \(options): \(reply)")
                }
                #expect(try client.call("GET", "k") == bulk("6"))
                #expect(try client.call("SET", "k") == .error("ERR wrong number of arguments for 'set' command"))
            }
        }

        @Test(arguments: [2, 3]) func setnxGetsetGetdel(protocolVersion: Int) async throws {
            try await withPeer("getset") { peer in
                let client = try Self.client(peer, protocolVersion: protocolVersion)
                #expect(try client.call("SETNX", "k", "a") == .integer(1))
                #expect(try client.call("SETNX", "k", "b") == .integer(0))
                #expect(try client.call("GET", "k") == bulk("a"))
                #expect(try client.call("GETSET", "k", "c") == bulk("a"))
                #expect(try client.call("GETSET", "absent", "c") == .null)
                #expect(try client.call("GET", "absent") == bulk("c"))
                #expect(try client.call("GETDEL", "k") == bulk("c"))
                #expect(try client.call("GET", "k") == .null)
                #expect(peer.node.entry(for: StateKey(name: "k"))?.isTombstone == true)
                #expect(try client.call("GETDEL", "never") == .null)
                #expect(peer.node.entry(for: StateKey(name: "never")) == nil, "GETDEL of an absent key wrote a tombstone")
                #expect(try client.call("SETNX", "k") == .error("ERR wrong number of arguments for 'setnx' command"))
                #expect(try client.call("GETDEL", "k", "x") == .error("ERR wrong number of arguments for 'getdel' command"))
            }
        }

        @Test(arguments: [2, 3]) func mgetReturnsNullForMissingKeys(protocolVersion: Int) async throws {
            try await withPeer("mget") { peer in
                let client = try Self.client(peer, protocolVersion: protocolVersion)
                #expect(try client.call("MSET", "a", "1", "b", "two") == ok)
                #expect(try client.call("DEL", "b") == .integer(1))
                #expect(try client.call("MSET", "c", "{\"x\":1}") == ok)
                let reply = try client.call("MGET", "a", "missing", "b", "c", "a")
                #expect(reply == .array([bulk("1"), .null, .null, bulk("{\"x\":1}"), bulk("1")]))
                #expect(try client.call("MSET", "a", "1", "b") == .error("ERR wrong number of arguments for 'mset' command"))
                #expect(try client.call("MGET") == .error("ERR wrong number of arguments for 'mget' command"))
            }
        }

        /// MSET is one decision: one commit on the writer, one version for all its keys on a replica.
        @Test func msetIsOneDecisionWithOneVersionOnEveryReplica() async throws {
            try await withPair { a, b in
                let client = try a.client()
                let before = a.node.stateSummary.committedDecisions
                let keys = (0 ..< 50).map { "batch:\($0)" }
                #expect(try client.call(bytes: [Array("MSET".utf8)] + keys.flatMap { [Array($0.utf8), Array("v-\($0)".utf8)] }) == ok)
                #expect(a.node.stateSummary.committedDecisions == before + 1)
                let reader = try b.client()
                #expect(try await eventually { try reader.call("EXISTS", keys[0]) == .integer(1) && reader.call("EXISTS", keys[49]) == .integer(1) })
                var versions: [String] = []
                for key in keys {
                    let reply = try reader.call("DECIDE.GET", key)
                    let json = try #require(reply.json, "DECIDE.GET \(key): \(reply)")
                    #expect(json["value"] as? String == "v-\(key)")
                    #expect(json["deleted"] as? Bool == false)
                    let version = try #require(json["version"] as? [String: Any])
                    #expect(version["node"] as? String == "a")
                    versions.append("\(version["ms"] ?? "")/\(version["logical"] ?? "")/\(version["node"] ?? "")")
                }
                #expect(Set(versions).count == 1, "one MSET carried several versions: \(Set(versions))")
                #expect(b.node.stateSummary.appliedRemoteDeltas >= 1)
                // And a second MSET is a second version.
                #expect(try client.call("MSET", keys[0], "again", keys[1], "again") == ok)
                #expect(a.node.stateSummary.committedDecisions == before + 2)
            }
        }

        @Test(arguments: [2, 3]) func delAndUnlinkCountKeysThatHeldAValue(protocolVersion: Int) async throws {
            try await withPeer("del") { peer in
                let client = try Self.client(peer, protocolVersion: protocolVersion)
                #expect(try client.call("MSET", "a", "1", "b", "2", "c", "3", "d", "4") == ok)
                // Duplicates counted once, absent keys 0.
                #expect(try client.call("DEL", "a", "a", "b", "absent", "b") == .integer(2))
                #expect(peer.node.entry(for: StateKey(name: "a"))?.isTombstone == true)
                #expect(peer.node.entry(for: StateKey(name: "absent")) == nil, "DEL of an absent key wrote a tombstone")
                #expect(try client.call("DEL", "a") == .integer(0))
                #expect(try client.call("UNLINK", "c", "c", "gone", "d") == .integer(2))
                #expect(peer.node.entry(for: StateKey(name: "gone")) == nil)
                #expect(try client.call("UNLINK", "c", "d") == .integer(0))
                // A DEL of nothing commits nothing.
                let before = peer.node.stateSummary
                #expect(try client.call("DEL", "nothing", "none") == .integer(0))
                #expect(peer.node.stateSummary.entryCount == before.entryCount)
                #expect(try client.call("DBSIZE") == .integer(0))
                #expect(try client.call("DEL") == .error("ERR wrong number of arguments for 'del' command"))
            }
        }

        @Test(arguments: [2, 3]) func existsTypeAndDbsize(protocolVersion: Int) async throws {
            try await withPeer("exists") { peer in
                let client = try Self.client(peer, protocolVersion: protocolVersion)
                #expect(try client.call("DBSIZE") == .integer(0))
                #expect(try client.call("MSET", "a", "1", "b", "2", "c", "3") == ok)
                // Like Redis, EXISTS counts a key once per time it is named.
                #expect(try client.call("EXISTS", "a", "a", "b", "missing") == .integer(3))
                #expect(try client.call("EXISTS", "missing") == .integer(0))
                #expect(try client.call("TYPE", "a") == .simple("string"))
                #expect(try client.call("TYPE", "missing") == .simple("none"))
                #expect(try client.call("DBSIZE") == .integer(3))
                #expect(try client.call("DEL", "c") == .integer(1))
                // A tombstone is no key: TYPE none, EXISTS 0, not counted.
                #expect(try client.call("TYPE", "c") == .simple("none"))
                #expect(try client.call("EXISTS", "c") == .integer(0))
                #expect(try client.call("DBSIZE") == .integer(2))
                #expect(try client.call("EXISTS") == .error("ERR wrong number of arguments for 'exists' command"))
                #expect(try client.call("DBSIZE", "x") == .error("ERR wrong number of arguments for 'dbsize' command"))
            }
        }

        /// A key named twice in one MSET takes its last value, here and on the replica, and the
        /// two nodes converge to the same digest.
        @Test func msetWithARepeatedKeyKeepsTheLastValueEverywhere() async throws {
            try await withPair { a, b in
                let client = try a.client()
                #expect(try client.call("MSET", "d", "1", "e", "x", "d", "2") == ok)
                #expect(try client.call("MGET", "d", "e") == bulks("2", "x"))
                #expect(try client.call("DBSIZE") == .integer(2))
                let reader = try b.client()
                #expect(try await eventually { try reader.call("MGET", "d", "e") == bulks("2", "x") })
                #expect(try reader.call("DBSIZE") == .integer(2))
                #expect(await eventually { a.node.stateSummary.digest == b.node.stateSummary.digest })
                #expect(a.node.entries() == b.node.entries())
                #expect(try client.call("DEL", "d", "d", "e") == .integer(2))
                #expect(try await eventually { try reader.call("DBSIZE") == .integer(0) })
            }
        }

        /// DECIDE.DUMP: every entry (tombstones too), sorted by key, written in chunks as the
        /// client reads; the commands pipelined behind it are answered after it, in order.
        @Test func decideDumpIsWrittenInChunksBeforeTheNextReplies() async throws {
            try await withPeer("dump") { peer in
                let client = try peer.client()
                let value = String(repeating: "v", count: 200)
                var batch: [UInt8] = []
                for start in stride(from: 0, to: 5_000, by: 500) {
                    batch += request(["MSET"] + (start ..< start + 500).flatMap { ["d:\($0)", value] })
                }
                try client.send(raw: batch)
                for _ in 0 ..< 10 { #expect(try client.reply() == ok) }
                #expect(try client.call("DEL", "d:7") == .integer(1))
                try client.send(raw: request("DECIDE.DUMP") + request("PING") + request("GET", "d:8"))
                let dump = try #require(try client.reply(timeout: 30).elements)
                #expect(dump.count == 5_000)
                let lines = dump.compactMap(\.json)
                #expect(lines.count == 5_000)
                let keys = lines.compactMap { $0["key"] as? String }
                #expect(keys == keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, "not sorted by key")
                #expect(lines.filter { $0["deleted"] as? Bool == true }.compactMap { $0["key"] as? String } == ["d:7"])
                #expect(lines.first { $0["key"] as? String == "d:8" }?["value"] as? String == value)
                #expect(try client.reply() == .simple("PONG"))
                #expect(try client.reply() == bulk(value))
            }
        }

        /// DECIDE.DUMP (the CLI's dump) says what each entry of a counter, a set, a sorted set
        /// or a lifetime is, as JSON, beside its raw key: the counter and the node a slot is of,
        /// the set and member a dot is of, the sorted set and member a score is of.
        @Test func decideDumpShowsWhatCompoundEntriesAre() async throws {
            try await withPeer("dump-layout") { peer in
                let client = try peer.client()
                #expect(try client.call("SET", "plain", "1") == ok)
                #expect(try client.call("INCRBY", "hits", "3") == .integer(3))
                #expect(try client.call("EXPIRE", "hits", "100") == .integer(1))
                #expect(try client.call("SADD", "online", "ann") == .integer(1))
                #expect(try client.call("ZADD", "board", "12", "bob") == .integer(1))
                let lines = try #require(try client.call("DECIDE.DUMP").elements).compactMap(\.json)
                func layouts(_ kind: String) -> [[String: Any]] {
                    lines.compactMap { $0["layout"] as? [String: Any] }.filter { $0["kind"] as? String == kind }
                }
                let slot = try #require(layouts("counterSlot").first)
                #expect(slot["counter"] as? String == "hits" && slot["node"] as? String == "dump-layout")
                #expect(slot["incarnation"] as? String == ReplyJSON.hex(peer.node.incarnation))
                #expect(lines.first { ($0["layout"] as? [String: Any])?["kind"] as? String == "counterSlot" }?["value"] as? [Int] == [3, 0])
                let dot = try #require(layouts("setDot").first)
                #expect(dot["set"] as? String == "online" && dot["member"] as? String == "ann")
                let member = try #require(layouts("sortedSetMember").first)
                #expect(member["sortedSet"] as? String == "board" && member["member"] as? String == "bob")
                #expect(layouts("lifetime").first?["of"] as? String == "hits")
                #expect(lines.first { $0["key"] as? String == "plain" }?["layout"] == nil, "a plain key has no layout")
            }
        }

        /// DECIDE.PUT / DECIDE.GET / DECIDE.DELETE: JSON in, versions out.
        @Test func decideCommands() async throws {
            try await withPeer("decide") { peer in
                let client = try peer.client()
                let put = try #require(try client.call("DECIDE.PUT", "cfg", "{\"on\":true}").json)
                #expect(put["key"] as? String == "cfg")
                #expect((put["version"] as? [String: Any])?["node"] as? String == "decide")
                #expect(try client.call("GET", "cfg") == bulk("{\"on\":true}"))
                #expect(try client.call("DECIDE.PUT", "cfg", "not json").errorText?.hasPrefix("ERR the value is not JSON") == true)
                #expect(try client.call("DECIDE.GET", "never") == .null)
                #expect(try client.call("DECIDE.DELETE", "cfg").json?["version"] != nil)
                let deleted = try #require(try client.call("DECIDE.GET", "cfg").json)
                #expect(deleted["deleted"] as? Bool == true)
                #expect(deleted["value"] is NSNull)
                let status = try #require(try client.call("DECIDE.STATUS").json)
                #expect(status["node"] as? String == "decide")
                #expect(status["tombstones"] as? Int == 1)
            }
        }
    }

        /// Plain SETs pipelined in one read commit as one decision, answered `+OK` each in order;
        /// any other command (or a SET with an option or an error) runs alone in its turn and
        /// sees the writes before it; a batch the node refuses as a whole (one value over
        /// maxValueBytes) runs SET by SET, so only the bad one fails.
        @Test func pipelinedPlainSetsCommitTogetherAndAnswerInOrder() async throws {
            try await withPeer("batch") { peer in
                let client = try peer.client()
                func decisions() throws -> Int {
                    guard case .bulk(let text) = try client.call("INFO", "decide"),
                          let line = String(decoding: text, as: UTF8.self).split(whereSeparator: \.isNewline)
                            .first(where: { $0.hasPrefix("committed_decisions:") }),
                          let count = Int(line.dropFirst("committed_decisions:".count)) else {
                        throw TestFailure("no committed_decisions in INFO decide")
                    }
                    return count
                }
                let before = try decisions()
                var notText = Array("*3\r\n$3\r\nSET\r\n$3\r\nbin\r\n$2\r\n".utf8)
                notText += [0xFF, 0xFE, 0x0D, 0x0A]
                try client.send(raw: request("SET", "a", "1") + request("SET", "b", "x") + request("SET", "a", "2")
                    + request("GET", "a") + request("SET", "c", "3", "NX") + notText
                    + request("SET", "d", "4") + request("SET", "e", "5") + request("MGET", "a", "b", "c", "d", "e"))
                #expect(try client.reply() == ok)
                #expect(try client.reply() == ok)
                #expect(try client.reply() == ok)
                #expect(try client.reply() == bulk("2"))
                #expect(try client.reply() == ok)
                guard case .error(let refusal) = try client.reply() else { throw TestFailure("a non-UTF-8 SET was not refused") }
                #expect(refusal.contains("not valid UTF-8"))
                #expect(try client.reply() == ok)
                #expect(try client.reply() == ok)
                #expect(try client.reply() == .array(["2", "x", "3", "4", "5"].map(bulk)))
                // {a, b, a}, then c alone, then {d, e}: three decisions for six writes.
                #expect(try decisions() - before == 3)

                let tooLarge = String(repeating: "v", count: 1024 * 1024 + 1)
                try client.send(raw: request("SET", "f", "6") + request("SET", "big", tooLarge) + request("SET", "g", "7")
                    + request("MGET", "f", "big", "g"))
                #expect(try client.reply() == ok)
                guard case .error(let large) = try client.reply() else { throw TestFailure("an oversized SET was not refused") }
                #expect(large.contains("maxValueBytes"))
                #expect(try client.reply() == ok)
                #expect(try client.reply() == .array([bulk("6"), .null, bulk("7")]))
            }
        }

        /// INCR, INCRBY, SADD, SREM, HSET, ZADD and plain SETs pipelined in one read commit as
        /// one decision, each answered what it would have been alone, in order: each sees the
        /// writes before it (a second INCR answers one more, an INCR after a SET counts from its
        /// value), a WRONGTYPE answers in its place; a batch the node refuses as a whole runs
        /// write by write, and a write tried in the refused batch does not count twice.
        @Test func pipelinedCounterSetHashAndSortedSetWritesCommitTogether() async throws {
            try await withPeer("batch-kinds") { peer in
                let client = try peer.client()
                let before = peer.node.stateSummary.committedDecisions
                try client.send(raw: request("INCR", "c") + request("INCR", "c") + request("INCRBY", "c", "5")
                    + request("SADD", "s", "a", "b") + request("SADD", "s", "a") + request("SET", "n", "10") + request("INCR", "n")
                    + request("HSET", "h", "f", "1") + request("HSET", "h", "f", "2", "g", "3") + request("ZADD", "z", "1", "m")
                    + request("ZADD", "z", "CH", "2", "m") + request("INCR", "s") + request("SREM", "s", "a") + request("SET", "h", "x")
                    + request("MGET", "c", "n", "h"))
                let replies = try (0..<14).map { _ in try client.reply() }
                #expect(replies == [.integer(1), .integer(2), .integer(7), .integer(2), .integer(0), ok, .integer(11), .integer(1), .integer(1),
                                    .integer(1), .integer(1), .error("WRONGTYPE Operation against a key holding the wrong kind of value"),
                                    .integer(1), ok], "\(replies)")
                #expect(try client.reply() == .array([bulk("7"), bulk("11"), bulk("x")]))
                #expect(peer.node.stateSummary.committedDecisions - before == 1, "14 writes of one read, one decision")
                #expect(try client.call("SMEMBERS", "s") == .array([bulk("b")]))
                #expect(try client.call("ZSCORE", "z", "m") == bulk("2"))

                let longName = String(repeating: "n", count: 1025)
                try client.send(raw: request("SADD", "t", "m1", "m2") + request("SET", longName, "x") + request("INCR", "d") + request("SCARD", "t"))
                #expect(try client.reply() == .integer(2), "counted once, though tried in the refused batch first")
                guard case .error(let refusal) = try client.reply() else { throw TestFailure("a SET over maxNameBytes was not refused") }
                #expect(refusal.contains("maxNameBytes"))
                #expect(try client.reply() == .integer(1))
                #expect(try client.reply() == .integer(2))
            }
        }

        /// Runs `body` with a peer, an endpoint of it and `count` clients it has accepted.
        static func withConnectedClients(_ id: String, count: Int,
                                         _ body: (TestPeer, CustomEndpoint, [TestClient]) async throws -> Void) async throws {
            try await withPeer(id) { peer in
                let endpoint = try CustomEndpoint(on: peer) { _ in }
                defer { endpoint.stop() }
                let clients = try (0..<count).map { _ in try endpoint.client() }
                for client in clients { #expect(try client.call("PING") == .simple("PONG")) }
                try await body(peer, endpoint, clients)
            }
        }

        /// Sends `sets[i]` from `clients[i]` while the endpoint's loop thread is held, so that
        /// every client is read in the loop's next turn, then lets the loop go.
        static func sendInOneTurn(_ endpoint: CustomEndpoint, _ clients: [TestClient], _ sets: [[UInt8]]) async throws {
            let held = DispatchSemaphore(value: 0)
            let hold = DispatchSemaphore(value: 0)
            #expect(endpoint.server.execute { held.signal(); hold.wait() })
            held.wait()
            for (client, bytes) in zip(clients, sets) { try client.send(raw: bytes) }
            // Loopback delivers into the server's socket within `send`; the margin is for a
            // loaded machine. The loop, once let go, finds every socket readable in one poll.
            try await Task.sleep(for: .milliseconds(50))
            hold.signal()
        }

        /// Clients read in one loop turn that ended their reads with plain SETs have them
        /// committed as one decision, each client answered its own `+OK`s.
        @Test func setsOfClientsReadInOneTurnCommitAsOneDecision() async throws {
            try await Self.withConnectedClients("turn", count: 8) { peer, endpoint, clients in
                let before = peer.node.stateSummary.committedDecisions
                try await Self.sendInOneTurn(endpoint, clients, clients.indices.map { index in
                    request("SET", "k\(index)", "\(index)") + request("SET", "j\(index)", "x")
                })
                for client in clients {
                    #expect(try client.reply() == ok)
                    #expect(try client.reply() == ok)
                }
                #expect(peer.node.stateSummary.committedDecisions - before == 1, "16 SETs of 8 clients in one turn")
                for index in clients.indices {
                    #expect(peer.node.entry(for: StateKey(name: "k\(index)"))?.value == Array("\(index)".utf8))
                    #expect(peer.node.entry(for: StateKey(name: "j\(index)"))?.value == Array("\"x\"".utf8))
                }
                // A client that sends again in a later turn is answered after its earlier SETs.
                #expect(try clients[0].call("GET", "k0") == bulk("0"))
            }
        }

        /// When the node refuses the turn's SETs together (one of them breaks a limit), they run
        /// one by one: only the bad one gets the error, and every client its own answers in order.
        @Test func aTurnRefusedTogetherAnswersEachClientItsOwn() async throws {
            try await Self.withConnectedClients("turn-refused", count: 3) { _, endpoint, clients in
                let longName = String(repeating: "n", count: 1025)
                try await Self.sendInOneTurn(endpoint, clients, [
                    request("SET", "a1", "1") + request("SET", "a2", "2"),
                    request("SET", longName, "x"),
                    request("SET", "c", "3"),
                ])
                #expect(try clients[0].reply() == ok)
                #expect(try clients[0].reply() == ok)
                guard case .error(let refusal) = try clients[1].reply() else { throw TestFailure("a SET over maxNameBytes was not refused") }
                #expect(refusal.contains("maxNameBytes"))
                #expect(try clients[2].reply() == ok)
                #expect(try clients[2].call("MGET", "a1", "a2", "c") == .array(["1", "2", "3"].map(bulk)))
            }
        }

        /// A pipelined run of GETs (and an MGET) over a table large enough to be prefetched (past
        /// `EntryTable.prefetchMinimumRecords`) answers exactly as one GET at a time would: each
        /// sees the writes and deletes before it in the pipeline and none after, absent, deleted,
        /// element and non-plain keys included, and a malformed request at the end is still met
        /// in its turn, after every reply before it.
        @Test func pipelinedGetsAnswerInOrderWhatTheyWouldAlone() async throws {
            try await withPeer("gets") { peer in
                let client = try peer.client()
                let count = EntryTable.prefetchMinimumRecords + 1_000
                for chunk in stride(from: 0, to: count, by: 500) {
                    try client.send(raw: (chunk..<min(count, chunk + 500)).flatMap { request("SET", "key:\($0)", "v\($0)") })
                    for _ in chunk..<min(count, chunk + 500) { #expect(try client.reply() == ok) }
                }
                var pipeline = request("GET", "key:1") + request("GET", "key:2") + request("SET", "key:1", "new")
                    + request("GET", "key:1") + request("DEL", "key:2") + request("GET", "key:2") + request("GET", "absent")
                    + request("SET", "quota[\"a\"]", "7") + request("GET", "quota[\"a\"]") + request("get", "key:3")
                    + request("MGET", "key:1", "key:2", "absent", "quota[\"a\"]", "key:5")
                var expected: [RESPValue] = [bulk("v1"), bulk("v2"), ok, bulk("new"), .integer(1), .null, .null, ok, bulk("7"), bulk("v3"),
                                             .array([bulk("new"), .null, .null, bulk("7"), bulk("v5")])]
                for index in stride(from: 10, to: count, by: 97) {
                    pipeline += request("GET", "key:\(index)")
                    expected.append(index == 2 ? .null : bulk(index == 1 ? "new" : "v\(index)"))
                }
                pipeline += request("SET", "key:10", "later") + request("GET", "key:10") + request("PING")
                expected += [ok, bulk("later"), .simple("PONG")]
                try client.send(raw: pipeline + Array("*1\r\n?3\r\n".utf8))
                for (position, reply) in expected.enumerated() {
                    #expect(try client.reply() == reply, "reply \(position)")
                }
                guard case .error(let fault) = try client.reply() else { throw TestFailure("the malformed request was not refused") }
                #expect(fault.contains("Protocol error"), "\(fault)")
                #expect(client.readUntilClosed().closed)
            }
        }
}
