#define _GNU_SOURCE
#include "CDecideLock.h"
#include "CDecideClock.h"

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
    /// WAITING until an unlock pops it: RETRY (compete again), TURN (its turn has come: claim
    /// the lock) or HANDED (it owns the lock).
    uint32_t signal;
    /// Claims the lock (urgent, or its turn has come): handed the lock at the next unlock.
    uint32_t claims;
    decide_lock_waiter *next;
};

enum { WAITING = 0, RETRY = 1, HANDED = 2, TURN = 3 };

/// Rounds an arriving thread spins on a held lock before it queues: about a microsecond, a few
/// times a decision's hold, and far less than a sleep and a wakeup.
enum { SPIN_ROUNDS = 64 };

/// Rounds a thread that claims the lock spins on its signal before it sleeps: the next unlock
/// hands it the lock, usually within one decision's hold, and a thread already running takes
/// it with no wakeup.
enum { CLAIM_SPIN_ROUNDS = 4 * SPIN_ROUNDS };

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

/// An instant of the turn clock, and its unit: the processor's counter where the millisecond
/// clock measured its rate (`ticks_per_ms`; the kernel keeps time by it, so it agrees between
/// processors), else CLOCK_MONOTONIC nanoseconds (`ticks_per_ms` 0). A contended unlock reads
/// it once: `clock_gettime` there was 3 % of fifty deciding threads' time, a counter read is a
/// few nanoseconds (docs/design/0005-node-lock.md, "Turns timed by the processor's counter").
/// When the unit changes (the rate becomes known, or is found wrong and dropped), one turn is
/// measured across the two and may come early: one handoff more, nothing else.
typedef struct {
    uint64_t now;
    uint64_t ticks_per_ms;
} turn_clock_reading;

static turn_clock_reading turn_clock(void) {
#if defined(__x86_64__)
    uint64_t rate = decide_clock_ticks_per_ms();
    if (rate != 0) return (turn_clock_reading){__builtin_ia32_rdtsc(), rate};
#endif
    return (turn_clock_reading){now_ns(), 0};
}

/// Whether `elapsed`, in `reading`'s unit, is past the lock's bound: in ticks compared as
/// ticks × 10⁶ against nanoseconds × rate, in 128 bits, so nothing is divided on the unlock.
static int past_bound(const decide_lock_t *lock, uint64_t elapsed, turn_clock_reading reading) {
    if (reading.ticks_per_ms == 0) return elapsed > lock->handoff_ns;
    return (unsigned __int128)elapsed * 1000000u > (unsigned __int128)lock->handoff_ns * reading.ticks_per_ms;
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
    lock->turn_at = 0;
    lock->handoffs = 0;
    lock->sleeps = 0;
}

