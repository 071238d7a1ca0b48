/* gram_vocab.c — a tokenizer's vocabulary as the grammar matcher needs it, built once per
 * tokenizer and shared by every grammar compiled against it.
 *
 * Every token's raw bytes (tern_token_to_piece without TERN_PIECE_SPECIAL: what the token adds
 * to the output text), its kind (text, end of generation, never: control tokens and tokens
 * with no bytes), and tries of the text tokens in depth-first order: node i's subtree is
 * i .. end-1, so a walk that finds a prefix impossible skips all tokens under it in one jump.
 * Tokens with identical bytes share a trie node and are chained through `same`. Nodes with many
 * children (and the root) get a child index: their children's bytes as a bitset and their
 * positions in byte order, so a walk can go straight to the children it can use. Two tries:
 * all text tokens, and those outside the text slice (gram_internal.h), with the slice itself
 * kept as a bitset and as a list ordered by character count.
 *
 * Control tokens (not end of generation) keep their text aside (ctl_text) so a tool grammar can
 * find its format's markup, and get the literal bytes of gram_internal.h ("control tokens as
 * grammar literals") as their bytes; text tokens holding the literal's lead byte 0xFF (byte
 * tokens) become GRAM_TOK_NEVER, so no text can spell a literal. */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/check.h"
#include "util/error.h"

#define GRAM_MAX_TOKEN_BYTES 65535

struct sort_ent {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
};

static int cmp_ent(const void *a, const void *b)
{
    const struct sort_ent *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, m);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void tern_grammar_vocab_free(struct tern_grammar_vocab *v)
{
    if (!v) return;
    free(v->off);
    free(v->bytes);
    free(v->kind);
    free(v->same);
    struct gram_trie *ts[2] = {&v->all, &v->rest};
    for (int i = 0; i < 2; i++) {
        free(ts[i]->node);
        free(ts[i]->cidx);
        free(ts[i]->cpos);
        free(ts[i]->dfs_tok);
    }
    free(v->slice_chars);
    free(v->slice_bits);
    free(v->slice_sorted);
    free(v->slice_upto);
    free(v->short_bits);
    free(v->text_bits);
    free(v->eog);
    free(v->ctl);
    free(v->ctl_off);
    free(v->ctl_text);
    free(v);
}

void gram_ctl_encode(int32_t id, uint8_t out[GRAM_CTL_LEN])
{
    uint32_t u = (uint32_t)id;
    out[0] = GRAM_CTL_LEAD;
    for (int i = 0; i < 4; i++) out[1 + i] = (uint8_t)(0x80 | ((u >> (6 * (3 - i))) & 63));
}

int32_t gram_ctl_decode(const uint8_t *b, size_t n)
{
    if (n < GRAM_CTL_LEN || b[0] != GRAM_CTL_LEAD) return -1;
    uint32_t u = 0;
    for (int i = 0; i < 4; i++) {
        if ((b[1 + i] & 0xC0) != 0x80) return -1;
        u = u << 6 | (b[1 + i] & 63);
    }
    return (int32_t)u;
}

int32_t gram_vocab_control(const struct tern_grammar_vocab *v, const char *text, size_t len)
{
    if (!v || !text) return -1;
    for (uint32_t k = 0; k < v->n_ctl; k++) {
        const char *t = v->ctl_text + v->ctl_off[k];
        if (!strncmp(t, text, len) && t[len] == 0) return v->ctl[k];
    }
    return -1;
}

