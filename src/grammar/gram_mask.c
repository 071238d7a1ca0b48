/* gram_mask.c — which tokens a grammar position allows, classified once per position.
 *
 * A parse state is a set of stacks; a stack's top node n belongs to some rule R. Whether a
 * token can be consumed from n depends on the rest of the stack only if R can end before the
 * token's bytes run out: the remainder then continues in R's caller. So the vocabulary is
 * classified per node, with R's caller unknown ("virtual"):
 *   accepted  — some path consumes the whole token inside R (and the rules R calls), or R ends
 *               exactly at the token's end: allowed whatever the stack below holds;
 *   rejected  — every path dies, in every context R can be called from;
 *   uncertain — a path reaches R's end with bytes left that some caller could take: the matcher
 *               runs these against its real stack at decode time (gram_matcher.c).
 * "Every context" is made precise by the compiler's follow sets: when R ends in the virtual
 * bottom frame, the walk continues at every node that can follow R's end, up to GRAM_VLEVELS
 * levels of callers; a token that survives only there is uncertain, one that dies there too is
 * rejected. This keeps the uncertain lists short (inside a JSON string only tokens like `",`
 * `"}` that close the string in a way some caller accepts), which is what makes a mask cheap.
 *
 * The walk follows the vocabulary trie (gram_vocab.c) keeping one parse state per depth, and
 * skips a whole subtree as soon as no stack survives its prefix. Below a trie node with many
 * children it reads only the children of bytes the state takes (the trie's child index): a
 * position that allows a few bytes (a key, a literal, a number's digits) costs a few reads per
 * level instead of one per sibling, each a subtree away in the array. Results are published into
 * the grammar's cache with an atomic compare-and-swap (a racing thread's duplicate is freed).
 *
 * Text nodes: inside a string body nearly every token is allowed, and walking 150k tokens
 * costs about a millisecond. A node whose every "slice" character (gram_internal.h) leads, in
 * a deterministic chain, back to itself (capacity unbounded) or to a node of capacity c-1
 * (strings with maxLength), and from which nothing else is reached without a non-slice byte,
 * accepts exactly the slice tokens of at most c characters: those are added from the
 * vocabulary's precomputed slice at mask time, and the walk covers only the other tokens.
 *
 * Positions alike (end of file): a position equivalent to another shares its classification;
 * one that agrees with an already classified position (its rule's last few, and the last of its
 * shape) on every string of up to h bytes (the counts of `{0,61}` far from the bound) copies
 * that one's verdicts for tokens of at most h bytes and walks only the longer tokens (a text node
 * walks at once: its walk is cheaper than the comparison). Where a rule ends and its callers are too many to
 * follow, the walk keeps going GRAM_FOLLOW_BYTES bytes over the bytes some caller can take
 * (gram_engine.c), so a token that no caller could continue is rejected, not left uncertain. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/check.h"
#include "util/error.h"

/* text capacity memo values (besides 0 .. INT32_MAX - 1 characters) */
#define TCAP_UNKNOWN (-2)
#define TCAP_NONE (-1)
#define TCAP_INF INT32_MAX
#define KCAP_UNKNOWN (-1) /* loop class memo: not computed (else 0 .. GRAM_CLASS_INF) */
#define KEND_UNKNOWN 0 /* class chain end memo */
#define KEND_OPEN 1
#define KEND_CLOSED 2
/* slice step memo values (else the node every slice character leads to, + SSTEP_TO) */
#define SSTEP_UNKNOWN 0u
#define SSTEP_OTHER 1u /* not one plain step: a slice character goes elsewhere, or not text-like */
#define SSTEP_NONE 2u  /* takes no slice character */
#define SSTEP_TO 3u

static tern_status gram_ccls_create(struct tern_grammar *g);

tern_status gram_cache_create(struct tern_grammar *g)
{
    g->cache = calloc(1, sizeof *g->cache);
    if (!g->cache) return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    g->cache->slot = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *g->cache->slot);
    g->cache->tcap = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *g->cache->tcap);
    g->cache->sstep = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *g->cache->sstep);
    g->cache->kcls = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *g->cache->kcls);
    g->cache->kcap = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *g->cache->kcap);
    g->cache->kend = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *g->cache->kend);
    g->cache->recent = calloc((size_t)(g->n_rules ? g->n_rules : 1) * GRAM_RECENT, sizeof *g->cache->recent);
    g->cache->recent_n = calloc(g->n_rules ? g->n_rules : 1, sizeof *g->cache->recent_n);
    g->cache->folb = calloc(g->n_rules ? g->n_rules : 1, sizeof *g->cache->folb);
    if (!g->cache->slot || !g->cache->tcap || !g->cache->sstep || !g->cache->kcls || !g->cache->kcap || !g->cache->kend || !g->cache->recent ||
        !g->cache->recent_n || !g->cache->folb) {
        free(g->cache->folb);
        free(g->cache->slot);
        free(g->cache->tcap);
        free(g->cache->sstep);
        free(g->cache->kcls);
        free(g->cache->kcap);
        free(g->cache->kend);
        free(g->cache->recent);
        free(g->cache->recent_n);
        free(g->cache);
        g->cache = NULL;
        return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        atomic_init(&g->cache->slot[i], NULL);
        atomic_init(&g->cache->tcap[i], TCAP_UNKNOWN);
        atomic_init(&g->cache->sstep[i], SSTEP_UNKNOWN);
        atomic_init(&g->cache->kcap[i], KCAP_UNKNOWN);
        atomic_init(&g->cache->kend[i], KEND_UNKNOWN);
        atomic_init(&g->cache->kcls[i][0], 0);
        atomic_init(&g->cache->kcls[i][1], 0);
    }
    for (uint32_t r = 0; r < g->n_rules; r++) {
        atomic_init(&g->cache->recent_n[r], 0);
        atomic_init(&g->cache->folb[r], NULL);
        for (int k = 0; k < GRAM_RECENT; k++) atomic_init(&g->cache->recent[(size_t)r * GRAM_RECENT + k], 0);
    }
    for (int k = 0; k < GRAM_ALIKE_SLOTS; k++) atomic_init(&g->cache->alike[k], 0);
    atomic_init(&g->cache->n_shared, 0);
    atomic_init(&g->cache->n_derived, 0);
    atomic_init(&g->cache->bytes, 0);
    atomic_init(&g->cache->count, 0);
    if (gram_ccls_create(g)) {
        gram_cache_free(g);
        return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    }
    return TERN_OK;
}

void gram_cls_free(struct gram_cls *c)
{
    if (!c) return;
    free(c->acc_bits);
    free(c->acc_ids);
    free(c->unc);
    free(c);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

static void gram_ccls_free(struct tern_grammar *g);

void gram_cache_free(struct tern_grammar *g)
{
    if (!g->cache) return;
    gram_ccls_free(g);
    /* equivalent nodes share a classification: free each once */
    struct gram_cls **all = malloc(((size_t)g->n_nodes + 1) * sizeof *all);
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        struct gram_cls *c = atomic_load(&g->cache->slot[i]);
        if (!c) continue;
        if (all) all[n++] = c;
    }
    if (all) {
        qsort(all, n, sizeof *all, cmp_ptr);
        for (uint32_t i = 0; i < n; i++)
            if (!i || all[i] != all[i - 1]) gram_cls_free(all[i]);
        free(all);
    }
    free(g->cache->recent);
    free(g->cache->recent_n);
    for (uint32_t r = 0; r < g->n_rules; r++) free(atomic_load(&g->cache->folb[r]));
    free(g->cache->folb);
    free(g->cache->slot);
    free(g->cache->tcap);
    free(g->cache->sstep);
    free(g->cache->kcls);
    free(g->cache->kcap);
    free(g->cache->kend);
    free(g->cache);
    g->cache = NULL;
}

/* ---------------------------------------------------------------- text nodes */

/* The node reached from n on byte b (deterministic nodes), or GRAM_NONE. */
static uint32_t delta(const struct tern_grammar *g, uint32_t n, unsigned b)
{
    const struct gram_node *nd = &g->nodes[n];
    const struct gram_range *r = g->ranges + nd->r_off;
    for (uint32_t k = 0; k < nd->r_n; k++) {
        if (r[k].lo > b) break;
        if (b <= r[k].hi) return r[k].to;
    }
    return GRAM_NONE;
}

static bool det_plain(const struct tern_grammar *g, uint32_t n)
{
    return (g->nodes[n].flags & (GN_PLAIN | GN_NONDET)) == GN_PLAIN;
}

/* No token holds a byte of lo .. end-1 (the compiler drops such bytes from the automaton, so a
 * byte missing there says nothing about the text a position takes). */
static bool unused(const struct tern_grammar *g, unsigned lo, unsigned end)
{
    for (unsigned b = lo; b < end; b++)
        if (gram_bset_has(&g->vocab->avail, b)) return false;
    return true;
}

/* Every byte lo..hi from node a (deterministic, plain) that some token holds is taken, and
 * leads to target (more == 0) or on through `more` further continuation bytes 80..BF to
 * target? Range by range: a string under maxLength has a node per count, each asked this for
 * every UTF-8 lead. */
static bool conts_reach(const struct tern_grammar *g, uint32_t a, unsigned lo, unsigned hi, int more,
                        uint32_t target)
{
    if (a == GRAM_NONE || !det_plain(g, a)) return false;
    const struct gram_node *nd = &g->nodes[a];
    const struct gram_range *r = g->ranges + nd->r_off;
    unsigned next = lo; /* the first byte not yet seen covered */
    uint32_t last = GRAM_NONE;
    for (uint32_t k = 0; k < nd->r_n; k++) {
        if (r[k].hi < next) continue;
        if (!unused(g, next, r[k].lo)) return false; /* a byte not taken */
        if (more == 0) {
            if (r[k].to != target) return false;
        } else if (r[k].to != last) { /* neighbouring ranges usually share a node: check it once */
            if (!conts_reach(g, r[k].to, 0x80, 0xBF, more - 1, target)) return false;
            last = r[k].to;
        }
        if (r[k].hi >= hi) return true;
        next = r[k].hi + 1u;
    }
    return unused(g, next, hi + 1);
}

