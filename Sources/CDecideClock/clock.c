// Slow path of the millisecond clock (include/CDecideClock.h): reading CLOCK_REALTIME, and on
// x86-64 measuring the time-stamp counter's rate and caching the current millisecond per thread.

#include "CDecideClock.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t decide_clock_realtime_ms_uncached(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

#if defined(__x86_64__)

__thread decide_clock_cache decide_clock_thread_cache __attribute__((tls_model("initial-exec")));

/// Counter ticks per millisecond, measured (0 until known). Read and written with `__atomic`.
static uint64_t ticks_per_ms;
/// CLOCK_REALTIME nanoseconds at or after which a slow read measures the rate (again).
static uint64_t next_measure_ns;
/// Where the rate measurement started (counter, CLOCK_MONOTONIC nanoseconds), under `rate_lock`.
static uint64_t anchor_counter;
static uint64_t anchor_ns;
/// Whether the kernel's clock source is the counter: 1 yes, -1 no, 0 not looked at yet.
static int counter_is_clock_source;
static pthread_mutex_t rate_lock = PTHREAD_MUTEX_INITIALIZER;

enum {
    /// The shortest span the rate is measured over.
    min_rate_span_ns = 20 * 1000 * 1000,
    /// A sample whose two CLOCK_MONOTONIC reads are further apart than this (the thread was
    /// preempted between them) is not used: it would put the counter up to that far off.
    max_sample_spread_ns = 20 * 1000,
    /// Less than this left in the millisecond: read the clock every time until it ends.
    min_cached_ns = 2000,
};
/// How often the rate is measured again once known (a virtual machine moved to another host
/// may see its counter run at another rate).
static const uint64_t rate_refresh_ns = 1000000000u;
/// Plausible rates: 100 MHz to 20 GHz.
static const uint64_t min_ticks_per_ms = 100000u, max_ticks_per_ms = 20000000u;

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int clock_source_is_counter(void) {
    FILE *file = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!file) return 0;
    char name[32] = {0};
    int is_tsc = fgets(name, sizeof name, file) != NULL && strcmp(name, "tsc\n") == 0;
    fclose(file);
    return is_tsc;
}

/// Takes a (counter, CLOCK_MONOTONIC) sample and, with the anchor at least `min_rate_span_ns`
/// before it, sets the rate; the sample becomes the next anchor. One thread at a time; others
/// skip it. Sets when the next measurement is due, in CLOCK_REALTIME nanoseconds from `now_ns`.
static void measure_rate(uint64_t now_ns) {
    if (pthread_mutex_trylock(&rate_lock) != 0) return;
    if (counter_is_clock_source == 0) counter_is_clock_source = clock_source_is_counter() ? 1 : -1;
    uint64_t next = UINT64_MAX;
    if (counter_is_clock_source > 0) {
        uint64_t before = monotonic_ns();
        uint64_t counter = __builtin_ia32_rdtsc();
        uint64_t after = monotonic_ns();
        next = now_ns + min_rate_span_ns;
        if (after - before <= max_sample_spread_ns) {
            uint64_t ns = before + (after - before) / 2;
            if (anchor_ns != 0 && counter > anchor_counter && ns - anchor_ns >= min_rate_span_ns) {
                // ticks × 1e6 / ns, in 128 bits: a day of ticks at 5 GHz times 1e6 passes 64.
                unsigned __int128 ticks = (unsigned __int128)(counter - anchor_counter) * 1000000u;
                uint64_t rate = (uint64_t)(ticks / (ns - anchor_ns));
                __atomic_store_n(&ticks_per_ms, rate >= min_ticks_per_ms && rate <= max_ticks_per_ms ? rate : 0,
                                 __ATOMIC_RELAXED);
                next = now_ns + rate_refresh_ns;
            }
            anchor_counter = counter;
            anchor_ns = ns;
        }
    } else {
        __atomic_store_n(&ticks_per_ms, 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&next_measure_ns, next, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&rate_lock);
}

uint64_t decide_clock_realtime_ms_slow(uint64_t counter) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    uint64_t ms = now_ns / 1000000u;
    uint64_t due = __atomic_load_n(&next_measure_ns, __ATOMIC_RELAXED);
    // Due, or the clock was set back past when the last measurement was (then it is due again).
    if (now_ns >= due || (due != UINT64_MAX && due - now_ns > rate_refresh_ns)) measure_rate(now_ns);
    uint64_t rate = __atomic_load_n(&ticks_per_ms, __ATOMIC_RELAXED);
    uint64_t left_ns = 1000000u - now_ns % 1000000u;
    decide_clock_cache *cache = &decide_clock_thread_cache;
    cache->read_at = counter;
    cache->ms = ms;
    // The counter was read before the clock, so the millisecond ends no sooner than `left_ns`
    // after it. Half of that at the measured rate: a rate up to twice too high still ends the
    // cached millisecond before the clock's does.
    uint64_t valid_before = 0;
    if (rate != 0 && left_ns >= min_cached_ns) {
        valid_before = counter + (uint64_t)(((unsigned __int128)rate * (left_ns / 2)) / 1000000u);
        if (valid_before < counter) valid_before = 0;
    }
    cache->valid_before = valid_before;
    return ms;
}

int decide_clock_counter_in_use(void) {
    return __atomic_load_n(&ticks_per_ms, __ATOMIC_RELAXED) != 0;
}

uint64_t decide_clock_ticks_per_ms(void) { return __atomic_load_n(&ticks_per_ms, __ATOMIC_RELAXED); }

#else

uint64_t decide_clock_realtime_ms_slow(uint64_t counter) {
    (void)counter;
    return decide_clock_realtime_ms_uncached();
}

int decide_clock_counter_in_use(void) { return 0; }

uint64_t decide_clock_ticks_per_ms(void) { return 0; }

#endif
