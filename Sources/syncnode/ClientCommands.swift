import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `--admin HOST:PORT` for every client command: flag, else `SYNCNODE_ADMIN`, else 127.0.0.1:7501.
struct AdminOptions: ParsableArguments {
    @Option(help: "The admin endpoint of a running syncnode (default: $SYNCNODE_ADMIN or \(RunSettings.defaultAdmin)).")
    var admin: String?

    var address: String {
        if let admin { return admin }
        if let fromEnvironment = ProcessInfo.processInfo.environment["SYNCNODE_ADMIN"], !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        return RunSettings.defaultAdmin
    }

    /// Connects, or prints the one-line reason and exits 2.
    func connect(replyTimeoutSeconds: Int = 30) throws -> AdminClient {
        signal(SIGPIPE, SIG_IGN)
        do {
            return try AdminClient(address: address, replyTimeoutSeconds: replyTimeoutSeconds)
        } catch {
            throw ClientExit.unreachable(error.description)
        }
    }
}

/// How a client command ends when it does not succeed: a message on stderr and an exit code.
enum ClientExit {
    /// The node answered `{"ok":false,...}` or the key has no value: exit 1.
    static func refused(_ message: String) -> ExitCode {
        printError(message)
        return ExitCode(1)
    }

    /// No syncnode could be talked to: exit 2.
    static func unreachable(_ message: String) -> ExitCode {
        printError(message)
        return ExitCode(2)
    }

    static func printError(_ message: String) {
        FileHandle.standardError.write(Data("syncnode: \(message)\n".utf8))
    }
}

/// Sends one request and returns its reply; exits 2 when the endpoint fails, 1 when the reply
/// is `{"ok":false}`.
func exchange(_ options: AdminOptions, _ request: JSONValue) throws -> JSONValue {
    let client = try options.connect()
    let reply: JSONValue
    do {
        reply = try client.request(request)
    } catch {
        throw ClientExit.unreachable(error.description)
    }
    guard reply["ok"]?.boolValue == true else {
        throw ClientExit.refused(reply["error"]?.stringValue ?? "the node refused: \(reply.compact())")
    }
    return reply
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
                """)
        @OptionGroup var options: AdminOptions
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
            let reply = try exchange(options, .object([("op", .string("put")), ("key", .string(try checkedKey(key))), ("value", parsed)]))
            print("ok \(reply["key"]?.stringValue ?? key) \(versionText(reply["version"]))")
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a key's value as JSON (exit 1 when it has none or was deleted).",
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
            let reply = try exchange(options, .object([("op", .string("get")), ("key", .string(try checkedKey(key)))]))
            print(reply["value"]?.compact() ?? "null")
            if showVersion { print(versionText(reply["version"])) }
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
            let reply = try exchange(options, .object([("op", .string("delete")), ("key", .string(try checkedKey(key)))]))
            print("deleted \(reply["key"]?.stringValue ?? key) \(versionText(reply["version"]))")
        }
    }

    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print one JSON line per change (local or replicated) of keys starting with a prefix, until interrupted.",
            discussion: """
                Changes applied by anti-entropy catch-up (after a restart or a dropped queue) are \
                not shown; see docs/operations.md.

                Examples:
                  syncnode watch                 # every key
                  syncnode watch quota           # quota and quota[...] keys
                """)
        @OptionGroup var options: AdminOptions
        @Argument(help: "Only keys whose text starts with this (default: all).")
        var prefix: String = ""

        mutating func run() async throws {
            let client = try options.connect(replyTimeoutSeconds: 0)
            do {
                let header = try client.request(.object([("op", .string("watch")), ("prefix", .string(prefix))]))
                guard header["ok"]?.boolValue == true else {
                    throw ClientExit.refused(header["error"]?.stringValue ?? "watch refused")
                }
                ClientExit.printError("watching \(prefix.isEmpty ? "every key" : "keys starting with '\(prefix)'") on \(client.address) (Ctrl-C to stop)")
                while let line = try client.nextLine() {
                    FileHandle.standardOutput.write(Data(line + [UInt8(ascii: "\n")]))  // unbuffered: a pipe sees each change at once
                }
                throw ClientExit.unreachable("syncnode at \(client.address) closed the watch (it stopped?)")
            } catch let failure as AdminClient.Failure {
                throw ClientExit.unreachable(failure.description)
            }
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
            let reply = try exchange(options, .object([("op", .string("status"))]))
            print(json ? reply.compact() : StatusTable.render(reply))
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
            let reply = try exchange(options, .object([("op", .string("forget")), ("node", .string(node))]))
            print("ok removed \(reply["removed"]?.stringValue ?? node)")
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
            do {
                let header = try client.request(.object([("op", .string("dump"))]))
                guard header["ok"]?.boolValue == true, let count = header["entries"]?.intValue else {
                    throw ClientExit.refused(header["error"]?.stringValue ?? "dump refused")
                }
                let output = FileHandle.standardOutput
                var pending: [UInt8] = []
                for _ in 0 ..< count {
                    guard let line = try client.nextLine() else {
                        throw ClientExit.unreachable("syncnode at \(client.address) closed the connection mid-dump")
                    }
                    pending += line
                    pending.append(UInt8(ascii: "\n"))
                    if pending.count >= 1 << 16 {
                        output.write(Data(pending))
                        pending.removeAll(keepingCapacity: true)
                    }
                }
                output.write(Data(pending))
            } catch let failure as AdminClient.Failure {
                throw ClientExit.unreachable(failure.description)
            }
        }
    }
}

/// `ms.logical@node` for a version object of a reply.
func versionText(_ version: JSONValue?) -> String {
    guard let version, let ms = version["ms"], let logical = version["logical"], let node = version["node"]?.stringValue else {
        return ""
    }
    return "version \(ms.compact()).\(logical.compact())@\(node)"
}
