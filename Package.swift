// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Decide",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DecideCore", targets: ["DecideCore"]),
        .library(name: "Decide", targets: ["Decide"]),
        .library(name: "DecideUV", targets: ["DecideUV"]),
        .library(name: "DecideSimulation", targets: ["DecideSimulation"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // Pure values: clock, versions, entries, merge, digest, codec. No I/O, no threads.
        .target(name: "DecideCore"),
        // The node: keys, decisions, effects, task pool, observation, replication seam.
        .target(
            name: "Decide",
            dependencies: [
                "DecideCore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // libuv through pkg-config; `make deps` installs libuv1-dev.
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
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
            ]
        ),
        // A deterministic, seeded Transport and clock for tests: one thread, virtual time.
        .target(name: "DecideSimulation", dependencies: ["Decide", "DecideCore"]),
        // `make bench`: figures against baselines measured in the same run.
        .executableTarget(
            name: "DecideBench",
            dependencies: ["Decide", "DecideCore", "DecideUV"]
        ),
        .testTarget(name: "DecideCoreTests", dependencies: ["DecideCore"]),
        .testTarget(name: "DecideTests", dependencies: ["Decide", "DecideCore"]),
        .testTarget(name: "DecideUVTests", dependencies: ["DecideUV", "Decide", "DecideCore"]),
        // Multi-node behaviour: the seeded simulator and real loopback links.
        .testTarget(name: "ReplicationTests", dependencies: ["Decide", "DecideCore", "DecideUV", "DecideSimulation"]),
        .testTarget(name: "DecideSimulationTests", dependencies: ["DecideSimulation", "Decide", "DecideCore"]),
    ]
)
