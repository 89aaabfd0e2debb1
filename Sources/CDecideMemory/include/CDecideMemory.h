#ifndef C_DECIDE_MEMORY_H
#define C_DECIDE_MEMORY_H

#include <stddef.h>

/// Whether this platform maps memory with the calls below (Linux: 1); elsewhere they return
/// NULL and callers use `malloc`.
int decide_memory_maps(void);

/// `bytes` (a multiple of the page size) of private, zeroed memory from the system, whose pages
/// are not touched until written; NULL on failure.
void *decide_memory_map(size_t bytes);

/// Resizes a mapping of `old_bytes` made by `decide_memory_map` to `new_bytes`, moving its pages
/// (not their contents) where it cannot grow in place; NULL on failure (the old mapping stays).
void *decide_memory_remap(void *address, size_t old_bytes, size_t new_bytes);

/// Hands the pages of `bytes` at `address` (whole pages of a mapping made above) back to the
/// system; they read as zeros afterwards, faulting in afresh when written.
void decide_memory_release(void *address, size_t bytes);

/// Faults in the pages of `bytes` at `address` (within a mapping of `decide_memory_map`) in one
/// call, ahead of a copy that would fault them one by one; does nothing where the system cannot.
void decide_memory_populate(void *address, size_t bytes);

/// Returns a mapping made by `decide_memory_map` or `decide_memory_remap` to the system.
void decide_memory_unmap(void *address, size_t bytes);

/// The system's page size in bytes.
size_t decide_memory_page_bytes(void);

#endif
