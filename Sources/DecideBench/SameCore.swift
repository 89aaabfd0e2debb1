#if canImport(Glibc)
import Glibc
#endif

/// Runs a measurement with the calling thread held on the processor it is on now, so two rates
/// measured in turns (`CoreBench.bestAlternating`) ran on the same core. On a machine whose
/// cores differ (stop 43's virtual machine: a one-write decision twice as slow on one core as on
/// the other, the Mutex<Dictionary> baseline alike on both), turns on different cores made a
/// ratio of the cores, not of the code (docs/benchmarks.md, "The machine of stop 43"). Other
/// threads (a store's writer) are not held. Where the affinity cannot be read or set, `body`
/// runs as it would have.
enum SameCore {
    /// glibc's `sched_getcpu`, `sched_getaffinity` and `sched_setaffinity`, looked up at run time:
    /// Swift's Glibc module leaves out the GNU extensions.
    private typealias GetCPU = @convention(c) () -> Int32
    private typealias Affinity = @convention(c) (Int32, Int, UnsafeMutableRawPointer) -> Int32

    static func run<Result>(_ body: () -> Result) -> Result {
        #if os(Linux)
        guard let getCPU = symbol("sched_getcpu", as: GetCPU.self),
              let getAffinity = symbol("sched_getaffinity", as: Affinity.self),
              let setAffinity = symbol("sched_setaffinity", as: Affinity.self) else { return body() }
        let cpu = Int(getCPU())
        // 1,024 processors, glibc's `cpu_set_t`.
        var previous = [UInt8](repeating: 0, count: 128)
        guard cpu >= 0, cpu < previous.count * 8,
              previous.withUnsafeMutableBytes({ getAffinity(0, $0.count, $0.baseAddress!) }) == 0 else { return body() }
        var only = [UInt8](repeating: 0, count: 128)
        only[cpu / 8] = UInt8(1) << UInt8(cpu % 8)
        guard only.withUnsafeMutableBytes({ setAffinity(0, $0.count, $0.baseAddress!) }) == 0 else { return body() }
        defer { _ = previous.withUnsafeMutableBytes { setAffinity(0, $0.count, $0.baseAddress!) } }
        return body()
        #else
        return body()
        #endif
    }

    private static func symbol<Function>(_ name: String, as type: Function.Type) -> Function? {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(address, to: type)
    }
}
