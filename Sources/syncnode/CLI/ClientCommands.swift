import SyncNodeServer
import ArgumentParser
import Decide
import DecideRESP
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `--admin` and `--password-file` for every client command: flag, else `SYNCNODE_ADMIN` /
/// `SYNCNODE_ADMIN_PASSWORD_FILE`, else 127.0.0.1:7501 and no password.
struct AdminOptions: ParsableArguments {
    @Option(help: "The client endpoint of a running syncnode: HOST:PORT or unix:PATH (default: $SYNCNODE_ADMIN or \(RunSettings.defaultAdmin)).")
    var admin: String?
    @Option(help: "File with the password the node wants (default: $SYNCNODE_ADMIN_PASSWORD_FILE).")
    var passwordFile: String?

    var address: String {
        if let admin { return admin }
        if let fromEnvironment = ProcessInfo.processInfo.environment["SYNCNODE_ADMIN"], !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        return RunSettings.defaultAdmin
    }

    /// Connects (and authenticates), or prints the one-line reason and exits 2.
    func connect(replyTimeoutSeconds: Int = 30) throws -> RESPClient {
        signal(SIGPIPE, SIG_IGN)
        let path = passwordFile ?? ProcessInfo.processInfo.environment["SYNCNODE_ADMIN_PASSWORD_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        do {
            let password = try path.map { path throws(PeerFiles.Invalid) in try PeerFiles.readSecret(path, what: "admin password") }
            return try RESPClient(address: address, replyTimeoutSeconds: replyTimeoutSeconds, password: password)
        } catch {
            throw ClientExit.unreachable("\(error)")
        }
    }
}

/// How a client command ends when it does not succeed: a message on stderr and an exit code.
enum ClientExit {
    /// The node refused the request or the key has no value: exit 1.
    static func refused(_ message: String) -> ExitCode {
        printError(message)
        return ExitCode(1)
    }

    /// No syncnode could be talked to (or it wants a password we do not have): exit 2.
    static func unreachable(_ message: String) -> ExitCode {
        printError(message)
        return ExitCode(2)
    }

    static func printError(_ message: String) {
        FileHandle.standardError.write(Data("syncnode: \(message)\n".utf8))
    }
}

/// Sends one of syncnode's own commands (`DECIDE.*`) and returns its reply: the JSON of a bulk
/// reply, or nil for a null reply. Exits 2 when the endpoint fails, 1 when it answers an error.
func exchange(_ options: AdminOptions, _ arguments: [String]) throws -> JSONValue? {
    try exchange(on: try options.connect(), arguments)
}

/// `exchange` on a connection the caller keeps (for a command after it, or a reply that may
/// take long: connect with a longer `replyTimeoutSeconds`).
func exchange(on client: RESPClient, _ arguments: [String]) throws -> JSONValue? {
    let reply: RESPValue
    do {
        reply = try client.call(arguments.map { Array($0.utf8) })
    } catch {
        throw ClientExit.unreachable(error.description)
    }
    return try json(of: reply, from: client.address)
}

/// The JSON a `DECIDE.*` reply carries (nil for null); an error reply exits 1, or 2 when it
/// is about authentication.
func json(of reply: RESPValue, from address: String) throws -> JSONValue? {
    switch reply {
    case .null:
        return nil
    case .error(let text):
        if text.hasPrefix("NOAUTH") || text.hasPrefix("WRONGPASS") {
            throw ClientExit.unreachable("syncnode at \(address) wants a password: pass --password-file or set SYNCNODE_ADMIN_PASSWORD_FILE (\(text))")
        }
        throw ClientExit.refused(text.hasPrefix("ERR ") ? String(text.dropFirst(4)) : text)
    default:
        guard let text = reply.text, let value = try? JSONValue.parse(text) else {
            throw ClientExit.unreachable("syncnode at \(address) sent an unexpected reply — is that a syncnode client port?")
        }
        return value
    }
}

/// Checks a KEY locally so a typo is reported before anything is sent.
func checkedKey(_ key: String) throws -> String {
    do {
        _ = try KeySyntax.parse(key)
        return key
    } catch {
        ClientExit.printError(error.description)
        throw ExitCode(64)
    }
}

