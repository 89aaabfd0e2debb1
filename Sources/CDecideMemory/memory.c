// Anonymous memory mappings for DecideCore's growing arrays (include/CDecideMemory.h): Swift
// cannot call `mremap`, which is variadic. No I/O: the mappings are private and anonymous.

#define _GNU_SOURCE
#include "CDecideMemory.h"

#include <unistd.h>

#if defined(__linux__)
#include <sys/mman.h>

int decide_memory_maps(void) { return 1; }

void *decide_memory_map(size_t bytes) {
    void *address = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return address == MAP_FAILED ? NULL : address;
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
void *decide_memory_remap(void *address, size_t old_bytes, size_t new_bytes) {
    (void)address; (void)old_bytes; (void)new_bytes;
    return NULL;
}
void decide_memory_release(void *address, size_t bytes) { (void)address; (void)bytes; }
void decide_memory_unmap(void *address, size_t bytes) { (void)address; (void)bytes; }
void decide_memory_populate(void *address, size_t bytes) { (void)address; (void)bytes; }

#endif

size_t decide_memory_page_bytes(void) { return (size_t)sysconf(_SC_PAGESIZE); }
