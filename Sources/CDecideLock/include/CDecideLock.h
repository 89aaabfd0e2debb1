#ifndef C_DECIDE_LOCK_H
#define C_DECIDE_LOCK_H

#include <stdint.h>

/// The lock around a node's state (Decide's `NodeLock`): a mutex that lets a running thread
/// take it ahead of sleeping ones while waits are short, and hands it over in queue order once
/// the thread at the head of the queue has waited longer than its bound (`handoff_ns`).
///
/// - Barging mode (the usual one): `decide_lock` takes a free lock at once, spinning briefly
///   while it is held; a thread that must sleep queues at the back. An unlock frees the lock and
///   wakes the head of the queue to compete for it (one at a time: while a woken thread has not
///   tried, no other is woken). A thread that keeps running takes the lock many times in a row
///   without a context switch.
/// - Handoff mode: a woken thread that loses the lock again keeps its place at the front; if it
///   has waited longer than the bound, it switches the lock to handoff mode. Then no arriving
///   thread takes the lock: each unlock gives it to the head of the queue, which wakes owning
///   it. The mode ends when the queue empties or the thread served had waited less than the
///   bound. `decide_lock_urgent` queues at the front in handoff mode at once.
///
/// Guarantees: mutual exclusion, with acquire and release ordering; no lost wakeup (a queued
/// thread is woken by an unlock after it queued); sleepers are served in queue order; once the
/// head of the queue has waited longer than the bound, the unlock after its next wakeup hands
/// it the lock, and no arriving thread takes the lock before it. Not recursive. All fields zero
/// is an unlocked lock with a bound of 0; `decide_lock_init` sets the bound.
typedef struct decide_lock_waiter decide_lock_waiter;

typedef struct {
    /// DECIDE_LOCK_LOCKED | DECIDE_LOCK_QUEUED | DECIDE_LOCK_HANDOFF | DECIDE_LOCK_WOKEN, read and
    /// written only with `__atomic` builtins (plain fields, so Swift imports the type).
    uint32_t state;
    /// Guards the queue (0 free, 1 held, 2 held with sleepers): taken only on slow paths.
    uint32_t queue_lock;
    decide_lock_waiter *head;
    decide_lock_waiter *tail;
    uint64_t handoff_ns;
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

/// Takes the lock ahead of every sleeping thread: when it must wait, it queues at the front in
/// handoff mode, so the next unlock hands the lock to it. For the few threads whose waits hold
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
    decide_unlock_slow(lock);
}

/// Times the lock was handed over in handoff mode, and times a thread queued to sleep on it (it
/// may be woken before it sleeps): for tests and diagnostics.
uint64_t decide_lock_handoffs(decide_lock_t *lock);
uint64_t decide_lock_sleeps(decide_lock_t *lock);

#endif
