import Foundation

/// This process's memory as the kernel counts it, for the benches that report RSS.
enum ProcessMemory {
    /// A `/proc/self/status` field in kB (`VmRSS`, `VmHWM`), read after handing free heap pages
    /// back to the system (glibc's `malloc_trim`), so memory freed but kept by the allocator is
    /// not counted.
    static func kilobytes(_ field: String) -> Int {
        _ = releaseFreeHeapMemory(0)
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    /// Consolidates and trims glibc's free lists now (`malloc_trim`), so a bench's setup that
    /// freed many small blocks does not bill the consolidation to the next large allocation of
    /// the operation it times.
    static func settleHeap() { _ = releaseFreeHeapMemory(0) }

    /// glibc's `malloc_trim` (not in the Glibc module map).
    @_silgen_name("malloc_trim")
    private static func releaseFreeHeapMemory(_ pad: Int) -> Int32
}

/// A bench's child process: this binary run with `arguments`, reporting `name=number` pairs on
/// its standard output (so what it measures is its own memory and time).
enum BenchChild {
    /// Runs the child to its end; its exit status, its output, and the numbers it reported.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String, fields: [String: Double]) {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = arguments
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        var fields: [String: Double] = [:]
        for pair in text.split(whereSeparator: \.isWhitespace) {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let number = Double(parts[1]) { fields[String(parts[0])] = number }
        }
        return (child.terminationStatus, text, fields)
    }
}
