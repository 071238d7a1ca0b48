/* tok_spm.c — SentencePiece (llama.cpp's "llama" vocab type): score-driven merges with byte
 * fallback.
 *
 * The segment is escaped first (optional leading space, every ' ' -> U+2581 "▁"), split into
 * characters, and the adjacent pair whose concatenation is a token with the highest score is
 * merged until none is left (ties: leftmost), exactly llama.cpp's llm_tokenizer_spm. A final
 * symbol that is not a token is emitted as its bytes (<0xNN> tokens, else unk).
 *
 * Speed: when no vocabulary token contains "x▁" (a non-▁ character followed by ▁), no merge
 * can cross the start of a word (a ▁ run after a non-▁ character), so the segment is cut there
 * and each word goes through the word cache; the result is identical (merges in different
 * words never interact). The loader checks that property (spm_split_words). */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"
#include "util/heap.h"

struct spm_ent {
    float score;
    int32_t left, right;
    uint32_t size;
};
_Static_assert(sizeof(struct spm_ent) <= 24, "heap entry fits the scratch (TOK_HEAP_ENTRY_MAX)");

static inline bool better(const struct spm_ent *a, const struct spm_ent *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

TERN_HEAP_DEFINE(spm_heap, struct spm_ent, better)

static inline void try_pair(const struct tern_tokenizer *t, const char *w, struct spm_ent *h,
                            size_t *hn, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return;
    const struct tok_scratch *s = &t->scratch;
    uint32_t size = s->sym_len[l] + s->sym_len[r];
    int32_t id = tok_strmap_get(&t->map, w + s->sym_off[l], size);
    if (id < 0) return;
    struct spm_ent e = {t->score[id], l, r, size};
    spm_heap_push(h, hn, TOK_HEAP_CAP(s), e);
}

/* Byte fallback: at most one id per byte, so a word of n bytes fills at most n ids. */
static void emit_bytes(const struct tern_tokenizer *t, const unsigned char *p, size_t n,
                       int32_t *ids, int *m)
{
    for (size_t i = 0; i < n; i++) {
        int32_t b = t->byte_token[p[i]];
        if (b < 0) b = t->unk;
        TERN_ASSERT((size_t)*m < t->scratch.cap_sym);
        if (b >= 0) ids[(*m)++] = b;
    }
}

/* Merge w[0..n) into ids in s->word_ids; returns the count. */
static int spm_merge(struct tern_tokenizer *t, const char *w, size_t n)
{
    struct tok_scratch *s = &t->scratch;
    int32_t *prev = s->sym_prev, *next = s->sym_next;
    uint32_t *off = s->sym_off, *len = s->sym_len;
    int32_t ns = 0;
    TERN_ASSERT(n > 0 && n <= s->cap_sym); /* spm_word grew the scratch; one symbol per byte at most */
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = tok_utf8_decode((const unsigned char *)w + i, n - i, &c);
        off[ns] = (uint32_t)i;
        len[ns] = (uint32_t)l;
        prev[ns] = ns - 1;
        next[ns] = ns + 1;
        ns++;
        i += (size_t)l;
    }
    next[ns - 1] = -1;
    struct spm_ent *h = s->heap;
    size_t hn = 0;
    for (int32_t i = 0; i + 1 < ns; i++) try_pair(t, w, h, &hn, i, i + 1);
    while (hn) {
        struct spm_ent e = spm_heap_pop(h, &hn);
        int32_t l = e.left, r = e.right;
        TERN_ASSERT(l >= 0 && r > l && r < ns);
        if (len[l] == 0 || len[r] == 0 || len[l] + len[r] != e.size) continue; /* stale */
        len[l] += len[r];
        len[r] = 0;
        next[l] = next[r];
        if (next[r] >= 0) prev[next[r]] = l;
        try_pair(t, w, h, &hn, prev[l], l);
        try_pair(t, w, h, &hn, l, next[l]);
    }
    int m = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) {
        TERN_ASSERT(i < ns && (size_t)m < n);
        int32_t id = tok_strmap_get(&t->map, w + off[i], len[i]);
        if (id >= 0) s->word_ids[m++] = id;
        else emit_bytes(t, (const unsigned char *)w + off[i], len[i], s->word_ids, &m);
    }
    return m;
}

static tern_status spm_word(struct tern_tokenizer *t, const char *w, size_t n, struct tok_out *o)
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
    /* byte fallback emits at most one id per byte: n ids at most */
    tern_status st = tok_scratch_sym(&t->scratch, n);
    if (st) return st;
    int m = spm_merge(t, w, n);
    for (int i = 0; i < m; i++) tok_out_push(o, t->scratch.word_ids[i]);
    if (n <= TOK_CACHE_MAX_WORD) tok_cache_put(&t->cache, w, n, h, t->scratch.word_ids, m);
    return TERN_OK;
}

static inline bool is_sp(const char *p) /* "▁" = E2 96 81 */
{
    return (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x96 &&
           (unsigned char)p[2] == 0x81;
}

tern_status tok_spm_segment(struct tern_tokenizer *t, const char *text, size_t n,
                            bool prefix_space, struct tok_out *o)
{
    tern_status st = tok_scratch_esc(&t->scratch, 3 * n + 3 + 4);
    if (st) return st;
    char *e = t->scratch.esc;
    size_t m = 0;
    if (prefix_space) {
        memcpy(e, "\xE2\x96\x81", 3);
        m = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ') {
            memcpy(e + m, "\xE2\x96\x81", 3);
            m += 3;
        } else {
            e[m++] = text[i];
        }
    }
    TERN_ASSERT(m + 4 <= t->scratch.cap_esc); /* grown above for 3 bytes per input byte */
    memset(e + m, 0, 4); /* is_sp may look 2 bytes past the end */
    if (!t->spm_split_words) return spm_word(t, e, m, o);
    size_t start = 0;
    for (size_t i = 3; i + 3 <= m; i++) {
        if (is_sp(e + i) && !is_sp(e + i - 3)) {
            st = spm_word(t, e + start, i - start, o);
            if (st) return st;
            start = i;
        }
    }
    return spm_word(t, e + start, m - start, o);
}
