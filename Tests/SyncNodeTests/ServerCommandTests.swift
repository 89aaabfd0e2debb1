import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// The connection and server commands through a real socket: PING, ECHO, SELECT, HELLO,
/// CLIENT, COMMAND, CONFIG, INFO, TIME, QUIT, RESET; arity, unknown and refused commands.
extension SyncNodeTests {
    @Suite struct ServerCommandTests {
        @Test func pingEchoSelectTimeQuit() async throws {
            try await withPeer("ping") { peer in
                let client = try peer.client()
                #expect(try client.call("PING") == .simple("PONG"))
                #expect(try client.call("ping", "hello there") == bulk("hello there"))
                #expect(try client.call("ECHO", "é\r\n\u{0}") == bulk("é\r\n\u{0}"))
                #expect(try client.call("PING", "a", "b") == .error("ERR wrong number of arguments for 'ping' command"))
                #expect(try client.call("SELECT", "0") == ok)
                #expect(try client.call("SELECT", "1") == .error("ERR DB index is out of range"))
                #expect(try client.call("SELECT", "x") == .error("ERR value is not an integer or out of range"))
                let time = try client.call("TIME")
                let parts = try #require(time.texts)
                #expect(parts.count == 2 && parts.allSatisfy { Int($0) != nil }, "\(time)")
                #expect(abs((Int(parts[0]) ?? 0) - Int(Date().timeIntervalSince1970)) < 60)
                #expect(try client.call("QUIT") == ok)
                let rest = client.readUntilClosed(timeout: 5)
                #expect(rest.closed && rest.bytes.isEmpty)
            }
        }

        @Test func wrongArityAndUnknownCommands() async throws {
            try await withPeer("arity") { peer in
                let client = try peer.client()
                #expect(try client.call("GET") == .error("ERR wrong number of arguments for 'get' command"))
                #expect(try client.call("GET", "a", "b") == .error("ERR wrong number of arguments for 'get' command"))
                #expect(try client.call("echo") == .error("ERR wrong number of arguments for 'echo' command"))
                #expect(try client.call("TYPE", "a", "b") == .error("ERR wrong number of arguments for 'type' command"))
                #expect(try client.call("MSET", "a") == .error("ERR wrong number of arguments for 'mset' command"))
                let unknown = try client.call("FROBNICATE", "a", "b c")
                #expect(unknown.errorText?.hasPrefix("ERR unknown command 'FROBNICATE', with args beginning with:") == true, "\(unknown)")
                #expect(unknown.errorText?.contains("'a' 'b c'") == true, "\(unknown)")
                #expect(try client.call("NOSUCH").errorText?.hasPrefix("ERR unknown command 'NOSUCH'") == true)
                // A long, binary command name is cut and made printable; the reply stays one line.
                let long = try client.call(bytes: [Array(repeating: UInt8(ascii: "x"), count: 300) + [0x0A, 0x0D]])
                #expect(long.errorText.map { $0.count < 300 && !$0.contains("\n") } == true, "\(long)")
                #expect(try client.call("PING") == .simple("PONG"))
            }
        }

