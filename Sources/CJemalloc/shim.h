// CJemalloc: the system jemalloc (pkg-config jemalloc, Debian libjemalloc-dev), which syncnode
// links so that it, not glibc's malloc, serves every allocation of the process (Redis ships
// with jemalloc for the same reason: docs/operations.md, "Memory allocator").
#ifndef DECIDE_CJEMALLOC_SHIM_H
#define DECIDE_CJEMALLOC_SHIM_H

#include <stddef.h>
#include <jemalloc/jemalloc.h>

/// jemalloc's version string ("5.3.0-0-g…"), or NULL when the allocator cannot say.
static inline const char *decide_jemalloc_version(void) {
    const char *version = NULL;
    size_t size = sizeof(version);
    if (mallctl("version", &version, &size, NULL, 0) != 0) return NULL;
    return version;
}

#endif
