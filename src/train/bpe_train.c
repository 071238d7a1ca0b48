/* bpe_train.c — byte-level BPE training (read bpe_train.h first) and tern_tokenizer_train.
 *
 * Data (all indices 32-bit; a corpus of a few hundred MB has a few million distinct words):
 *   words   distinct pre-tokenized words: bytes in an arena, a count, and their current symbols
 *           (token ids) in one array (a word's slot keeps its length; merges only shrink it)
 *   pairs   (left id, right id) -> count over all words (weighted by word count) and the list of
 *           words that contained the pair when it was last counted (may hold stale entries:
 *           checked on use)
 *   heap    (count, left, right), max count first, ties to the lowest (left, right) so merges
 *           are deterministic; an entry whose count is no longer the pair's is re-pushed with
 *           the current count (counts of existing pairs only decrease: a merge creates pairs
 *           with the new id, which did not exist before)
 * A merge visits only the words in the pair's list: their old pairs are subtracted, the word is
 * rewritten, its new pairs added; pairs containing the new token are pushed on the heap.
 * Vocabulary ids: 0..255 bytes (id = byte value), then the special tokens, then the merges,
 * then unused padding up to vocab_size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat/chat.h"
#include "tern_gguf.h"
#include "tokenizer/tok_internal.h"
#include "train/bpe_train.h"
#include "corpus/corpus.h"
#include "util/check.h"
#include "util/error.h"
#include "util/utf8.h"

#define N_DEFAULT_SPECIAL 7
static const char *const default_specials[N_DEFAULT_SPECIAL] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", /* control (GGUF token type 3) */
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", /* user-defined (4) */
};
#define N_CONTROL 3
#define MAX_SPECIALS 256
#define MAX_SPECIAL_LEN 256
#define TEXT_CHUNK (1u << 20) /* plain files are pre-tokenized in ~1 MiB documents */

struct pair {
    int32_t a, b;
    int64_t count;
    uint32_t *words, n_words, cap_words;
};

struct heap_ent {
    int64_t count;
    int32_t a, b;
};

struct bpe_trainer {
    struct tern_bpe_train_params p;
    char *specials[MAX_SPECIALS];   /* vocabulary order: defaults, then extras */
    int n_specials;
    int by_len[MAX_SPECIALS];       /* specials longest first: the longest match wins, as in
                                       tern_tokenize */
    bool first_byte[256];           /* a special starts with this byte */

    /* word table: open addressing on (hash, bytes) */
    uint32_t wmask;
    uint32_t *wslot;          /* [wmask + 1] word index + 1, 0 = empty */
    uint64_t *whash;          /* [n_words] */
    uint32_t *woff, *wlen;    /* [n_words] bytes in warena */
    uint64_t *wcount;         /* [n_words] */
    uint32_t n_words, cap_words;
    char *warena;
    size_t arena_n, arena_cap;
    uint64_t total_words, text_bytes;

    /* pre-tokenizer state: the tokenizer room's qwen2 splitter works on a tern_tokenizer, of
     * which it reads only `pre` and uses `scratch` */
    struct tern_tokenizer pretok;
    const char *cur_text;
    tern_status cb_status;
};

/* ------------------------------------------------------------------ setup */

struct tern_bpe_train_params tern_bpe_train_default_params(void)
{
    struct tern_bpe_train_params p = {0};
    p.vocab_size = 4096;
    p.min_pair_count = 2;
    return p;
}

void bpe_trainer_free(struct bpe_trainer *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_specials; i++) free(t->specials[i]);
    free(t->wslot);
    free(t->whash);
    free(t->woff);
    free(t->wlen);
    free(t->wcount);
    free(t->warena);
    tok_scratch_free(&t->pretok.scratch);
    free(t);
}