/* Every lead byte lo..hi from n: none taken (target GRAM_NONE), or each one some token holds
 * followed by a continuation c1lo..c1hi and `more` bytes 80..BF reaches target. */
static bool leads_reach(const struct tern_grammar *g, uint32_t n, unsigned lo, unsigned hi, unsigned c1lo,
                        unsigned c1hi, int more, uint32_t target)
{
    const struct gram_node *nd = &g->nodes[n];
    const struct gram_range *r = g->ranges + nd->r_off;
    unsigned next = lo;
    uint32_t last = GRAM_NONE;
    for (uint32_t k = 0; k < nd->r_n; k++) {
        if (r[k].hi < next) continue;
        if (r[k].lo > hi) break;
        if (target == GRAM_NONE || !unused(g, next, r[k].lo)) return false; /* one taken, or one not taken */
        if (r[k].to != last) {
            if (!conts_reach(g, r[k].to, c1lo, c1hi, more, target)) return false;
            last = r[k].to;
        }
        if (r[k].hi >= hi) return true;
        next = r[k].hi + 1u;
    }
    return target == GRAM_NONE || unused(g, next, hi + 1);
}

/* Set the bits of the bytes lo..hi (clipped to 0x20..0x7E, the printable ASCII) in k[2]. */
static inline void ascii_bits(unsigned lo, unsigned hi, uint64_t k[2])
{
    if (lo < 0x20) lo = 0x20;
    if (hi > 0x7E) hi = 0x7E;
    for (unsigned w = lo >> 6; lo <= hi && w < 2; w++) {
        unsigned a = lo > w * 64 ? lo - w * 64 : 0, b = hi < w * 64 + 63 ? hi - w * 64 : 63;
        if (a <= b && hi >= w * 64) k[w] |= (~0ull >> (63 - b)) & (~0ull << a);
    }
}

/* Where slice characters from n lead. *t = the node every multi-byte character and most ASCII
 * slice characters reach (GRAM_NONE: none is accepted); *exc = the ASCII slice characters that
 * go elsewhere. Returns false if the node is not text-like at all (multi-byte characters
 * disagree, or only ASCII is accepted, or too many exceptions). */
#define MAX_EXCEPTIONS 48
static bool slice_info(const struct tern_grammar *g, uint32_t n, uint32_t *t, struct gram_bset *exc)
{
    memset(exc, 0, sizeof *exc);
    static const struct { uint8_t lo, hi, c1lo, c1hi; int more; } leads[] = {
        {0xC2, 0xDF, 0x80, 0xBF, 0}, {0xE0, 0xE0, 0xA0, 0xBF, 1}, {0xE1, 0xEC, 0x80, 0xBF, 1},
        {0xED, 0xED, 0x80, 0x9F, 1}, {0xEE, 0xEF, 0x80, 0xBF, 1}, {0xF0, 0xF0, 0x90, 0xBF, 2},
        {0xF1, 0xF3, 0x80, 0xBF, 2}, {0xF4, 0xF4, 0x80, 0x8F, 2}};
    uint32_t a0 = delta(g, n, 0xC2);
    uint32_t target = a0 == GRAM_NONE ? GRAM_NONE : delta(g, a0, 0x80);
    if (a0 != GRAM_NONE && target == GRAM_NONE) return false;
    if (target == GRAM_NONE) { /* text only if it takes no slice character: any ASCII one says no */
        const struct gram_node *nd = &g->nodes[n];
        const struct gram_range *r = g->ranges + nd->r_off;
        for (uint32_t k = 0; k < nd->r_n; k++) {
            unsigned lo = r[k].lo < 0x20 ? 0x20 : r[k].lo, hi = r[k].hi > 0x7E ? 0x7E : r[k].hi;
            for (unsigned b = lo; b <= hi; b++)
                if (b != '"' && b != '\\') return false;
        }
    }
    for (size_t i = 0; i < sizeof leads / sizeof leads[0]; i++)
        if (!leads_reach(g, n, leads[i].lo, leads[i].hi, leads[i].c1lo, leads[i].c1hi, leads[i].more, target))
            return false;
    /* the printable ASCII slice characters that do not lead to target, range by range */
    uint64_t hit[2] = {0, 0}, cov[2] = {0, 0}, all[2] = {0, 0};
    const struct gram_node *nd = &g->nodes[n];
    for (uint32_t k = 0; k < nd->r_n; k++) {
        const struct gram_range *r = &g->ranges[nd->r_off + k];
        if (r->hi < 0x20 || r->lo > 0x7E) continue;
        ascii_bits(r->lo, r->hi, cov);
        if (r->to == target) ascii_bits(r->lo, r->hi, hit);
    }
    ascii_bits(0x20, 0x7E, all);
    all[0] &= ~(1ull << '"');
    all[1] &= ~(1ull << ('\\' - 64));
    if (target == GRAM_NONE) { /* no slice character is taken: the ones taken are the exceptions */
        hit[0] = ~cov[0];
        hit[1] = ~cov[1];
    }
    exc->w[0] = all[0] & ~hit[0];
    exc->w[1] = all[1] & ~hit[1];
    int n_exc = __builtin_popcountll(exc->w[0]) + __builtin_popcountll(exc->w[1]);
    if (target == GRAM_NONE && n_exc) return false; /* ASCII only: not text */
    if (n_exc > MAX_EXCEPTIONS) return false;
    *t = target;
    return true;
}

static int32_t cap_plus1(int32_t v)
{
    if (v == TCAP_NONE || v == TCAP_INF) return v;
    return v + 1 < TCAP_INF ? v + 1 : TCAP_INF;
}

/* Every slice character is taken, inside the rule, from every node slice characters lead to
 * from n (an unanchored search such as `needle` moves between a few nodes that each take any
 * character): then every slice token stays inside the rule from n, an unbounded text node. */
#define CLOSED_MAX 64
static bool slice_closed(const struct tern_grammar *g, uint32_t n)
{
    uint32_t q[CLOSED_MAX];
    uint32_t nq = 0;
    q[nq++] = n;
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t t;
        struct gram_bset exc;
        if (!det_plain(g, q[i]) || !slice_info(g, q[i], &t, &exc) || t == GRAM_NONE) return false;
        for (unsigned b = 0x1F; b < 0x7F; b++) {
            uint32_t to = t; /* 0x1F stands for the multi-byte characters and the rest */
            if (b >= 0x20) {
                if (!gram_bset_has(&exc, b)) continue;
                if ((to = delta(g, q[i], b)) == GRAM_NONE) return false; /* a character refused */
            }
            bool seen = false;
            for (uint32_t k = 0; k < nq && !seen; k++) seen = q[k] == to;
            if (seen) continue;
            if (nq == CLOSED_MAX) return false;
            q[nq++] = to;
        }
    }
    return true;
}

/* Where every slice character leads from n, decided once per node: slice_info looks at each
 * UTF-8 lead and its continuation nodes (a few hundred nanoseconds), and a string under
 * maxLength asks it of each of its positions, each position's capacity walking the chain of the
 * ones after it. */
static uint32_t slice_step(const struct tern_grammar *g, uint32_t n)
{
    uint32_t s = atomic_load_explicit(&g->cache->sstep[n], memory_order_relaxed);
    if (s != SSTEP_UNKNOWN) return s;
    uint32_t t = GRAM_NONE;
    struct gram_bset exc;
    if (!det_plain(g, n) || !slice_info(g, n, &t, &exc) || !gram_bset_empty(&exc)) s = SSTEP_OTHER;
    else s = t == GRAM_NONE ? SSTEP_NONE : t + SSTEP_TO;
    atomic_store_explicit(&g->cache->sstep[n], s, memory_order_relaxed);
    return s;
}

/* A small set of node ids (open addressing, size a power of two at least twice the chain's
 * bound): finds a chain that comes back on itself in one pass. Adds node; true if it was in. */
#define CHAIN_SET_MAX 1024 /* > 2 (GRAM_SLICE_MAX_CHARS + 2) */
static bool chain_seen_add(uint32_t *set, uint32_t mask, uint32_t node)
{
    for (uint32_t h = (node * 2654435761u) & mask;; h = (h + 1) & mask) {
        if (set[h] == node + 1) return true;
        if (!set[h]) {
            set[h] = node + 1;
            return false;
        }
    }
}

static int32_t text_cap(const struct tern_grammar *g, uint32_t n)
{
    int32_t known = atomic_load_explicit(&g->cache->tcap[n], memory_order_relaxed);
    if (known != TCAP_UNKNOWN) return known;
    /* Follow the chain n -> n1 -> ... (each the target of every slice character of the one
     * before) until a node whose capacity is decided. More capacity than any slice token has
     * characters is as good as unbounded, and the vocabulary's own longest slice token sets "that
     * many" (SmolLM2's 80 characters, far below GRAM_SLICE_MAX_CHARS): once slice_max + 1 steps
     * are proven after n, n alone is decided, so a 10000-character string does not walk its
     * whole chain at once. The next position follows the same steps again, memoized
     * (slice_step): only its one new step costs a slice_info. */
    const uint32_t far = g->vocab->slice_max ? g->vocab->slice_max : 1;
    uint32_t chain[GRAM_SLICE_MAX_CHARS + 2], len = 0, seen[CHAIN_SET_MAX], set_size = 64;
    TERN_ASSERT(far <= GRAM_SLICE_MAX_CHARS);
    while (set_size < 2 * (far + 2)) set_size *= 2; /* the chain and one more node */
    memset(seen, 0, set_size * sizeof *seen);
    const uint32_t mask = set_size - 1;
    int32_t v; /* the value of chain[len - 1] */
    uint32_t cur = n;
    for (;;) {
        known = atomic_load_explicit(&g->cache->tcap[cur], memory_order_relaxed);
        if (known != TCAP_UNKNOWN) { v = cap_plus1(known); break; } /* cur != n: len >= 1 */
        const uint32_t step = slice_step(g, cur);
        if (step == SSTEP_OTHER) {
            v = slice_closed(g, cur) ? TCAP_INF : TCAP_NONE;
            atomic_store_explicit(&g->cache->tcap[cur], v, memory_order_relaxed);
            break;
        }
        chain[len++] = cur;
        chain_seen_add(seen, mask, cur);
        if (step == SSTEP_NONE) { v = 0; break; }       /* takes no slice character */
        const uint32_t t = step - SSTEP_TO;
        if (t == cur) { v = TCAP_INF; break; }           /* a loop */
        if (chain_seen_add(seen, mask, t)) { v = TCAP_NONE; break; } /* a cycle through other nodes is not a simple count */
        if (len > far) {                                  /* n takes more than far characters */
            atomic_store_explicit(&g->cache->tcap[n], TCAP_INF, memory_order_relaxed);
            return TCAP_INF;
        }
        cur = t;
    }
    for (uint32_t i = len; i-- > 0;) {
        atomic_store_explicit(&g->cache->tcap[chain[i]], v, memory_order_relaxed);
        v = cap_plus1(v);
    }
    return atomic_load_explicit(&g->cache->tcap[n], memory_order_relaxed);
}

