/* gguf_index.c — name -> index hash for GGUF keys and tensor names.
 *
 * Open addressing with linear probing over FNV-1a hashes; the table stores only ids and asks
 * the owner for the name of an id (names live in the mapped file), so it costs 8 bytes per
 * slot. Built once at open time, read-only afterwards (safe to share between threads). */
#include "gguf/gguf_internal.h"
#include "util/check.h"
#include "util/error.h"

#include <stdlib.h>

static uint64_t fnv1a(const char *s, uint64_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

tern_status gguf_index_init(struct gguf_index *ix, uint64_t count)
{
    uint64_t cap = 8;
    while (cap < 2 * count) cap *= 2; /* count is bounded by the file size, no overflow */
    ix->slots = malloc(cap * sizeof *ix->slots);
    if (!ix->slots) {
        ix->cap = 0;
        return tern_fail(TERN_ERR_NOMEM, "gguf: out of memory for a name index of %llu entries",
                         (unsigned long long)count);
    }
    for (uint64_t i = 0; i < cap; i++) ix->slots[i] = -1;
    ix->cap = cap;
    return TERN_OK;
}

void gguf_index_free(struct gguf_index *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->cap = 0;
}

static int name_eq(struct tern_str a, const char *b, uint64_t len)
{
    return a.len == len && (len == 0 || memcmp(a.ptr, b, len) == 0);
}

int64_t gguf_index_insert(struct gguf_index *ix, const char *name, uint64_t len, int64_t id,
                          struct tern_str (*names)(const void *ctx, int64_t id), const void *ctx)
{
    /* sized at twice the count (gguf_index_init): the probe always meets an empty slot */
    TERN_ASSERT(ix->slots && ix->cap >= 8 && (ix->cap & (ix->cap - 1)) == 0 && id >= 0);
    uint64_t mask = ix->cap - 1;
    for (uint64_t s = fnv1a(name, len) & mask;; s = (s + 1) & mask) {
        int64_t cur = ix->slots[s];
        if (cur < 0) {
            ix->slots[s] = id;
            return -1;
        }
        if (name_eq(names(ctx, cur), name, len)) return cur;
    }
}

int64_t gguf_index_find(const struct gguf_index *ix, const char *name, uint64_t len,
                        struct tern_str (*names)(const void *ctx, int64_t id), const void *ctx)
{
    if (!ix->slots) return -1;
    TERN_ASSERT(ix->cap >= 8 && (ix->cap & (ix->cap - 1)) == 0);
    uint64_t mask = ix->cap - 1;
    for (uint64_t s = fnv1a(name, len) & mask;; s = (s + 1) & mask) {
        int64_t cur = ix->slots[s];
        if (cur < 0) return -1;
        if (name_eq(names(ctx, cur), name, len)) return cur;
    }
}
