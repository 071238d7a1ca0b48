/* tok_cache.c — the word cache: pre-token word bytes -> token ids.
 *
 * Most words of a text repeat, so the merge loop runs once per distinct word. The cache has a
 * fixed number of slots and a fixed arena, both allocated at load; when either is about to
 * overflow, everything is dropped at once (a "reset", counted) instead of evicting entries
 * one by one: no allocation ever happens after load. Words longer than TOK_CACHE_MAX_WORD
 * bytes are not cached (they are rare and would crowd the arena). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"

tern_status tok_cache_init(struct tok_cache *c, uint32_t slots, size_t arena_bytes)
{
    memset(c, 0, sizeof *c);
    c->mask = slots - 1;
    c->slot_hash = calloc(slots, sizeof *c->slot_hash);
    c->slot_off = malloc(sizeof *c->slot_off * slots);
    c->arena = malloc(arena_bytes);
    if (!c->slot_hash || !c->slot_off || !c->arena) {
        tok_cache_free(c);
        return tern_fail(TERN_ERR_NOMEM, "tokenizer: word cache of %zu bytes", arena_bytes);
    }
    c->arena_cap = arena_bytes;
    return TERN_OK;
}

void tok_cache_free(struct tok_cache *c)
{
    free(c->slot_hash);
    free(c->slot_off);
    free(c->arena);
    memset(c, 0, sizeof *c);
}

static size_t entry_size(size_t wn, int n)
{
    return (4 + wn + 3) / 4 * 4 + (size_t)n * 4;
}

const int32_t *tok_cache_get(struct tok_cache *c, const char *w, size_t wn, uint32_t h, int *n)
{
    uint32_t i = h & c->mask;
    const uint32_t start = i;
    for (;;) {
        uint32_t sh = c->slot_hash[i];
        if (sh == 0) break;
        if (sh == h) {
            /* a used slot points at a whole entry written since the last reset */
            TERN_ASSERT(c->slot_off[i] % 4 == 0 && c->slot_off[i] + 4 <= c->arena_used);
            const char *e = c->arena + c->slot_off[i];
            uint16_t elen, en;
            memcpy(&elen, e, 2);
            memcpy(&en, e + 2, 2);
            TERN_ASSERT(c->slot_off[i] + entry_size(elen, en) <= c->arena_used);
            if (elen == wn && !memcmp(e + 4, w, wn)) {
                c->hits++;
                *n = en;
                return (const int32_t *)(const void *)(e + (4 + wn + 3) / 4 * 4);
            }
        }
        i = (i + 1) & c->mask;
        TERN_ASSERT(i != start); /* at most 3/4 of the slots are used (put resets first) */
    }
    c->misses++;
    return NULL;
}

void tok_cache_put(struct tok_cache *c, const char *w, size_t wn, uint32_t h, const int32_t *ids,
                   int n)
{
    if (wn > TOK_CACHE_MAX_WORD || n > 0xFFFF) return;
    size_t need = entry_size(wn, n);
    if (c->arena_used + need > c->arena_cap || (c->n_used + 1) * 4 > (c->mask + 1) * 3) {
        memset(c->slot_hash, 0, sizeof *c->slot_hash * (c->mask + 1));
        c->n_used = 0;
        c->arena_used = 0;
        c->resets++;
        if (need > c->arena_cap) return;
    }
    TERN_ASSERT(h != 0 && c->arena_used + need <= c->arena_cap && c->arena_used % 4 == 0);
    TERN_ASSERT((c->n_used + 1) * 4 <= (c->mask + 1) * 3);
    uint32_t i = h & c->mask;
    while (c->slot_hash[i]) i = (i + 1) & c->mask;
    char *e = c->arena + c->arena_used;
    uint16_t elen = (uint16_t)wn, en = (uint16_t)n;
    memcpy(e, &elen, 2);
    memcpy(e + 2, &en, 2);
    memcpy(e + 4, w, wn);
    memcpy(e + (4 + wn + 3) / 4 * 4, ids, (size_t)n * 4);
    c->slot_hash[i] = h;
    c->slot_off[i] = (uint32_t)c->arena_used;
    c->arena_used += need;
    c->n_used++;
}