tern_status gram_cls_scratch_init(struct gram_cls_scratch *s, const struct tern_grammar *g)
{
    memset(s, 0, sizeof *s);
    tern_status st = gram_engine_init(&s->eng, g, true);
    if (st) return st;
    uint32_t depth = g->vocab ? g->vocab->max_len + 2 : 2;
    s->at = malloc(depth * sizeof *s->at);
    s->cap_buf = 4 * (GRAM_MAX_STACKS + 8);
    s->buf = malloc(s->cap_buf * sizeof *s->buf);
    s->dslot = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *s->dslot);
    s->dchunk[0] = malloc(sizeof *s->dchunk[0]);
    s->dnode = malloc(GRAM_DENSE_TABLES * sizeof *s->dnode);
    s->accd = calloc((g->vocab ? gram_trie_n_tok(&g->vocab->all) : 0) / 64 + 1, sizeof *s->accd);
    if (!s->at || !s->buf || !s->dslot || !s->dchunk[0] || !s->dnode || !s->accd) {
        gram_cls_scratch_free(s);
        return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    }
    return TERN_OK;
}

void gram_cls_scratch_free(struct gram_cls_scratch *s)
{
    gram_engine_free(&s->eng);
    free(s->buf);
    free(s->at);
    free(s->acc);
    free(s->unc);
    free(s->dslot);
    for (size_t k = 0; k < sizeof s->dchunk / sizeof s->dchunk[0]; k++) free(s->dchunk[k]);
    free(s->dnode);
    free(s->accd);
    free(s->pcur);
    free(s->pnext);
    free(s->pset);
    free(s->pused);
    memset(s, 0, sizeof *s);
}

static bool push_id(int32_t **v, uint32_t *n, uint32_t *cap, int32_t id)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 1024;
        int32_t *p = realloc(*v, nc * sizeof *p);
        if (!p) return false;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = id;
    return true;
}

/* Add a trie node's token and every token with the same bytes. */
static inline bool push_tokens(const struct tern_grammar_vocab *v, const struct gram_trie_node *tn, int32_t **ids,
                               uint32_t *n, uint32_t *cap)
{
    const int32_t tok = tn->token;
    if (*n < *cap && !(tn->flags & GRAM_TRIE_DUP)) {
        (*ids)[(*n)++] = tok;
        return true;
    }
    for (int32_t t = tok; t >= 0; t = v->same[t])
        if (!push_id(ids, n, cap, t)) return false;
    return true;
}

/* dense table entries besides node ids */
#define DENSE_NONE GRAM_NONE            /* no transition */
#define DENSE_ENGINE (GRAM_NONE - 1)    /* the target needs the general step */
#define DENSE_FULL (GRAM_NONE - 2)      /* no table for this node: scan the ranges */

/* The dense table of a deterministic node (built on first use in this walk). */
static const uint32_t *dense(struct gram_cls_scratch *s, const struct tern_grammar *g, uint32_t node)
{
    /* a dense table maps each byte to one target: only a deterministic node has one */
    TERN_ASSERT(node < g->n_nodes && !(g->nodes[node].flags & GN_NONDET));
    uint32_t sl = s->dslot[node];
    TERN_ASSERT(sl <= s->n_dtab && (!sl || s->dnode[sl - 1] == node), "dslot and dnode agree");
    if (sl) return s->dchunk[(sl - 1) / GRAM_DENSE_CHUNK]->tab[(sl - 1) % GRAM_DENSE_CHUNK];
    if (s->n_dtab == GRAM_DENSE_TABLES) return NULL;
    struct gram_dense_chunk **ch = &s->dchunk[s->n_dtab / GRAM_DENSE_CHUNK];
    if (!*ch && !(*ch = malloc(sizeof **ch))) return NULL; /* no table: the general step */
    uint32_t *t = (*ch)->tab[s->n_dtab % GRAM_DENSE_CHUNK];
    uint64_t *live = (*ch)->live[s->n_dtab % GRAM_DENSE_CHUNK];
    for (int b = 0; b < 256; b++) t[b] = DENSE_NONE;
    memset(live, 0, sizeof (*ch)->live[0]);
    const struct gram_node *nd = &g->nodes[node];
    for (uint32_t k = 0; k < nd->r_n; k++) {
        const struct gram_range *r = &g->ranges[nd->r_off + k];
        uint32_t to = (g->nodes[r->to].flags & GN_PLAIN) ? r->to : DENSE_ENGINE;
        for (unsigned b = r->lo; b <= r->hi; b++) {
            t[b] = to;
            live[b >> 6] |= 1ull << (b & 63);
        }
    }
    TERN_ASSERT(s->n_dtab < GRAM_DENSE_TABLES);
    s->dnode[s->n_dtab] = node;
    s->dslot[node] = ++s->n_dtab;
    return t;
}

static void dense_reset(struct gram_cls_scratch *s)
{
    for (uint32_t i = 0; i < s->n_dtab; i++) s->dslot[s->dnode[i]] = 0;
    s->n_dtab = 0;
}

#define GRAM_TAB_LAZY ((const uint32_t *)1)

/* The ASCII loop class of a deterministic node from its ranges: the printable ASCII bytes that
 * lead to its most common plain (consuming) target, the one reached by the lowest byte among
 * equals; fewer than 2 such bytes is no class. Returns that target, or GRAM_NONE. */
static uint32_t loop_class(const struct tern_grammar *g, uint32_t node, uint64_t k[2])
{
    k[0] = k[1] = 0;
    const struct gram_node *nd = &g->nodes[node];
    if (nd->flags & GN_NONDET) return GRAM_NONE;
    const struct gram_range *r = g->ranges + nd->r_off;
    uint32_t best = GRAM_NONE;
    unsigned best_n = 0;
    for (uint32_t i = 0; i < nd->r_n; i++) {
        uint32_t to = r[i].to;
        if (r[i].hi < 0x20 || r[i].lo > 0x7E || to == best || !(g->nodes[to].flags & GN_PLAIN)) continue;
        unsigned cnt = 0; /* the bytes leading to `to` from this range on */
        for (uint32_t j = i; j < nd->r_n; j++) {
            if (r[j].to != to) continue;
            unsigned lo = r[j].lo < 0x20 ? 0x20 : r[j].lo, hi = r[j].hi > 0x7E ? 0x7E : r[j].hi;
            if (lo <= hi) cnt += hi - lo + 1;
        }
        if (cnt > best_n) { best_n = cnt; best = to; }
    }
    if (best_n < 2) return GRAM_NONE;
    for (uint32_t i = 0; i < nd->r_n; i++)
        if (r[i].to == best) ascii_bits(r[i].lo, r[i].hi, k);
    return best;
}

static void kmemo_put(const struct tern_grammar *g, uint32_t node, const uint64_t k[2], int cap)
{
    atomic_store_explicit(&g->cache->kcls[node][0], k[0], memory_order_relaxed);
    atomic_store_explicit(&g->cache->kcls[node][1], k[1], memory_order_relaxed);
    atomic_store_explicit(&g->cache->kcap[node], cap, memory_order_release);
}

static int kmemo_get(const struct tern_grammar *g, uint32_t node, uint64_t k[2])
{
    int cap = atomic_load_explicit(&g->cache->kcap[node], memory_order_acquire);
    if (cap != KCAP_UNKNOWN) {
        k[0] = atomic_load_explicit(&g->cache->kcls[node][0], memory_order_relaxed);
        k[1] = atomic_load_explicit(&g->cache->kcls[node][1], memory_order_relaxed);
    }
    return cap;
}

/* The ASCII loop class of a node and how many bytes of that class it can still take: following
 * the loop target while every class byte leads on to one same node (a loop: unbounded; a
 * counter such as {0,61}: its remaining count). A token whose remaining bytes all lie in the
 * class, and are no more than that many, stays in the chain, so it is accepted without
 * stepping: the walk accepts whole subtrees this way. A property of the grammar node alone, so
 * it is kept in the grammar (every position of a format's or a maxLength string's counter
 * shares one chain) and worked out from the ranges, without the walk's dense tables. */
