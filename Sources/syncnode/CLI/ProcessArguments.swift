import Foundation

/// The arguments syncnode was started with, after the program's name.
///
/// Swift's runtime finds `argv` on Linux by walking back from `environ`; a library that sets an
/// environment variable before the runtime looks (libfaketime, preloaded to move a peer's clock,
/// does) leaves `CommandLine.arguments` empty (swiftlang/swift#76080), and `syncnode run --id a`
/// would print the top-level help instead of starting a peer. The kernel's copy,
/// `/proc/self/cmdline`, is read then.
enum ProcessArguments {
    static func current() -> [String] {
        current(runtime: CommandLine.arguments) { FileManager.default.contents(atPath: "/proc/self/cmdline") }
    }

    /// The arguments after the program's name: `runtime`'s, or when it is empty (no program
    /// name either), those of the kernel's copy `kernel` reads.
    static func current(runtime: [String], kernel: () -> Data?) -> [String] {
        if !runtime.isEmpty { return Array(runtime.dropFirst()) }
        return Array(parse(commandLine: kernel() ?? Data()).dropFirst())
    }

    /// Splits `/proc/PID/cmdline` (each argument ended by a NUL byte) into its arguments.
    static func parse(commandLine bytes: Data) -> [String] {
        var arguments: [String] = []
        var start = bytes.startIndex
        for index in bytes.indices where bytes[index] == 0 {
            arguments.append(String(decoding: bytes[start..<index], as: UTF8.self))
            start = bytes.index(after: index)
        }
        if start < bytes.endIndex { arguments.append(String(decoding: bytes[start...], as: UTF8.self)) }
        return arguments
    }
}