tern_status bpe_trainer_create(const struct tern_bpe_train_params *params, struct bpe_trainer **out)
{
    struct tern_bpe_train_params p = params ? *params : tern_bpe_train_default_params();
    if (p.vocab_size == 0) p.vocab_size = 4096;
    if (p.min_pair_count <= 0) p.min_pair_count = 2;
    if (p.n_extra_special < 0 || p.n_extra_special > MAX_SPECIALS - N_DEFAULT_SPECIAL ||
        (p.n_extra_special && !p.extra_special))
        return tern_fail(TERN_ERR_ARG, "tokenizer train: %d extra special tokens (at most %d)", p.n_extra_special,
                         MAX_SPECIALS - N_DEFAULT_SPECIAL);
    int min_vocab = 256 + N_DEFAULT_SPECIAL + p.n_extra_special + 1;
    if (p.vocab_size < min_vocab || p.vocab_size > (1 << 20))
        return tern_fail(TERN_ERR_ARG, "tokenizer train: vocab size %d is outside %d .. %d (256 bytes + %d special tokens + merges)",
                         p.vocab_size, min_vocab, 1 << 20, N_DEFAULT_SPECIAL + p.n_extra_special);
    struct bpe_trainer *t = calloc(1, sizeof *t);
    if (!t) return tern_fail(TERN_ERR_NOMEM, "tokenizer train: allocation");
    t->p = p;
    t->p.extra_special = NULL; /* copied below */
    for (int i = 0; i < N_DEFAULT_SPECIAL + p.n_extra_special; i++) {
        const char *s = i < N_DEFAULT_SPECIAL ? default_specials[i] : p.extra_special[i - N_DEFAULT_SPECIAL];
        size_t n = s ? strlen(s) : 0;
        if (!n || n > MAX_SPECIAL_LEN) {
            bpe_trainer_free(t);
            return tern_fail(TERN_ERR_ARG, "tokenizer train: special token %d is empty or longer than %d bytes",
                             i - N_DEFAULT_SPECIAL, MAX_SPECIAL_LEN);
        }
        for (int j = 0; j < t->n_specials; j++)
            if (!strcmp(t->specials[j], s)) {
                bpe_trainer_free(t);
                return tern_fail(TERN_ERR_ARG, "tokenizer train: special token '%s' given twice", s);
            }
        if (!(t->specials[t->n_specials] = strdup(s))) {
            bpe_trainer_free(t);
            return tern_fail(TERN_ERR_NOMEM, "tokenizer train: allocation");
        }
        t->n_specials++;
    }
    for (int i = 0; i < t->n_specials; i++) {
        int j = i;
        while (j > 0 && strlen(t->specials[t->by_len[j - 1]]) < strlen(t->specials[i])) {
            t->by_len[j] = t->by_len[j - 1];
            j--;
        }
        t->by_len[j] = i;
        t->first_byte[(unsigned char)t->specials[i][0]] = true;
    }
    t->wmask = (1u << 16) - 1;
    t->wslot = calloc((size_t)t->wmask + 1, sizeof *t->wslot);
    if (!t->wslot) {
        bpe_trainer_free(t);
        return tern_fail(TERN_ERR_NOMEM, "tokenizer train: word table");
    }
    t->pretok.pre = TOK_PRE_QWEN2;
    *out = t;
    return TERN_OK;
}

/* ------------------------------------------------------------------ word counting */

