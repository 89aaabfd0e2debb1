import ArgumentParser
import DecideRESP
import Foundation

extension SyncNode {
    struct Lease: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take (or renew) a lease on a resource; print its fencing token.",
            discussion: """
                Prints `held RESOURCE token TOKEN until MS` and exits 0 when this node now holds \
                the lease; exits 1 when another node holds a live one (`held by NODE ...`), 3 when \
                fewer peers than --wait acknowledged it in time (treat it as not held). Pass \
                TOKEN to what the lease guards, which refuses tokens lower than the highest it \
                saw: two holders are possible during a partition (docs/consistency.md, "Leases").

                Examples:
                  syncnode lease nightly-job --for 60 --wait 1
                  syncnode release nightly-job 117636281540608001
                """)
        @OptionGroup var options: AdminOptions
        @Argument(help: "What the lease is for.")
        var resource: String
        @Option(name: .customLong("for"), help: "Seconds (a decimal) the lease lasts unless renewed.")
        var seconds: Double
        @Option(name: .customLong("wait"), help: "Peers that must acknowledge it (default 0).")
        var waitForPeers: Int = 0
        @Option(name: .customLong("wait-timeout-ms"), help: "How long --wait waits (default 5000).")
        var waitTimeoutMilliseconds: Int = 5_000
        @Flag(name: .customLong("owned"), help: "Free the lease as soon as the others stop seeing this peer.")
        var owned = false

        mutating func run() async throws {
            let milliseconds = (seconds * 1000).rounded()
            guard seconds.isFinite, milliseconds >= 1, milliseconds <= Double((1 << 48) - 1),
                  waitForPeers >= 0, waitTimeoutMilliseconds >= 0 else {
                ClientExit.printError("--for must be at least 0.001 seconds, --wait and --wait-timeout-ms not negative")
                throw ExitCode(64)
            }
            var request = ["DECIDE.LEASE", resource, String(Int(milliseconds)), "WAIT", String(waitForPeers), String(waitTimeoutMilliseconds)]
            if owned { request.append("OWNED") }
            let reply = try exchange(on: try options.connect(replyTimeoutSeconds: 30 + waitTimeoutMilliseconds / 1000), request)
            guard let reply, let holder = reply["holder"]?.stringValue else {
                throw ClientExit.refused("unexpected reply to DECIDE.LEASE")
            }
            let token = reply["fencingToken"].map { $0.stringValue ?? $0.compact() } ?? "?"
            let until = reply["expiresAt"].map { $0.stringValue ?? $0.compact() } ?? "?"
            let acquired: Bool
            if case .bool(true)? = reply["acquired"] { acquired = true } else { acquired = false }
            if acquired {
                print("held \(resource) token \(token) until \(until)")
            } else if reply["required"] != nil {
                print("held \(resource) token \(token) until \(until)")
                ClientExit.printError("fewer than \(waitForPeers) peers acknowledged the lease in time: treat it as not held")
                throw ExitCode(3)
            } else {
                throw ClientExit.refused("\(resource) is held by \(holder) until \(until)")
            }
        }
    }

    struct Release: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End this node's lease on a resource early (exit 1 when the stored lease is another).",
            discussion: "Example:\n  syncnode release nightly-job 117636281540608001")
        @OptionGroup var options: AdminOptions
        @Argument(help: "What the lease is for.")
        var resource: String
        @Argument(help: "The fencing token `syncnode lease` printed.")
        var token: String

        mutating func run() async throws {
            let client = try options.connect()
            let answer: RESPValue
            do {
                answer = try client.call(["DECIDE.RELEASE", resource, token].map { Array($0.utf8) })
            } catch {
                throw ClientExit.unreachable(error.description)
            }
            guard case .integer(let released) = answer else {
                throw ClientExit.refused("DECIDE.RELEASE answered \(answer)")
            }
            guard released == 1 else {
                throw ClientExit.refused("\(resource) has no lease of token \(token) held by this node")
            }
            print("released \(resource)")
        }
    }
}
