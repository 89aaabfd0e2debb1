#define _GNU_SOURCE
#include "CDecideLock.h"

#include <stddef.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <sched.h>
#endif

/// A thread asleep in the queue, on its own stack.
struct decide_lock_waiter {
    /// WAITING until an unlock pops it: RETRY (compete again) or HANDED (it owns the lock).
    uint32_t signal;
    /// Monotonic nanoseconds when it first queued.
    uint64_t since;
    decide_lock_waiter *next;
};

enum { WAITING = 0, RETRY = 1, HANDED = 2 };

/// Rounds an arriving thread spins on a held lock before it queues: about a microsecond, a few
/// times a decision's hold, and far less than a sleep and a wakeup.
enum { SPIN_ROUNDS = 64 };

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/// Sleeps while `*word == expected`; may return early (a signal, a stale wake): callers loop.
static void futex_wait(uint32_t *word, uint32_t expected) {
#if defined(__linux__)
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)word;
    (void)expected;
    sched_yield();
#endif
}

static void futex_wake(uint32_t *word) {
#if defined(__linux__)
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
    (void)word;
#endif
}

static uint64_t now_ns(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (uint64_t)time.tv_sec * 1000000000u + (uint64_t)time.tv_nsec;
}

// The queue's own lock: 0 free, 1 held, 2 held and someone sleeps on it. Held for a few
// pointer moves only.
static void queue_lock(decide_lock_t *lock) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(&lock->queue_lock, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    for (int round = 0; round < SPIN_ROUNDS; round++) {
        relax();
        expected = 0;
        if (__atomic_load_n(&lock->queue_lock, __ATOMIC_RELAXED) == 0
            && __atomic_compare_exchange_n(&lock->queue_lock, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            return;
        }
    }
    while (__atomic_exchange_n(&lock->queue_lock, 2, __ATOMIC_ACQUIRE) != 0) futex_wait(&lock->queue_lock, 2);
}

static void queue_unlock(decide_lock_t *lock) {
    if (__atomic_exchange_n(&lock->queue_lock, 0, __ATOMIC_RELEASE) == 2) futex_wake(&lock->queue_lock);
}

void decide_lock_init(decide_lock_t *lock, uint64_t handoff_ns) {
    lock->state = 0;
    lock->queue_lock = 0;
    lock->head = NULL;
    lock->tail = NULL;
    lock->handoff_ns = handoff_ns;
    lock->handoffs = 0;
    lock->sleeps = 0;
}

void decide_lock_slow(decide_lock_t *lock, int manner) {
    decide_lock_waiter me = {WAITING, 0, NULL};
    int urgent = manner == DECIDE_LOCK_AS_URGENT;
    int spins = 0;
    // Woken with RETRY and not yet tried: the WOKEN flag is ours to clear.
    int woken = 0;
    for (;;) {
        // What keeps this thread from taking a free lock: a holder, handoff mode, and for a
        // polite thread (until it is woken itself) a woken thread about to try.
        uint32_t blockers = DECIDE_LOCK_LOCKED | DECIDE_LOCK_HANDOFF;
        if (manner == DECIDE_LOCK_AS_POLITE && !woken) blockers |= DECIDE_LOCK_WOKEN;
        uint32_t state = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);
        if (!(state & blockers)) {
            uint32_t taken = (state | DECIDE_LOCK_LOCKED) & ~(woken ? DECIDE_LOCK_WOKEN : 0u);
            if (__atomic_compare_exchange_n(&lock->state, &state, taken, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
            continue;
        }
        if (!(state & (DECIDE_LOCK_HANDOFF | (DECIDE_LOCK_WOKEN & blockers))) && spins < SPIN_ROUNDS) {
            spins++;
            relax();
            continue;
        }
        queue_lock(lock);
        int starving = urgent || (me.since != 0 && now_ns() - me.since > lock->handoff_ns);
        int queued = 0;
        state = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);
        // Queue only while the lock is held (or handed over, or a woken thread is about to take
        // it): an unlock after this sees QUEUED and takes the queue's lock, so it cannot miss
        // this thread.
        while (state & blockers) {
            uint32_t next = state | DECIDE_LOCK_QUEUED;
            if (woken) next &= ~DECIDE_LOCK_WOKEN;
            if (starving) next |= DECIDE_LOCK_HANDOFF;
            if (__atomic_compare_exchange_n(&lock->state, &state, next, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                queued = 1;
                break;
            }
        }
        if (!queued) {
            // Freed meanwhile: compete again.
            queue_unlock(lock);
            continue;
        }
        woken = 0;
        me.signal = WAITING;
        if (me.since == 0 && !urgent) {
            // A newcomer queues at the back.
            me.since = now_ns();
            me.next = NULL;
            if (lock->tail) lock->tail->next = &me; else lock->head = &me;
            lock->tail = &me;
        } else {
            // A thread woken before, which lost again, keeps its turn at the front; so does an
            // urgent one, which has the lock handed to it at the next unlock.
            if (me.since == 0) me.since = now_ns();
            me.next = lock->head;
            lock->head = &me;
            if (!lock->tail) lock->tail = &me;
        }
        lock->sleeps++;
        queue_unlock(lock);
        uint32_t signal;
        while ((signal = __atomic_load_n(&me.signal, __ATOMIC_ACQUIRE)) == WAITING) futex_wait(&me.signal, WAITING);
        if (signal == HANDED) return;
        woken = 1;
        spins = 0;
    }
}

void decide_unlock_slow(decide_lock_t *lock) {
    queue_lock(lock);
    uint32_t state = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);
    decide_lock_waiter *waiter = NULL;
    uint32_t signal = RETRY;
    if (state & DECIDE_LOCK_HANDOFF) {
        // Handoff mode: the head owns the lock from now on (LOCKED stays set).
        waiter = lock->head;
        lock->head = waiter->next;
        if (!lock->head) lock->tail = NULL;
        uint32_t clear = 0;
        if (!lock->head) {
            clear = DECIDE_LOCK_HANDOFF | DECIDE_LOCK_QUEUED;
        } else if (now_ns() - waiter->since <= lock->handoff_ns) {
            // The thread served had not starved: back to barging after it.
            clear = DECIDE_LOCK_HANDOFF;
        }
        if (clear) __atomic_fetch_and(&lock->state, ~clear, __ATOMIC_RELAXED);
        lock->handoffs++;
        signal = HANDED;
    } else {
        // Barging mode: free the lock, and wake the head to compete unless a woken thread has
        // not tried yet.
        uint32_t set = 0;
        if (!(state & DECIDE_LOCK_WOKEN) && lock->head) {
            waiter = lock->head;
            lock->head = waiter->next;
            if (!lock->head) lock->tail = NULL;
            set = DECIDE_LOCK_WOKEN;
        }
        uint32_t clear = DECIDE_LOCK_LOCKED | (lock->head ? 0u : DECIDE_LOCK_QUEUED);
        uint32_t next;
        do {
            next = (state & ~clear) | set;
        } while (!__atomic_compare_exchange_n(&lock->state, &state, next, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }
    queue_unlock(lock);
    if (waiter) {
        // The waiter may return (and its stack be reused) as soon as this store lands; a wake
        // on a stale address is harmless, as every futex wait here loops on its condition.
        __atomic_store_n(&waiter->signal, signal, __ATOMIC_RELEASE);
        futex_wake(&waiter->signal);
    }
}

uint64_t decide_lock_handoffs(decide_lock_t *lock) {
    queue_lock(lock);
    uint64_t count = lock->handoffs;
    queue_unlock(lock);
    return count;
}

uint64_t decide_lock_sleeps(decide_lock_t *lock) {
    queue_lock(lock);
    uint64_t count = lock->sleeps;
    queue_unlock(lock);
    return count;
}