#define KCHAIN_MAX 256
static int class_info(const struct tern_grammar *g, uint32_t node, uint64_t k[2])
{
    int known = kmemo_get(g, node, k);
    if (known != KCAP_UNKNOWN) return known;
    /* more than any token's bytes is as good as unbounded */
    const int enough = g->vocab->max_len + 1 < GRAM_CLASS_INF - 1 ? (int)g->vocab->max_len + 1 : GRAM_CLASS_INF - 1;
    uint32_t chain[KCHAIN_MAX];
    int n = 0, c = 0;
    uint64_t k0[2] = {0, 0};
    for (uint32_t cur = node;;) {
        uint64_t kk[2];
        if (n > 0 && (known = kmemo_get(g, cur, kk)) != KCAP_UNKNOWN) {
            c = (kk[0] == k0[0] && kk[1] == k0[1]) ? known : 0; /* the chain goes on only in its class */
            break;
        }
        uint32_t best = loop_class(g, cur, kk);
        if (n == 0) { k0[0] = kk[0]; k0[1] = kk[1]; }
        if (best == GRAM_NONE) {
            kmemo_put(g, cur, kk, 0);
            c = 0;
            break;
        }
        if (n > 0 && (kk[0] != k0[0] || kk[1] != k0[1])) { c = 0; break; } /* its own chain: later */
        if (best == cur) { c = GRAM_CLASS_INF; kmemo_put(g, cur, kk, c); break; }
        chain[n++] = cur;
        if (n == KCHAIN_MAX || n >= 2 * enough) {
            /* proven: chain[i] takes n - i bytes; those with enough (about half) are decided,
             * the rest are left to a walk that starts at them, which soon meets a decided one */
            for (int i = 0; i < n && n - i >= enough; i++) kmemo_put(g, chain[i], k0, n - i);
            if (n >= enough) return kmemo_get(g, node, k);
            c = 0; /* tokens longer than the chain: lower bounds, counted from the cut */
            break;
        }
        cur = best;
    }
    /* back to front: each node takes one more byte than the next (a loop stays unbounded) */
    for (int i = n; i-- > 0;) {
        if (c != GRAM_CLASS_INF) c = c + 1 < GRAM_CLASS_INF - 1 ? c + 1 : GRAM_CLASS_INF - 1;
        kmemo_put(g, chain[i], k0, c);
    }
    return kmemo_get(g, node, k);
}

/* Accept the tokens at depth-first positions [lo, hi) of the trie `all` (s->acc_dfs): whole
 * words of bits at a time. */
static void accd_range(struct gram_cls_scratch *s, uint32_t lo, uint32_t hi)
{
    if (lo >= hi) return;
    s->n_acc += hi - lo;
    if (lo >> 6 < s->accd_lo) s->accd_lo = lo >> 6;
    if (((hi - 1) >> 6) + 1 > s->accd_hi) s->accd_hi = ((hi - 1) >> 6) + 1;
    while (lo < hi) {
        const uint32_t w = lo >> 6, b = lo & 63, n = hi - lo < 64 - b ? hi - lo : 64 - b;
        s->accd[w] |= (n == 64 ? ~0ull : ((1ull << n) - 1)) << b;
        lo += n;
    }
}

/* The accepted tokens of trie node tn (its own, not its subtree's). */
static inline bool accept_tokens(struct gram_cls_scratch *s, const struct tern_grammar_vocab *v,
                                 const struct gram_trie_node *tn)
{
    if (s->acc_dfs) {
        accd_range(s, tn[0].tok_first, tn[1].tok_first);
        return true;
    }
    return push_tokens(v, tn, &s->acc, &s->n_acc, &s->cap_acc);
}

/* Whether node's class chain (class_info: k, cap bytes) ends at a node that takes no byte of
 * the class and cannot end its rule or call another (deterministic): then a token that stays in
 * the class for more than cap bytes is refused in every context. Kept per node; the chain's
 * later nodes whose own capacity leads to the same end get the answer too, so a chain is
 * followed once, not once per node. */
static bool chain_closed(const struct tern_grammar *g, uint32_t node, const uint64_t k[2], int cap)
{
    const unsigned known = atomic_load_explicit(&g->cache->kend[node], memory_order_relaxed);
    if (known != KEND_UNKNOWN) return known == KEND_CLOSED;
    uint32_t cur = node, path[KCHAIN_MAX];
    int n_path = 0;
    bool closed = true;
    for (int i = 0; i < cap && closed; i++) {
        uint64_t kk[2];
        const uint32_t nx = loop_class(g, cur, kk);
        if (nx == GRAM_NONE || kk[0] != k[0] || kk[1] != k[1]) closed = false;
        else cur = nx;
        if (closed && i + 1 < cap && n_path < KCHAIN_MAX) path[n_path++] = cur; /* i + 1 bytes in */
    }
    const struct gram_node *nd = &g->nodes[cur];
    if (closed && ((nd->flags & (GN_NONDET | GN_FINAL)) || nd->c_n)) closed = false;
    if (closed) {
        const struct gram_range *r = g->ranges + nd->r_off;
        for (uint32_t j = 0; j < nd->r_n && closed; j++) {
            uint64_t rk[2] = {0, 0};
            if (r[j].lo > 0x7F) continue;
            ascii_bits(r[j].lo, r[j].hi > 0x7F ? 0x7F : r[j].hi, rk);
            if ((rk[0] & k[0]) | (rk[1] & k[1])) closed = false;
        }
    }
    const unsigned res = closed ? KEND_CLOSED : KEND_OPEN;
    atomic_store_explicit(&g->cache->kend[node], res, memory_order_relaxed);
    for (int i = 0; i < n_path; i++) {
        uint64_t kk[2] = {0, 0};
        if (kmemo_get(g, path[i], kk) == cap - (i + 1) && kk[0] == k[0] && kk[1] == k[1])
            atomic_store_explicit(&g->cache->kend[path[i]], res, memory_order_relaxed);
    }
    return closed;
}

/* Record the tokens of trie nodes [a, b) (whole subtrees, depth-first) deeper than
 * s->min_depth as uncertain (unc) or accepted: one copy when all are wanted. */
static bool push_subtree(struct gram_cls_scratch *s, const struct tern_grammar_vocab *v, const struct gram_trie *tr,
                         uint32_t a, uint32_t b, bool unc)
{
    int32_t **ids = unc ? &s->unc : &s->acc;
    uint32_t *n = unc ? &s->n_unc : &s->n_acc, *cap = unc ? &s->cap_unc : &s->cap_acc;
    if (s->min_depth) {
        for (uint32_t j = a; j < b; j++)
            if (tr->node[j].token >= 0 && tr->node[j].depth > s->min_depth && !push_tokens(v, &tr->node[j], ids, n, cap))
                return false;
        return true;
    }
    const uint32_t lo = tr->node[a].tok_first, k = tr->node[b].tok_first - lo;
    if (k == 0) return true; /* a subtree of tokenless prefixes: nothing to copy, and *ids may be NULL */
    if (!unc && s->acc_dfs) {
        accd_range(s, lo, lo + k);
        return true;
    }
    if (*n + k > *cap) {
        uint32_t nc = *cap ? *cap : 1024;
        while (nc < *n + k) nc *= 2;
        int32_t *p = realloc(*ids, nc * sizeof *p);
        if (!p) return false;
        *ids = p;
        *cap = nc;
    }
    memcpy(*ids + *n, tr->dfs_tok + lo, k * sizeof **ids);
    *n += k;
    return true;
}

/* Record the tokens of trie nodes [a, b) (whole subtrees, depth-first) no deeper than max_d
 * (and deeper than s->min_depth) as uncertain (unc) or accepted. */
static bool push_shallow(struct gram_cls_scratch *s, const struct tern_grammar_vocab *v, const struct gram_trie *tr,
                         uint32_t a, uint32_t b, uint32_t max_d, bool unc)
{
    for (uint32_t j = a; j < b;) {
        const struct gram_trie_node *tn = &tr->node[j];
        if (tn->depth > max_d) { j = tn->end; continue; }
        if (gram_trie_below_depth(tn) <= max_d) { /* all of it: one copy (one range of bits) */
            if (!push_subtree(s, v, tr, j, tn->end, unc)) return false;
            j = tn->end;
            continue;
        }
        if (tn->token >= 0 && tn->depth > s->min_depth) {
            const bool ok = unc ? push_tokens(v, tn, &s->unc, &s->n_unc, &s->cap_unc) : accept_tokens(s, v, tn);
            if (!ok) return false;
        }
        j++;
    }
    return true;
}

/* Trie node i (depth d) left the walk on one stack at node: if every longer token below i
 * stays in node's loop class, accept them all (or record them uncertain under a virtual
 * caller) and tell the caller to skip the subtree. */
static inline int try_skip(struct gram_cls_scratch *s, const struct tern_grammar *g, const struct gram_trie *tr,
                           uint32_t i, uint32_t d, uint32_t node, bool virt)
{
    const struct gram_trie_node *tn = &tr->node[i];
    if (tn->end == i + 1 || (tn->flags & GRAM_TRIE_OTHER)) return 0;
    uint64_t k[2];
    const int cap = class_info(g, node, k);
    if (!cap) return 0;
    /* the class in the trie's layout: bytes 0x20..0x7F as three words */
    const uint32_t k0 = (uint32_t)(k[0] >> 32), k1 = (uint32_t)k[1], k2 = (uint32_t)(k[1] >> 32);
    if ((tn->below[0] & ~k0) | (tn->below[1] & ~k1) | (tn->below[2] & ~k2)) return 0;
    if (cap != GRAM_CLASS_INF && gram_trie_below_depth(tn) - d > (uint32_t)cap) {
        /* longer tokens below: where the chain ends closed (a counted class before its closing
         * quote: `[a-z0-9]{8}"`), those are refused and the others accepted, without stepping */
        if (!chain_closed(g, node, k, cap)) return 0;
        return push_shallow(s, g->vocab, tr, i + 1, tn->end, d + (uint32_t)cap, virt) ? 1 : -1;
    }
    return push_subtree(s, g->vocab, tr, i + 1, tn->end, virt) ? 1 : -1;
}

static int32_t count_text_cap(const struct tern_grammar *g, uint32_t node, uint32_t L, uint32_t cnt);

/* Trie node i (depth d) left the walk's general step on one real stack at node, in the counter
 * frame `frame` (a string under maxLength, entered again after an escape or a multi-byte
 * character): if the counted body takes slice tokens there (count_text_cap) and every longer
 * token below i goes on in plain ASCII slice characters (no '"', '\\', control or DEL byte),
 * no more of them than the count leaves, accept them all and tell the caller to skip the
 * subtree. Without it each of their bytes took the engine's general step: an escape's first
 * mask in a code string walked for 240-370 us. */
