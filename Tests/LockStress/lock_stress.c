// The node's lock (Sources/CDecideLock) under ThreadSanitizer, outside Swift: the Swift runtime
// and swift-testing do not run under TSan here, so this C program drives the lock itself.
// Threads (8, then 48), some of them urgent and some polite, add to plain counters inside the
// lock. TSan reports a data race if any body's accesses are not ordered by the lock's acquire and
// release; the program checks that no update was lost and that no two bodies overlapped. Run by
// `make test-lock-tsan`.
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
    for (int round = 0; round < 4; round++) {
        int count = thread_counts[round];
        decide_lock_init(&lock, bounds[round]);
        counter = 0;
        overlaps = 0;
        pthread_t threads[MAX_THREADS];
        for (long thread = 0; thread < count; thread++) pthread_create(&threads[thread], NULL, work, (void *)thread);
        for (int thread = 0; thread < count; thread++) pthread_join(threads[thread], NULL);
        if (counter != (long)count * ITERATIONS || overlaps != 0) {
            fprintf(stderr, "lock-stress: %d threads, bound %llu ns: counter %ld (want %ld), overlaps %ld\n",
                    count, bounds[round], counter, (long)count * ITERATIONS, overlaps);
            return 1;
        }
        printf("lock-stress: %d threads, bound %llu ns: %ld updates, no overlap; %llu sleeps, %llu handoffs\n", count,
               bounds[round], counter, (unsigned long long)decide_lock_sleeps(&lock), (unsigned long long)decide_lock_handoffs(&lock));
    }
    return 0;
}
