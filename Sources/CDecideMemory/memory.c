// Anonymous memory mappings for DecideCore's growing arrays (include/CDecideMemory.h): Swift
// cannot call `mremap`, which is variadic. No I/O: the mappings are private and anonymous.

#define _GNU_SOURCE
#include "CDecideMemory.h"

#include <unistd.h>

#if defined(__linux__)
#include <sys/mman.h>

#include <stdint.h>

int decide_memory_maps(void) { return 1; }

// A zeroed mapping that is filled all over at once (a hash index, whose cells are written
// wherever keys hash) starts on a huge-page boundary and asks for transparent huge pages
// (MADV_HUGEPAGE; the kernel's "madvise" mode, Debian's default, gives them only to regions
// that ask): it then faults once per 2 MiB instead of twice per 4 KiB page (a probe's read maps
// the shared zero page, the write after it copies it and flushes the other processors' TLBs).
// Arrays that grow at their end are not asked: the huge page they stop in would be resident
// whole (docs/benchmarks.md, "Huge pages for the index").
static const size_t huge_page_bytes = (size_t)2 << 20;

size_t decide_memory_huge_page_bytes(void) { return huge_page_bytes; }

void *decide_memory_map(size_t bytes) {
    void *address = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return address == MAP_FAILED ? NULL : address;
}

void *decide_memory_map_huge(size_t bytes) {
    if (bytes < huge_page_bytes) return decide_memory_map(bytes);
    // Over-mapped by one huge page, then the unaligned head and the tail unmapped.
    size_t padded = bytes + huge_page_bytes;
    if (padded < bytes) return NULL;
    char *raw = mmap(NULL, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *aligned = (char *)(((uintptr_t)raw + huge_page_bytes - 1) & ~(uintptr_t)(huge_page_bytes - 1));
    if (aligned > raw) munmap(raw, (size_t)(aligned - raw));
    size_t tail = (size_t)(raw + padded - (aligned + bytes));
    if (tail > 0) munmap(aligned + bytes, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(aligned, bytes, MADV_HUGEPAGE);
#endif
    return aligned;
}

void *decide_memory_remap(void *address, size_t old_bytes, size_t new_bytes) {
    void *moved = mremap(address, old_bytes, new_bytes, MREMAP_MAYMOVE);
    return moved == MAP_FAILED ? NULL : moved;
}

void decide_memory_release(void *address, size_t bytes) { madvise(address, bytes, MADV_DONTNEED); }

void decide_memory_unmap(void *address, size_t bytes) { munmap(address, bytes); }

void decide_memory_populate(void *address, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    (void)madvise(address, bytes, MADV_POPULATE_WRITE);
#else
    (void)address;
    (void)bytes;
#endif
}

#else

int decide_memory_maps(void) { return 0; }
void *decide_memory_map(size_t bytes) { (void)bytes; return NULL; }
void *decide_memory_map_huge(size_t bytes) { (void)bytes; return NULL; }
void *decide_memory_remap(void *address, size_t old_bytes, size_t new_bytes) {
    (void)address; (void)old_bytes; (void)new_bytes;
    return NULL;
}
void decide_memory_release(void *address, size_t bytes) { (void)address; (void)bytes; }
void decide_memory_unmap(void *address, size_t bytes) { (void)address; (void)bytes; }
void decide_memory_populate(void *address, size_t bytes) { (void)address; (void)bytes; }
size_t decide_memory_huge_page_bytes(void) { return 0; }

#endif

size_t decide_memory_page_bytes(void) { return (size_t)sysconf(_SC_PAGESIZE); }