static uint64_t hash64(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static bool words_grow(struct bpe_trainer *t)
{
    if (t->n_words == t->cap_words) {
        uint32_t cap = t->cap_words ? t->cap_words * 2 : 4096;
        uint64_t *h = realloc(t->whash, cap * sizeof *h);
        if (h) t->whash = h;
        uint32_t *o = realloc(t->woff, cap * sizeof *o);
        if (o) t->woff = o;
        uint32_t *l = realloc(t->wlen, cap * sizeof *l);
        if (l) t->wlen = l;
        uint64_t *c = realloc(t->wcount, cap * sizeof *c);
        if (c) t->wcount = c;
        if (!h || !o || !l || !c) return false;
        t->cap_words = cap;
    }
    if ((uint64_t)(t->n_words + 1) * 2 > (uint64_t)t->wmask + 1) { /* keep the table half empty */
        uint32_t mask = t->wmask * 2 + 1;
        uint32_t *slot = calloc((size_t)mask + 1, sizeof *slot);
        if (!slot) return false;
        for (uint32_t w = 0; w < t->n_words; w++) {
            uint32_t i = (uint32_t)t->whash[w] & mask;
            while (slot[i]) i = (i + 1) & mask;
            slot[i] = w + 1;
        }
        free(t->wslot);
        t->wslot = slot;
        t->wmask = mask;
    }
    return true;
}

static void count_word(void *ctx, size_t b0, size_t b1)
{
    struct bpe_trainer *t = ctx;
    if (t->cb_status) return;
    const char *w = t->cur_text + b0;
    size_t n = b1 - b0;
    t->total_words++;
    uint64_t h = hash64(w, n);
    uint32_t i = (uint32_t)h & t->wmask;
    for (uint32_t s; (s = t->wslot[i]); i = (i + 1) & t->wmask) {
        uint32_t k = s - 1;
        if (t->whash[k] == h && t->wlen[k] == n && !memcmp(t->warena + t->woff[k], w, n)) {
            t->wcount[k]++;
            return;
        }
    }
    if (t->arena_n + n > UINT32_MAX) {
        t->cb_status = tern_fail(TERN_ERR_RANGE, "tokenizer train: more than 4 GiB of distinct words");
        return;
    }
    if (t->arena_n + n > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 1 << 20;
        while (cap < t->arena_n + n) cap *= 2;
        char *a = realloc(t->warena, cap);
        if (!a) {
            t->cb_status = tern_fail(TERN_ERR_NOMEM, "tokenizer train: word arena of %zu bytes", cap);
            return;
        }
        t->warena = a;
        t->arena_cap = cap;
    }
    if (t->n_words == UINT32_MAX - 1 || !words_grow(t)) {
        t->cb_status = tern_fail(TERN_ERR_NOMEM, "tokenizer train: word table of %u words", t->n_words);
        return;
    }
    uint32_t k = t->n_words++;
    memcpy(t->warena + t->arena_n, w, n);
    t->whash[k] = h;
    t->woff[k] = (uint32_t)t->arena_n;
    t->wlen[k] = (uint32_t)n;
    t->wcount[k] = 1;
    t->arena_n += n;
    i = (uint32_t)h & t->wmask;
    while (t->wslot[i]) i = (i + 1) & t->wmask;
    t->wslot[i] = k + 1;
}

/* Pre-tokenize one segment that holds no special token. */
static tern_status add_segment(struct bpe_trainer *t, const char *s, size_t n)
{
    if (!n) return TERN_OK;
    t->cur_text = s;
    t->cb_status = TERN_OK;
    tern_status st = tok_pretokenize(&t->pretok, s, n, count_word, t);
    return st ? st : t->cb_status;
}

tern_status bpe_trainer_add_text(struct bpe_trainer *t, const char *text, size_t n)
{
    t->text_bytes += n;
    /* special tokens are single tokens at encode time: they never take part in merges */
    size_t seg = 0;
    for (size_t i = 0; i < n; i++) {
        if (!t->first_byte[(unsigned char)text[i]]) continue;
        for (int q = 0; q < t->n_specials; q++) {
            const char *sp = t->specials[t->by_len[q]];
            size_t l = strlen(sp);
            if (l <= n - i && !memcmp(text + i, sp, l)) {
                tern_status st = add_segment(t, text + seg, i - seg);
                if (st) return st;
                i += l - 1;
                seg = i + 1;
                break;
            }
        }
    }
    return add_segment(t, text + seg, n - seg);
}

struct jsonl_ctx {
    struct bpe_trainer *t;
    tern_status st;
};

static void jsonl_piece(void *ctx, const char *text, size_t len)
{
    struct jsonl_ctx *j = ctx;
    if (!j->st) j->st = bpe_trainer_add_text(j->t, text, len);
}

tern_status bpe_trainer_add_jsonl(struct bpe_trainer *t, const char *name, const char *data, size_t n)
{
    size_t line = 0;
    for (size_t pos = 0; pos < n;) {
        const char *nl = memchr(data + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - data) : n;
        line++;
        size_t b = pos, e = end;
        while (b < e && (data[b] == ' ' || data[b] == '\t' || data[b] == '\r')) b++;
        while (e > b && (data[e - 1] == ' ' || data[e - 1] == '\t' || data[e - 1] == '\r')) e--;
        if (e > b) {
            const char *err = NULL;
            cJSON *conv = cJSON_ParseWithLengthOpts(data + b, e - b, &err, false);
            if (!conv) {
                size_t at = err && err >= data + b && err <= data + e ? (size_t)(err - (data + b)) : 0;
                return tern_fail(TERN_ERR_FORMAT, "%s:%zu: not JSON (at column %zu)", name, line, at + 1);
            }
            struct jsonl_ctx j = {t, TERN_OK};
            tern_status st = corpus_conv_text(conv, jsonl_piece, &j, NULL);
            cJSON_Delete(conv);
            if (!st) st = j.st;
            if (st) return tern_fail_prefix(st, "%s:%zu: ", name, line);
        }
        pos = end + 1;
    }
    return TERN_OK;
}

/* ------------------------------------------------------------------ merges */

struct merge_state {
    /* symbols of every word: word w owns sym[soff[w] .. soff[w] + slen[w]) */
    int32_t *sym;
    uint32_t *soff, *slen;
    /* pairs: hash (a, b) -> index */
    struct pair *pairs;
    uint32_t n_pairs, cap_pairs;
    uint32_t *pslot; /* index + 1 */
    uint32_t pmask;
    struct heap_ent *heap;
    size_t n_heap, cap_heap;
    /* tokens: bytes of each id (specials excluded: never merged) */
    char *tarena;
    size_t tarena_n, tarena_cap;
    uint32_t *toff, *tlen;
    int32_t n_tokens, cap_tokens;
    uint32_t *tslot; /* token bytes -> id + 1 */
    uint32_t tmask;
    /* merges in order: ids of the parts */
    int32_t *ma, *mb;
    int n_merges;
    bool oom;
};

static inline uint64_t pair_key(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static inline uint32_t pair_hash(uint64_t k)
{
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32);
}

static bool pairs_rehash(struct merge_state *m, uint32_t mask)
{
    uint32_t *slot = calloc((size_t)mask + 1, sizeof *slot);
    if (!slot) return false;
    for (uint32_t p = 0; p < m->n_pairs; p++) {
        uint32_t i = pair_hash(pair_key(m->pairs[p].a, m->pairs[p].b)) & mask;
        while (slot[i]) i = (i + 1) & mask;
        slot[i] = p + 1;
    }
    free(m->pslot);
    m->pslot = slot;
    m->pmask = mask;
    return true;
}

/* Index of pair (a, b), created with count 0 if absent; UINT32_MAX on allocation failure. */
static uint32_t pair_get(struct merge_state *m, int32_t a, int32_t b)
{
    uint64_t k = pair_key(a, b);
    uint32_t i = pair_hash(k) & m->pmask;
    for (uint32_t s; (s = m->pslot[i]); i = (i + 1) & m->pmask)
        if (m->pairs[s - 1].a == a && m->pairs[s - 1].b == b) return s - 1;
    if (m->n_pairs == m->cap_pairs) {
        uint32_t cap = m->cap_pairs ? m->cap_pairs * 2 : 1 << 16;
        struct pair *p = realloc(m->pairs, cap * sizeof *p);
        if (!p) return UINT32_MAX;
        m->pairs = p;
        m->cap_pairs = cap;
    }
    uint32_t idx = m->n_pairs++;
    m->pairs[idx] = (struct pair){a, b, 0, NULL, 0, 0};
    if ((uint64_t)m->n_pairs * 2 > (uint64_t)m->pmask + 1) {
        if (!pairs_rehash(m, m->pmask * 2 + 1)) return UINT32_MAX;
        return idx;
    }
    m->pslot[i] = idx + 1;
    return idx;
}

static bool pair_add_word(struct pair *p, uint32_t w)
{
    if (p->n_words && p->words[p->n_words - 1] == w) return true;
    if (p->n_words == p->cap_words) {
        uint32_t cap = p->cap_words ? p->cap_words * 2 : 4;
        uint32_t *ws = realloc(p->words, cap * sizeof *ws);
        if (!ws) return false;
        p->words = ws;
        p->cap_words = cap;
    }
    p->words[p->n_words++] = w;
    return true;
}

/* Max-heap order: larger count first; equal counts: smaller (a, b) first. */
static inline bool heap_before(const struct heap_ent *x, const struct heap_ent *y)
{
    if (x->count != y->count) return x->count > y->count;
    if (x->a != y->a) return x->a < y->a;
    return x->b < y->b;
}

static bool heap_push(struct merge_state *m, struct heap_ent e)
{
    if (m->n_heap == m->cap_heap) {
        size_t cap = m->cap_heap ? m->cap_heap * 2 : 1 << 16;
        struct heap_ent *h = realloc(m->heap, cap * sizeof *h);
        if (!h) return false;
        m->heap = h;
        m->cap_heap = cap;
    }
    size_t i = m->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_before(&e, &m->heap[p])) break;
        m->heap[i] = m->heap[p];
        i = p;
    }
    m->heap[i] = e;
    return true;
}

