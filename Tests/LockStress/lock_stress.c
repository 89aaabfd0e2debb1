// The node's lock (Sources/CDecideLock) under ThreadSanitizer, outside Swift: the Swift runtime
// and swift-testing do not run under TSan here, so this C program drives the lock itself.
// Threads (8, then 48), some of them urgent and some polite, add to plain counters inside the
// lock. TSan reports a data race if any body's accesses are not ordered by the lock's acquire and
// release; the program checks that no update was lost and that no two bodies overlapped. The
// rounds run twice: first with turns timed by CLOCK_MONOTONIC, then (where the millisecond clock
// measures the processor counter's rate: x86-64, clock source tsc) by the counter. Run by
// `make test-lock-tsan`.
#include "CDecideClock.h"
#include "CDecideLock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { MAX_THREADS = 48, ITERATIONS = 20000 };

static decide_lock_t lock;
static long counter;         // guarded by `lock`, plain on purpose
static long inside;          // guarded by `lock`: 1 while a body runs
static long overlaps;        // guarded by `lock`

static void *work(void *argument) {
    long thread = (long)argument;
    for (int iteration = 0; iteration < ITERATIONS; iteration++) {
        if (thread % 4 == 0) {
            decide_lock_urgent(&lock);
        } else if (thread % 4 == 1) {
            decide_lock_polite(&lock);
        } else {
            decide_lock(&lock);
        }
        if (inside != 0) overlaps++;
        inside = 1;
        counter++;
        // Now and then a hold far past the arriving threads' spin, so they sleep.
        if (iteration % 1000 == 0) usleep(50);
        inside = 0;
        decide_unlock(&lock);
    }
    return NULL;
}

int main(void) {
    // 0, a small bound and one never reached: a turn at every unlock with a sleeper, one per
    // 100 µs, none (only the urgent threads are handed the lock). Then many more threads than
    // processors, so that most sleep while one spins and heirs claim the lock.
    const unsigned long long bounds[] = {0, 100000, 10000000000ull, 100000};
    const int thread_counts[] = {8, 8, 8, MAX_THREADS};
    int counter_known = 0;
    for (int round = 0; round < 8; round++) {
        if (round == 4) {
            // Read the millisecond clock for up to a second, so that it measures the counter's
            // rate (over 20 ms at least) and the lock times its turns by the counter.
            for (int poll = 0; poll < 1000 && !decide_clock_counter_in_use(); poll++) {
                (void)decide_clock_realtime_ms();
                usleep(1000);
            }
            counter_known = decide_clock_counter_in_use();
            printf("lock-stress: turns timed by %s\n", counter_known ? "the processor's counter" : "CLOCK_MONOTONIC (no counter rate here)");
        }
        int count = thread_counts[round % 4];
        decide_lock_init(&lock, bounds[round % 4]);
        counter = 0;
        overlaps = 0;
        pthread_t threads[MAX_THREADS];
        for (long thread = 0; thread < count; thread++) pthread_create(&threads[thread], NULL, work, (void *)thread);
        for (int thread = 0; thread < count; thread++) pthread_join(threads[thread], NULL);
        if (counter != (long)count * ITERATIONS || overlaps != 0) {
            fprintf(stderr, "lock-stress: %d threads, bound %llu ns: counter %ld (want %ld), overlaps %ld\n",
                    count, bounds[round % 4], counter, (long)count * ITERATIONS, overlaps);
            return 1;
        }
        printf("lock-stress: %d threads, bound %llu ns: %ld updates, no overlap; %llu sleeps, %llu handoffs\n", count,
               bounds[round % 4], counter, (unsigned long long)decide_lock_sleeps(&lock), (unsigned long long)decide_lock_handoffs(&lock));
    }
    return 0;
}
