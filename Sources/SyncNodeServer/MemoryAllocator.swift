#if DECIDE_JEMALLOC
import CJemalloc
#endif
import Foundation

/// The allocator serving this process, as `INFO memory` (`mem_allocator`) and the ready log
/// line name it. syncnode links jemalloc, as Redis does: with glibc's allocator a pipelined SET
/// spent about a tenth of its time in `malloc` and `free` (docs/operations.md, "Memory
/// allocator").
package enum MemoryAllocator {
    /// "jemalloc-5.3.0" when jemalloc serves `malloc`; "libc" for glibc's; otherwise the file
    /// that provides `malloc` (a preloaded allocator, a sanitizer's runtime), or "unknown".
    package static let name: String = {
        guard let path = mallocProvider() else { return "unknown" }
        let file = path.split(separator: "/").last.map(String.init) ?? path
        if file.hasPrefix("libjemalloc") {
            #if DECIDE_JEMALLOC
            if let version = decide_jemalloc_version() {
                return "jemalloc-" + String(String(cString: version).prefix { $0 != "-" })
            }
            #endif
            return "jemalloc"
        }
        if file.hasPrefix("libc.so") || file.hasPrefix("libc-") { return "libc" }
        return file.isEmpty ? "unknown" : file
    }()

    /// The file mapped where the `malloc` the process calls lives (`/proc/self/maps`, read line
    /// by line: the file reports no size, and a read sized by it stops after the first page).
    private static func mallocProvider() -> String? {
        guard let process = dlopen(nil, RTLD_NOW) else { return nil }
        defer { dlclose(process) }
        guard let malloc = dlsym(process, "malloc"), let maps = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(maps) }
        let address = UInt(bitPattern: malloc)
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        while getline(&buffer, &capacity, maps) > 0, let buffer {
            // "start-end perms offset dev inode path"
            let fields = String(cString: buffer).split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6 else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
                  start <= address && address < end else { continue }
            return fields[5].trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return nil
    }

    /// The process's resident set in bytes (`/proc/self/statm`), nil where it cannot be read.
    package static func residentBytes() -> UInt64? {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count >= 2, let pages = UInt64(fields[1]) else { return nil }
        return pages * UInt64(sysconf(Int32(_SC_PAGESIZE)))
    }
}
