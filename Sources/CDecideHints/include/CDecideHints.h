#ifndef C_DECIDE_HINTS_H
#define C_DECIDE_HINTS_H

/// Asks the processor to start loading the cache line holding `address` for a read; returns at
/// once and changes nothing a program can observe (Swift has no prefetch of its own).
static inline __attribute__((always_inline)) void decide_prefetch_read(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

/// The same, for a line about to be written (a reference count about to drop).
static inline __attribute__((always_inline)) void decide_prefetch_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

#endif