static inline int try_skip_counted(struct gram_cls_scratch *s, const struct tern_grammar *g, const struct gram_trie *tr,
                                   uint32_t i, uint32_t d, uint32_t node, uint32_t frame)
{
    const struct gram_trie_node *tn = &tr->node[i];
    const uint32_t cnt = s->eng.fr.cnt[frame];
    if (!cnt || (tn->flags & GRAM_TRIE_OTHER)) return 0;
    /* the ASCII slice in the trie's layout (bytes 0x20..0x7F as three words): not '"' 0x22,
     * '\\' 0x5C or DEL 0x7F */
    if ((tn->below[0] & (1u << 2)) | (tn->below[1] & (1u << 28)) | (tn->below[2] & (1u << 31))) return 0;
    const int32_t cap = count_text_cap(g, node, s->eng.fr.node[frame], cnt);
    if (cap == TCAP_NONE) return 0;
    if (cap != TCAP_INF && gram_trie_below_depth(tn) - d > (uint32_t)cap) return 0;
    return push_subtree(s, g->vocab, tr, i + 1, tn->end, false) ? 1 : -1;
}

/* The dense table of a simple depth state (looked up on first need: leaves never need it). */
static inline const uint32_t *tab_of(struct gram_cls_scratch *s, const struct tern_grammar *g, struct gram_depth *a)
{
    if (a->tab == GRAM_TAB_LAZY) a->tab = (g->nodes[a->node].flags & GN_NONDET) ? NULL : dense(s, g, a->node);
    return a->tab;
}

/* About to descend from trie node i into its children with the state a: where that state is
 * one stack with a dense table and i has a child index, the children worth reading are those
 * of the bytes the table takes (a dead child only matters to a walk that overflowed, whose
 * tokens become uncertain). first: at the root, only those bytes. */
static inline void set_children(struct gram_cls_scratch *s, const struct tern_grammar *g,
                                struct gram_depth *a, const struct gram_cidx *x, uint32_t pend,
                                const struct gram_bset *first)
{
    a->cx = NULL;
    if (!x || !a->simple || a->ovf) return;
    const uint32_t *tab = tab_of(s, g, a);
    if (!tab) return;
    const uint32_t sl = s->dslot[a->node] - 1;
    const uint64_t *lv = s->dchunk[sl / GRAM_DENSE_CHUNK]->live[sl % GRAM_DENSE_CHUNK];
    for (int w = 0; w < 4; w++) a->live[w] = x->bits[w] & lv[w] & (first ? first->w[w] : ~0ull);
    a->cx = x;
    a->pend = pend;
}

/* The first byte >= b in live, or -1. */
static inline int next_live(const uint64_t live[4], unsigned b)
{
    unsigned w = b >> 6;
    uint64_t m = live[w] & (~0ull << (b & 63));
    while (!m) {
        if (++w == 4) return -1;
        m = live[w];
    }
    return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
}

/* Walk trie tr from the single stack (node, virtual bottom) and append accepted / uncertain
 * tokens to s->acc / s->unc. first: the first bytes whose subtrees are walked (NULL: all).
 *
 * The state after each prefix is kept per depth. Most of the time it is one stack on a
 * deterministic node and the next byte leads to a node that only consumes: then the step is
 * one table lookup (the fast path below); everything else goes through the engine. */
static bool walk(const struct tern_grammar *g, struct gram_cls_scratch *s, uint32_t node, uint32_t frame0,
                 const struct gram_trie *tr, const struct gram_bset *first)
{
    const struct tern_grammar_vocab *v = g->vocab;
    struct gram_depth *at = s->at;
    TERN_ASSERT(v && node < g->n_nodes && frame0 < s->eng.fr.n && s->eng.sim, "a walk starts from one stack");
    TERN_ASSERT(tr == &v->all || tr == &v->rest);
    at[0] = (struct gram_depth){node, frame0, GRAM_TAB_LAZY, 0, 1, 0, 0, NULL, {0, 0, 0, 0}, 0};
    set_children(s, g, &at[0], tr->root_cidx, tr->n, first);
    const struct gram_trie_node *trie = tr->node;
    /* min_d > 0: the tokens of at most min_d bytes are known already (classify): subtrees
     * without a longer token are skipped, and only longer tokens are recorded */
    const uint32_t min_d = s->min_depth;
    for (uint32_t i = 0; i < tr->n;) {
        const struct gram_trie_node *tn = &trie[i];
        uint32_t d = tn->depth;
        if (at[d - 1].cx) { /* the parent's next live child */
            const struct gram_depth *pa = &at[d - 1];
            int b = next_live(pa->live, tn->byte);
            if (b < 0) { i = pa->pend; continue; }
            if ((unsigned)b != tn->byte) {
                i = gram_cidx_child(tr, pa->cx, (unsigned)b);
                tn = &trie[i];
                TERN_ASSERT(tn->depth == d && tn->byte == (unsigned)b, "a child index lists its node's children");
            }
        }
        /* the next sibling is read next whatever happens here (a subtree away: a miss) */
        __builtin_prefetch(&trie[tn->end]);
        if (d == 1 && first && !gram_bset_has(first, tn->byte)) { i = tn->end; continue; }
        if (gram_trie_below_depth(tn) <= min_d) { i = tn->end; continue; }
        const int32_t tok = d > min_d ? tn->token : -1;
        TERN_ASSERT(d >= 1 && d <= v->max_len);
        struct gram_depth *pa = &at[d - 1], *ca = &at[d];
        uint8_t ovf = pa->ovf;
        if (pa->simple) {
            const uint32_t *tab = tab_of(s, g, pa);
            if (tab) {
                uint32_t to = tab[tn->byte];
                if (to < DENSE_ENGINE) { /* fast path: one stack stays one stack */
                    ca->node = to;
                    ca->frame = pa->frame;
                    ca->tab = GRAM_TAB_LAZY;
                    ca->off_next = pa->off_next;
                    ca->simple = 1;
                    ca->virt = pa->virt;
                    ca->ovf = ovf;
                    if (tok >= 0) {
                        bool ok = ca->virt ? push_tokens(v, tn, &s->unc, &s->n_unc, &s->cap_unc)
                                           : accept_tokens(s, v, tn);
                        if (!ok) return false;
                    }
                    if (tn->end > i + 1 && !ovf) {
                        int sk = try_skip(s, g, tr, i, d, to, ca->virt);
                        if (sk < 0) return false;
                        if (sk) { i = tn->end; continue; }
                    }
                    set_children(s, g, ca, (tn->flags & GRAM_TRIE_WIDE) ? gram_trie_cidx(tr, i) : NULL, tn->end, NULL);
                    i++;
                    continue;
                }
                if (to == DENSE_NONE) { /* dead prefix */
                    if (ovf && !push_subtree(s, v, tr, i, tn->end, true)) return false;
                    i = tn->end;
                    continue;
                }
            }
        }
        /* general step: this depth's stacks go to buf[off .. ) */
        uint32_t off = pa->off_next;
        if ((size_t)off + GRAM_MAX_STACKS + 8 > s->cap_buf) {
            size_t nc = s->cap_buf * 2;
            while (nc < (size_t)off + GRAM_MAX_STACKS + 8) nc *= 2;
            struct gram_stack *nb = realloc(s->buf, nc * sizeof *nb);
            if (!nb) return false;
            s->buf = nb;
            s->cap_buf = nc;
        }
        struct gram_stack one;
        const struct gram_stack *in;
        uint32_t in_n;
        if (pa->simple) {
            one = (struct gram_stack){pa->node, pa->frame};
            in = &one;
            in_n = 1;
        } else {
            uint32_t poff = d >= 2 ? at[d - 2].off_next : 0;
            TERN_ASSERT(poff <= off, "each depth's stacks follow the previous depth's in buf");
            in = s->buf + poff;
            in_n = off - poff;
        }
        struct gram_stack *out = s->buf + off;
        uint32_t n = gram_engine_step(&s->eng, in, in_n, tn->byte, out);
        TERN_ASSERT(n <= GRAM_MAX_STACKS && (size_t)off + n <= s->cap_buf);
        const uint8_t *level = s->eng.fr.level;
        bool live_real = false, live_virt = false, popped = false, vpopped = false;
        if (s->eng.overflow) ovf = 1;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t nd = out[k].node;
            if (nd == GRAM_POPPED) popped = true;
            else if (nd == GRAM_VPOPPED) vpopped = true;
            else if (nd == GRAM_OVERFLOW) ovf = 1;
            else if (nd == GRAM_FOLBYTES) live_virt = true; /* a caller may go on: walk on */
            else if (level[out[k].frame] == 0) live_real = true;
            else live_virt = true;
        }
        ca->ovf = ovf;
        if (n == 1 && !gram_is_marker(out[0].node)) { /* back to one stack */
            ca->node = out[0].node;
            ca->frame = out[0].frame;
            ca->tab = GRAM_TAB_LAZY;
            ca->simple = 1;
            ca->virt = level[out[0].frame] != 0;
            ca->off_next = off;
        } else {
            ca->simple = 0;
            ca->off_next = off + n;
        }
        if (tok >= 0) {
            if (live_real || popped) {
                if (!accept_tokens(s, v, tn)) return false;
            } else if (live_virt || vpopped || ovf) {
                if (!push_tokens(v, tn, &s->unc, &s->n_unc, &s->cap_unc)) return false;
            }
        }
        if (!live_real && !live_virt) {
            if (ovf && !push_subtree(s, v, tr, i + 1, tn->end, true)) /* no context we know rules these out: the matcher decides */
                return false;
            i = tn->end;
            continue;
        }
        if (tn->end > i + 1 && live_real && !ovf) {
            /* the one real stack (the others wait in virtual callers, e.g. for the string's
             * closing quote, and take no slice character) */
            uint32_t r1 = GRAM_NONE;
            for (uint32_t k = 0; k < n; k++) {
                if (gram_is_marker(out[k].node) || level[out[k].frame] != 0) continue;
                if (r1 != GRAM_NONE) { r1 = GRAM_NONE; break; }
                r1 = k;
            }
            const int sk = r1 == GRAM_NONE ? 0 : try_skip_counted(s, g, tr, i, d, out[r1].node, out[r1].frame);
            if (sk < 0) return false;
            if (sk) { i = tn->end; continue; }
        }
        if (tn->end > i + 1)
            set_children(s, g, ca, (tn->flags & GRAM_TRIE_WIDE) ? gram_trie_cidx(tr, i) : NULL, tn->end, NULL);
        i++;
    }
    return true;
}

