import Foundation

// `make bench` runs every section; `DecideBench SECTION...` runs some.
// Figures are rates measured here and now, beside a baseline measured in the same run:
// compare ratios, not absolute numbers, across machines.
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "join-child" { JoinBench.child(Array(arguments.dropFirst())) }
if arguments.first == "memory-child" { MemoryBench.child(Array(arguments.dropFirst())) }
let known = ["machine", "core", "memory", "transport", "replication", "anti-entropy", "durability", "join", "collection"]
let sections = arguments.isEmpty ? known : arguments
let seconds = Double(ProcessInfo.processInfo.environment["BENCH_SECONDS"] ?? "") ?? 1.0

for section in sections {
    switch section {
    case "machine": MachineBench.run(seconds: seconds)
    case "core": CoreBench.run(seconds: seconds)
    case "memory": MemoryBench.run()
    case "transport": runTransportBench()
    case "replication": ReplicationBench.run(seconds: seconds)
    case "anti-entropy": AntiEntropyBench.run()
    case "durability": DurabilityBench.run(seconds: seconds)
    case "join": JoinBench.run()
    case "collection": CollectionBench.run()
    case "compare": CompareBench.run()
    default:
        FileHandle.standardError.write(Data("unknown bench section \(section); known: \(known.joined(separator: ", "))\n".utf8))
        exit(2)
    }
}