static struct heap_ent heap_pop(struct merge_state *m)
{
    struct heap_ent top = m->heap[0], last = m->heap[--m->n_heap];
    size_t i = 0, n = m->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(&m->heap[c + 1], &m->heap[c])) c++;
        if (!heap_before(&m->heap[c], &last)) break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (n) m->heap[i] = last;
    return top;
}

/* Id of the token with these bytes, adding it if new; -1 on allocation failure. */
static int32_t token_intern(struct merge_state *m, const char *bytes, uint32_t n)
{
    uint64_t h = hash64(bytes, n);
    uint32_t i = (uint32_t)h & m->tmask;
    for (uint32_t s; (s = m->tslot[i]); i = (i + 1) & m->tmask)
        if (m->tlen[s - 1] == n && !memcmp(m->tarena + m->toff[s - 1], bytes, n)) return (int32_t)(s - 1);
    if (m->n_tokens == m->cap_tokens) return -1; /* sized for every merge up front */
    if (m->tarena_n + n > m->tarena_cap) {
        size_t cap = m->tarena_cap * 2 + n;
        char *a = realloc(m->tarena, cap);
        if (!a) return -1;
        m->tarena = a;
        m->tarena_cap = cap;
    }
    int32_t id = m->n_tokens++;
    memcpy(m->tarena + m->tarena_n, bytes, n);
    m->toff[id] = (uint32_t)m->tarena_n;
    m->tlen[id] = n;
    m->tarena_n += n;
    m->tslot[i] = (uint32_t)id + 1;
    return id;
}