static inline uint32_t tok_len(const struct tern_grammar_vocab *v, int32_t id)
{
    return v->off[id + 1] - v->off[id];
}

/* The classification of node. Returns NULL on OOM. base (may be NULL): the classification of
 * a position no string of up to gram_horizon[hk] bytes tells apart from node; the tokens of
 * at most that many bytes are then taken from it and only the longer ones are walked. */
/* The text capacity of node on top of the counter frame (L, caller, cnt): node is the start of
 * the counter's body, every slice character leads from it to the body's end (one character per
 * completion, as a string's characters under maxLength), and nothing after the counter takes a
 * slice character (so a longer token is refused, not continued). Then the slice tokens of up
 * to the remaining completions are accepted: cmax - cnt + 1 (this one and the ones left). */
static int32_t count_text_cap(const struct tern_grammar *g, uint32_t node, uint32_t L, uint32_t cnt)
{
    const struct gram_node *ln = &g->nodes[L];
    const struct gram_rule *r = &g->rules[ln->rule];
    if (!ln->c_n || node != g->rules[g->calls[ln->c_off].rule].start) return TCAP_NONE;
    const uint32_t step = slice_step(g, node);
    if (step < SSTEP_TO || !(g->nodes[step - SSTEP_TO].flags & GN_POPONLY)) return TCAP_NONE;
    if (r->cmax == GRAM_INF) return TCAP_INF;
    for (uint32_t i = 0; i < r->fol_n; i++)
        if (slice_step(g, g->follow[r->fol_off + i]) != SSTEP_NONE) return TCAP_NONE;
    if (r->doc_end && g->lazy) return TCAP_NONE; /* free text may follow the end */
    uint64_t rem = (uint64_t)r->cmax - cnt + 1;
    return rem >= GRAM_SLICE_MAX_CHARS ? TCAP_INF : (int32_t)rem;
}

/* Zero the words of s->accd a walk set, for the next. */
static void accd_clear(struct gram_cls_scratch *s)
{
    if (s->accd_lo < s->accd_hi) memset(s->accd + s->accd_lo, 0, (size_t)(s->accd_hi - s->accd_lo) * sizeof *s->accd);
    s->accd_lo = UINT32_MAX, s->accd_hi = 0;
}

/* Set (or clear) in bits the ids at the depth-first positions b marks among the 64 from d:
 * a whole word (whole subtrees) without a bit scan. */
static inline void mark_positions(uint32_t *bits, const int32_t *d, uint64_t b, bool set)
{
    if (b == ~0ull) {
        if (set)
            for (int j = 0; j < 64; j++) bits[d[j] >> 5] |= 1u << (d[j] & 31);
        else
            for (int j = 0; j < 64; j++) bits[d[j] >> 5] &= ~(1u << (d[j] & 31));
        return;
    }
    for (; b; b &= b - 1) {
        const int32_t id = d[__builtin_ctzll(b)];
        if (set) bits[id >> 5] |= 1u << (id & 31);
        else bits[id >> 5] &= ~(1u << (id & 31));
    }
}

/* The accepted tokens of a walk kept as depth-first positions (s->accd, s->n_acc of them) into
 * c: few as ids, many as a bitset, and most as the text tokens less the positions not
 * accepted, which costs a bit per token left out instead of per token accepted. */
static bool accd_to_cls(const struct tern_grammar_vocab *v, const struct gram_cls_scratch *s, struct gram_cls *c)
{
    const int32_t *dfs = v->all.dfs_tok;
    const uint32_t n_dfs = gram_trie_n_tok(&v->all), n_acc = s->n_acc;
    if (n_acc < v->n_words) { /* an id list is smaller than a bitset */
        c->acc_ids = malloc(n_acc * sizeof *c->acc_ids);
        if (!c->acc_ids) return false;
        uint32_t k = 0;
        for (uint32_t w = s->accd_lo; w < s->accd_hi; w++)
            for (uint64_t b = s->accd[w]; b; b &= b - 1) c->acc_ids[k++] = dfs[w * 64 + (uint32_t)__builtin_ctzll(b)];
        TERN_ASSERT(k == n_acc, "every accepted position is counted once");
        c->bytes += (size_t)n_acc * 4;
        return true;
    }
    const bool most = n_acc > n_dfs / 2;
    c->acc_bits = most ? malloc((size_t)v->n_words * sizeof *c->acc_bits) : calloc(v->n_words, sizeof *c->acc_bits);
    if (!c->acc_bits) return false;
    if (most) {
        memcpy(c->acc_bits, v->text_bits, (size_t)v->n_words * sizeof *c->acc_bits);
        for (uint32_t w = 0; w <= n_dfs / 64; w++) {
            /* the positions left out (none past the last) */
            uint64_t b = ~s->accd[w];
            if (w == n_dfs / 64) b &= (n_dfs & 63) ? (1ull << (n_dfs & 63)) - 1 : 0;
            mark_positions(c->acc_bits, dfs + (size_t)w * 64, b, false);
        }
    } else {
        for (uint32_t w = s->accd_lo; w < s->accd_hi; w++) mark_positions(c->acc_bits, dfs + (size_t)w * 64, s->accd[w], true);
    }
    c->bytes += (size_t)v->n_words * 4;
    return true;
}

static struct gram_cls *classify(const struct tern_grammar *g, uint32_t node, struct gram_cls_scratch *s,
                                 const struct gram_cls *base, int hk, uint32_t L, uint32_t cnt)
{
    const struct tern_grammar_vocab *v = g->vocab;
    s->n_acc = s->n_unc = 0;
    gram_engine_reset(&s->eng);
    dense_reset(s);
    /* on top of a counter frame: that frame (the caller below it stays virtual) */
    uint32_t frame0 = 0;
    TERN_ASSERT(node < g->n_nodes && v && s->n_dtab == 0 && s->eng.fr.n == s->eng.fr.n_fixed);
    if (L != GRAM_NONE) {
        frame0 = gram_frame_intern(&s->eng.fr, L, 0, cnt);
        if (frame0 == GRAM_NONE) return NULL;
    }
    int32_t cap = L != GRAM_NONE ? count_text_cap(g, node, L, cnt) : text_cap(g, node);
    /* almost text: a text node except for a few ASCII first characters (a key that may still
     * become a declared property name); the others go to a text node of capacity tcap */
    bool almost = false;
    int32_t tcap = TCAP_NONE;
    struct gram_bset exc;
    uint32_t tnode;
    if (L == GRAM_NONE && cap == TCAP_NONE && det_plain(g, node) && slice_info(g, node, &tnode, &exc) && tnode != GRAM_NONE &&
        !gram_bset_empty(&exc)) {
        tcap = text_cap(g, tnode);
        almost = tcap != TCAP_NONE;
    }
    /* a base of another kind walked another trie (text nodes: only the non-slice tokens) */
    if (base && (base->almost || almost || base->text != (cap != TCAP_NONE))) base = NULL;
    const uint32_t h = base ? gram_horizon[hk] : 0;
    s->min_depth = h;
    bool ok;
    if (cap != TCAP_NONE) {
        ok = walk(g, s, node, frame0, &v->rest, NULL);
    } else if (almost) {
        struct gram_bset not_exc;
        for (int w = 0; w < 4; w++) not_exc.w[w] = ~exc.w[w];
        ok = walk(g, s, node, frame0, &v->all, &exc);
        if (ok) {
            gram_engine_reset(&s->eng);
            ok = walk(g, s, node, frame0, &v->rest, &not_exc);
        }
    } else {
        /* from scratch, the accepted tokens are kept as depth-first positions: a position inside
         * an open class (`[^/]+`, a counted `[a-z0-9]`) accepts tens of thousands of tokens,
         * mostly as whole subtrees, and one id at a time those cost a bit each to set */
        s->acc_dfs = !base;
        s->accd_lo = UINT32_MAX, s->accd_hi = 0;
        ok = walk(g, s, node, frame0, &v->all, NULL);
    }
    s->min_depth = 0;
    const bool acc_dfs = s->acc_dfs;
    s->acc_dfs = false;
    if (!ok) {
        if (acc_dfs) accd_clear(s);
        return NULL;
    }
    /* a walk records each token at most once, as accepted or as uncertain */
    TERN_ASSERT((uint64_t)s->n_acc + s->n_unc <= (uint64_t)v->n_vocab);
    /* the base's short tokens: uncertain ones always as ids, accepted ids too (a bitset is
     * masked below) */
    if (base) {
        for (uint32_t k = 0; k < base->n_unc; k++)
            if (tok_len(v, base->unc[k]) <= h && !push_id(&s->unc, &s->n_unc, &s->cap_unc, base->unc[k])) return NULL;
        if (!base->acc_bits)
            for (uint32_t k = 0; k < base->n_acc; k++)
                if (tok_len(v, base->acc_ids[k]) <= h && !push_id(&s->acc, &s->n_acc, &s->cap_acc, base->acc_ids[k]))
                    return NULL;
    }
    uint32_t n_acc = s->n_acc, n_unc = s->n_unc;
    struct gram_cls *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->almost = almost;
    c->text = cap != TCAP_NONE;
    c->text_cap = cap == TCAP_INF ? GRAM_CAP_INF : (uint32_t)(cap < 0 ? 0 : cap);
    c->n_acc = n_acc;
    c->n_unc = n_unc;
    c->bytes = sizeof *c;
    TERN_ASSERT(!c->text || !almost, "a node is a text node or an almost-text one, not both");
    if (almost) {
        /* the slice tokens not starting with an exception, up to 1 + tcap characters */
        uint32_t lim = tcap == TCAP_INF ? GRAM_SLICE_MAX_CHARS : (uint32_t)tcap + 1;
        if (lim > GRAM_SLICE_MAX_CHARS) lim = GRAM_SLICE_MAX_CHARS;
        c->acc_bits = calloc(v->n_words, sizeof *c->acc_bits);
        if (!c->acc_bits) { free(c); return NULL; }
        for (uint32_t k = 0; k < v->slice_off[lim + 1]; k++) {
            int32_t id = v->slice_sorted[k];
            if (gram_bset_has(&exc, v->bytes[v->off[id]])) continue;
            c->acc_bits[id >> 5] |= 1u << (id & 31);
            c->n_acc++;
        }
        for (uint32_t k = 0; k < n_acc; k++) c->acc_bits[s->acc[k] >> 5] |= 1u << (s->acc[k] & 31);
        c->bytes += (size_t)v->n_words * 4;
    } else if (base && base->acc_bits) {
        const uint32_t *sb = v->short_bits + (size_t)hk * v->n_words;
        c->acc_bits = malloc((size_t)v->n_words * sizeof *c->acc_bits);
        if (!c->acc_bits) { free(c); return NULL; }
        for (uint32_t w = 0; w < v->n_words; w++) c->acc_bits[w] = base->acc_bits[w] & sb[w];
        for (uint32_t k = 0; k < n_acc; k++) c->acc_bits[s->acc[k] >> 5] |= 1u << (s->acc[k] & 31);
        uint32_t cnt = 0;
        for (uint32_t w = 0; w < v->n_words; w++) cnt += (uint32_t)__builtin_popcount(c->acc_bits[w]);
        c->n_acc = cnt;
        c->bytes += (size_t)v->n_words * 4;
    } else if (acc_dfs && n_acc) {
        const bool done = accd_to_cls(v, s, c);
        accd_clear(s);
        if (!done) { free(c); return NULL; }
    } else if (n_acc >= v->n_words) { /* a bitset is smaller than the id list */
        c->acc_bits = calloc(v->n_words, sizeof *c->acc_bits);
        if (!c->acc_bits) { free(c); return NULL; }
        for (uint32_t k = 0; k < n_acc; k++) c->acc_bits[s->acc[k] >> 5] |= 1u << (s->acc[k] & 31);
        c->bytes += (size_t)v->n_words * 4;
    } else if (n_acc) {
        c->acc_ids = malloc(n_acc * sizeof *c->acc_ids);
        if (!c->acc_ids) { free(c); return NULL; }
        memcpy(c->acc_ids, s->acc, n_acc * sizeof *c->acc_ids); /* in trie order: setting them needs no order */
        c->bytes += (size_t)n_acc * 4;
    }
    TERN_ASSERT(!c->acc_ids || !c->acc_bits, "accepted tokens are either ids or a bitset");
    if (n_unc) {
        c->unc = malloc(n_unc * sizeof *c->unc);
        if (!c->unc) { gram_cls_free(c); return NULL; }
        memcpy(c->unc, s->unc, n_unc * sizeof *c->unc);
        c->bytes += (size_t)n_unc * 4;
    }
    return c;
}

