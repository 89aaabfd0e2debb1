// wallclock_shift: preloaded into one test process (Cluster/lib.sh, PEER_WALLCLOCK_SHIFT_MS), it
// moves that process's wall clock by WALLCLOCK_SHIFT_MS milliseconds (negative: behind) and
// nothing else. It is how a machine whose NTP is wrong looks: CLOCK_REALTIME, gettimeofday and
// time are off; CLOCK_MONOTONIC, sleeps and timers are not.
//
// Not libfaketime: preloaded into syncnode, libfaketime deadlocks with jemalloc before main (each
// one's start calls the other), hides the process's arguments from Swift (it sets environment
// variables before Swift's runtime finds argv), and moves the monotonic deadlines of timerfd
// timers even with FAKETIME_DONT_FAKE_MONOTONIC, so libdispatch's timers spin (ahead) or never
// fire (behind). docs/operations.md, "Testing a wrong clock", says so for operators too.
//
// The real clock_gettime (glibc's, through the vDSO) is looked up once this library's constructor
// runs. Before that, the raw system call answers: jemalloc reads the clock while it starts,
// earlier than this constructor, and a lookup then could allocate inside jemalloc's own start.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t shift_ms;
static int shift_read;

static int64_t shift(void) {
    if (!shift_read) {
        const char *text = getenv("WALLCLOCK_SHIFT_MS");
        shift_ms = text ? strtoll(text, NULL, 10) : 0;
        shift_read = 1;
    }
    return shift_ms;
}

static void move(struct timespec *ts) {
    int64_t ns = (int64_t)ts->tv_nsec + (shift() % 1000) * 1000000;
    int64_t s = (int64_t)ts->tv_sec + shift() / 1000;
    while (ns < 0) { ns += 1000000000; s -= 1; }
    while (ns >= 1000000000) { ns -= 1000000000; s += 1; }
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)ns;
}

static int (*real_clock_gettime)(clockid_t, struct timespec *);

__attribute__((constructor)) static void find_real_clock(void) {
    real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int result = real_clock_gettime ? real_clock_gettime(clock, ts) : (int)syscall(SYS_clock_gettime, clock, ts);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) move(ts);
    return result;
}

// glibc declares `tv` nonnull; a caller may still pass NULL, which the real call tolerates.
#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int result = clock_gettime(CLOCK_REALTIME, &ts);
    if (result == 0 && tv != NULL) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