static void merge_state_free(struct merge_state *m)
{
    for (uint32_t p = 0; p < m->n_pairs; p++) free(m->pairs[p].words);
    free(m->pairs);
    free(m->pslot);
    free(m->heap);
    free(m->sym);
    free(m->soff);
    free(m->slen);
    free(m->tarena);
    free(m->toff);
    free(m->tlen);
    free(m->tslot);
    free(m->ma);
    free(m->mb);
}

/* Add (sign +1) or remove (-1) the pairs of word w; with track, record w in the lists of pairs
 * that contain id z and push them (their counts are final after the whole merge). */
static bool word_pairs(struct merge_state *m, uint32_t w, int64_t c, int32_t z, uint32_t *touched,
                       uint32_t *n_touched, uint32_t cap_touched)
{
    const int32_t *s = m->sym + m->soff[w];
    for (uint32_t i = 0; i + 1 < m->slen[w]; i++) {
        uint32_t p = pair_get(m, s[i], s[i + 1]);
        if (p == UINT32_MAX) return false;
        m->pairs[p].count += c;
        if (z >= 0 && (s[i] == z || s[i + 1] == z)) {
            if (!pair_add_word(&m->pairs[p], w)) return false;
            if (*n_touched < cap_touched) touched[(*n_touched)++] = p;
        }
    }
    return true;
}