/* ---------------------------------------------------------------- positions alike up to h bytes */

/* Two positions of one rule that no string of up to h bytes tells apart classify every token
 * of at most h bytes alike. Counters make such pairs common: the positions of `[a-z0-9-]{0,61}`
 * all differ (by a string running to the bound), but those more than h from the bound agree up
 * to h. (A per-rule partition refinement that joined only the fully equivalent positions cost
 * more than it saved: its rounds ran once per byte of the longest token over the whole rule.) So a new position is compared with the
 * rule's last few classified ones, a breadth-first walk over the pairs of nodes the same string
 * leads to (one level per byte) until they differ; with the best, the new position copies the
 * tokens of at most h bytes and walks only the longer ones (the vocabulary trie has 7 % of its
 * nodes on paths to tokens longer than 16 bytes, 1 % beyond 32 on Qwen2). A pair that does not
 * differ within the longest token's length is a full equivalence: the classification is
 * shared. */
#define AGREE_ALL UINT32_MAX

static void pairs_clear(struct gram_cls_scratch *s)
{
    for (uint32_t i = 0; i < s->n_pused; i++) s->pset[s->pused[i]] = UINT64_MAX;
    s->n_pused = 0;
}

/* Queue the pair (x, y) on the current level (same) or the next. false when the pair budget is
 * spent. */
static bool pair_add(struct gram_cls_scratch *s, uint32_t x, uint32_t y, bool same)
{
    if (x == y) return true; /* a node agrees with itself */
    uint64_t key = ((uint64_t)x << 32) | y;
    uint32_t k = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & GRAM_PAIR_MASK;
    while (s->pset[k] != UINT64_MAX) {
        if (s->pset[k] == key) return true; /* met on an earlier (or this) level */
        k = (k + 1) & GRAM_PAIR_MASK;
    }
    if (s->n_pused == GRAM_MAX_PAIRS) return false;
    /* every queued pair is in pused: the level arrays cannot outgrow it */
    TERN_ASSERT(s->n_pcur + s->n_pnext < GRAM_MAX_PAIRS);
    s->pset[k] = key;
    s->pused[s->n_pused++] = k;
    if (same) s->pcur[s->n_pcur++] = (struct gram_stack){x, y};
    else s->pnext[s->n_pnext++] = (struct gram_stack){x, y};
    return true;
}

/* The largest h (bytes) such that a and b (one rule) agree on every string of up to h bytes:
 * the same bytes can be taken, the rule can end at the same places, the same rules are called
 * (so tokens of up to h bytes classify alike). AGREE_ALL when no string tells them apart (the
 * pairs ran out), or none of up to the longest token's length. The walk stops past the longest
 * horizon: proving more costs more pairs than walking the few longer tokens does. */
static uint32_t agree_depth(const struct tern_grammar *g, struct gram_cls_scratch *s, uint32_t a, uint32_t b)
{
    if (!s->pset) {
        s->pcur = malloc(GRAM_MAX_PAIRS * sizeof *s->pcur);
        s->pnext = malloc(GRAM_MAX_PAIRS * sizeof *s->pnext);
        s->pused = malloc(GRAM_MAX_PAIRS * sizeof *s->pused);
        s->pset = malloc(((size_t)GRAM_PAIR_MASK + 1) * sizeof *s->pset);
        if (!s->pcur || !s->pnext || !s->pused || !s->pset) {
            free(s->pcur); free(s->pnext); free(s->pused); free(s->pset);
            s->pcur = s->pnext = NULL;
            s->pused = NULL;
            s->pset = NULL;
            return 0; /* no base: a full classification */
        }
        memset(s->pset, 0xFF, ((size_t)GRAM_PAIR_MASK + 1) * sizeof *s->pset);
    }
    const uint32_t max_h = gram_horizon[GRAM_NH - 1];
    const uint32_t limit = g->vocab->max_len;
    uint32_t res = AGREE_ALL;
    s->n_pcur = s->n_pnext = 0;
    pair_add(s, a, b, true);
    uint32_t j = 0;
    for (; s->n_pcur && j <= limit && res == AGREE_ALL; j++) {
        if (j > max_h) { res = max_h; break; }
        /* level j: the pairs j bytes lead to; a differing finality or call shows in tokens of j
         * bytes (the rule may end there), differing bytes in tokens of j + 1 */
        const uint32_t before = j ? j - 1 : 0;
        for (uint32_t i = 0; i < s->n_pcur; i++) { /* n_pcur grows with same-level pairs */
            const struct gram_node *nx = &g->nodes[s->pcur[i].node], *ny = &g->nodes[s->pcur[i].frame];
            if (((nx->flags | ny->flags) & GN_NONDET) || ((nx->flags ^ ny->flags) & GN_FINAL) || nx->c_n != ny->c_n) {
                res = before;
                break;
            }
            for (uint32_t k = 0; k < nx->c_n && res == AGREE_ALL; k++) {
                const struct gram_call *cx = &g->calls[nx->c_off + k], *cy = &g->calls[ny->c_off + k];
                if (cx->rule != cy->rule) { res = before; break; }
                /* the callee consumes at least one byte before the return, unless nullable */
                if (!pair_add(s, cx->ret, cy->ret, g->rules[cx->rule].nullable)) res = before;
            }
            if (res != AGREE_ALL) break;
            const struct gram_range *rx = g->ranges + nx->r_off, *ry = g->ranges + ny->r_off;
            uint32_t p = 0, q = 0;
            unsigned lx = nx->r_n ? rx[0].lo : 0, ly = ny->r_n ? ry[0].lo : 0;
            while (p < nx->r_n && q < ny->r_n) {
                if (lx != ly) break;
                unsigned end = rx[p].hi < ry[q].hi ? rx[p].hi : ry[q].hi;
                if (!pair_add(s, rx[p].to, ry[q].to, false)) { res = before; break; }
                if (rx[p].hi == end) { if (++p < nx->r_n) lx = rx[p].lo; } else lx = end + 1;
                if (ry[q].hi == end) { if (++q < ny->r_n) ly = ry[q].lo; } else ly = end + 1;
            }
            if (res != AGREE_ALL) break;
            if (p < nx->r_n || q < ny->r_n) { res = j; break; }
        }
        struct gram_stack *t = s->pcur;
        s->pcur = s->pnext;
        s->pnext = t;
        s->n_pcur = s->n_pnext;
        s->n_pnext = 0;
    }
    pairs_clear(s);
    return res;
}

