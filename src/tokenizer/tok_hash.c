/* tok_hash.c — the tokenizer's hash tables and scratch: token text -> id, merge pair -> rank,
 * and the growable per-call scratch.
 *
 * All tables are open addressing with linear probing, sized at load to a power of two at
 * least twice the key count, so a lookup is O(1) and never allocates. The string hash reads
 * eight bytes at a time (tokens and words are short, most lookups touch one or two words). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x;
}

uint32_t tok_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = mix64(h ^ v) * 0x9E3779B97F4A7C15ull;
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = 0;
        memcpy(&v, s, n);
        h = mix64(h ^ v ^ ((uint64_t)n << 56)) * 0x9E3779B97F4A7C15ull;
    }
    h = mix64(h);
    return (uint32_t)h | 1u; /* never 0: the word cache uses 0 for empty slots */
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

tern_status tok_strmap_init(struct tok_strmap *m, uint32_t n_keys)
{
    uint32_t cap = pow2_at_least((uint64_t)n_keys * 2);
    m->mask = cap - 1;
    m->n_keys = n_keys;
    m->slot = malloc(sizeof *m->slot * cap);
    m->slot_hash = malloc(sizeof *m->slot_hash * cap);
    if (!m->slot || !m->slot_hash) {
        tok_strmap_free(m);
        return tern_fail(TERN_ERR_NOMEM, "tokenizer: token hash of %u slots", cap);
    }
    memset(m->slot, 0xFF, sizeof *m->slot * cap);
    return TERN_OK;
}

void tok_strmap_free(struct tok_strmap *m)
{
    free(m->slot);
    free(m->slot_hash);
    m->slot = NULL;
    m->slot_hash = NULL;
}

/* Every table has at least twice as many slots as keys (init), so a probe always reaches an
 * empty slot; the checks below catch a table filled past that or a slot holding a foreign id,
 * either of which would read key bytes through a wrong offset. */
void tok_strmap_put(struct tok_strmap *m, int32_t id)
{
    TERN_ASSERT(id >= 0 && (uint32_t)id < m->n_keys);
    const char *k = m->arena + m->off[id];
    uint32_t n = m->len[id];
    uint32_t h = tok_hash_bytes(k, n);
    uint32_t i = h & m->mask;
    const uint32_t start = i;
    for (;;) {
        int32_t s = m->slot[i];
        if (s < 0) {
            m->slot[i] = id;
            m->slot_hash[i] = h;
            return;
        }
        TERN_ASSERT((uint32_t)s < m->n_keys);
        if (m->slot_hash[i] == h && m->len[s] == n && !memcmp(m->arena + m->off[s], k, n)) {
            m->slot[i] = id; /* later id wins */
            return;
        }
        i = (i + 1) & m->mask;
        TERN_ASSERT(i != start);
    }
}

int32_t tok_strmap_get(const struct tok_strmap *m, const void *key, size_t n)
{
    uint32_t h = tok_hash_bytes(key, n);
    uint32_t i = h & m->mask;
    const uint32_t start = i;
    for (;;) {
        int32_t s = m->slot[i];
        if (s < 0) return -1;
        TERN_ASSERT((uint32_t)s < m->n_keys);
        if (m->slot_hash[i] == h && m->len[s] == n && !memcmp(m->arena + m->off[s], key, n))
            return s;
        i = (i + 1) & m->mask;
        TERN_ASSERT(i != start);
    }
}

tern_status tok_pairmap_init(struct tok_pairmap *m, uint32_t n_keys)
{
    uint32_t cap = pow2_at_least((uint64_t)n_keys * 2);
    m->mask = cap - 1;
    m->key = malloc(sizeof *m->key * cap);
    m->rank = malloc(sizeof *m->rank * cap);
    m->result = malloc(sizeof *m->result * cap);
    if (!m->key || !m->rank || !m->result) {
        tok_pairmap_free(m);
        return tern_fail(TERN_ERR_NOMEM, "tokenizer: merge hash of %u slots", cap);
    }
    memset(m->key, 0xFF, sizeof *m->key * cap);
    return TERN_OK;
}

void tok_pairmap_free(struct tok_pairmap *m)
{
    free(m->key);
    free(m->rank);
    free(m->result);
    m->key = NULL;
    m->rank = NULL;
    m->result = NULL;
}

void tok_pairmap_put(struct tok_pairmap *m, int32_t left, int32_t right, int32_t rank,
                     int32_t result)
{
    uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & m->mask;
    const uint32_t start = i;
    for (;;) {
        if (m->key[i] == k) return; /* keep the lower rank (inserted first) */
        if (m->key[i] == UINT64_MAX) {
            m->key[i] = k;
            m->rank[i] = rank;
            m->result[i] = result;
            return;
        }
        i = (i + 1) & m->mask;
        TERN_ASSERT(i != start);
    }
}

/* ---- scratch ---- */

static bool grow(void **p, size_t elem, size_t n)
{
    void *q = realloc(*p, elem * n);
    if (!q) return false;
    *p = q;
    return true;
}

tern_status tok_scratch_cpt(struct tok_scratch *s, size_t n)
{
    if (n <= s->cap_cpt) return TERN_OK;
    size_t cap = s->cap_cpt ? s->cap_cpt : 4096;
    while (cap < n) cap *= 2;
    if (!grow((void **)&s->cpt, sizeof *s->cpt, cap + 1) ||
        !grow((void **)&s->cls, sizeof *s->cls, cap + 1) ||
        !grow((void **)&s->boff, sizeof *s->boff, cap + 1))
        return tern_fail(TERN_ERR_NOMEM, "tokenizer: scratch for %zu code points", cap);
    s->cap_cpt = cap;
    return TERN_OK;
}

tern_status tok_scratch_sym(struct tok_scratch *s, size_t n)
{
    if (n <= s->cap_sym) return TERN_OK;
    size_t cap = s->cap_sym ? s->cap_sym : 1024;
    while (cap < n) cap *= 2;
    if (!grow((void **)&s->sym_id, sizeof *s->sym_id, cap) ||
        !grow((void **)&s->sym_prev, sizeof *s->sym_prev, cap) ||
        !grow((void **)&s->sym_next, sizeof *s->sym_next, cap) ||
        !grow((void **)&s->sym_off, sizeof *s->sym_off, cap) ||
        !grow((void **)&s->sym_len, sizeof *s->sym_len, cap) ||
        !grow((void **)&s->word_ids, sizeof *s->word_ids, cap) ||
        !grow(&s->heap, TOK_HEAP_ENTRY_MAX, cap * 3)) /* TOK_HEAP_CAP */
        return tern_fail(TERN_ERR_NOMEM, "tokenizer: scratch for %zu symbols", cap);
    s->cap_sym = cap;
    return TERN_OK;
}

tern_status tok_scratch_esc(struct tok_scratch *s, size_t n)
{
    if (n <= s->cap_esc) return TERN_OK;
    size_t cap = s->cap_esc ? s->cap_esc : 16384;
    while (cap < n) cap *= 2;
    if (!grow((void **)&s->esc, 1, cap))
        return tern_fail(TERN_ERR_NOMEM, "tokenizer: scratch for %zu bytes", cap);
    s->cap_esc = cap;
    return TERN_OK;
}

void tok_scratch_free(struct tok_scratch *s)
{
    free(s->cpt);
    free(s->cls);
    free(s->boff);
    free(s->sym_id);
    free(s->sym_prev);
    free(s->sym_next);
    free(s->sym_off);
    free(s->sym_len);
    free(s->word_ids);
    free(s->heap);
    free(s->esc);
    memset(s, 0, sizeof *s);
}
