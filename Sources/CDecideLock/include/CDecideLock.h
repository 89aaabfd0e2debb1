#ifndef C_DECIDE_LOCK_H
#define C_DECIDE_LOCK_H

#include <stdint.h>

/// The lock around a node's state (Decide's `NodeLock`): a mutex that lets running threads take
/// it ahead of sleeping ones, and gives the longest sleeper a turn once per bound (`handoff_ns`).
///
/// - Barging: `decide_lock` takes a free lock at once. On a held lock one thread at a time
///   spins briefly; the others queue at the back and sleep, so threads beyond the holder and
///   that spinner do not compete for processors. An unlock frees the lock and wakes the head of
///   the queue to compete for it, unless a spinner or an earlier woken thread is about to take
///   it. A thread that keeps running takes the lock many times in a row without a context
///   switch, however many threads ask.
/// - Turns: once the head of the queue has waited the bound since the queue last moved (a
///   handoff, or a woken thread taking the lock), the next unlock wakes it as the heir, even
///   past a spinner. Running again and finding the lock held, the heir claims it: arriving
///   threads queue instead of taking it, and the holder's unlock hands it over (the lock stays
///   held). The heir spins briefly on its signal before it sleeps, so the lock is not left idle
///   while a thread wakes. So the lock is handed over at most once per bound, plus once for
///   each urgent request.
/// - `decide_lock_urgent` claims the lock at once: it queues at the front, and the next unlock
///   hands it the lock.
///
/// Guarantees: mutual exclusion, with acquire and release ordering; no lost wakeup (a queued
/// thread is woken by an unlock after it queued, or by the unlock of a spinner that takes the
/// lock instead); sleepers are served in queue order; the head of the queue is woken by the
/// first unlock past its turn, and once it claims the lock only an urgent thread takes it
/// first. Not recursive. All fields zero is an unlocked lock with a bound of 0;
/// `decide_lock_init` sets the bound.
typedef struct decide_lock_waiter decide_lock_waiter;

typedef struct {
    /// DECIDE_LOCK_LOCKED | DECIDE_LOCK_QUEUED | DECIDE_LOCK_HANDOFF (a claiming thread waits:
    /// the next unlock hands over) | DECIDE_LOCK_WOKEN | DECIDE_LOCK_SPINNING (a thread spins),
    /// read and written only with `__atomic` builtins (plain fields, so Swift imports the type).
    uint32_t state;
    /// Guards the queue (0 free, 1 held, 2 held with sleepers): taken only on slow paths.
    uint32_t queue_lock;
    decide_lock_waiter *head;
    decide_lock_waiter *tail;
    uint64_t handoff_ns;
    /// When the head of the queue's turn began: when it queued into an empty queue, or the
    /// queue last moved (a handoff, or a woken thread taking the lock). In the processor's
    /// counter ticks where the millisecond clock measured their rate (`CDecideClock`), else in
    /// monotonic nanoseconds (lock.c, `turn_clock`).
    uint64_t turn_at;
    /// Counters for tests and diagnostics (`decide_lock_handoffs`, `decide_lock_sleeps`),
    /// changed under `queue_lock`.
    uint64_t handoffs;
    uint64_t sleeps;
} decide_lock_t;

enum {
    DECIDE_LOCK_LOCKED = 1u,
    DECIDE_LOCK_QUEUED = 2u,
    DECIDE_LOCK_HANDOFF = 4u,
    DECIDE_LOCK_WOKEN = 8u,
    DECIDE_LOCK_SPINNING = 16u,
};

/// Zeroes `lock` and sets its bound in nanoseconds.
void decide_lock_init(decide_lock_t *lock, uint64_t handoff_ns);

/// How a thread asks for the lock: as anyone, urgently (`decide_lock_urgent`), or politely
/// (`decide_lock_polite`).
enum { DECIDE_LOCK_PLAIN = 0, DECIDE_LOCK_AS_URGENT = 1, DECIDE_LOCK_AS_POLITE = 2 };

void decide_lock_slow(decide_lock_t *lock, int manner);
void decide_unlock_slow(decide_lock_t *lock);

/// Takes the lock: a compare-and-swap when it is free, `decide_lock_slow` otherwise.
static inline __attribute__((always_inline)) void decide_lock_as(decide_lock_t *lock, int manner) {
    uint32_t expected = 0;
    if (__builtin_expect(__atomic_compare_exchange_n(&lock->state, &expected, DECIDE_LOCK_LOCKED, 1,
                                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED), 1)) {
        return;
    }
    decide_lock_slow(lock, manner);
}

/// Takes the lock, waiting as long as it takes.
static inline __attribute__((always_inline)) void decide_lock(decide_lock_t *lock) { decide_lock_as(lock, DECIDE_LOCK_PLAIN); }

/// Takes the lock ahead of every sleeping thread: when it must wait, it queues at the front and
/// claims the lock, so the next unlock hands the lock to it. For the few threads whose waits hold
/// up other machines (the one applying a peer's deltas), not for ordinary callers: used by
/// many, it is a plain handoff lock.
static inline __attribute__((always_inline)) void decide_lock_urgent(decide_lock_t *lock) { decide_lock_as(lock, DECIDE_LOCK_AS_URGENT); }

/// Takes the lock after a thread an unlock has just woken, which it does not race: when one is
/// about to try, it queues at the back instead of taking a free lock. For a chore that holds the
/// lock in slices (expiry, tombstone collection) and takes it again after each: a decision that
/// queued behind one slice gets in before the next.
static inline __attribute__((always_inline)) void decide_lock_polite(decide_lock_t *lock) { decide_lock_as(lock, DECIDE_LOCK_AS_POLITE); }

/// Releases the lock, which the calling thread holds.
static inline __attribute__((always_inline)) void decide_unlock(decide_lock_t *lock) {
    uint32_t expected = DECIDE_LOCK_LOCKED;
    if (__builtin_expect(__atomic_compare_exchange_n(&lock->state, &expected, 0, 0,
                                                     __ATOMIC_RELEASE, __ATOMIC_RELAXED), 1)) {
        return;
    }
    // Only a spinner waits: free the lock and leave it to that thread.
    if (expected == (DECIDE_LOCK_LOCKED | DECIDE_LOCK_SPINNING)
        && __atomic_compare_exchange_n(&lock->state, &expected, DECIDE_LOCK_SPINNING, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
        return;
    }
    decide_unlock_slow(lock);
}

/// Times the lock was handed over (to an heir or an urgent thread), and times a thread queued to
/// sleep on it (it may be woken before it sleeps): for tests and diagnostics.
uint64_t decide_lock_handoffs(decide_lock_t *lock);
uint64_t decide_lock_sleeps(decide_lock_t *lock);

#endif
