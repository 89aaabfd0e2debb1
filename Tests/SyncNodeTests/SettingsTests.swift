import Foundation
import Testing
@testable import syncnode

/// `syncnode run` settings that tests elsewhere do not reach: the failure timeout that decides
/// how long a silent peer's owned keys stay visible.
extension SyncNodeTests {
    @Suite struct SettingsTests {
        static func flags(_ failureTimeout: String?) -> RunSettings.Flags {
            var flags = RunSettings.Flags(listen: "127.0.0.1:0", admin: "127.0.0.1:0", peers: [])
            flags.id = "s"
            flags.failureTimeoutMilliseconds = failureTimeout
            return flags
        }

        @Test func theFailureTimeoutComesFromTheFlagThenTheEnvironmentWithinItsRange() throws {
            #expect(try RunSettings.resolve(flags: Self.flags(nil), environment: [:]).failureTimeoutMilliseconds == 3_000)
            #expect(try RunSettings.resolve(flags: Self.flags(nil), environment: ["SYNCNODE_FAILURE_TIMEOUT_MS": "4000"])
                .failureTimeoutMilliseconds == 4_000)
            #expect(try RunSettings.resolve(flags: Self.flags("2500"), environment: ["SYNCNODE_FAILURE_TIMEOUT_MS": "4000"])
                .failureTimeoutMilliseconds == 2_500)
            for bad in ["100", "soon", "700000"] {
                do {
                    _ = try RunSettings.resolve(flags: Self.flags(bad), environment: [:])
                    Issue.record("failure-timeout-ms \(bad) was accepted")
                } catch {
                    #expect("\(error)".contains("failure-timeout-ms"), "\(error)")
                }
            }
        }
    }
}
