import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// The fallback that reads syncnode's arguments from `/proc/self/cmdline` when a preloaded
/// library hid them from `CommandLine.arguments` (`ProcessArguments`).
extension SyncNodeTests {
    @Suite struct ProcessArgumentsTests {
        @Test func theKernelsCopySplitsAtEveryNulByte() {
            let bytes = Data("syncnode\0run\0--id\0a\0\0--peer\0127.0.0.1:7401\0".utf8)
            #expect(ProcessArguments.parse(commandLine: bytes) == ["syncnode", "run", "--id", "a", "", "--peer", "127.0.0.1:7401"])
            #expect(ProcessArguments.parse(commandLine: Data("no-final-nul".utf8)) == ["no-final-nul"])
            #expect(ProcessArguments.parse(commandLine: Data()) == [])
            #expect(ProcessArguments.parse(commandLine: Data("naïve\0".utf8)) == ["naïve"])
        }

        @Test func emptyRuntimeArgumentsAreReadFromTheKernelsCopy() {
            let kernel = Data("/usr/bin/syncnode\0run\0--id\0a\0".utf8)
            #expect(ProcessArguments.current(runtime: [], kernel: { kernel }) == ["run", "--id", "a"])
            #expect(ProcessArguments.current(runtime: ["syncnode", "get", "k"], kernel: { kernel }) == ["get", "k"])
            #expect(ProcessArguments.current(runtime: [], kernel: { nil }) == [])
        }

        @Test func thisProcessesKernelCopyMatchesItsArguments() throws {
            // The test runner's own arguments, read both ways, agree (the fallback reads what
            // the runtime would have).
            let kernel = ProcessArguments.parse(commandLine: try #require(FileManager.default.contents(atPath: "/proc/self/cmdline")))
            #expect(Array(kernel.dropFirst()) == Array(CommandLine.arguments.dropFirst()))
            #expect(ProcessArguments.current() == Array(CommandLine.arguments.dropFirst()))
        }
    }
}