const char *gram_vocab_control_text(const struct tern_grammar_vocab *v, int32_t id)
{
    if (!v || id < 0 || id >= v->n_vocab || v->kind[id] != GRAM_TOK_CONTROL) return NULL;
    uint32_t lo = 0, hi = v->n_ctl;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (v->ctl[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < v->n_ctl && v->ctl[lo] == id ? v->ctl_text + v->ctl_off[lo] : NULL;
}

/* Characters of a slice token (whole UTF-8 characters, none of them a control, '"', '\\' or
 * DEL), or 0. */
static uint32_t slice_chars(const uint8_t *b, uint32_t n)
{
    uint32_t chars = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t cp;
        int k = gram_utf8_decode(b + i, n - i, &cp);
        if (!k || cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7F) return 0;
        i += (uint32_t)k;
        chars++;
    }
    return chars <= GRAM_SLICE_MAX_CHARS ? chars : 0;
}

/* The child indices of the nodes with at least GRAM_CIDX_MIN children and of the root
 * (parent[i]: node i's parent, GRAM_NONE at depth 1). */
static bool build_cidx(struct gram_trie *t, const uint32_t *parent)
{
    const uint32_t nt = t->n;
    uint32_t *nch = calloc((size_t)nt + 1, sizeof *nch); /* [nt]: the root's count */
    if (!nch) return false;
    for (uint32_t i = 0; i < nt; i++) nch[parent[i] == GRAM_NONE ? nt : parent[i]]++;
    uint32_t n_idx = 0, n_pos = 0;
    for (uint32_t i = 0; i <= nt; i++)
        if (i == nt || nch[i] >= GRAM_CIDX_MIN) { n_idx++; n_pos += nch[i]; }
    t->cidx = calloc(n_idx ? n_idx : 1, sizeof *t->cidx);
    t->cpos = malloc((n_pos ? n_pos : 1) * sizeof *t->cpos);
    uint32_t *slot = malloc(((size_t)nt + 1) * sizeof *slot); /* node -> its index, or GRAM_NONE */
    if (!t->cidx || !t->cpos || !slot) { free(nch); free(slot); return false; }
    uint32_t k = 0, pos = 0;
    for (uint32_t i = 0; i <= nt; i++) {
        slot[i] = GRAM_NONE;
        if (i < nt && nch[i] < GRAM_CIDX_MIN) continue;
        if (i == nt) continue; /* the root's goes last */
        t->cidx[k] = (struct gram_cidx){{0, 0, 0, 0}, i, pos};
        t->node[i].flags |= GRAM_TRIE_WIDE;
        TERN_ASSERT(k < (1u << 24), "a trie node's child index fits its 24 bits");
        t->node[i].cslot = k;
        slot[i] = k++;
        pos += nch[i];
    }
    t->cidx[k] = (struct gram_cidx){{0, 0, 0, 0}, UINT32_MAX, pos};
    slot[nt] = k;
    t->n_cidx = k; /* the root's stays out of the searched part */
    t->root_cidx = &t->cidx[k];
    t->n_cpos = n_pos;
    memset(nch, 0, ((size_t)nt + 1) * sizeof *nch); /* now: children placed so far */
    for (uint32_t i = 0; i < nt; i++) { /* depth-first order: each node's children by byte */
        uint32_t p = parent[i] == GRAM_NONE ? nt : parent[i];
        if (slot[p] == GRAM_NONE) continue;
        struct gram_cidx *x = &t->cidx[slot[p]];
        uint8_t b = t->node[i].byte;
        x->bits[b >> 6] |= 1ull << (b & 63);
        t->cpos[x->first + nch[p]++] = i;
    }
    free(nch);
    free(slot);
    return true;
}

/* Lay out the trie of ents[0..n) (sorted by bytes, duplicates adjacent). */
static bool build_trie(struct tern_grammar_vocab *v, const struct sort_ent *ents, uint32_t n,
                       struct gram_trie *t)
{
    size_t tcap = (size_t)n + 1024;
    t->node = malloc(tcap * sizeof *t->node);
    uint32_t *path = malloc(((size_t)v->max_len + 2) * sizeof *path);
    if (!t->node || !path) { free(path); return false; }
    uint32_t depth = 0, nt = 0;
    int32_t last_id = -1;
    for (uint32_t i = 0; i < n; i++) {
        const struct sort_ent *e = &ents[i];
        uint32_t l = 0;
        if (i) {
            const struct sort_ent *p = &ents[i - 1];
            uint32_t m = p->len < e->len ? p->len : e->len;
            while (l < m && p->p[l] == e->p[l]) l++;
        }
        TERN_ASSERT(e->len >= 1 && e->len <= v->max_len && l <= e->len && depth <= v->max_len,
                    "the path holds one node per byte of the longest token");
        if (i && l == e->len && l == ents[i - 1].len) { /* same bytes as the previous token */
            v->same[last_id] = e->id;
            last_id = e->id;
            t->node[path[depth]].flags |= GRAM_TRIE_DUP;
            continue;
        }
        while (depth > l) t->node[path[depth--]].end = nt;
        for (uint32_t d = l; d < e->len; d++) {
            if (nt == tcap) {
                tcap *= 2;
                struct gram_trie_node *q = realloc(t->node, tcap * sizeof *q);
                if (!q) { free(path); return false; }
                t->node = q;
            }
            t->node[nt] = (struct gram_trie_node){.end = 0, .token = -1, .byte = e->p[d], .depth = (uint16_t)(d + 1)};
            path[++depth] = nt++;
        }
        t->node[path[depth]].token = e->id;
        last_id = e->id;
    }
    while (depth > 0) t->node[path[depth--]].end = nt;
    free(path);
    t->n = nt;
    /* a subtree ends past its root, and no later than its parent's: the walks skip subtrees by end */
    for (uint32_t i = 0; i < nt; i++) TERN_ASSERT(t->node[i].end > i && t->node[i].end <= nt);
    /* the node past the last subtree (its tok_first closes the last range) */
    if (nt == tcap) {
        struct gram_trie_node *q = realloc(t->node, (tcap + 1) * sizeof *q);
        if (!q) return false;
        t->node = q;
    }
    t->node[nt] = (struct gram_trie_node){.end = nt + 1, .token = -1};
    /* subtree summaries, children before parents (reverse depth-first order) */
    uint32_t *parent = malloc((nt ? nt : 1) * sizeof *parent);
    uint32_t *stack = malloc(((size_t)v->max_len + 2) * sizeof *stack);
    uint16_t *below_depth = malloc((nt ? nt : 1) * sizeof *below_depth);
    if (!parent || !stack || !below_depth) { free(parent); free(stack); free(below_depth); return false; }
    uint32_t sp = 0;
    for (uint32_t i = 0; i < nt; i++) {
        while (sp && t->node[stack[sp - 1]].depth >= t->node[i].depth) sp--;
        TERN_ASSERT(sp <= v->max_len && (uint32_t)sp + 1 == t->node[i].depth, "a child is one byte below its parent");
        parent[i] = sp ? stack[sp - 1] : GRAM_NONE;
        stack[sp++] = i;
        below_depth[i] = t->node[i].depth;
    }
    for (uint32_t i = nt; i-- > 0;) {
        struct gram_trie_node *c = &t->node[i];
        TERN_ASSERT(below_depth[i] >= c->depth, "a subtree reaches at least its own root's depth");
        uint32_t more = below_depth[i] - c->depth;
        c->below_more = more < GRAM_TRIE_MORE_SAT ? more : GRAM_TRIE_MORE_SAT;
        uint32_t p = parent[i];
        if (p == GRAM_NONE) continue;
        struct gram_trie_node *pn = &t->node[p];
        uint8_t b = c->byte;
        if (b >= 0x20 && b < 0x80) pn->below[(b - 0x20) >> 5] |= 1u << ((b - 0x20) & 31);
        else pn->flags |= GRAM_TRIE_OTHER;
        for (int w = 0; w < 3; w++) pn->below[w] |= c->below[w];
        pn->flags |= c->flags & GRAM_TRIE_OTHER;
        if (below_depth[i] > below_depth[p]) below_depth[p] = below_depth[i];
    }
    free(below_depth);
    free(stack);
    bool ok = build_cidx(t, parent);
    free(parent);
    /* tokens in depth-first order */
    t->dfs_tok = malloc((n ? n : 1) * sizeof *t->dfs_tok);
    if (!ok || !t->dfs_tok) return false;
    uint32_t k = 0;
    for (uint32_t i = 0; i < nt; i++) {
        t->node[i].tok_first = k;
        for (int32_t id = t->node[i].token; id >= 0; id = v->same[id]) {
            TERN_ASSERT(k < n, "each token is in one node");
            t->dfs_tok[k++] = id;
        }
    }
    TERN_ASSERT(k == n, "every token is in the trie, once");
    t->node[nt].tok_first = k;
    return true;
}

tern_status tern_grammar_vocab_create(const struct tern_tokenizer *tok, struct tern_grammar_vocab **out)
{
    if (!tok || !out) return tern_fail(TERN_ERR_ARG, "grammar vocab: tokenizer and out are required");
    int32_t n = tern_tokenizer_n_vocab(tok);
    if (n <= 0) return tern_fail(TERN_ERR_ARG, "grammar vocab: empty vocabulary");
    struct tern_grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return tern_fail(TERN_ERR_NOMEM, "grammar vocab: out of memory");
    v->n_vocab = n;
    v->n_words = ((uint32_t)n + 31) / 32;
    v->off = malloc(((size_t)n + 1) * sizeof *v->off);
    v->kind = malloc((size_t)n);
    v->same = malloc((size_t)n * sizeof *v->same);
    v->eog = malloc((size_t)n * sizeof *v->eog);
    v->slice_chars = calloc((size_t)n, 1);
    v->slice_bits = calloc(v->n_words, sizeof *v->slice_bits);
    v->slice_sorted = malloc((size_t)n * sizeof *v->slice_sorted);
    size_t cap = 1 << 20, used = 0, ctext_cap = 0, ctext_used = 0;
    uint32_t ctl_cap = 0;
    v->bytes = malloc(cap);
    struct sort_ent *ents = NULL;
    char *buf = malloc(GRAM_MAX_TOKEN_BYTES);
    tern_status st = TERN_OK;
    if (!v->off || !v->kind || !v->same || !v->eog || !v->bytes || !buf || !v->slice_chars ||
        !v->slice_bits || !v->slice_sorted)
        goto oom;
    for (int32_t id = 0; id < n; id++) {
        v->off[id] = (uint32_t)used;
        v->same[id] = -1;
        if (tern_token_is_eog(tok, id)) {
            v->kind[id] = GRAM_TOK_EOG;
            v->eog[v->n_eog++] = id;
            continue;
        }
        size_t len = 0;
        if (tern_token_is_control(tok, id)) {
            v->kind[id] = GRAM_TOK_NEVER;
            if (tern_token_to_piece(tok, id, TERN_PIECE_SPECIAL, buf, GRAM_MAX_TOKEN_BYTES, &len) != TERN_OK ||
                len == 0 || memchr(buf, 0, len))
                continue;
            /* its text aside, its literal as its bytes */
            if (v->n_ctl == ctl_cap) {
                ctl_cap = ctl_cap ? ctl_cap * 2 : 64;
                int32_t *a = realloc(v->ctl, ctl_cap * sizeof *a);
                uint32_t *o = a ? realloc(v->ctl_off, ctl_cap * sizeof *o) : NULL;
                if (a) v->ctl = a;
                if (o) v->ctl_off = o;
                if (!a || !o) goto oom;
            }
            if (ctext_used + len + 1 > ctext_cap) {
                while (ctext_used + len + 1 > ctext_cap) ctext_cap = ctext_cap ? ctext_cap * 2 : 4096;
                char *t = realloc(v->ctl_text, ctext_cap);
                if (!t) goto oom;
                v->ctl_text = t;
            }
            memcpy(v->ctl_text + ctext_used, buf, len);
            v->ctl_text[ctext_used + len] = 0;
            v->ctl_off[v->n_ctl] = (uint32_t)ctext_used;
            v->ctl[v->n_ctl++] = id;
            ctext_used += len + 1;
            if (used + GRAM_CTL_LEN > cap) {
                while (used + GRAM_CTL_LEN > cap) cap *= 2;
                uint8_t *nb = realloc(v->bytes, cap);
                if (!nb) goto oom;
                v->bytes = nb;
            }
            gram_ctl_encode(id, v->bytes + used);
            used += GRAM_CTL_LEN;
            v->kind[id] = GRAM_TOK_CONTROL;
            continue;
        }
        if (tern_token_to_piece(tok, id, 0, buf, GRAM_MAX_TOKEN_BYTES, &len) != TERN_OK || len == 0 ||
            memchr(buf, GRAM_CTL_LEAD, len)) {
            v->kind[id] = GRAM_TOK_NEVER; /* 0xFF: never valid UTF-8, and a literal's lead */
            continue;
        }
        v->kind[id] = GRAM_TOK_TEXT;
        if (used + len > cap) {
            while (used + len > cap) cap *= 2;
            uint8_t *nb = realloc(v->bytes, cap);
            if (!nb) goto oom;
            v->bytes = nb;
        }
        memcpy(v->bytes + used, buf, len);
        used += len;
        if (len > v->max_len) v->max_len = (uint32_t)len;
        for (size_t i = 0; i < len; i++) gram_bset_add(&v->avail, (uint8_t)buf[i]);
        uint32_t c = slice_chars((const uint8_t *)buf, (uint32_t)len);
        v->slice_chars[id] = (uint8_t)c;
        if (c) {
            v->slice_bits[id >> 5] |= 1u << (id & 31);
            v->slice_off[c + 1]++;
            v->n_slice++;
            if (c > v->slice_max) v->slice_max = c;
        }
    }
    v->off[n] = (uint32_t)used;
    if (v->n_ctl) { /* the literals' bytes (digits 0x80..0xBF) */
        gram_bset_add(&v->avail, GRAM_CTL_LEAD);
        gram_bset_add_range(&v->avail, 0x80, 0xBF);
    }
    free(buf);
    buf = NULL;
    /* slice ordered by character count (counting sort) */
    for (uint32_t c = 1; c <= GRAM_SLICE_MAX_CHARS + 1; c++) v->slice_off[c] += v->slice_off[c - 1];
    {
        uint32_t fill[GRAM_SLICE_MAX_CHARS + 2];
        memcpy(fill, v->slice_off, sizeof fill);
        for (int32_t id = 0; id < n; id++)
            if (v->slice_chars[id]) v->slice_sorted[fill[v->slice_chars[id]]++] = id;
    }

    /* near the end of a counted string the allowed slice is "at most c characters": small c
     * would otherwise cost setting tens of thousands of bits per mask */
    v->slice_upto = calloc((size_t)GRAM_SLICE_SMALL * v->n_words, sizeof *v->slice_upto);
    if (!v->slice_upto) goto oom;
    for (uint32_t c = 0; c < GRAM_SLICE_SMALL; c++) {
        uint32_t *bits = v->slice_upto + (size_t)c * v->n_words;
        for (uint32_t k = 0; k < v->slice_off[c + 1]; k++) bits[v->slice_sorted[k] >> 5] |= 1u << (v->slice_sorted[k] & 31);
    }

    /* tokens of at most h bytes, per horizon: the part of a classification a position
     * equivalent up to h shares (gram_mask.c) */
    v->short_bits = calloc((size_t)GRAM_NH * v->n_words, sizeof *v->short_bits);
    if (!v->short_bits) goto oom;
    for (int32_t id = 0; id < n; id++) {
        if (v->kind[id] != GRAM_TOK_TEXT) continue;
        uint32_t len = v->off[id + 1] - v->off[id];
        for (int k = 0; k < GRAM_NH; k++)
            if (len <= gram_horizon[k]) v->short_bits[(size_t)k * v->n_words + (id >> 5)] |= 1u << (id & 31);
    }

    /* sort the text tokens by bytes, then lay the tries out depth first */
    uint32_t n_text = 0;
    ents = malloc((size_t)n * sizeof *ents);
    if (!ents) goto oom;
    for (int32_t id = 0; id < n; id++)
        if (v->kind[id] == GRAM_TOK_TEXT)
            ents[n_text++] = (struct sort_ent){v->bytes + v->off[id], v->off[id + 1] - v->off[id], id};
    qsort(ents, n_text, sizeof *ents, cmp_ent);
    if (!build_trie(v, ents, n_text, &v->all)) goto oom;
    v->text_bits = calloc(v->n_words, sizeof *v->text_bits);
    if (!v->text_bits) goto oom;
    for (uint32_t k = 0; k < gram_trie_n_tok(&v->all); k++)
        v->text_bits[v->all.dfs_tok[k] >> 5] |= 1u << (v->all.dfs_tok[k] & 31);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n_text; i++)
        if (!v->slice_chars[ents[i].id]) ents[m++] = ents[i];
    if (!build_trie(v, ents, m, &v->rest)) goto oom;
    free(ents);
    v->mem_bytes = sizeof *v + ((size_t)n + 1) * 4 + used + (size_t)n * (1 + 4 + 4 + 1 + 4) +
                   (size_t)v->n_words * 4 * (2 + GRAM_SLICE_SMALL + GRAM_NH) + ((size_t)v->all.n + v->rest.n) * (sizeof(struct gram_trie_node) + 16 + 1 + 2) +
                   ((size_t)v->all.n_cidx + v->rest.n_cidx + 2) * sizeof(struct gram_cidx) + ((size_t)v->all.n_cpos + v->rest.n_cpos) * 4 +
                   ((size_t)v->all.n + v->rest.n) * 8 +
                   (size_t)v->n_ctl * 8 + ctext_cap;
    *out = v;
    return TERN_OK;
oom:
    st = tern_fail(TERN_ERR_NOMEM, "grammar vocab: out of memory");
    free(buf);
    free(ents);
    tern_grammar_vocab_free(v);
    return st;
}
