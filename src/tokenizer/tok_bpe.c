/* tok_bpe.c — byte-level BPE on one pre-token word, behind the word cache.
 *
 * A word starts as one symbol per raw byte (byte_token[]), then the adjacent pair of lowest
 * merge rank is merged until no pair has a rank; ties go to the leftmost pair (llama.cpp's
 * order). Pairs wait in a min-heap keyed (rank, left index) with lazy deletion: an entry is
 * stale when either side changed since it was pushed (we compare both ids), so each merge costs
 * O(log n) and long words stay O(n log n). Symbols are token ids, never strings: merge ranks
 * and results were resolved to ids at load (tok_load.c), so the loop hashes nothing. */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"
#include "util/heap.h"

struct bpe_ent {
    uint64_t key; /* rank << 32 | left index: min-heap order */
    int32_t right, lid, rid, res;
};
_Static_assert(sizeof(struct bpe_ent) <= 24, "heap entry fits the scratch (TOK_HEAP_ENTRY_MAX)");

#define DEAD INT32_MIN

static inline bool bpe_before(const struct bpe_ent *a, const struct bpe_ent *b)
{
    return a->key < b->key;
}
TERN_HEAP_DEFINE(bpe_heap, struct bpe_ent, bpe_before)

static inline void try_pair(const struct tern_tokenizer *t, const struct tok_scratch *s,
                            struct bpe_ent *h, size_t *hn, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return;
    int32_t lid = s->sym_id[l], rid = s->sym_id[r], rank, res;
    if (lid < 0 || rid < 0) return;
    if (!tok_pairmap_get(&t->merges, lid, rid, &rank, &res)) return;
    struct bpe_ent e = {((uint64_t)(uint32_t)rank << 32) | (uint32_t)l, r, lid, rid, res};
    bpe_heap_push(h, hn, TOK_HEAP_CAP(s), e);
}

/* Merge w[0..n) into ids; returns the count, ids in s->word_ids. */
static int bpe_merge(struct tern_tokenizer *t, const unsigned char *w, size_t n)
{
    struct tok_scratch *s = &t->scratch;
    int32_t *id = s->sym_id, *prev = s->sym_prev, *next = s->sym_next;
    TERN_ASSERT(n <= s->cap_sym); /* bpe_word grew the scratch for this word */
    for (size_t i = 0; i < n; i++) {
        int32_t b = t->byte_token[w[i]];
        id[i] = b >= 0 ? b : -1 - (int32_t)w[i]; /* a byte with no token never merges */
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    struct bpe_ent *h = s->heap;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(t, s, h, &hn, (int32_t)i, (int32_t)i + 1);
    while (hn) {
        struct bpe_ent e = bpe_heap_pop(h, &hn);
        int32_t l = (int32_t)(uint32_t)e.key, r = e.right;
        TERN_ASSERT(l >= 0 && (size_t)l < n && r > l && (size_t)r < n);
        if (id[l] != e.lid || next[l] != r || id[r] != e.rid) continue; /* stale */
        id[l] = e.res;
        id[r] = DEAD;
        next[l] = next[r];
        if (next[r] >= 0) prev[next[r]] = l;
        try_pair(t, s, h, &hn, prev[l], l);
        try_pair(t, s, h, &hn, l, next[l]);
    }
    int m = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) {
        TERN_ASSERT((size_t)i < n && (size_t)m < n); /* links stay inside the word */
        if (id[i] >= 0) s->word_ids[m++] = id[i];
    }
    return m;
}

static tern_status bpe_word(struct tern_tokenizer *t, const char *w, size_t n, struct tok_out *o)
{
    if (n == 0) return TERN_OK;
    uint32_t h = 0;
    if (n <= TOK_CACHE_MAX_WORD) {
        int cn;
        h = tok_hash_bytes(w, n);
        const int32_t *ids = tok_cache_get(&t->cache, w, n, h, &cn);
        if (ids) {
            for (int i = 0; i < cn; i++) tok_out_push(o, ids[i]);
            return TERN_OK;
        }
    }
    if (t->ignore_merges) {
        int32_t id = tok_strmap_get(&t->map, w, n);
        if (id >= 0) {
            tok_out_push(o, id);
            if (n <= TOK_CACHE_MAX_WORD) tok_cache_put(&t->cache, w, n, h, &id, 1);
            return TERN_OK;
        }
    }
    tern_status st = tok_scratch_sym(&t->scratch, n);
    if (st) return st;
    int m = bpe_merge(t, (const unsigned char *)w, n);
    for (int i = 0; i < m; i++) tok_out_push(o, t->scratch.word_ids[i]);
    if (n <= TOK_CACHE_MAX_WORD) tok_cache_put(&t->cache, w, n, h, t->scratch.word_ids, m);
    return TERN_OK;
}

void tok_bpe_word(struct tern_tokenizer *t, const char *w, size_t n, struct tok_out *o)
{
    (void)bpe_word(t, w, n, o);
}

struct seg_ctx {
    struct tern_tokenizer *t;
    const char *text;
    struct tok_out *o;
    tern_status st;
};

static void on_word(void *ctx, size_t b0, size_t b1)
{
    struct seg_ctx *c = ctx;
    if (c->st) return;
    c->st = bpe_word(c->t, c->text + b0, b1 - b0, c->o);
}

tern_status tok_bpe_segment(struct tern_tokenizer *t, const char *text, size_t n,
                            struct tok_out *o)
{
    struct seg_ctx c = {t, text, o, TERN_OK};
    tern_status st = tok_pretokenize(t, text, n, on_word, &c);
    return st ? st : c.st;
}
