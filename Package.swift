// swift-tools-version:6.0
import PackageDescription

// syncnode links jemalloc (through SyncNodeServer; docs/operations.md, "Memory allocator"),
// except in a sanitizer's build, whose runtime must own malloc: `make test-transport-asan` and
// the RESP service fuzzer set DECIDE_SANITIZED=1.
let linksJemalloc = Context.environment["DECIDE_SANITIZED"] == nil

let package = Package(
    name: "Decide",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DecideCore", targets: ["DecideCore"]),
        .library(name: "Decide", targets: ["Decide"]),
        .library(name: "DecideUV", targets: ["DecideUV"]),
        .library(name: "DecideSimulation", targets: ["DecideSimulation"]),
        .library(name: "DecideTesting", targets: ["DecideTesting"]),
        .executable(name: "syncnode", targets: ["syncnode"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/pointfreeco/swift-custom-dump", from: "1.7.3"),
        .package(url: "https://github.com/pointfreeco/xctest-dynamic-overlay", from: "1.13.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
    ],
    targets: [
        // Pure values: clock, versions, entries, merge, digest, codec. No I/O, no threads.
        .target(name: "DecideCore", dependencies: ["CDecideMemory"]),
        // Anonymous memory mappings for the entry table's growing arrays, in C: Swift cannot
        // call `mremap` (variadic). No I/O, no state.
        .target(name: "CDecideMemory"),
        // Processor hints Swift cannot spell (cache prefetch), as inline C; no I/O, no state.
        .target(name: "CDecideHints"),
        // The node's lock (futex slow paths, inline fast paths), in C: Swift cannot wait on a
        // futex or spell a pause instruction.
        .target(name: "CDecideLock", dependencies: ["CDecideClock"]),
        // The real-time clock in milliseconds, read from the processor's counter between
        // `clock_gettime` calls: Swift cannot spell the counter read.
        .target(name: "CDecideClock"),
        // The node: keys, decisions, effects, task pool, observation, replication seam.
        .target(
            name: "Decide",
            dependencies: [
                "DecideCore",
                "CDecideHints",
                "CDecideLock",
                "CDecideClock",
                "CSQLite",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // SQLite through pkg-config, for durable nodes; `make deps` installs libsqlite3-dev.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libuv through pkg-config; `make deps` installs libuv1-dev.
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // jemalloc through pkg-config, syncnode's allocator; `make deps` installs libjemalloc-dev.
        .systemLibrary(
            name: "CJemalloc",
            pkgConfig: "jemalloc",
            providers: [.apt(["libjemalloc-dev"])]
        ),
        // The libuv Transport: loop thread, TCP, framing, backpressure, handshake.
        .target(
            name: "DecideUV",
            dependencies: [
                "Decide",
                "DecideCore",
                "CLibUV",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The Redis protocol (RESP2/RESP3) as pure values: request parser, reply writer and parser, glob patterns. No I/O.
        .target(name: "DecideRESP"),
        // A deterministic, seeded Transport and clock for tests: one thread, virtual time.
        .target(name: "DecideSimulation", dependencies: ["Decide", "DecideCore"]),
        // For users' tests: TestNode (exhaustive state assertions, effects awaited without
        // sleeping) and TestCluster (real nodes and engines on the simulator).
        .target(
            name: "DecideTesting",
            dependencies: [
                "Decide",
                "DecideCore",
                "DecideSimulation",
                .product(name: "CustomDump", package: "swift-custom-dump"),
                .product(name: "IssueReporting", package: "xctest-dynamic-overlay"),
                // Lets failures reach Swift Testing and XCTest on Linux, where they are found by
                // linking, not by looking up symbols at run time.
                .product(name: "IssueReportingTestSupport", package: "xctest-dynamic-overlay"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // syncnode's Redis-protocol endpoint (RESPService and the key and value mapping it
        // answers with), a library so that its tests and the RESP service fuzzer
        // (Fuzz/FuzzRESPService) drive it without the executable. Not a product.
        .target(
            name: "SyncNodeServer",
            dependencies: [
                "Decide",
                "DecideCore",
                "DecideUV",
                "DecideRESP",
                .product(name: "Logging", package: "swift-log"),
            ] + (linksJemalloc ? ["CJemalloc"] : []),
            swiftSettings: linksJemalloc ? [.define("DECIDE_JEMALLOC")] : []
        ),
        // The peer executable: `syncnode run` and its admin client commands (docs/operations.md).
        .executableTarget(
            name: "syncnode",
            dependencies: [
                "SyncNodeServer",
                "Decide",
                "DecideCore",
                "DecideUV",
                "DecideRESP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // Settings precedence: flags, environment, config file (Settings/).
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The RESP service fuzzer (`make fuzz-run-resp-service`, mk/fuzz.mk builds it with
        // libFuzzer); built plainly, it replays inputs given as files.
        .executableTarget(
            name: "FuzzRESPService",
            dependencies: [
                "SyncNodeServer", "Decide", "DecideCore", "DecideUV", "DecideRESP",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Fuzz/RESPService"
        ),
        // `make bench`: figures against baselines measured in the same run.
        .executableTarget(
            name: "DecideBench",
            dependencies: ["Decide", "DecideCore", "DecideUV", "DecideSimulation"]
        ),
        .testTarget(name: "DecideCoreTests", dependencies: ["DecideCore"]),
        .testTarget(name: "DecideTests", dependencies: ["Decide", "DecideCore", "DecideTesting"]),
        .testTarget(name: "DecideUVTests", dependencies: ["DecideUV", "Decide", "DecideCore"]),
        // Multi-node behaviour: the seeded simulator and real loopback links.
        .testTarget(name: "ReplicationTests", dependencies: [
            "Decide", "DecideCore", "DecideUV", "DecideSimulation", "DecideTesting",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .testTarget(name: "DecideSimulationTests", dependencies: ["DecideSimulation", "Decide", "DecideCore"]),
        .testTarget(name: "DecideRESPTests", dependencies: ["DecideRESP"]),
        // syncnode's Redis-protocol endpoint, in-process against real sockets.
        .testTarget(name: "SyncNodeTests", dependencies: [
            "syncnode", "SyncNodeServer", "Decide", "DecideCore", "DecideUV", "DecideRESP", "DecideTesting",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ]),
    ]
)

// A `[weak self]` capture is immutable (SE-0481), so reading it is a plain weak load: as a mutable
// capture box, every call of such a closure also ran a dynamic exclusivity check (the commit
// listener on every decision, syncnode's request callbacks; docs/design/0008-in-place-access.md,
// "Immutable weak captures").
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("ImmutableWeakCaptures")]
}