/* The shape of a node: what it does with the next byte, without where it leads (its byte ranges,
 * finality, the rules it calls). Positions alike share it; a rule's recent positions may be of
 * other shapes only (a schema whose object is one inlined rule classifies keys, enums and a
 * format's characters in turn), so the last node of each shape is kept too. */
static uint32_t shape_slot(const struct tern_grammar *g, uint32_t node)
{
    const struct gram_node *nd = &g->nodes[node];
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (nd->flags & (GN_FINAL | GN_NONDET)) ^ (uint64_t)nd->rule << 8;
    for (uint32_t k = 0; k < nd->r_n; k++) {
        const struct gram_range *r = &g->ranges[nd->r_off + k];
        h = (h ^ ((uint64_t)r->lo << 8 | r->hi)) * 0xff51afd7ed558ccdull;
    }
    for (uint32_t k = 0; k < nd->c_n; k++) h = (h ^ g->calls[nd->c_off + k].rule) * 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(h >> 40) % GRAM_ALIKE_SLOTS;
}

/* Remember node as one of its rule's recent classifications and the last of its shape (bases
 * for the next). */
static void recent_add(const struct tern_grammar *g, uint32_t node)
{
    TERN_ASSERT(node < g->n_nodes && g->nodes[node].rule < g->n_rules);
    uint32_t r = g->nodes[node].rule;
    unsigned k = atomic_fetch_add_explicit(&g->cache->recent_n[r], 1, memory_order_relaxed) % GRAM_RECENT;
    atomic_store_explicit(&g->cache->recent[(size_t)r * GRAM_RECENT + k], node + 1, memory_order_release);
    atomic_store_explicit(&g->cache->alike[shape_slot(g, node)], node + 1, memory_order_release);
}

/* The best base among the rule's recent classifications and the last of node's shape: *depth =
 * how far it agrees with node. */
static const struct gram_cls *best_base(const struct tern_grammar *g, struct gram_cls_scratch *s, uint32_t node,
                                        uint32_t *depth)
{
    uint32_t r = g->nodes[node].rule;
    const struct gram_cls *best = NULL;
    *depth = 0;
    unsigned last = atomic_load_explicit(&g->cache->recent_n[r], memory_order_relaxed);
    for (unsigned i = 0; i < GRAM_RECENT && i < last; i++) { /* newest first */
        unsigned o = atomic_load_explicit(&g->cache->recent[(size_t)r * GRAM_RECENT + (last - 1 - i) % GRAM_RECENT],
                                          memory_order_acquire);
        if (!o || o - 1 == node) continue;
        const struct gram_cls *c = atomic_load_explicit(&g->cache->slot[o - 1], memory_order_acquire);
        if (!c) continue;
        uint32_t d = agree_depth(g, s, o - 1, node);
        if (!best || d > *depth) { best = c; *depth = d; }
        if (d >= gram_horizon[GRAM_NH - 1]) return best; /* as good as it gets for what it costs */
    }
    /* the last position of the same shape, unless it was among those */
    unsigned o = atomic_load_explicit(&g->cache->alike[shape_slot(g, node)], memory_order_acquire);
    if (!o || o - 1 == node || g->nodes[o - 1].rule != r) return best;
    for (unsigned i = 0; i < GRAM_RECENT && i < last; i++)
        if (atomic_load_explicit(&g->cache->recent[(size_t)r * GRAM_RECENT + (last - 1 - i) % GRAM_RECENT],
                                 memory_order_relaxed) == o)
            return best;
    const struct gram_cls *c = atomic_load_explicit(&g->cache->slot[o - 1], memory_order_acquire);
    if (!c) return best;
    uint32_t d = agree_depth(g, s, o - 1, node);
    if (!best || d > *depth) { best = c; *depth = d; }
    return best;
}

const struct gram_cls *gram_node_cls(const struct tern_grammar *g, uint32_t node,
                                     struct gram_cls_scratch *s, bool *fresh)
{
    *fresh = false;
    TERN_ASSERT(node < g->n_nodes && g->vocab && g->cache, "classification needs a vocabulary");
    struct gram_cls *c = atomic_load_explicit(&g->cache->slot[node], memory_order_acquire);
    if (c) return c;
    const struct gram_cls *share = NULL;
    uint32_t depth = 0;
    /* a text node walks only the tokens outside the text slice (a few hundred): comparing it
     * with other positions first (tens of µs at each count of a maxLength string) would cost
     * more than the walk it saves */
    const struct gram_cls *base = text_cap(g, node) == TCAP_NONE ? best_base(g, s, node, &depth) : NULL;
    if (base && depth == AGREE_ALL) share = base;
    if (share) {
        struct gram_cls *expected = NULL;
        if (!atomic_compare_exchange_strong_explicit(&g->cache->slot[node], &expected, (struct gram_cls *)share,
                                                     memory_order_acq_rel, memory_order_acquire))
            return expected;
        atomic_fetch_add_explicit(&g->cache->n_shared, 1, memory_order_relaxed);
        return share;
    }
    int hk = -1;
    for (int k = 0; k < GRAM_NH; k++)
        if (gram_horizon[k] <= depth) hk = k;
    c = classify(g, node, s, hk >= 0 ? base : NULL, hk, GRAM_NONE, 0);
    if (!c) return NULL;
    struct gram_cls *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&g->cache->slot[node], &expected, c,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        gram_cls_free(c); /* another thread published first: use theirs */
        return expected;
    }
    recent_add(g, node);
    if (hk >= 0) atomic_fetch_add_explicit(&g->cache->n_derived, 1, memory_order_relaxed);
    atomic_fetch_add(&g->cache->bytes, c->bytes);
    atomic_fetch_add(&g->cache->count, 1);
    *fresh = true;
    return c;
}

/* ---------------------------------------------------------------- positions under a counter */

/* (node, L, cnt) -> classification: open addressing under a lock (looked up once per counted
 * stack of a mask; a counter has at most ~2 x (longest token) saturated counts). */
struct ccls_ent {
    uint32_t node, L, cnt;
    struct gram_cls *c;
};
struct ccls_map {
    pthread_mutex_t mu;
    struct ccls_ent *e;
    uint32_t mask, n;
};

static uint32_t ccls_hash(uint32_t node, uint32_t L, uint32_t cnt)
{
    uint64_t h = ((uint64_t)node << 32 | L) * 0x9E3779B97F4A7C15ull ^ (uint64_t)cnt * 0xC2B2AE3D27D4EB4Full;
    return (uint32_t)(h >> 32);
}

static struct gram_cls *ccls_find(const struct ccls_map *m, uint32_t node, uint32_t L, uint32_t cnt)
{
    if (!m->e) return NULL;
    for (uint32_t k = ccls_hash(node, L, cnt) & m->mask;; k = (k + 1) & m->mask) {
        const struct ccls_ent *x = &m->e[k];
        if (!x->c) return NULL;
        if (x->node == node && x->L == L && x->cnt == cnt) return x->c;
    }
}

static bool ccls_put(struct ccls_map *m, uint32_t node, uint32_t L, uint32_t cnt, struct gram_cls *c)
{
    if (!m->e || (m->n + 1) * 2 > m->mask) {
        uint32_t nm = m->e ? m->mask * 2 + 1 : 255;
        struct ccls_ent *ne = calloc((size_t)nm + 1, sizeof *ne);
        if (!ne) return false;
        for (uint32_t i = 0; m->e && i <= m->mask; i++) {
            if (!m->e[i].c) continue;
            uint32_t k = ccls_hash(m->e[i].node, m->e[i].L, m->e[i].cnt) & nm;
            while (ne[k].c) k = (k + 1) & nm;
            ne[k] = m->e[i];
        }
        free(m->e);
        m->e = ne;
        m->mask = nm;
    }
    TERN_ASSERT((m->n + 1) * 2 <= m->mask && c, "the table keeps an empty slot");
    uint32_t k = ccls_hash(node, L, cnt) & m->mask;
    while (m->e[k].c) k = (k + 1) & m->mask;
    m->e[k] = (struct ccls_ent){node, L, cnt, c};
    m->n++;
    return true;
}

static tern_status gram_ccls_create(struct tern_grammar *g)
{
    struct ccls_map *m = calloc(1, sizeof *m);
    if (!m || pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    }
    g->cache->ccls = m;
    return TERN_OK;
}

static void gram_ccls_free(struct tern_grammar *g)
{
    struct ccls_map *m = g->cache ? g->cache->ccls : NULL;
    if (!m) return;
    for (uint32_t i = 0; m->e && i <= m->mask; i++) gram_cls_free(m->e[i].c);
    free(m->e);
    pthread_mutex_destroy(&m->mu);
    free(m);
    g->cache->ccls = NULL;
}

const struct gram_cls *gram_node_cls_count(const struct tern_grammar *g, uint32_t node, uint32_t L, uint32_t cnt,
                                           struct gram_cls_scratch *s, bool *fresh)
{
    *fresh = false;
    TERN_ASSERT(node < g->n_nodes && L < g->n_nodes && (g->nodes[L].flags & GN_COUNT), "L is a counter's node");
    TERN_ASSERT(cnt > 0, "counts start at 1 in a counter frame");
    struct ccls_map *m = g->cache->ccls;
    pthread_mutex_lock(&m->mu);
    struct gram_cls *c = ccls_find(m, node, L, cnt);
    pthread_mutex_unlock(&m->mu);
    if (c) return c;
    c = classify(g, node, s, NULL, -1, L, cnt);
    if (!c) return NULL;
    pthread_mutex_lock(&m->mu);
    struct gram_cls *other = ccls_find(m, node, L, cnt);
    bool ok = other || ccls_put(m, node, L, cnt, c);
    pthread_mutex_unlock(&m->mu);
    if (other || !ok) {
        gram_cls_free(c); /* another thread's is the same */
        return other;     /* NULL: out of memory */
    }
    atomic_fetch_add(&g->cache->bytes, c->bytes);
    atomic_fetch_add(&g->cache->count, 1);
    *fresh = true;
    return c;
}
