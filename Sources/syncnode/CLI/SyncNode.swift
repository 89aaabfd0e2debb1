import ArgumentParser

/// `syncnode`: a Decide peer process (`run`) and the client commands that talk to a running
/// one through its admin endpoint.
@main
struct SyncNode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncnode",
        abstract: "A Decide peer: replicates JSON state between processes; put, get and watch it from the shell.",
        discussion: """
            Start three peers on this machine, write on one, read on another:

              syncnode run --id a --listen 127.0.0.1:7401 --admin 127.0.0.1:7501 &
              syncnode run --id b --listen 127.0.0.1:7402 --admin 127.0.0.1:7502 \\
                           --peer 127.0.0.1:7401 &
              syncnode run --id c --listen 127.0.0.1:7403 --admin 127.0.0.1:7503 \\
                           --peer 127.0.0.1:7401 &
              syncnode put --admin 127.0.0.1:7501 maintenance true
              syncnode get --admin 127.0.0.1:7503 maintenance
              syncnode put --admin 127.0.0.1:7501 'quota[batch-jobs]' 0
              syncnode status --admin 127.0.0.1:7502
              syncnode forget --admin 127.0.0.1:7501 c     # c is gone for good

            Exit status: 0 done; 1 the node refused or the key has no value; 2 no syncnode \
            answered at the admin address. The admin address speaks the Redis protocol, so \
            redis-cli and every Redis client work too. Keys, values, the protocol and the log \
            lines are described in docs/operations.md.
            """,
        subcommands: [Run.self, Put.self, Get.self, Delete.self, Watch.self, Status.self, Dump.self, Forget.self, ReloadSecrets.self, Lease.self, Release.self])

    /// Parses and runs the command the process was started with (`ProcessArguments`: also
    /// when a preloaded library hid them from `CommandLine.arguments`).
    static func main() async {
        await main(ProcessArguments.current())
    }
}
