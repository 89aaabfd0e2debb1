#ifndef C_DECIDE_CLOCK_H
#define C_DECIDE_CLOCK_H

#include <stdint.h>

/// The real-time clock (`CLOCK_REALTIME`) in whole milliseconds since the Unix epoch, read
/// through `clock_gettime` at most a few times per millisecond per thread (Decide's
/// `SystemClock`).
///
/// `clock_gettime` costs about 21 ns here, and it orders the processor's time-stamp counter read
/// behind every instruction before it: a decision read it once, a sixth of its time
/// (docs/design/0011-counter-clock.md, "The problem"). A
/// millisecond changes far less often than that. On x86-64, each thread keeps the millisecond it
/// last read and the counter value before which that millisecond cannot have ended: half the
/// time left until it ends, at the counter's measured rate. Until then a read is one unordered
/// counter read and a comparison.
///
/// Guarantees: the result is what `clock_gettime(CLOCK_REALTIME)` returned at some moment no
/// earlier than the previous call on this thread, and the millisecond it names has not ended
/// when the call returns, unless the clock was stepped (set, or moved by NTP in a step) within
/// the last millisecond: a step is seen at most one millisecond late. The counter is used only
/// when the kernel keeps time by it (current clock source "tsc", which the kernel selects only
/// for a counter that runs at a constant rate and agrees between processors), after its rate
/// was measured against `CLOCK_MONOTONIC` over at least 20 ms, and the rate is measured again
/// every second; if the counter is ever seen going backwards, the clock is read. Elsewhere
/// (other processors, other clock sources, before the rate is known) every call reads the clock.
uint64_t decide_clock_realtime_ms_slow(uint64_t counter);

#if defined(__x86_64__)

typedef struct {
    /// The counter value read before the clock was read last.
    uint64_t read_at;
    /// The counter value before which `ms` still holds (0: read the clock).
    uint64_t valid_before;
    uint64_t ms;
} decide_clock_cache;

extern __thread decide_clock_cache decide_clock_thread_cache __attribute__((tls_model("initial-exec")));

static inline __attribute__((always_inline)) uint64_t decide_clock_realtime_ms(void) {
    uint64_t counter = __builtin_ia32_rdtsc();
    decide_clock_cache *cache = &decide_clock_thread_cache;
    if (__builtin_expect(counter >= cache->read_at && counter < cache->valid_before, 1)) return cache->ms;
    return decide_clock_realtime_ms_slow(counter);
}

#else

static inline uint64_t decide_clock_realtime_ms(void) { return decide_clock_realtime_ms_slow(0); }

#endif

/// The processor's time-stamp counter ticks per millisecond, as measured for the millisecond
/// clock above; 0 where the counter is not used (not x86-64, another clock source, or the rate
/// not measured yet: it is measured once a thread has read the millisecond clock over 20 ms).
/// For code that times short spans with the counter (the node's lock, `CDecideLock`).
uint64_t decide_clock_ticks_per_ms(void);

/// Reads the clock through `clock_gettime` every time (for tests that compare the two).
uint64_t decide_clock_realtime_ms_uncached(void);

/// Whether this thread's reads are answered from the counter (the clock source is the counter's
/// and its rate is known): for tests and diagnostics.
int decide_clock_counter_in_use(void);

#endif