        /// Past `--admin-max-clients`, a connection gets Redis's error and is closed; a slot
        /// freed is taken again.
        @Test func connectionsPastTheLimitAreRefused() async throws {
            try await withPeer("max", configure: { $0.adminMaxClients = "2" }) { peer in
                var first: TestClient? = try peer.client()
                let second = try peer.client()
                #expect(try first?.call("PING") == .simple("PONG"))
                #expect(try second.call("PING") == .simple("PONG"))
                let third = try peer.client()
                let (bytes, closed) = third.readUntilClosed(timeout: 10)
                #expect(String(decoding: bytes, as: UTF8.self) == "-ERR max number of clients reached\r\n" && closed)
                #expect(try second.call("CONFIG", "GET", "maxclients") == bulks("maxclients", "2"))
                first = nil
                #expect(await eventually {
                    guard let client = try? peer.client() else { return false }
                    return (try? client.call("PING")) == .simple("PONG")
                })
                _ = first
            }
        }

        /// Commands last-writer-wins cannot keep the meaning of are refused with the reason, and
        /// the connection stays usable.
        @Test func refusedCommandsNameTheReason() async throws {
            try await withPeer("refused") { peer in
                let client = try peer.client()
                #expect(try client.call("SET", "k", "1") == ok)
                let cases: [([String], String)] = [
                    (["incrbyfloat", "k", "2.5"], "to the last bit"),
                    (["LPUSH", "list", "a"], "NAME[ID]"),
                    (["HINCRBYFLOAT", "h", "f", "1.5"], "to the last bit"),
                    (["SPOP", "s"], "hand the same member to both"),
                    (["ZINCRBY", "z", "1", "m"], "adding to one score at once"),
                    (["ZPOPMIN", "z"], "hand the same member to both"),
                    (["WATCH", "k"], "one server to order every write"),
                    (["EVAL", "return 1", "0"], "MULTI … EXEC (or MSET) runs several commands as one decision"),
                    (["APPEND", "k", "x"], "parts of one string"),
                    (["GETEX", "k", "EX", "10"], "renew with EXPIRE"),
                    (["PUBLISH", "ch", "msg"], "keyspace notifications"),
                    (["FLUSHALL"], "DEL keys in batches"),
                    (["FLUSHDB"], "DEL keys in batches"),
                    (["WAITAOF", "1", "1", "0"], "no append-only file"),
                    (["RENAME", "k", "j"], "identity"),
                    (["SWAPDB", "0", "1"], "one database"),
                ]
                for (command, reason) in cases {
                    let reply = try client.call(bytes: command.map { Array($0.utf8) })
                    let text = reply.errorText ?? ""
                    #expect(text.hasPrefix("ERR \(command[0].uppercased()) is not supported: "), "\(command): \(reply)")
                    #expect(text.contains(reason), "\(command): \(reply)")
                    #expect(try client.call("PING") == .simple("PONG"), "connection unusable after \(command)")
                }
                #expect(try client.call("GET", "k") == bulk("1"), "a refused command changed the value")
                #expect(try client.call("CONFIG", "SET", "save", "").errorText?.hasPrefix("ERR CONFIG SET is not supported") == true)
            }
        }

        /// The fields of a HELLO reply (a RESP3 map, or a flat RESP2 array), by name.
        static func fields(_ reply: RESPValue) -> [String: RESPValue] {
            var fields: [String: RESPValue] = [:]
            let items = reply.elements ?? []
            for index in stride(from: 0, to: items.count - 1, by: 2) {
                if let name = items[index].text { fields[name] = items[index + 1] }
            }
            return fields
        }

        @Test func helloSwitchesProtocols() async throws {
            try await withPeer("hello") { peer in
                let client = try peer.client()
                // RESP2: HELLO without a version answers a flat array in the current protocol.
                let plain = try client.call("HELLO")
                guard case .array = plain else { throw TestFailure("HELLO in RESP2 answered \(plain)") }
                #expect(Self.fields(plain)["proto"] == .integer(2))
                try client.send("GET", "missing")
                #expect(try client.rawReply().bytes == Array("$-1\r\n".utf8))

                try client.send("HELLO", "3")
                let (hello, helloBytes) = try client.rawReply()
                #expect(helloBytes.first == UInt8(ascii: "%"), "HELLO 3 did not answer a map")
                let fields = Self.fields(hello)
                #expect(fields["server"] == bulk("syncnode"))
                #expect(fields["version"] == bulk("7.0.0"))
                #expect(fields["proto"] == .integer(3))
                #expect(fields["mode"] == bulk("standalone"))
                #expect(fields["role"] == bulk("master"))
                #expect(fields["modules"] == .array([]))
                let id = try #require(fields["id"]?.integerValue)
                #expect(try client.call("CLIENT", "ID") == .integer(id))
                // RESP3 nulls are `_`, for a missing key and in MGET.
                try client.send("GET", "missing")
                #expect(try client.rawReply().bytes == Array("_\r\n".utf8))
                try client.send("MGET", "missing")
                #expect(try client.rawReply().bytes == Array("*1\r\n_\r\n".utf8))
                try client.send("SET", "k", "v", "NX", "GET")
                #expect(try client.rawReply().bytes == Array("_\r\n".utf8))

                // An unsupported version: NOPROTO, and the protocol is unchanged.
                #expect(try client.call("HELLO", "4") == .error("NOPROTO unsupported protocol version"))
                #expect(try client.call("HELLO", "1") == .error("NOPROTO unsupported protocol version"))
                try client.send("GET", "missing")
                #expect(try client.rawReply().bytes == Array("_\r\n".utf8))
                #expect(try client.call("HELLO", "three") == .error("ERR Protocol version is not an integer or out of range"))
                #expect(try client.call("HELLO", "3", "BOGUS") == .error("ERR Syntax error in HELLO option 'BOGUS'"))

                // HELLO 2 SETNAME: back to RESP2, and named.
                let back = try client.call("HELLO", "2", "SETNAME", "worker-1")
                #expect(Self.fields(back)["proto"] == .integer(2))
                #expect(try client.call("CLIENT", "GETNAME") == bulk("worker-1"))
                try client.send("GET", "missing")
                #expect(try client.rawReply().bytes == Array("$-1\r\n".utf8))
                #expect(try client.call("HELLO", "3", "SETNAME", "bad name").errorText?.hasPrefix("ERR Client names cannot contain spaces") == true)

                // RESET: back to RESP2, unnamed.
                _ = try client.call("HELLO", "3")
                #expect(try client.call("RESET") == .simple("RESET"))
                try client.send("GET", "missing")
                #expect(try client.rawReply().bytes == Array("$-1\r\n".utf8))
                #expect(try client.call("CLIENT", "GETNAME") == .null)
            }
        }

        @Test func clientSubcommands() async throws {
            try await withPeer("client") { peer in
                let client = try peer.client()
                let other = try peer.client()
                let id = try #require(try client.call("CLIENT", "ID").integerValue)
                let otherID = try #require(try other.call("CLIENT", "ID").integerValue)
                #expect(otherID != id)
                #expect(try client.call("CLIENT", "GETNAME") == .null)
                #expect(try client.call("CLIENT", "SETNAME", "reporter") == ok)
                #expect(try client.call("CLIENT", "GETNAME") == bulk("reporter"))
                #expect(try client.call("CLIENT", "SETNAME", "has space").errorText?.hasPrefix("ERR Client names cannot contain spaces") == true)
                #expect(try client.call("CLIENT", "GETNAME") == bulk("reporter"))
                #expect(try client.call("CLIENT", "SETINFO", "LIB-NAME", "redis-py") == ok)
                #expect(try client.call("CLIENT", "SETINFO", "lib-ver", "5.0.1") == ok)
                #expect(try client.call("CLIENT", "SETINFO", "COLOR", "blue") == .error("ERR Unrecognized option 'COLOR'"))
                let info = try #require(try client.call("CLIENT", "INFO").text)
                for part in ["id=\(id) ", "name=reporter ", "lib-name=redis-py ", "lib-ver=5.0.1", "db=0 ", "resp=2 "] {
                    #expect(info.contains(part), "CLIENT INFO lacks \(part): \(info)")
                }
                let list = try #require(try client.call("CLIENT", "LIST").text)
                #expect(list.split(separator: "\n").count == 2, "\(list)")
                #expect(list.contains("id=\(otherID) "))
                #expect(try client.call("CLIENT", "SETNAME", "") == ok)
                #expect(try client.call("CLIENT", "GETNAME") == .null)
                #expect(try client.call("CLIENT", "NO-EVICT", "on") == ok)
                #expect(try client.call("CLIENT", "KILL", "x").errorText?.hasPrefix("ERR unknown subcommand or wrong number of arguments for 'KILL'") == true)
                #expect(try client.call("CLIENT") == .error("ERR wrong number of arguments for 'client' command"))
            }
        }

        @Test(arguments: [2, 3]) func commandAndConfig(protocolVersion: Int) async throws {
            try await withPeer("command") { peer in
                let client = try peer.client()
                if protocolVersion == 3 { _ = try client.call("HELLO", "3") }
                #expect(try client.call("COMMAND", "COUNT") == .integer(Int64(RESPCommand.allCases.count)))
                let flags: [RESPValue] = [.simple("readonly"), .simple("fast")]
                let empty: RESPValue = protocolVersion == 3 ? .set([]) : .array([])
                let getInfo: RESPValue = .array([bulk("get"), .integer(2), protocolVersion == 3 ? .set(flags) : .array(flags),
                                                 .integer(1), .integer(1), .integer(1), empty, empty, empty, .array([])])
                #expect(try client.call("COMMAND", "INFO", "get") == .array([getInfo]))
                #expect(try client.call("COMMAND", "INFO", "GET", "nosuch") == .array([getInfo, .null]))
                let mset = try #require(try client.call("COMMAND", "INFO", "mset").elements?.first?.elements)
                #expect(mset[1] == .integer(-3) && mset[3] == .integer(1) && mset[4] == .integer(-1) && mset[5] == .integer(2))
                let names = try #require(try client.call("COMMAND", "LIST").texts)
                #expect(names.count == RESPCommand.allCases.count && names.contains("scan") && names.contains("decide.get"))
                let all = try #require(try client.call("COMMAND").elements)
                #expect(all.count == RESPCommand.allCases.count)

                let save = try client.call("CONFIG", "GET", "save")
                #expect(save == (protocolVersion == 3 ? .map([bulk("save"), bulk("")]) : bulks("save", "")))
                let appendonly = try client.call("CONFIG", "GET", "appendonly")
                #expect(appendonly.elements == [bulk("appendonly"), bulk("no")])
                let both = try #require(try client.call("CONFIG", "GET", "save", "appendonly").elements)
                #expect(both.count == 4)
                let matched = try #require(try client.call("CONFIG", "GET", "max*").elements)
                #expect(matched == [bulk("maxclients"), bulk("1024")])
                #expect(try client.call("CONFIG", "GET", "nonexistent").elements == [])
                #expect(try client.call("CONFIG", "RESETSTAT") == ok)
            }
        }

        @Test func infoSections() async throws {
            try await withPair { a, b in
                let client = try b.client()
                #expect(try client.call("MSET", "x", "1", "y", "2", "z", "3") == ok)
                #expect(try client.call("DEL", "z") == .integer(1))
                let replication = try #require(try client.call("INFO", "replication").text)
                #expect(replication.hasPrefix("# Replication\r\n"), "\(replication)")
                #expect(replication.contains("role:master\r\n"))
                #expect(replication.contains("connected_peers:1\r\n"), "\(replication)")
                #expect(replication.contains("peer0:id=a,addr=\(a.listenAddress),link=connected,"), "\(replication)")
                #expect(!replication.contains("# Keyspace"))
                let keyspace = try #require(try client.call("INFO", "keyspace").text)
                #expect(keyspace == "# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n", "\(keyspace)")
                let all = try #require(try client.call("INFO").text)
                for header in ["# Server", "# Clients", "# Memory", "# Replication", "# Keyspace", "# Decide"] {
                    #expect(all.contains(header + "\r\n"), "INFO lacks \(header)")
                }
                #expect(all.contains("redis_version:7.0.0\r\n"))
                #expect(all.contains("decide_node:b\r\n"))
                #expect(all.contains("connected_clients:1\r\n"))
                #expect(all.contains("tombstones:1\r\n"))
                // syncnode links jemalloc, and so does this test process, through the syncnode
                // module (except in the sanitizer's build, which does not run this suite).
                let memory = try #require(try client.call("INFO", "memory").text)
                #expect(memory.hasPrefix("# Memory\r\nused_memory_rss:"), "\(memory)")
                #expect(memory.contains("\r\nmem_allocator:jemalloc-5."), "\(memory)")
                let two = try #require(try client.call("INFO", "server", "CLIENTS").text)
                #expect(two.contains("# Server") && two.contains("# Clients") && !two.contains("# Keyspace"))
                #expect(try client.call("INFO", "everything").text?.contains("# Decide\r\n") == true)
                // RESP3: a verbatim string.
                _ = try client.call("HELLO", "3")
                let verbatim = try client.call("INFO", "keyspace")
                #expect(verbatim == .verbatim(format: "txt", text: Array(keyspace.utf8)), "\(verbatim)")
            }
        }
    }
}