void decide_lock_slow(decide_lock_t *lock, int manner) {
    decide_lock_waiter me = {WAITING, 0, NULL};
    int urgent = manner == DECIDE_LOCK_AS_URGENT;
    int spins = 0;
    // Woken (RETRY or TURN) and not yet tried: the WOKEN flag is ours to clear.
    int woken = 0;
    // Queued before (woken since, and lost): queues at the front again.
    int queued_before = 0;
    // This thread set SPINNING: the flag is ours to clear.
    int spinning = 0;
    // Woken with TURN: claims the lock as an urgent thread does.
    int heir = 0;
    for (;;) {
        // What keeps this thread from taking a free lock: a holder, a claiming thread (urgent,
        // or an heir), and for a polite thread (until it is woken itself) a woken thread about
        // to try.
        uint32_t blockers = DECIDE_LOCK_LOCKED | DECIDE_LOCK_HANDOFF;
        if (manner == DECIDE_LOCK_AS_POLITE && !woken) blockers |= DECIDE_LOCK_WOKEN;
        uint32_t state = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);
        if (!(state & blockers)) {
            uint32_t taken = (state | DECIDE_LOCK_LOCKED) & ~((woken ? DECIDE_LOCK_WOKEN : 0u) | (spinning ? DECIDE_LOCK_SPINNING : 0u));
            if (__atomic_compare_exchange_n(&lock->state, &state, taken, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                // A woken sleeper got in: the queue moved, so its head's turn starts now.
                if (woken) __atomic_store_n(&lock->turn_at, turn_clock().now, __ATOMIC_RELAXED);
                return;
            }
            continue;
        }
        // Spin only while the holder may let go soon (no claiming thread, no woken thread ahead
        // of a polite one), and only one thread at a time besides an urgent one: the rest
        // sleep, so threads beyond the holder and one spinner do not compete for processors.
        // An heir does not spin: it claims the lock at once.
        if (!(state & (DECIDE_LOCK_HANDOFF | (DECIDE_LOCK_WOKEN & blockers))) && spins < SPIN_ROUNDS && !heir) {
            if (spinning || urgent) {
                spins++;
                relax();
                continue;
            }
            if (!(state & DECIDE_LOCK_SPINNING)) {
                if (__atomic_compare_exchange_n(&lock->state, &state, state | DECIDE_LOCK_SPINNING, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                    spinning = 1;
                }
                continue;
            }
            // Another thread spins: sleep.
        }
        queue_lock(lock);
        int queued = 0;
        state = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);
        // Queue only while the lock is held (or an urgent thread waits for it, or a woken thread
        // is about to take it): an unlock after this sees QUEUED and takes the queue's lock, so
        // it cannot miss this thread.
        while (state & blockers) {
            uint32_t next = state | DECIDE_LOCK_QUEUED;
            if (woken) next &= ~DECIDE_LOCK_WOKEN;
            if (spinning) next &= ~DECIDE_LOCK_SPINNING;
            if (urgent || heir) next |= DECIDE_LOCK_HANDOFF;
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
        spinning = 0;
        me.signal = WAITING;
        me.claims = (uint32_t)(urgent || heir);
        // A newcomer to an empty queue starts the head's turn, unless a woken thread is out
        // competing: that one comes back to the front, its turn still running. A woken thread
        // that lost keeps its turn (restarting it would let a running thread keep the lock).
        if (!lock->head && !queued_before && !(state & DECIDE_LOCK_WOKEN)) __atomic_store_n(&lock->turn_at, turn_clock().now, __ATOMIC_RELAXED);
        if (!queued_before && !urgent) {
            // A newcomer queues at the back.
            me.next = NULL;
            if (lock->tail) lock->tail->next = &me; else lock->head = &me;
            lock->tail = &me;
        } else {
            // A thread woken before, which lost again, keeps its place at the front; so does an
            // urgent one, which has the lock handed to it at the next unlock (as does a woken
            // thread whose turn has come).
            me.next = lock->head;
            lock->head = &me;
            if (!lock->tail) lock->tail = &me;
        }
        queued_before = 1;
        lock->sleeps++;
        queue_unlock(lock);
        uint32_t signal;
        int waits = 0;
        while ((signal = __atomic_load_n(&me.signal, __ATOMIC_ACQUIRE)) == WAITING) {
            if (me.claims && waits++ < CLAIM_SPIN_ROUNDS) {
                relax();
            } else {
                futex_wait(&me.signal, WAITING);
            }
        }
        if (signal == HANDED) return;
        woken = 1;
        heir = signal == TURN;
        spins = 0;
    }
}

void decide_unlock_slow(decide_lock_t *lock) {
    queue_lock(lock);
    uint32_t state = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);
    decide_lock_waiter *waiter = NULL;
    uint32_t signal = RETRY;
    // The head's turn has come once it has waited the bound since the queue last moved. The
    // clock is read once, and only with a queue: a handoff (which always has one) starts the
    // next turn at the same instant.
    turn_clock_reading clock = lock->head ? turn_clock() : (turn_clock_reading){0, 0};
    uint64_t now = clock.now;
    int turn = lock->head && past_bound(lock, now - __atomic_load_n(&lock->turn_at, __ATOMIC_RELAXED), clock);
    if (state & DECIDE_LOCK_HANDOFF) {
        // A claiming thread waits (urgent, or an heir whose turn came): the head owns the lock
        // from now on (LOCKED stays set), and the next head's turn starts.
        waiter = lock->head;
        lock->head = waiter->next;
        if (!lock->head) lock->tail = NULL;
        uint32_t clear = 0;
        if (!lock->head) {
            clear = DECIDE_LOCK_HANDOFF | DECIDE_LOCK_QUEUED;
        } else if (!lock->head->claims) {
            clear = DECIDE_LOCK_HANDOFF;
        }
        if (clear) __atomic_fetch_and(&lock->state, ~clear, __ATOMIC_RELAXED);
        __atomic_store_n(&lock->turn_at, now, __ATOMIC_RELAXED);
        lock->handoffs++;
        signal = HANDED;
    } else {
        // Barging: free the lock, and wake the head to compete for it unless a thread is about
        // to take it anyway (a spinner, or a woken thread that has not tried yet). Once the
        // head's turn has come it is woken despite a spinner, as the heir: running again, it
        // claims the lock, and the unlock after that hands it over. The lock is never left
        // idle for a wakeup. Only the spinner's flag can change meanwhile: a thread queues only
        // under the queue's lock.
        uint32_t next;
        do {
            int wake = lock->head && !(state & DECIDE_LOCK_WOKEN) && (turn || !(state & DECIDE_LOCK_SPINNING));
            uint32_t clear = DECIDE_LOCK_LOCKED;
            if (!lock->head || (wake && !lock->head->next)) clear |= DECIDE_LOCK_QUEUED;
            next = (state & ~clear) | (wake ? DECIDE_LOCK_WOKEN : 0u);
            waiter = wake ? lock->head : NULL;
        } while (!__atomic_compare_exchange_n(&lock->state, &state, next, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
        if (waiter) {
            lock->head = waiter->next;
            if (!lock->head) lock->tail = NULL;
            if (turn) signal = TURN;
        }
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
