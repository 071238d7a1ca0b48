/* alloc_count.c — the allocator wrappers behind test_allocations() (see alloc_count.h). Only
 * linked into tests that call test_allocations(), which are also the ones linked with --wrap. */
#include "alloc_count.h"

#include <stdatomic.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static _Atomic long allocations;

long test_allocations(void) { return atomic_load(&allocations); }

void *__wrap_malloc(size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    atomic_fetch_add(&allocations, 1);
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_realloc(p, n);
}