/* Learn up to max_merges merges over the counted words. */
static tern_status learn(struct bpe_trainer *t, struct merge_state *m, int max_merges)
{
    /* tokens: 256 bytes + one per merge at most */
    m->cap_tokens = 256 + max_merges;
    m->tarena_cap = 256 + (size_t)max_merges * 8;
    m->tmask = 1;
    while (m->tmask + 1 < (uint32_t)m->cap_tokens * 2) m->tmask = m->tmask * 2 + 1;
    m->tarena = malloc(m->tarena_cap);
    m->toff = malloc((size_t)m->cap_tokens * sizeof *m->toff);
    m->tlen = malloc((size_t)m->cap_tokens * sizeof *m->tlen);
    m->tslot = calloc((size_t)m->tmask + 1, sizeof *m->tslot);
    m->ma = malloc(((size_t)max_merges + 1) * sizeof *m->ma);
    m->mb = malloc(((size_t)max_merges + 1) * sizeof *m->mb);
    size_t n_sym = t->arena_n;
    m->sym = malloc((n_sym ? n_sym : 1) * sizeof *m->sym);
    m->soff = malloc(((size_t)t->n_words + 1) * sizeof *m->soff);
    m->slen = malloc(((size_t)t->n_words + 1) * sizeof *m->slen);
    m->pmask = (1u << 16) - 1;
    m->pslot = calloc((size_t)m->pmask + 1, sizeof *m->pslot);
    if (!m->tarena || !m->toff || !m->tlen || !m->tslot || !m->ma || !m->mb || !m->sym || !m->soff ||
        !m->slen || !m->pslot)
        return tern_fail(TERN_ERR_NOMEM, "tokenizer train: merge tables");
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        token_intern(m, &c, 1);
    }
    for (uint32_t w = 0; w < t->n_words; w++) {
        m->soff[w] = t->woff[w];
        m->slen[w] = t->wlen[w];
        for (uint32_t i = 0; i < t->wlen[w]; i++)
            m->sym[t->woff[w] + i] = (unsigned char)t->warena[t->woff[w] + i];
    }
    for (uint32_t w = 0; w < t->n_words; w++) {
        const int32_t *s = m->sym + m->soff[w];
        for (uint32_t i = 0; i + 1 < m->slen[w]; i++) {
            uint32_t p = pair_get(m, s[i], s[i + 1]);
            if (p == UINT32_MAX || !pair_add_word(&m->pairs[p], w))
                return tern_fail(TERN_ERR_NOMEM, "tokenizer train: pair table");
            m->pairs[p].count += (int64_t)t->wcount[w];
        }
    }
    for (uint32_t p = 0; p < m->n_pairs; p++)
        if (!heap_push(m, (struct heap_ent){m->pairs[p].count, m->pairs[p].a, m->pairs[p].b}))
            return tern_fail(TERN_ERR_NOMEM, "tokenizer train: heap");

    uint32_t cap_touched = 1 << 16, n_touched;
    uint32_t *touched = malloc(cap_touched * sizeof *touched);
    char *buf = malloc(2 * 4096 + 2);
    if (!touched || !buf) {
        free(touched);
        free(buf);
        return tern_fail(TERN_ERR_NOMEM, "tokenizer train: scratch");
    }
    tern_status st = TERN_OK;
    while (m->n_merges < max_merges && m->n_heap) {
        struct heap_ent e = heap_pop(m);
        uint32_t pi = pair_get(m, e.a, e.b);
        if (pi == UINT32_MAX) {
            st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: pair table");
            break;
        }
        struct pair *pr = &m->pairs[pi];
        if (pr->count != e.count) { /* stale: the pair lost occurrences since this was pushed */
            if (pr->count > 0 && !heap_push(m, (struct heap_ent){pr->count, e.a, e.b})) {
                st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: heap");
                break;
            }
            continue;
        }
        if (e.count < t->p.min_pair_count) break;
        uint32_t la = m->tlen[e.a], lb = m->tlen[e.b];
        if (la + lb > 2 * 4096) { /* absurdly long tokens are not worth a vocabulary slot */
            pr->count = 0;
            continue;
        }
        memcpy(buf, m->tarena + m->toff[e.a], la);
        memcpy(buf + la, m->tarena + m->toff[e.b], lb);
        int32_t z = token_intern(m, buf, la + lb);
        if (z < 0) {
            st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: token table");
            break;
        }
        m->ma[m->n_merges] = e.a;
        m->mb[m->n_merges] = e.b;
        m->n_merges++;
        /* the pair's word list is taken over: word_pairs may grow the pair table (realloc) */
        uint32_t *ws = pr->words, nws = pr->n_words;
        pr->words = NULL;
        pr->n_words = pr->cap_words = 0;
        n_touched = 0;
        for (uint32_t k = 0; k < nws && !st; k++) {
            uint32_t w = ws[k];
            int32_t *s = m->sym + m->soff[w];
            uint32_t n = m->slen[w];
            bool has = false;
            for (uint32_t i = 0; i + 1 < n && !has; i++) has = s[i] == e.a && s[i + 1] == e.b;
            if (!has) continue; /* stale entry */
            int64_t c = (int64_t)t->wcount[w];
            if (!word_pairs(m, w, -c, -1, NULL, &n_touched, 0)) st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: pairs");
            uint32_t j = 0;
            for (uint32_t i = 0; i < n;) {
                if (i + 1 < n && s[i] == e.a && s[i + 1] == e.b) {
                    s[j++] = z;
                    i += 2;
                } else {
                    s[j++] = s[i++];
                }
            }
            m->slen[w] = j;
            if (!st && !word_pairs(m, w, c, z, touched, &n_touched, cap_touched))
                st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: pairs");
            if (n_touched == cap_touched) { /* flush: push what we have, keep going */
                for (uint32_t q = 0; q < n_touched && !st; q++)
                    if (!heap_push(m, (struct heap_ent){m->pairs[touched[q]].count, m->pairs[touched[q]].a, m->pairs[touched[q]].b}))
                        st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: heap");
                n_touched = 0;
            }
        }
        free(ws);
        /* new pairs: pushed once each with their final count (duplicates in touched are harmless:
         * the second entry is stale once the first is merged) */
        for (uint32_t q = 0; q < n_touched && !st; q++) {
            struct pair *np = &m->pairs[touched[q]];
            if (np->count > 0 && !heap_push(m, (struct heap_ent){np->count, np->a, np->b}))
                st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: heap");
        }
        TERN_ASSERT(st || m->pairs[pi].count == 0 || e.a == e.b);
    }
    free(touched);
    free(buf);
    return st;
}