extension SyncNode {
    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a JSON value into a key (replies once committed on that node).",
            discussion: """
                Examples:
                  syncnode put maintenance true
                  syncnode put 'quota["batch-jobs"]' 0
                  syncnode put --admin 127.0.0.1:7502 motd '"deploy at 5pm"'
                  syncnode put config '{"replicas": 3, "zones": ["a", "b"]}'
                  syncnode put --expire-after 30 'presence["worker-1"]' '"up"'
                  syncnode put --owned 'presence["api@node1"]' '"up"'   # gone while node1 is down
                  syncnode put --wait 2 config '{"replicas": 3}'        # returns once 2 peers hold it
                """)
        @OptionGroup var options: AdminOptions
        @Option(name: .customLong("expire-after"),
                help: "Seconds (a decimal, e.g. 2.5) after which the value expires on every peer; a later put renews it.")
        var expireAfterSeconds: Double?
        @Option(name: .customLong("wait"),
                help: "After the write, wait until this many peers hold it (each applied it at its own durability level); exit 3 if fewer did in time.")
        var waitForPeers: Int?
        @Option(name: .customLong("wait-timeout-ms"), help: "How long --wait waits (default 5000).")
        var waitTimeoutMilliseconds: Int = 5_000
        @Flag(name: .customLong("owned"),
              help: "The value belongs to the peer it is written on: while that peer is down, cut off or gone, it reads as absent on the others.")
        var owned = false
        @Argument(help: "NAME for an atomic state, NAME[ID] for a collection element (ID as JSON).")
        var key: String
        @Argument(help: "The value, as JSON (a string needs its quotes: '\"text\"').")
        var value: String

        mutating func run() async throws {
            let parsed: JSONValue
            do { parsed = try JSONValue.parse(value) } catch {
                ClientExit.printError("the value is not JSON (\(error)); a string needs its quotes, e.g. '\"text\"'")
                throw ExitCode(64)
            }
            var request = ["DECIDE.PUT", try checkedKey(key), parsed.compact()]
            if let seconds = expireAfterSeconds {
                let milliseconds = (seconds * 1000).rounded()
                guard seconds.isFinite, milliseconds >= 1, milliseconds <= Double((1 << 48) - 1) else {
                    ClientExit.printError("--expire-after must be at least 0.001 seconds, not \(seconds)")
                    throw ExitCode(64)
                }
                request += ["PX", String(Int(milliseconds))]
            }
            if owned { request.append("OWNED") }
            if let waitForPeers, waitForPeers < 0 || waitTimeoutMilliseconds < 1 {
                ClientExit.printError("--wait needs a peer count of 0 or more and --wait-timeout-ms at least 1")
                throw ExitCode(64)
            }
            // One connection for both: WAIT waits for every write the node committed before it.
            let client = try options.connect(replyTimeoutSeconds: 30 + waitTimeoutMilliseconds / 1000)
            let reply = try exchange(on: client, request)
            print("ok \(reply?["key"]?.stringValue ?? key) \(versionText(reply?["version"]))")
            guard let waitForPeers else { return }
            let acknowledged: Int64
            do {
                let answer = try client.call(["WAIT", String(waitForPeers), String(waitTimeoutMilliseconds)].map { Array($0.utf8) })
                guard case .integer(let count) = answer else {
                    throw ClientExit.refused("WAIT answered \(answer)")
                }
                acknowledged = count
            } catch let error as RESPClient.Failure {
                throw ClientExit.unreachable(error.description)
            }
            print("acknowledged by \(acknowledged) of \(waitForPeers) peers")
            if acknowledged < waitForPeers {
                ClientExit.printError("only \(acknowledged) of \(waitForPeers) peers acknowledged the write within \(waitTimeoutMilliseconds) ms; it is committed on this node and replicates when they are back")
                throw ExitCode(3)
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a key's value as JSON: a counter's total, a set's members, a hash's fields, a sorted set's members with scores (exit 1 when it has none or was deleted).",
            discussion: """
                Examples:
                  syncnode get maintenance
                  syncnode get --admin 127.0.0.1:7503 'quota[batch-jobs]'
                  syncnode get --version maintenance    # value, then its version
                """)
        @OptionGroup var options: AdminOptions
        @Flag(name: .customLong("version"), help: "Also print the version that wrote the value.")
        var showVersion = false
        @Argument(help: "NAME or NAME[ID].")
        var key: String

        mutating func run() async throws {
            let text = try checkedKey(key)
            guard let reply = try exchange(options, ["DECIDE.GET", text]) else {
                throw ClientExit.refused("\(canonical(text)) has no value on this node")
            }
            if reply["deleted"]?.boolValue == true {
                throw ClientExit.refused("\(reply["key"]?.stringValue ?? text) was deleted")
            }
            print(Self.shown(reply).compact())
            if showVersion { print(versionText(reply["version"])) }
        }

        /// What `get` prints of DECIDE.GET's reply: a value as it is; a counter's total; a set's
        /// members, as a JSON array in byte order; a hash's fields, as a JSON object (a counter
        /// field as its total); a sorted set's `{"member","score"}` objects, in score order.
        static func shown(_ reply: JSONValue) -> JSONValue {
            if let value = reply["value"] { return value }
            if let total = reply["counter"] { return total }
            if case .array(let members)? = reply["set"] { return .array(members.compactMap { $0["member"] }) }
            if let scored = reply["sortedSet"] { return scored }
            if let fields = reply["hash"] { return fields }
            return .null
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a key (a tombstone replicates like any write).",
            discussion: "Example:\n  syncnode delete 'quota[batch-jobs]'")
        @OptionGroup var options: AdminOptions
        @Argument(help: "NAME or NAME[ID].")
        var key: String

        mutating func run() async throws {
            let reply = try exchange(options, ["DECIDE.DELETE", try checkedKey(key)])
            print("deleted \(reply?["key"]?.stringValue ?? key) \(versionText(reply?["version"]))")
        }
    }

    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print one JSON line per change (local or replicated) of keys starting with a prefix, until interrupted.",
            discussion: """
                Each line is a write the node took, with its origin (local, remote, catch-up, \
                expired, owner-gone, owner-back) and its position on the node's change feed; \
                the writes of one decision share a position. The first line on standard error \
                names the feed: resume with --from POSITION --feed FEED and nothing is missed \
                or shown twice, as long as the node still retains the changes after POSITION. \
                See docs/operations.md, "The change feed".

                Examples:
                  syncnode watch                             # every key, from now on
                  syncnode watch quota                       # quota and quota[...] keys
                  syncnode watch --from 0                    # every retained change, then live
                  syncnode watch --from 1234 --feed 9c0f2b6e51a4d3f7 --resync
                """)
        @OptionGroup var options: AdminOptions
        @Option(help: "Print the changes after this position first (0: every retained change), then follow.")
        var from: UInt64?
        @Option(help: "The feed --from belongs to (16 hex digits, as the first line names it): refused if the node's is another.")
        var feed: String?
        @Flag(help: "When the node no longer retains the changes after --from (or its feed is another), print its present values as lines of origin \"snapshot\" and go on from there, instead of exiting 1.")
        var resync = false
        @Argument(help: "Only keys whose text starts with this (default: all).")
        var prefix: String = ""

        mutating func run() async throws {
            let client = try options.connect(replyTimeoutSeconds: 0)
            var after = from.map { $0 == 0 ? "-" : String($0) } ?? "$"
            var feedID = feed
            if let feed, ChangeFeedID(feed) == nil { throw ClientExit.refused("--feed \(feed) is not 16 hex digits") }
            var announced = false
            while true {
                // The first request answers at once, so the line naming the feed comes at once.
                var request = ["DECIDE.CHANGES", after, "COUNT", "1000"] + (announced ? ["BLOCK", "1000"] : [])
                if let feedID { request += ["FEED", feedID] }
                if !prefix.isEmpty { request += ["PREFIX", prefix] }
                let reply = try Self.call(client, request)
                if case .error(let text) = reply, resync, text.hasPrefix("OUTOFRETENTION") || text.hasPrefix("OTHERFEED") || text.hasPrefix("AHEAD") {
                    ClientExit.printError("resynchronising from a snapshot: \(text)")
                    (feedID, after) = try printSnapshot(client)
                    continue
                }
                guard case .array(let parts) = reply, let first = parts.first, let headerText = first.text,
                      let header = try? JSONValue.parse(headerText), let feedText = header["feed"]?.stringValue,
                      let end = header["end"].flatMap({ if case .number(let text) = $0 { text } else { nil } }) else {
                    _ = try json(of: reply, from: client.address)
                    throw ClientExit.unreachable("syncnode at \(client.address) sent an unexpected reply to DECIDE.CHANGES")
                }
                if !announced {
                    let retained = [header["oldest"], header["newest"]].map { $0.flatMap { if case .number(let text) = $0 { text } else { nil } } ?? "?" }
                    ClientExit.printError("watching \(prefix.isEmpty ? "every key" : "keys starting with '\(prefix)'") on \(client.address): feed \(feedText), retaining positions \(retained[0]) to \(retained[1]) (Ctrl-C to stop)")
                    announced = true
                }
                feedID = feedText
                after = end
                for part in parts.dropFirst() {
                    guard let text = part.text, let change = try? JSONValue.parse(text), case .array(let writes)? = change["writes"] else { continue }
                    var lines: [UInt8] = []
                    for write in writes {
                        guard case .object(var fields) = write else { continue }
                        if let origin = change["origin"] { fields.append(("origin", origin)) }
                        if let position = change["position"] { fields.append(("position", position)) }
                        lines += Array(JSONValue.object(fields).compact().utf8) + [UInt8(ascii: "\n")]
                    }
                    FileHandle.standardOutput.write(Data(lines))  // unbuffered: a pipe sees each change at once
                }
            }
        }

        /// `request`'s reply; a connection that fails ends the watch (exit 2).
        private static func call(_ client: RESPClient, _ request: [String]) throws -> RESPValue {
            do {
                return try client.call(request.map { Array($0.utf8) })
            } catch {
                throw ClientExit.unreachable("syncnode at \(client.address) closed the watch: \(error)")
            }
        }

        /// Prints the node's present values (DECIDE.SNAPSHOT) as lines of origin "snapshot";
        /// returns the feed and position to go on from.
        private func printSnapshot(_ client: RESPClient) throws -> (String, String) {
            var request = ["DECIDE.SNAPSHOT"]
            if !prefix.isEmpty { request += ["PREFIX", prefix] }
            let reply = try Self.call(client, request)
            guard case .array(let parts) = reply, let headerText = parts.first?.text, let header = try? JSONValue.parse(headerText),
                  let feed = header["feed"]?.stringValue, case .number(let position)? = header["position"] else {
                _ = try json(of: reply, from: client.address)
                throw ClientExit.unreachable("syncnode at \(client.address) sent an unexpected reply to DECIDE.SNAPSHOT")
            }
            var lines: [UInt8] = []
            for part in parts.dropFirst() {
                guard let text = part.text, case .object(var fields)? = try? JSONValue.parse(text) else { continue }
                fields += [("origin", .string("snapshot")), ("position", .number(position))]
                lines += Array(JSONValue.object(fields).compact().utf8) + [UInt8(ascii: "\n")]
            }
            FileHandle.standardOutput.write(Data(lines))
            return (feed, position)
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the node, its members (link, last heard, queued bytes, catch-up), entry count, digest and tombstones.",
            discussion: """
                Examples:
                  syncnode status
                  syncnode status --json | python3 -m json.tool
                """)
        @OptionGroup var options: AdminOptions
        @Flag(help: "Print the raw JSON reply (one line) instead of the table.")
        var json = false

        mutating func run() async throws {
            guard let reply = try exchange(options, ["DECIDE.STATUS"]), case .object(let members) = reply else {
                throw ClientExit.unreachable("syncnode at \(options.address) sent an unexpected status reply")
            }
            // `"ok":true` first, as the status line always began.
            let line = JSONValue.object([("ok", .bool(true))] + members)
            print(json ? line.compact() : StatusTable.render(line))
        }
    }

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a member from the cluster for good: tombstones stop waiting for it, and it is refused if it returns.",
            discussion: """
                For a node that will not come back (its machine is gone, it was killed and will not \
                be restarted). Every other member learns of the removal by gossip. A removed node \
                that starts again is refused by every member; to bring the machine back, start it \
                with an empty data directory and a new node id.

                Example:
                  syncnode forget --admin 127.0.0.1:7501 node3
                """)
        @OptionGroup var options: AdminOptions
        @Argument(help: "The id of the member to remove.")
        var node: String

        mutating func run() async throws {
            let reply = try exchange(options, ["DECIDE.FORGET", node])
            print("ok removed \(reply?["removed"]?.stringValue ?? node)")
        }
    }

    struct ReloadSecrets: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reload-secrets",
            abstract: "Re-read the cluster secret and accepted secrets files of a running peer (as SIGHUP does).",
            discussion: """
                New links prove and seal with the cluster secret and accept any accepted secret; links \
                still sealed under a secret no longer accepted close and redial at once. If a file \
                cannot be used, nothing changes and the reason is printed (exit 1). Rotating the \
                secret without downtime (docs/operations.md, "Rotating the cluster secret"):
                  1. add the new secret to every peer's accepted secrets file, reload every peer;
                  2. swap: the new secret into the cluster secret file, the old into the accepted \
                     file, reload every peer;
                  3. when INFO replication shows every link sealed=NEW/NEW, remove the old secret \
                     from the accepted file, reload every peer.
                Example:
                  syncnode reload-secrets --admin 127.0.0.1:7501
                """)
        @OptionGroup var options: AdminOptions

        mutating func run() async throws {
            let client = try options.connect()
            let reply: RESPValue
            do {
                reply = try client.call([Array("DECIDE.REKEY".utf8)])
            } catch {
                throw ClientExit.unreachable(error.description)
            }
            if case .error = reply { _ = try json(of: reply, from: client.address) }
            print(reply.text.map { $0.hasPrefix("OK ") ? String($0.dropFirst(3)) : $0 } ?? "")
        }
    }

    struct Dump: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every entry (tombstones included) with its version, one JSON line each, sorted by key.",
            discussion: """
                Two nodes hold the same state exactly when their dumps are identical.
                Example:
                  diff <(syncnode dump --admin 127.0.0.1:7501) <(syncnode dump --admin 127.0.0.1:7502)
                """)
        @OptionGroup var options: AdminOptions

        mutating func run() async throws {
            let client = try options.connect()
            do throws(any Error) {
                try client.send([Array("DECIDE.DUMP".utf8)])
                let count: Int
                switch try client.receiveArrayHeader() {
                case .count(let elements): count = elements
                case .other(let reply):
                    _ = try json(of: reply, from: client.address)
                    throw ClientExit.unreachable("syncnode at \(client.address) sent an unexpected dump reply")
                }
                let output = FileHandle.standardOutput
                var pending: [UInt8] = []
                for _ in 0 ..< count {
                    guard let line = try client.receive() else {
                        throw ClientExit.unreachable("syncnode at \(client.address) closed the connection mid-dump")
                    }
                    guard case .bulk(let bytes) = line else {
                        throw ClientExit.unreachable("syncnode at \(client.address) sent an unexpected dump line")
                    }
                    pending += bytes
                    pending.append(UInt8(ascii: "\n"))
                    if pending.count >= 1 << 16 {
                        output.write(Data(pending))
                        pending.removeAll(keepingCapacity: true)
                    }
                }
                output.write(Data(pending))
            } catch let failure as RESPClient.Failure {
                throw ClientExit.unreachable(failure.description)
            }
        }
    }
}

/// The canonical text of a KEY the user typed (`quota[a]` is `quota["a"]`).
func canonical(_ key: String) -> String {
    (try? KeySyntax.parse(key).description) ?? key
}

/// `ms.logical@node` for a version object of a reply.
func versionText(_ version: JSONValue?) -> String {
    guard let version, let ms = version["ms"], let logical = version["logical"], let node = version["node"]?.stringValue else {
        return ""
    }
    return "version \(ms.compact()).\(logical.compact())@\(node)"
}
