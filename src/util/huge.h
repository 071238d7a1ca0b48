/* huge.h — memory that is streamed every token (a model's repacked weights, a LoRA adapter's
 * copies): aligned to a 2 MiB huge page and advised to use huge pages, so a pass through it does
 * not pay a page walk every 4 KiB. Transparent huge pages in "madvise" mode (Debian's default)
 * give them only to memory advised so. */
#ifndef TERN_UTIL_HUGE_H
#define TERN_UTIL_HUGE_H

#include <stdlib.h>
#include <sys/mman.h>

#define UTIL_HUGE_PAGE ((size_t)2 << 20)

/* bytes (rounded up to whole huge pages), or NULL when out of memory; freed with free(). */
static inline void *util_alloc_huge(size_t bytes)
{
    const size_t size = ((bytes ? bytes : 1) + UTIL_HUGE_PAGE - 1) & ~(UTIL_HUGE_PAGE - 1);
    void *p = NULL;
    if (posix_memalign(&p, UTIL_HUGE_PAGE, size) != 0) return NULL;
    (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: fine if refused */
    return p;
}

#endif