/* ------------------------------------------------------------------ output */

/* GPT-2 byte-level text of raw bytes. */
static bool bytelevel(const char *s, uint32_t n, char **out)
{
    /* GPT-2's byte code points are below 0x800 (2 bytes each); room for the encoder's 4 keeps
     * that a fact the compiler need not take on trust */
    char *o = malloc((size_t)n * 2 + 3);
    if (!o) return false;
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) k += (size_t)util_utf8_encode(tok_byte_to_cpt((uint8_t)s[i]), o + k);
    o[k] = '\0';
    *out = o;
    return true;
}

static tern_status write_vocab(struct bpe_trainer *t, struct merge_state *m, const char *path,
                               struct tern_bpe_train_report *rep)
{
    int V = t->p.vocab_size, ns = t->n_specials;
    /* ids: bytes, specials, merge results (in merge order, first appearance), padding */
    int32_t *id_of = malloc((size_t)m->n_tokens * sizeof *id_of); /* merge-state token -> vocab id */
    char **texts = calloc((size_t)V, sizeof *texts);
    int32_t *types = calloc((size_t)V, sizeof *types);
    char **merges = calloc((size_t)m->n_merges + 1, sizeof *merges);
    tern_status st = TERN_OK;
    if (!id_of || !texts || !types || !merges) {
        st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: vocabulary of %d tokens", V);
        goto done;
    }
    int next = 0;
    for (int b = 0; b < 256; b++) {
        id_of[b] = next;
        types[next] = 1;
        if (!bytelevel(m->tarena + m->toff[b], 1, &texts[next])) goto oom;
        next++;
    }
    for (int i = 0; i < ns; i++) {
        types[next] = i < N_CONTROL ? 3 : 4;
        if (!(texts[next] = strdup(t->specials[i]))) goto oom;
        next++;
    }
    for (int32_t k = 256; k < m->n_tokens; k++) { /* merge results, in the order they were made */
        id_of[k] = next;
        types[next] = 1;
        if (!bytelevel(m->tarena + m->toff[k], m->tlen[k], &texts[next])) goto oom;
        next++;
    }
    int n_pad = V - next;
    for (int i = 0; next < V; i++, next++) {
        char s[32];
        snprintf(s, sizeof s, "<|unused_%d|>", i);
        types[next] = 5;
        if (!(texts[next] = strdup(s))) goto oom;
    }
    for (int i = 0; i < m->n_merges; i++) {
        const char *a = texts[id_of[m->ma[i]]], *b = texts[id_of[m->mb[i]]];
        size_t la = strlen(a), lb = strlen(b);
        if (!(merges[i] = malloc(la + lb + 2))) goto oom;
        memcpy(merges[i], a, la);
        merges[i][la] = ' ';
        memcpy(merges[i] + la + 1, b, lb + 1);
    }
    struct tern_gguf_writer *w;
    if ((st = tern_gguf_writer_create(0, &w))) goto done;
    char name[64];
    snprintf(name, sizeof name, "tern BPE %d", V);
    if ((st = tern_gguf_writer_set_str(w, "general.architecture", "llama")) ||
        (st = tern_gguf_writer_set_str(w, "general.name", name)) ||
        (st = tern_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2")) ||
        (st = tern_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2")) ||
        (st = tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)texts, (uint64_t)V)) ||
        (st = tern_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TERN_GGUF_INT32, types, (uint64_t)V)) ||
        (st = tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)m->n_merges)) ||
        (st = tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 256)) ||     /* <|endoftext|> */
        (st = tern_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 258)) ||     /* <|im_end|> */
        (st = tern_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 256)) ||
        (st = tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false)) ||
        (st = tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false)) ||
        (st = tern_gguf_writer_set_str(w, "tokenizer.chat_template", chat_fallback_template)) ||
        (st = tern_gguf_writer_write(w, path))) {
        tern_gguf_writer_free(w);
        goto done;
    }
    tern_gguf_writer_free(w);
    if (rep) {
        rep->text_bytes = t->text_bytes;
        rep->n_words = t->total_words;
        rep->n_unique_words = t->n_words;
        rep->n_merges = m->n_merges;
        rep->n_special = ns;
        rep->n_padding = n_pad;
        rep->n_vocab = V;
    }
    goto done;
oom:
    st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: vocabulary texts");
done:
    if (texts)
        for (int i = 0; i < V; i++) free(texts[i]);
    if (merges)
        for (int i = 0; i < m->n_merges; i++) free(merges[i]);
    free(texts);
    free(types);
    free(merges);
    free(id_of);
    return st;
}

tern_status bpe_trainer_finish(struct bpe_trainer *t, const char *path, struct tern_bpe_train_report *report)
{
    struct merge_state m = {0};
    int max_merges = t->p.vocab_size - 256 - t->n_specials;
    tern_status st = learn(t, &m, max_merges);
    if (!st) st = write_vocab(t, &m, path, report);
    merge_state_free(&m);
    return st;
}

/* ------------------------------------------------------------------ files */

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static tern_status add_file(struct bpe_trainer *t, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "tokenizer train: cannot open %s: %s", path, strerror(errno));
    tern_status st = TERN_OK;
    bool jsonl = ends_with(path, ".jsonl");
    size_t cap = TEXT_CHUNK * 2, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return tern_fail(TERN_ERR_NOMEM, "tokenizer train: read buffer");
    }
    if (jsonl) { /* whole lines: read it all (corpus files are a few hundred MB at most) */
        for (;;) {
            if (n == cap) {
                char *b = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
                if (!b) {
                    st = tern_fail(TERN_ERR_NOMEM, "tokenizer train: reading %s", path);
                    break;
                }
                buf = b;
                cap *= 2;
            }
            size_t r = fread(buf + n, 1, cap - n, f);
            n += r;
            if (r == 0) break;
        }
        if (!st && ferror(f)) st = tern_fail(TERN_ERR_IO, "tokenizer train: reading %s: %s", path, strerror(errno));
        if (!st) st = bpe_trainer_add_jsonl(t, path, buf, n);
    } else { /* plain text in ~1 MiB documents cut after a newline that a non-blank follows */
        for (;;) {
            size_t r = fread(buf + n, 1, cap - n, f);
            n += r;
            bool eof = r == 0 || n < cap;
            if (ferror(f)) {
                st = tern_fail(TERN_ERR_IO, "tokenizer train: reading %s: %s", path, strerror(errno));
                break;
            }
            size_t cut = n;
            if (!eof && n > TEXT_CHUNK) {
                cut = 0;
                for (size_t i = TEXT_CHUNK; i + 1 < n && !cut; i++)
                    if (buf[i] == '\n' && buf[i + 1] != '\n' && buf[i + 1] != '\r' && buf[i + 1] != ' ' && buf[i + 1] != '\t')
                        cut = i + 1;
                if (!cut) /* no such newline: cut at a UTF-8 boundary (words may split: rare) */
                    for (cut = TEXT_CHUNK; cut < n && ((unsigned char)buf[cut] & 0xC0) == 0x80; cut++) {}
            }
            if ((st = bpe_trainer_add_text(t, buf, cut))) break;
            memmove(buf, buf + cut, n - cut);
            n -= cut;
            if (eof && n == 0) break;
        }
    }
    free(buf);
    fclose(f);
    return st;
}

tern_status tern_tokenizer_train(const char *const *files, int n_files, const struct tern_bpe_train_params *p,
                                 const char *out_path, struct tern_bpe_train_report *report)
{
    if (!files || n_files <= 0 || !out_path)
        return tern_fail(TERN_ERR_ARG, "tokenizer train: no input files or no output path");
    struct bpe_trainer *t;
    tern_status st = bpe_trainer_create(p, &t);
    if (st) return st;
    for (int i = 0; i < n_files && !st; i++) {
        if (!files[i]) st = tern_fail(TERN_ERR_ARG, "tokenizer train: input file %d is NULL", i);
        else st = add_file(t, files[i]);
    }
    if (!st) st = bpe_trainer_finish(t, out_path, report);
    bpe_trainer_free(t);
    return st;
}
