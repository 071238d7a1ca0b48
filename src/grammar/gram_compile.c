/* gram_compile.c — IR -> the pushdown automaton the matcher runs (see gram_internal.h).
 *
 * Each rule becomes one automaton over bytes whose edges are byte ranges or calls of other
 * rules (a call pushes the node to return to). Steps:
 *   1. Thompson construction of one NFA per rule (repetitions are expanded, so {m,n} costs
 *      states; the limits in gram_internal.h keep that bounded).
 *   2. Subset construction per rule over the grammar's byte classes (bytes no byte set of the
 *      grammar tells apart) and call symbols, so a rule is usually deterministic and a parse
 *      rarely needs more than one stack. A rule whose DFA would exceed GRAM_MAX_DFA_PER_RULE
 *      states keeps its epsilon-free NFA (nodes flagged GN_NONDET): bounded compile time for
 *      catastrophic regexes, at the price of more stacks while matching.
 *   3. Analyses: nullable rules, left recursion (refused: a call cycle that consumes nothing
 *      would push forever), productivity with the vocabulary's bytes (dead branches are cut so
 *      a matcher can never walk into a state from which no document can be finished; a root
 *      that is not productive is an error), and per rule the set of nodes that can follow its
 *      end (used by token classification to reject tokens that run past a rule's end in every
 *      context, gram_mask.c). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/check.h"
#include "util/error.h"

/* ---------------------------------------------------------------- growable arrays */
#define VEC(T) struct { T *v; uint32_t n, cap; }
#define VEC_PUSH(vec, x, fail)                                                                 \
    do {                                                                                       \
        if ((vec).n == (vec).cap) {                                                            \
            uint32_t nc_ = (vec).cap ? (vec).cap * 2 : 64;                                     \
            void *p_ = realloc((vec).v, (size_t)nc_ * sizeof *(vec).v);                        \
            if (!p_) goto fail;                                                                \
            (vec).v = p_;                                                                      \
            (vec).cap = nc_;                                                                   \
        }                                                                                      \
        (vec).v[(vec).n++] = (x);                                                              \
    } while (0)

/* ---------------------------------------------------------------- NFA */
enum { NE_EPS = 0, NE_SET, NE_RANGE, NE_CALL };
struct nfa_edge {
    uint32_t next;   /* next edge of the same state, or GRAM_NONE */
    uint32_t to;
    uint32_t arg;    /* SET: set index; RANGE: lo | hi << 8; CALL: rule */
    uint8_t kind;
};

struct nfa {
    const bool *inl; /* [rules] calls of these rules are expanded in place */
    uint32_t *head;  /* [n_states] first edge */
    uint32_t n_states, cap_states;
    struct nfa_edge *e;
    uint32_t n_e, cap_e;
    bool full, oom;
};

static uint32_t nfa_state(struct nfa *a)
{
    if (a->full || a->oom) return 0;
    if (a->n_states >= GRAM_MAX_NFA_STATES) { a->full = true; return 0; }
    if (a->n_states == a->cap_states) {
        uint32_t nc = a->cap_states ? a->cap_states * 2 : 256;
        uint32_t *h = realloc(a->head, nc * sizeof *h);
        if (!h) { a->oom = true; return 0; }
        a->head = h;
        a->cap_states = nc;
    }
    TERN_ASSERT(a->n_states < a->cap_states);
    a->head[a->n_states] = GRAM_NONE;
    return a->n_states++;
}

static void nfa_edge(struct nfa *a, uint32_t from, uint8_t kind, uint32_t arg, uint32_t to)
{
    if (a->full || a->oom) return;
    if (a->n_e >= 4 * GRAM_MAX_NFA_STATES) { a->full = true; return; }
    if (a->n_e == a->cap_e) {
        uint32_t nc = a->cap_e ? a->cap_e * 2 : 512;
        struct nfa_edge *e = realloc(a->e, nc * sizeof *e);
        if (!e) { a->oom = true; return; }
        a->e = e;
        a->cap_e = nc;
    }
    TERN_ASSERT(from < a->n_states && to < a->n_states && a->n_e < a->cap_e, "edges join states already made");
    a->e[a->n_e] = (struct nfa_edge){a->head[from], to, arg, kind};
    a->head[from] = a->n_e++;
}

/* Build ex between from and to. depth guards the C stack on absurdly nested IR. */
static void thompson(struct nfa *a, const struct gram_ir *ir, uint32_t x, uint32_t from,
                     uint32_t to, int depth)
{
    if (a->full || a->oom) return;
    if (depth > 2000) { a->full = true; return; }
    const struct gram_ex *e = &ir->ex[x];
    switch (e->kind) {
    case GX_NOTHING:
        return;
    case GX_EMPTY:
        nfa_edge(a, from, NE_EPS, 0, to);
        return;
    case GX_BYTES:
        nfa_edge(a, from, NE_SET, e->a, to);
        return;
    case GX_REF:
        if (a->inl && a->inl[e->a]) thompson(a, ir, ir->rules[e->a].ex, from, to, depth + 1);
        else nfa_edge(a, from, NE_CALL, e->a, to);
        return;
    case GX_SEQ: {
        uint32_t cur = from;
        for (uint32_t i = 0; i < e->b; i++) {
            uint32_t nxt = i + 1 == e->b ? to : nfa_state(a);
            thompson(a, ir, ir->kids[e->a + i], cur, nxt, depth + 1);
            cur = nxt;
        }
        return;
    }
    case GX_ALT:
        for (uint32_t i = 0; i < e->b; i++) {
            /* fresh entry/exit per branch: a loop inside one branch must not see the others */
            uint32_t s = nfa_state(a), t = nfa_state(a);
            nfa_edge(a, from, NE_EPS, 0, s);
            thompson(a, ir, ir->kids[e->a + i], s, t, depth + 1);
            nfa_edge(a, t, NE_EPS, 0, to);
        }
        return;
    case GX_REP: {
        uint32_t cur = from;
        for (uint32_t i = 0; i < e->b && !a->full && !a->oom; i++) {
            uint32_t nxt = nfa_state(a);
            thompson(a, ir, e->a, cur, nxt, depth + 1);
            cur = nxt;
        }
        if (e->c == GRAM_INF) {
            uint32_t s = nfa_state(a), t = nfa_state(a);
            nfa_edge(a, cur, NE_EPS, 0, s);
            thompson(a, ir, e->a, s, t, depth + 1);
            nfa_edge(a, t, NE_EPS, 0, s);
            nfa_edge(a, s, NE_EPS, 0, to);
        } else {
            for (uint32_t i = e->b; i < e->c && !a->full && !a->oom; i++) {
                nfa_edge(a, cur, NE_EPS, 0, to);
                uint32_t nxt = nfa_state(a);
                thompson(a, ir, e->a, cur, nxt, depth + 1);
                cur = nxt;
            }
            nfa_edge(a, cur, NE_EPS, 0, to);
        }
        return;
    }
    case GX_COUNT: {
        /* (body)*: one node that calls the body and returns to itself; the bounds are not in
         * the automaton but in the rule (gram_compile sets the counter flags) */
        uint32_t s = nfa_state(a);
        nfa_edge(a, from, NE_EPS, 0, s);
        nfa_edge(a, s, NE_CALL, e->a, s);
        nfa_edge(a, s, NE_EPS, 0, to);
        return;
    }
    case GX_DFA: {
        const struct gram_dfa *d = &ir->dfas[e->a];
        if (d->n_states == 0) return;
        uint32_t base = a->n_states;
        for (uint32_t i = 0; i < d->n_states; i++) nfa_state(a);
        if (a->full || a->oom) return;
        nfa_edge(a, from, NE_EPS, 0, base + d->start);
        for (uint32_t i = 0; i < d->n_edges; i++) {
            const struct gram_dfa_edge *de = &d->edges[i];
            if (de->from >= d->n_states || de->to >= d->n_states || de->lo > de->hi) continue;
            nfa_edge(a, base + de->from, NE_RANGE, de->lo | (uint32_t)de->hi << 8, base + de->to);
        }
        for (uint32_t i = 0; i < d->n_xedges; i++) {
            const struct gram_dfa_xedge *xe = &d->xedges[i];
            if (xe->from >= d->n_states || xe->to >= d->n_states || xe->ex >= ir->n_ex) continue;
            thompson(a, ir, xe->ex, base + xe->from, base + xe->to, depth + 1);
        }
        for (uint32_t i = 0; i < d->n_states; i++)
            if (d->final[i]) nfa_edge(a, base + i, NE_EPS, 0, to);
        return;
    }
    }
}

/* ---------------------------------------------------------------- inlining */

/* Which rules are expanded where they are called instead of being called: rules that are not
 * recursive, not the root, not marked shared, and either called from one place or tiny. A call
 * costs a push at match time, and a rule end inside a token makes the token's acceptance
 * depend on the caller (slower classification, more tokens checked at decode time); GBNF
 * grammars are full of small helper rules (ws, name, digit). Sizes count the automaton states
 * an expansion would make, callees' expansions included, so nesting cannot blow up. */
#define INLINE_TINY 48
#define INLINE_ONCE 60000

struct inl_ctx {
    const struct gram_ir *ir;
    bool *inl;
    uint64_t *size;      /* [n_ex] memo (0 = not computed) */
    uint32_t *calls;     /* [rules] references to the rule */
    uint8_t *state;      /* [rules] 0 new, 1 on the DFS stack, 2 done */
    bool *cyclic;
};

static uint64_t ex_size(struct inl_ctx *c, uint32_t x, int depth)
{
    if (depth > 2000) return UINT64_MAX / 4;
    if (c->size[x]) return c->size[x];
    const struct gram_ex *e = &c->ir->ex[x];
    uint64_t s = 1;
    switch (e->kind) {
    case GX_SEQ: case GX_ALT:
        s = 2;
        for (uint32_t i = 0; i < e->b; i++) s += ex_size(c, c->ir->kids[e->a + i], depth + 1);
        break;
    case GX_REP: {
        uint64_t k = e->c == GRAM_INF ? (uint64_t)e->b + 1 : e->c;
        s = 2 + ex_size(c, e->a, depth + 1) * (k ? k : 1);
        break;
    }
    case GX_REF:
        s = c->inl[e->a] ? ex_size(c, c->ir->rules[e->a].ex, depth + 1) : 1;
        break;
    case GX_DFA:
        s = c->ir->dfas[e->a].n_states + c->ir->dfas[e->a].n_xedges + 1;
        for (uint32_t i = 0; i < c->ir->dfas[e->a].n_xedges; i++) s += ex_size(c, c->ir->dfas[e->a].xedges[i].ex, depth + 1);
        break;
    default:
        break;
    }
    if (s > UINT64_MAX / 8) s = UINT64_MAX / 8;
    c->size[x] = s;
    return s;
}

/* Rules an expression refers to (each expression visited once per rule via mark). */
static void refs_of(const struct gram_ir *ir, uint32_t x, uint32_t *mark, uint32_t stamp, uint32_t *out, uint32_t *n,
                    uint32_t cap, int depth)
{
    if (depth > 2000 || mark[x] == stamp) return;
    mark[x] = stamp;
    const struct gram_ex *e = &ir->ex[x];
    if (e->kind == GX_REF || e->kind == GX_COUNT) { if (*n < cap) out[(*n)++] = e->a; return; }
    if (e->kind == GX_SEQ || e->kind == GX_ALT)
        for (uint32_t i = 0; i < e->b; i++) refs_of(ir, ir->kids[e->a + i], mark, stamp, out, n, cap, depth + 1);
    else if (e->kind == GX_REP) refs_of(ir, e->a, mark, stamp, out, n, cap, depth + 1);
    else if (e->kind == GX_DFA)
        for (uint32_t i = 0; i < ir->dfas[e->a].n_xedges; i++) refs_of(ir, ir->dfas[e->a].xedges[i].ex, mark, stamp, out, n, cap, depth + 1);
}

/* inl[r] for every rule; false everywhere on allocation failure (inlining is an optimization) */
static void decide_inlining(const struct gram_ir *ir, uint32_t root, bool *inl)
{
    uint32_t nr = ir->n_rules;
    memset(inl, 0, nr);
    uint32_t *mark = calloc(ir->n_ex ? ir->n_ex : 1, sizeof *mark);
    uint32_t *off = calloc(nr + 1, sizeof *off);
    uint32_t cap = 1 << 16, n_e = 0;
    uint32_t *edges = malloc(cap * sizeof *edges);
    uint32_t *calls = calloc(nr, sizeof *calls);
    uint8_t *state = calloc(nr, 1);
    uint64_t *size = calloc(ir->n_ex ? ir->n_ex : 1, sizeof *size);
    uint32_t *stack = malloc(((size_t)nr + 1) * 2 * sizeof *stack);
    uint32_t *low = malloc((size_t)nr * sizeof *low), *idx = malloc((size_t)nr * sizeof *idx);
    bool *cyclic = calloc(nr, 1), *onst = calloc(nr, 1);
    uint32_t *order = malloc((size_t)nr * sizeof *order), *tstack = malloc((size_t)nr * sizeof *tstack);
    if (!mark || !off || !edges || !calls || !state || !size || !stack || !low || !idx || !cyclic || !onst || !order || !tstack)
        goto done;
    for (uint32_t r = 0; r < nr; r++) {
        off[r] = n_e;
        uint32_t got = 0;
        refs_of(ir, ir->rules[r].ex, mark, r + 1, edges + n_e, &got, cap - n_e, 0);
        if (n_e + got >= cap) goto done; /* absurdly many references: no inlining */
        n_e += got;
    }
    off[nr] = n_e;
    /* how many times Thompson would expand each expression if every body were expanded once:
     * a shared subexpression counts once per parent use, a repetition's child max times.
     * Builders create children before parents, so descending ids are a topological order. */
    {
        uint64_t *mult = calloc(ir->n_ex ? ir->n_ex : 1, sizeof *mult);
        if (!mult) goto done;
        for (uint32_t r = 0; r < nr; r++)
            if (ir->rules[r].ex != GRAM_NONE) mult[ir->rules[r].ex] += 1;
        for (uint32_t x = ir->n_ex; x-- > 0;) {
            uint64_t m = mult[x];
            if (!m) continue;
            const struct gram_ex *e = &ir->ex[x];
            if (m > (1ull << 40)) m = 1ull << 40;
            switch (e->kind) {
            case GX_SEQ: case GX_ALT:
                for (uint32_t i = 0; i < e->b; i++) mult[ir->kids[e->a + i]] += m;
                break;
            case GX_REP: {
                uint64_t k = e->c == GRAM_INF ? (uint64_t)e->b + 1 : e->c;
                mult[e->a] += m * (k ? k : 1);
                break;
            }
            case GX_REF: case GX_COUNT:
                calls[e->a] += m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
                if (calls[e->a] > UINT32_MAX / 2) calls[e->a] = UINT32_MAX / 2;
                break;
            case GX_DFA:
                for (uint32_t i = 0; i < ir->dfas[e->a].n_xedges; i++) mult[ir->dfas[e->a].xedges[i].ex] += m;
                break;
            default:
                break;
            }
        }
        free(mult);
    }
    /* Tarjan's strongly connected components (iterative): rules in a cycle are recursive */
    uint32_t counter = 0, ts = 0, n_order = 0;
    for (uint32_t r = 0; r < nr; r++) idx[r] = GRAM_NONE;
    for (uint32_t r0 = 0; r0 < nr; r0++) {
        if (idx[r0] != GRAM_NONE) continue;
        uint32_t sp = 0;
        stack[sp++] = r0;
        stack[sp++] = off[r0];
        idx[r0] = low[r0] = counter++;
        tstack[ts++] = r0;
        onst[r0] = true;
        while (sp) {
            uint32_t r = stack[sp - 2], *it = &stack[sp - 1];
            if (*it < off[r + 1]) {
                uint32_t t = edges[(*it)++];
                if (idx[t] == GRAM_NONE) {
                    idx[t] = low[t] = counter++;
                    tstack[ts++] = t;
                    onst[t] = true;
                    stack[sp++] = t;
                    stack[sp++] = off[t];
                } else if (onst[t] && idx[t] < low[r]) {
                    low[r] = idx[t];
                }
                if (t == r) cyclic[r] = true;
                continue;
            }
            sp -= 2;
            if (sp && low[r] < low[stack[sp - 2]]) low[stack[sp - 2]] = low[r];
            if (low[r] == idx[r]) {
                uint32_t cnt = 0, top;
                uint32_t base = ts;
                do { top = tstack[--ts]; onst[top] = false; cnt++; } while (top != r);
                if (cnt > 1) for (uint32_t k = ts; k < base; k++) cyclic[tstack[k]] = true;
            }
            order[n_order++] = r; /* post-order: callees first */
        }
    }
    struct inl_ctx c = {ir, inl, size, calls, state, cyclic};
    for (uint32_t k = 0; k < n_order; k++) {
        uint32_t r = order[k];
        if (r == root || cyclic[r] || ir->rules[r].shared || ir->rules[r].ex == GRAM_NONE) continue;
        uint64_t s = ex_size(&c, ir->rules[r].ex, 0);
        inl[r] = s <= INLINE_TINY || (calls[r] == 1 && s <= INLINE_ONCE);
    }
done:
    free(mark);
    free(off);
    free(edges);
    free(calls);
    free(state);
    free(size);
    free(stack);
    free(low);
    free(idx);
    free(cyclic);
    free(onst);
    free(order);
    free(tstack);
}

/* ---------------------------------------------------------------- byte classes */
struct classes {
    uint8_t of[256];
    uint32_t n;
    uint8_t rep[256];   /* a byte of each class */
    /* each class's bytes as ranges: cr[cr_off[c] .. cr_off[c+1]) */
    uint16_t cr_off[257];
    uint8_t cr_lo[256], cr_hi[256];
};

static void refine(struct classes *c, const struct gram_bset *s)
{
    int16_t newid[256];
    for (int i = 0; i < 256; i++) newid[i] = -1;
    uint32_t n = c->n;
    uint32_t cnt_in[256] = {0}, cnt_all[256] = {0};
    for (int b = 0; b < 256; b++) {
        cnt_all[c->of[b]]++;
        if (gram_bset_has(s, (unsigned)b)) cnt_in[c->of[b]]++;
    }
    for (int b = 0; b < 256; b++) {
        uint8_t k = c->of[b];
        if (!gram_bset_has(s, (unsigned)b) || cnt_in[k] == cnt_all[k]) continue;
        if (newid[k] < 0) newid[k] = (int16_t)n++;
        c->of[b] = (uint8_t)newid[k];
    }
    c->n = n;
}

static void build_classes(const struct gram_ir *ir, struct classes *c)
{
    memset(c, 0, sizeof *c);
    c->n = 1;
    for (uint32_t i = 0; i < ir->n_sets && c->n < 256; i++) refine(c, &ir->sets[i]);
    /* embedded automata repeat the same few ranges over many edges (a number's digits): each
     * distinct range refines once (refining is idempotent, and costs two passes over 256 bytes) */
    uint64_t done[65536 / 64] = {0};
    for (uint32_t d = 0; d < ir->n_dfas && c->n < 256; d++)
        for (uint32_t i = 0; i < ir->dfas[d].n_edges && c->n < 256; i++) {
            uint32_t key = (uint32_t)ir->dfas[d].edges[i].lo << 8 | ir->dfas[d].edges[i].hi;
            if (done[key >> 6] >> (key & 63) & 1) continue;
            done[key >> 6] |= 1ull << (key & 63);
            struct gram_bset s = {{0}};
            gram_bset_add_range(&s, ir->dfas[d].edges[i].lo, ir->dfas[d].edges[i].hi);
            refine(c, &s);
        }
    bool seen[256] = {0};
    for (int b = 0; b < 256; b++)
        if (!seen[c->of[b]]) { seen[c->of[b]] = true; c->rep[c->of[b]] = (uint8_t)b; }
    /* ranges per class: count, then fill in byte order */
    uint16_t cnt[257] = {0};
    for (int b = 0; b < 256; b++)
        if (b == 0 || c->of[b] != c->of[b - 1]) cnt[c->of[b] + 1]++;
    for (uint32_t k = 0; k < c->n; k++) cnt[k + 1] += cnt[k];
    memcpy(c->cr_off, cnt, sizeof cnt);
    for (int b = 0; b < 256;) {
        int e = b;
        while (e + 1 < 256 && c->of[e + 1] == c->of[b]) e++;
        uint16_t i = cnt[c->of[b]]++;
        c->cr_lo[i] = (uint8_t)b;
        c->cr_hi[i] = (uint8_t)e;
        b = e + 1;
    }
}

static bool edge_has_byte(const struct gram_ir *ir, const struct nfa_edge *e, unsigned b)
{
    if (e->kind == NE_SET) return gram_bset_has(&ir->sets[e->arg], b);
    return b >= (e->arg & 0xFF) && b <= (e->arg >> 8);
}

/* ---------------------------------------------------------------- output being assembled */
struct out {
    VEC(struct gram_node) nodes;
    VEC(struct gram_range) ranges;
    VEC(struct gram_call) calls;
};

/* ---------------------------------------------------------------- subset construction */
struct subset_ctx {
    const struct gram_ir *ir;
    struct nfa *a;
    const struct classes *cls;
    struct gram_bset *set_cls;   /* [n_sets] the byte classes each byte set contains */
    uint32_t accept;          /* the rule's NFA accept state */
    uint32_t *stamp;          /* [n_states] */
    uint32_t cur_stamp;
    uint32_t *dfs;            /* scratch stack */
    VEC(uint32_t) pool;       /* member lists of DFA states */
    VEC(uint32_t) soff;       /* [dfa state] offset into pool, and soff[n] = end */
    uint32_t *hslot;          /* hash -> dfa state */
    uint32_t hmask;
    uint8_t *imp;             /* [n_states] 1 = a byte or call edge leaves (mark_important) */
    uint64_t work;            /* states and edges visited by this rule's construction */
    bool too_ambiguous;       /* nfa_rule: more than GRAM_MAX_NFA_RANGES edges */
    bool oom;
};

/* A state is important when a byte or a call leaves it, or it is the rule's accept state:
 * only those go into member lists (closures walk through the rest). The edge half is
 * computed once per grammar, since closures ask for every state they visit. */
static uint8_t *mark_important(const struct nfa *a)
{
    uint8_t *imp = calloc(a->n_states ? a->n_states : 1, 1);
    if (!imp) return NULL;
    for (uint32_t st = 0; st < a->n_states; st++)
        for (uint32_t e = a->head[st]; e != GRAM_NONE; e = a->e[e].next)
            if (a->e[e].kind != NE_EPS) { imp[st] = 1; break; }
    return imp;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Epsilon closure of seeds[0..n) (only important states kept), sorted, appended to pool.
 * Returns the number of members appended. */
static uint32_t closure(struct subset_ctx *s, const uint32_t *seeds, uint32_t n)
{
    s->cur_stamp++;
    uint32_t sp = 0, start = s->pool.n;
    for (uint32_t i = 0; i < n; i++) {
        if (s->stamp[seeds[i]] == s->cur_stamp) continue;
        s->stamp[seeds[i]] = s->cur_stamp;
        s->dfs[sp++] = seeds[i];
    }
    while (sp) {
        uint32_t st = s->dfs[--sp];
        s->work++;
        if (s->imp[st] || st == s->accept) VEC_PUSH(s->pool, st, oom);
        for (uint32_t e = s->a->head[st]; e != GRAM_NONE; e = s->a->e[e].next) {
            const struct nfa_edge *ed = &s->a->e[e];
            s->work++;
            if (ed->kind != NE_EPS || s->stamp[ed->to] == s->cur_stamp) continue;
            s->stamp[ed->to] = s->cur_stamp;
            s->dfs[sp++] = ed->to;
        }
    }
    uint32_t m = s->pool.n - start;
    /* insertion sort while member lists are short (the common case); a nested counted
     * repetition has hundreds of members, and quadratic sorting would dominate its budget */
    uint32_t *v = s->pool.v + start;
    if (m > 32) {
        qsort(v, m, sizeof *v, cmp_u32);
        s->work += m * (uint64_t)(32 - __builtin_clz(m));
        return m;
    }
    for (uint32_t i = 1; i < m; i++) {
        uint32_t x = v[i], j = i;
        while (j && v[j - 1] > x) { v[j] = v[j - 1]; j--; }
        v[j] = x;
    }
    return m;
oom:
    s->oom = true;
    return 0;
}

static uint32_t hash_list(const uint32_t *v, uint32_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ v[i]) * 0x100000001B3ull;
    return (uint32_t)(h ^ (h >> 29));
}

/* Find or add the DFA state whose members were just appended to the pool (m of them). */
static uint32_t intern_state(struct subset_ctx *s, uint32_t m, bool *is_new)
{
    *is_new = false;
    uint32_t start = s->pool.n - m;
    uint32_t h = hash_list(s->pool.v + start, m);
    uint32_t n_states = s->soff.n - 1;
    if (n_states * 2 >= s->hmask) { /* rehash */
        uint32_t nm = s->hmask ? (s->hmask + 1) * 2 - 1 : 255;
        uint32_t *ns = malloc((size_t)(nm + 1) * sizeof *ns);
        if (!ns) { s->oom = true; return GRAM_NONE; }
        memset(ns, 0xFF, (size_t)(nm + 1) * sizeof *ns);
        for (uint32_t d = 0; d < n_states; d++) {
            uint32_t a = s->soff.v[d], b = s->soff.v[d + 1];
            uint32_t k = hash_list(s->pool.v + a, b - a) & nm;
            while (ns[k] != GRAM_NONE) k = (k + 1) & nm;
            ns[k] = d;
        }
        free(s->hslot);
        s->hslot = ns;
        s->hmask = nm;
    }
    uint32_t k = h & s->hmask;
    while (s->hslot[k] != GRAM_NONE) {
        uint32_t d = s->hslot[k];
        uint32_t a = s->soff.v[d], b = s->soff.v[d + 1];
        if (b - a == m && !memcmp(s->pool.v + a, s->pool.v + start, m * sizeof(uint32_t))) {
            s->pool.n = start; /* drop the duplicate */
            return d;
        }
        k = (k + 1) & s->hmask;
    }
    s->hslot[k] = n_states;
    VEC_PUSH(s->soff, s->pool.n, oom);
    *is_new = true;
    return n_states;
oom:
    s->oom = true;
    return GRAM_NONE;
}

struct pair {
    uint32_t key, to;
};
static int cmp_pair(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->to < y->to ? -1 : x->to > y->to;
}

/* Determinize one rule. On success appends the rule's nodes to o (first node = start) and
 * returns true; returns false with *too_many when the state limit was hit (nothing appended). */
static bool subset_rule(struct subset_ctx *s, uint32_t rule, uint32_t nfa_start, struct out *o,
                        bool *too_many)
{
    *too_many = false;
    s->work = 0;
    s->pool.n = 0;
    s->soff.n = 0;
    if (s->hslot) memset(s->hslot, 0xFF, (size_t)(s->hmask + 1) * sizeof *s->hslot);
    VEC_PUSH(s->soff, 0, oom);
    bool is_new;
    uint32_t m = closure(s, &nfa_start, 1);
    if (s->oom) return false;
    intern_state(s, m, &is_new);
    if (s->oom) return false;

    uint32_t base = o->nodes.n;
    VEC(struct pair) pairs = {0};
    VEC(struct pair) tmp = {0};
    VEC(uint32_t) seeds = {0};
    uint32_t cls_to[256], used[256];
    for (uint32_t c = 0; c < 256; c++) cls_to[c] = GRAM_NONE;
    /* work budget as well as a state limit: a regex whose subsets explode (an unanchored
     * counted class) has large member sets, so it gives up early; a long counted string has
     * many small ones and determinizes. Closures count too (s->work): their epsilon walks are
     * where an unanchored `A.{60}` spends its time. */
    for (uint32_t d = 0; d < s->soff.n - 1; d++) {
        if (s->soff.n - 1 > GRAM_MAX_DFA_PER_RULE || s->work > GRAM_SUBSET_WORK) { *too_many = true; break; }
        /* members of d are copied out: the pool grows while we intern targets */
        uint32_t a = s->soff.v[d], b = s->soff.v[d + 1];
        pairs.n = 0;
        bool final = false;
        for (uint32_t i = a; i < b; i++) {
            uint32_t st = s->pool.v[i];
            if (st == s->accept) final = true;
            for (uint32_t e = s->a->head[st]; e != GRAM_NONE; e = s->a->e[e].next) {
                const struct nfa_edge *ed = &s->a->e[e];
                if (ed->kind == NE_SET) {
                    const struct gram_bset *cs = &s->set_cls[ed->arg];
                    for (int w = 0; w < 4; w++)
                        for (uint64_t bits = cs->w[w]; bits; bits &= bits - 1) {
                            struct pair p = {(uint32_t)(w * 64 + __builtin_ctzll(bits)), ed->to};
                            VEC_PUSH(pairs, p, oom_local);
                        }
                } else if (ed->kind == NE_RANGE) {
                    for (uint32_t c = 0; c < s->cls->n; c++)
                        if (edge_has_byte(s->ir, ed, s->cls->rep[c])) {
                            struct pair p = {c, ed->to};
                            VEC_PUSH(pairs, p, oom_local);
                        }
                    s->work += s->cls->n;
                } else if (ed->kind == NE_CALL) {
                    struct pair p = {0x10000u + ed->arg, ed->to};
                    VEC_PUSH(pairs, p, oom_local);
                }
            }
        }
        s->work += (b - a) + 2 * (uint64_t)pairs.n; /* members, then grouping the pairs */
        if (pairs.n > 1) {
            /* group by key: classes (< 256) with a stable counting sort (targets keep member
             * order, which is all the grouping below needs), calls after them by rule */
            uint32_t cnt[257], n_calls = 0, ncl = s->cls->n;
            memset(cnt, 0, (ncl + 1) * sizeof *cnt);
            for (uint32_t i = 0; i < pairs.n; i++) {
                if (pairs.v[i].key < 0x10000u) cnt[pairs.v[i].key + 1]++;
                else n_calls++;
            }
            for (uint32_t c = 0; c < ncl; c++) cnt[c + 1] += cnt[c];
            if (tmp.cap < pairs.n) {
                struct pair *q = realloc(tmp.v, pairs.n * sizeof *q);
                if (!q) goto oom_local;
                tmp.v = q;
                tmp.cap = pairs.n;
            }
            uint32_t callpos = cnt[ncl];
            for (uint32_t i = 0; i < pairs.n; i++) {
                if (pairs.v[i].key < 0x10000u) tmp.v[cnt[pairs.v[i].key]++] = pairs.v[i];
                else tmp.v[callpos++] = pairs.v[i];
            }
            if (n_calls > 1) qsort(tmp.v + (pairs.n - n_calls), n_calls, sizeof *tmp.v, cmp_pair);
            struct pair *sw = pairs.v;
            pairs.v = tmp.v;
            tmp.v = sw;
            uint32_t c2 = pairs.cap;
            pairs.cap = tmp.cap;
            tmp.cap = c2;
        }
        uint32_t n_used = 0;
        struct gram_node node = {rule, o->ranges.n, o->calls.n, 0, 0, final ? GN_FINAL : 0};
        uint32_t prev_a = 0, prev_n = 0, prev_d = GRAM_NONE;
        for (uint32_t i = 0; i < pairs.n;) {
            uint32_t j = i;
            seeds.n = 0;
            while (j < pairs.n && pairs.v[j].key == pairs.v[i].key) {
                if (!seeds.n || seeds.v[seeds.n - 1] != pairs.v[j].to) VEC_PUSH(seeds, pairs.v[j].to, oom_local);
                j++;
            }
            uint32_t target;
            /* classes with the same targets as the previous class share its state */
            if (prev_d != GRAM_NONE && prev_n == j - i && pairs.v[i].key < 0x10000u) {
                bool same = true;
                for (uint32_t k = 0; k < prev_n && same; k++) same = pairs.v[prev_a + k].to == pairs.v[i + k].to;
                target = same ? prev_d : GRAM_NONE;
            } else {
                target = GRAM_NONE;
            }
            if (target == GRAM_NONE) {
                uint32_t mm = closure(s, seeds.v, seeds.n);
                if (s->oom) goto oom_local;
                target = intern_state(s, mm, &is_new);
                if (s->oom) goto oom_local;
            }
            if (pairs.v[i].key < 0x10000u) {
                cls_to[pairs.v[i].key] = target;
                used[n_used++] = pairs.v[i].key;
                prev_a = i; prev_n = j - i; prev_d = target;
            } else {
                struct gram_call call = {pairs.v[i].key - 0x10000u, base + target};
                VEC_PUSH(o->calls, call, oom_local);
                node.c_n++;
            }
            i = j;
        }
        /* byte ranges from the class table: few classes (literals) from their ranges, sorted
         * and merged; many by scanning the bytes */
        if (n_used <= 8) {
            struct gram_range rr[64];
            uint32_t nr = 0;
            for (uint32_t u = 0; u < n_used; u++) {
                uint32_t c = used[u];
                for (uint32_t k = s->cls->cr_off[c]; k < s->cls->cr_off[c + 1] && nr < 64; k++)
                    rr[nr++] = (struct gram_range){s->cls->cr_lo[k], s->cls->cr_hi[k], 0, base + cls_to[c]};
            }
            if (nr == 64) goto scan; /* a class in pieces: scan instead */
            for (uint32_t i = 1; i < nr; i++) { /* insertion sort by lo */
                struct gram_range x = rr[i];
                uint32_t j = i;
                while (j && rr[j - 1].lo > x.lo) { rr[j] = rr[j - 1]; j--; }
                rr[j] = x;
            }
            for (uint32_t i = 0; i < nr; i++) {
                if (node.r_n && o->ranges.v[o->ranges.n - 1].to == rr[i].to && o->ranges.v[o->ranges.n - 1].hi + 1 == rr[i].lo) {
                    o->ranges.v[o->ranges.n - 1].hi = rr[i].hi;
                    continue;
                }
                VEC_PUSH(o->ranges, rr[i], oom_local);
                node.r_n++;
            }
        } else {
        scan:
            for (int bb = 0; bb < 256;) {
                uint32_t t = cls_to[s->cls->of[bb]];
                int e = bb;
                while (e + 1 < 256 && cls_to[s->cls->of[e + 1]] == t) e++;
                if (t != GRAM_NONE) {
                    struct gram_range r = {(uint8_t)bb, (uint8_t)e, 0, base + t};
                    VEC_PUSH(o->ranges, r, oom_local);
                    node.r_n++;
                }
                bb = e + 1;
            }
        }
        for (uint32_t u = 0; u < n_used; u++) cls_to[used[u]] = GRAM_NONE;
        VEC_PUSH(o->nodes, node, oom_local);
    }
    free(pairs.v);
    free(tmp.v);
    free(seeds.v);
    if (*too_many) { /* undo */
        o->calls.n = o->nodes.n > base ? o->nodes.v[base].c_off : o->calls.n;
        o->ranges.n = o->nodes.n > base ? o->nodes.v[base].r_off : o->ranges.n;
        o->nodes.n = base;
        return false;
    }
    return true;
oom_local:
    free(pairs.v);
    free(tmp.v);
    free(seeds.v);
oom:
    s->oom = true;
    return false;
}

/* NFA fallback: one node per NFA state that some edge enters (and the start); each node's
 * edges are those of its epsilon closure. Ranges may overlap (GN_NONDET). */
static bool nfa_rule(struct subset_ctx *s, uint32_t rule, uint32_t nfa_start, uint32_t nfa_lo,
                     uint32_t nfa_hi, struct out *o)
{
    uint32_t n = nfa_hi - nfa_lo;
    uint32_t *id = malloc((size_t)n * sizeof *id);
    if (!id) { s->oom = true; return false; }
    for (uint32_t i = 0; i < n; i++) id[i] = GRAM_NONE;
    uint32_t base = o->nodes.n, cnt = 0;
    id[nfa_start - nfa_lo] = cnt++;
    for (uint32_t st = nfa_lo; st < nfa_hi; st++)
        for (uint32_t e = s->a->head[st]; e != GRAM_NONE; e = s->a->e[e].next)
            if (s->a->e[e].kind != NE_EPS && id[s->a->e[e].to - nfa_lo] == GRAM_NONE)
                id[s->a->e[e].to - nfa_lo] = cnt++;
    if (base + cnt > GRAM_MAX_NODES) { free(id); return false; }
    uint32_t *order = malloc((size_t)cnt * sizeof *order);
    if (!order) { free(id); s->oom = true; return false; }
    for (uint32_t i = 0; i < n; i++)
        if (id[i] != GRAM_NONE) order[id[i]] = nfa_lo + i;
    uint32_t ranges0 = o->ranges.n;
    for (uint32_t k = 0; k < cnt; k++) {
        if (o->ranges.n - ranges0 > GRAM_MAX_NFA_RANGES) { /* every step would try them all */
            s->too_ambiguous = true;
            free(id);
            free(order);
            return false;
        }
        s->pool.n = 0;
        uint32_t m = closure(s, &order[k], 1);
        if (s->oom) goto oom;
        struct gram_node node = {rule, o->ranges.n, o->calls.n, 0, 0, 0};
        for (uint32_t i = 0; i < m; i++) {
            uint32_t st = s->pool.v[i];
            if (st == s->accept) node.flags |= GN_FINAL;
            for (uint32_t e = s->a->head[st]; e != GRAM_NONE; e = s->a->e[e].next) {
                const struct nfa_edge *ed = &s->a->e[e];
                uint32_t to = base + id[ed->to - nfa_lo];
                if (ed->kind == NE_CALL) {
                    struct gram_call c = {ed->arg, to};
                    VEC_PUSH(o->calls, c, oom);
                    node.c_n++;
                } else if (ed->kind == NE_RANGE) {
                    struct gram_range r = {(uint8_t)(ed->arg & 0xFF), (uint8_t)(ed->arg >> 8), 0, to};
                    VEC_PUSH(o->ranges, r, oom);
                    node.r_n++;
                } else if (ed->kind == NE_SET) {
                    /* maximal runs of the set, word by word */
                    const struct gram_bset *bs = &s->ir->sets[ed->arg];
                    int b = 0;
                    while (b < 256) {
                        uint64_t w = bs->w[b >> 6] >> (b & 63);
                        if (!w) { b = (b | 63) + 1; continue; }
                        b += __builtin_ctzll(w);
                        int e2 = b;
                        while (e2 + 1 < 256 && gram_bset_has(bs, (unsigned)e2 + 1)) e2++;
                        struct gram_range r = {(uint8_t)b, (uint8_t)e2, 0, to};
                        VEC_PUSH(o->ranges, r, oom);
                        node.r_n++;
                        b = e2 + 1;
                    }
                }
            }
        }
        node.flags |= GN_NONDET;
        VEC_PUSH(o->nodes, node, oom);
    }
    free(id);
    free(order);
    return true;
oom:
    free(id);
    free(order);
    s->oom = true;
    return false;
}

static int cmp_range(const void *a, const void *b)
{
    const struct gram_range *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* ---------------------------------------------------------------- analyses */

/* Left recursion: a rule reachable from its own start without consuming a byte. Writes the
 * cycle into msg. */
static bool find_left_recursion(const struct tern_grammar *g, const bool *nullable, char *msg,
                                size_t cap)
{
    uint32_t nr = g->n_rules;
    /* edges R -> R' (calls made before any byte is consumed) */
    uint32_t *eoff = calloc(nr + 1, sizeof *eoff);
    VEC(uint32_t) edges = {0};
    uint32_t *mark = calloc(g->n_nodes, sizeof *mark);
    uint32_t *stk = malloc((size_t)g->n_nodes * sizeof *stk);
    uint8_t *color = calloc(nr, 1);
    uint32_t *par = malloc((size_t)nr * sizeof *par);
    uint32_t *it = calloc(nr, sizeof *it);
    bool found = false;
    if (!eoff || !mark || !stk || !color || !par || !it) goto done;
    for (uint32_t r = 0; r < nr; r++) {
        eoff[r] = edges.n;
        uint32_t sp = 0;
        stk[sp++] = g->rules[r].start;
        mark[g->rules[r].start] = r + 1;
        while (sp) {
            const struct gram_node *nd = &g->nodes[stk[--sp]];
            for (uint32_t c = 0; c < nd->c_n; c++) {
                const struct gram_call *cl = &g->calls[nd->c_off + c];
                VEC_PUSH(edges, cl->rule, done);
                if (nullable[cl->rule] && mark[cl->ret] != r + 1) {
                    mark[cl->ret] = r + 1;
                    stk[sp++] = cl->ret;
                }
            }
        }
    }
    eoff[nr] = edges.n;
    /* iterative DFS for a cycle */
    for (uint32_t r0 = 0; r0 < nr && !found; r0++) {
        if (color[r0]) continue;
        uint32_t sp = 0;
        stk[sp++] = r0;
        color[r0] = 1;
        it[r0] = eoff[r0];
        while (sp && !found) {
            uint32_t r = stk[sp - 1];
            if (it[r] == eoff[r + 1]) { color[r] = 2; sp--; continue; }
            uint32_t t = edges.v[it[r]++];
            if (color[t] == 1) { /* cycle t -> ... -> r -> t */
                size_t k = 0;
                k += (size_t)snprintf(msg + k, cap - k, "left recursion: %s", g->rules[t].name);
                for (uint32_t i = 0; i < sp && k < cap; i++)
                    if (stk[i] == t) {
                        for (uint32_t j = i + 1; j < sp && k < cap; j++)
                            k += (size_t)snprintf(msg + k, cap - k, " -> %s", g->rules[stk[j]].name);
                        break;
                    }
                if (k < cap) snprintf(msg + k, cap - k, " -> %s (a rule that can call itself before consuming any text)", g->rules[t].name);
                found = true;
            } else if (!color[t]) {
                color[t] = 1;
                it[t] = eoff[t];
                par[t] = r;
                stk[sp++] = t;
            }
        }
    }
done:
    free(eoff);
    free(edges.v);
    free(mark);
    free(stk);
    free(color);
    free(par);
    free(it);
    return found;
}

/* Productivity: a node is productive if its rule can end from it using only bytes in avail. */
static void productive(const struct tern_grammar *g, const struct gram_bset *avail, bool *prod)
{
    memset(prod, 0, g->n_nodes);
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t i = g->n_nodes; i-- > 0;) {
            if (prod[i]) continue;
            const struct gram_node *nd = &g->nodes[i];
            bool p = nd->flags & GN_FINAL;
            if (nd->flags & GN_COUNT) { /* ends after cmin completions of its body */
                p = g->rules[nd->rule].cmin == 0 || (nd->c_n && prod[g->rules[g->calls[nd->c_off].rule].start]);
                if (p) { prod[i] = true; changed = true; }
                continue;
            }
            for (uint32_t k = 0; k < nd->r_n && !p; k++) {
                const struct gram_range *r = &g->ranges[nd->r_off + k];
                if (!prod[r->to]) continue;
                for (unsigned b = r->lo; b <= r->hi && !p; b++) p = gram_bset_has(avail, b);
            }
            for (uint32_t k = 0; k < nd->c_n && !p; k++) {
                const struct gram_call *c = &g->calls[nd->c_off + k];
                p = prod[g->rules[c->rule].start] && prod[c->ret];
            }
            if (p) { prod[i] = true; changed = true; }
        }
    }
}

/* Drop edges into dead nodes and bytes no token has. */
static tern_status prune(struct tern_grammar *g, const struct gram_bset *avail, const bool *prod)
{
    bool all = true;
    for (int i = 0; i < 4; i++) all = all && avail->w[i] == ~0ull;
    struct gram_range *nr = malloc(((size_t)g->n_ranges * 2 + 1) * sizeof *nr);
    struct gram_call *nc = malloc(((size_t)g->n_calls + 1) * sizeof *nc);
    if (!nr || !nc) { free(nr); free(nc); return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory"); }
    uint32_t rn = 0, cn = 0, rcap = g->n_ranges * 2 + 1;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        struct gram_node *nd = &g->nodes[i];
        uint32_t r0 = rn, c0 = cn;
        for (uint32_t k = 0; k < nd->r_n; k++) {
            struct gram_range r = g->ranges[nd->r_off + k];
            if (!prod[r.to]) continue;
            if (all) { nr[rn++] = r; continue; }
            for (unsigned b = r.lo; b <= r.hi;) {
                if (!gram_bset_has(avail, b)) { b++; continue; }
                unsigned e = b;
                while (e + 1 <= r.hi && gram_bset_has(avail, e + 1)) e++;
                if (rn == rcap) {
                    rcap *= 2;
                    struct gram_range *q = realloc(nr, rcap * sizeof *q);
                    if (!q) { free(nr); free(nc); return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory"); }
                    nr = q;
                }
                nr[rn++] = (struct gram_range){(uint8_t)b, (uint8_t)e, 0, r.to};
                b = e + 1;
            }
        }
        for (uint32_t k = 0; k < nd->c_n; k++) {
            struct gram_call c = g->calls[nd->c_off + k];
            if (prod[g->rules[c.rule].start] && prod[c.ret]) nc[cn++] = c;
        }
        nd->r_off = r0;
        nd->r_n = (uint16_t)(rn - r0);
        nd->c_off = c0;
        nd->c_n = (uint16_t)(cn - c0);
    }
    free(g->ranges);
    free(g->calls);
    g->ranges = nr;
    g->n_ranges = rn;
    g->calls = nc;
    g->n_calls = cn;
    return TERN_OK;
}

/* follow sets: the return nodes that can be on top when a rule ends (through tail calls). */
static tern_status follow_sets(struct tern_grammar *g)
{
    uint32_t nr = g->n_rules;
    VEC(uint32_t) *fs = calloc(nr, sizeof *fs);
    /* tail[R]: rules whose end is R's end (R tail-called from them) */
    VEC(uint32_t) *tail = calloc(nr, sizeof *tail);
    bool *docend = calloc(nr, 1);
    tern_status st = TERN_OK;
    if (!fs || !tail || !docend) { st = TERN_ERR_NOMEM; goto done; }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const struct gram_node *nd = &g->nodes[i];
        for (uint32_t k = 0; k < nd->c_n; k++) {
            const struct gram_call *c = &g->calls[nd->c_off + k];
            if (g->nodes[c->ret].flags & GN_POPONLY) VEC_PUSH(tail[c->rule], nd->rule, oom);
            else VEC_PUSH(fs[c->rule], c->ret, oom);
        }
    }
    docend[g->root] = true;
    for (uint32_t r = 0; r < nr; r++) {
        if (fs[r].n > 1) qsort(fs[r].v, fs[r].n, sizeof(uint32_t), cmp_u32);
        uint32_t m = 0;
        for (uint32_t i = 0; i < fs[r].n; i++)
            if (!m || fs[r].v[m - 1] != fs[r].v[i]) fs[r].v[m++] = fs[r].v[i];
        fs[r].n = m;
    }
    bool changed = true;
    int rounds = 0;
    while (changed && rounds++ < 64) {
        changed = false;
        for (uint32_t r = 0; r < nr; r++)
            for (uint32_t t = 0; t < tail[r].n; t++) {
                uint32_t from = tail[r].v[t];
                if (from == r) continue;
                if (docend[from] && !docend[r]) { docend[r] = true; changed = true; }
                for (uint32_t i = 0; i < fs[from].n; i++) {
                    uint32_t x = fs[from].v[i];
                    /* sorted insert if absent */
                    uint32_t lo = 0, hi = fs[r].n;
                    while (lo < hi) {
                        uint32_t mid = (lo + hi) / 2;
                        if (fs[r].v[mid] < x) lo = mid + 1; else hi = mid;
                    }
                    if (lo < fs[r].n && fs[r].v[lo] == x) continue;
                    VEC_PUSH(fs[r], 0, oom);
                    memmove(fs[r].v + lo + 1, fs[r].v + lo, (fs[r].n - 1 - lo) * sizeof(uint32_t));
                    fs[r].v[lo] = x;
                    changed = true;
                }
            }
    }
    if (changed) { /* did not settle (absurd grammars): be conservative, every rule may end anywhere */
        for (uint32_t r = 0; r < nr; r++) docend[r] = true;
    }
    uint32_t total = 0;
    for (uint32_t r = 0; r < nr; r++) total += fs[r].n;
    g->follow = malloc(((size_t)total + 1) * sizeof *g->follow);
    if (!g->follow) goto oom;
    g->n_follow = 0;
    for (uint32_t r = 0; r < nr; r++) {
        g->rules[r].fol_off = g->n_follow;
        g->rules[r].fol_n = fs[r].n;
        g->rules[r].doc_end = docend[r];
        if (fs[r].n) memcpy(g->follow + g->n_follow, fs[r].v, fs[r].n * sizeof(uint32_t));
        g->n_follow += fs[r].n;
    }
    goto done;
oom:
    st = TERN_ERR_NOMEM;
done:
    if (fs) for (uint32_t r = 0; r < nr; r++) free(fs[r].v);
    if (tail) for (uint32_t r = 0; r < nr; r++) free(tail[r].v);
    free(fs);
    free(tail);
    free(docend);
    return st == TERN_OK ? TERN_OK : tern_fail(st, "grammar: out of memory");
}

static void set_flags(struct tern_grammar *g)
{
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        struct gram_node *nd = &g->nodes[i];
        if (g->rules[nd->rule].counter) { /* the end is the count's to decide, not a flag's */
            nd->flags = GN_COUNT;
            continue;
        }
        nd->flags &= GN_FINAL | GN_NONDET;
        if ((nd->flags & GN_FINAL) && !nd->r_n && !nd->c_n) nd->flags |= GN_POPONLY;
        if (!(nd->flags & GN_FINAL) && !nd->c_n && nd->r_n) nd->flags |= GN_PLAIN;
        /* after pruning a DFA node's ranges still never overlap; an NFA node's may */
        if (nd->flags & GN_NONDET) {
            if (nd->r_n > 1) qsort(g->ranges + nd->r_off, nd->r_n, sizeof *g->ranges, cmp_range);
            bool overlap = false;
            for (uint32_t k = 1; k < nd->r_n; k++)
                if (g->ranges[nd->r_off + k].lo <= g->ranges[nd->r_off + k - 1].hi) overlap = true;
            if (!overlap) nd->flags &= ~(uint32_t)GN_NONDET;
        }
    }
}

/* The finished tables, checked once per compile (O(nodes + ranges + calls)): every index the
 * engine follows without a bounds check lies in its table, and each node's flags agree with
 * what it holds (the engine's fast paths trust GN_PLAIN, GN_POPONLY and GN_COUNT). */
static void check_tables(const struct tern_grammar *g, uint32_t root_rule)
{
    TERN_ASSERT(root_rule < g->n_rules && g->rules[root_rule].start < g->n_nodes);
    TERN_ASSERT(g->n_nodes <= GRAM_MAX_NODES);
    for (uint32_t r = 0; r < g->n_rules; r++) {
        const struct gram_rule *ru = &g->rules[r];
        TERN_ASSERT(ru->start < g->n_nodes && g->nodes[ru->start].rule == r, "a rule starts at one of its nodes");
        TERN_ASSERT((uint64_t)ru->fol_off + ru->fol_n <= g->n_follow);
        TERN_ASSERT(!ru->counter || ru->cmax == GRAM_INF || ru->cmin <= ru->cmax, "counter bounds are ordered");
    }
    for (uint32_t i = 0; i < g->n_follow; i++) TERN_ASSERT(g->follow[i] < g->n_nodes);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const struct gram_node *nd = &g->nodes[i];
        TERN_ASSERT(nd->rule < g->n_rules);
        TERN_ASSERT((uint64_t)nd->r_off + nd->r_n <= g->n_ranges && (uint64_t)nd->c_off + nd->c_n <= g->n_calls);
        for (uint32_t k = 0; k < nd->r_n; k++) {
            const struct gram_range *rg = &g->ranges[nd->r_off + k];
            TERN_ASSERT(rg->lo <= rg->hi && rg->to < g->n_nodes && g->nodes[rg->to].rule == nd->rule,
                        "a byte edge stays inside its rule");
            /* sorted by lo: the step's early exit (r.lo > byte) depends on it */
            TERN_ASSERT(k == 0 || g->ranges[nd->r_off + k - 1].lo <= rg->lo);
            TERN_ASSERT((nd->flags & GN_NONDET) || k == 0 || g->ranges[nd->r_off + k - 1].hi < rg->lo,
                        "a deterministic node's ranges do not overlap");
        }
        for (uint32_t k = 0; k < nd->c_n; k++) {
            const struct gram_call *c = &g->calls[nd->c_off + k];
            TERN_ASSERT(c->rule < g->n_rules && c->ret < g->n_nodes && g->nodes[c->ret].rule == nd->rule);
        }
        if (nd->flags & GN_COUNT)
            TERN_ASSERT(g->rules[nd->rule].counter && nd->r_n == 0 && nd->c_n <= 1 && (!nd->c_n || g->calls[nd->c_off].ret == i),
                        "a counter node calls its body and returns to itself");
        else if (nd->flags & GN_PLAIN)
            TERN_ASSERT(!(nd->flags & GN_FINAL) && nd->c_n == 0 && nd->r_n > 0);
        else if (nd->flags & GN_POPONLY)
            TERN_ASSERT((nd->flags & GN_FINAL) && nd->r_n == 0 && nd->c_n == 0);
    }
}

void gram_free_tables(struct tern_grammar *g)
{
    if (g->rules)
        for (uint32_t r = 0; r < g->n_rules; r++) free(g->rules[r].name);
    free(g->nodes);
    free(g->ranges);
    free(g->calls);
    free(g->rules);
    free(g->follow);
    g->nodes = NULL;
    g->ranges = NULL;
    g->calls = NULL;
    g->rules = NULL;
    g->follow = NULL;
}

tern_status gram_compile(const struct gram_ir *ir, uint32_t root_rule,
                         const struct tern_grammar_vocab *vocab, struct tern_grammar *g)
{
    tern_status st = gir_status(ir, "grammar");
    if (st) return st;
    if (root_rule >= ir->n_rules) return tern_fail(TERN_ERR_ARG, "grammar: no root rule");
    for (uint32_t r = 0; r < ir->n_rules; r++)
        if (ir->rules[r].ex == GRAM_NONE)
            return tern_fail(TERN_ERR_FORMAT, "grammar: rule '%s' is used but not defined", ir->rules[r].name);

    struct classes cls;
    build_classes(ir, &cls);

    /* 1. Thompson NFA for every rule (inlinable calls expanded in place) */
    struct nfa a = {0};
    bool *inl = calloc(ir->n_rules ? ir->n_rules : 1, 1);
    if (!inl) return tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
    decide_inlining(ir, root_rule, inl);
    a.inl = inl;
    uint32_t *nfa_start = malloc((size_t)ir->n_rules * sizeof *nfa_start);
    uint32_t *nfa_accept = malloc((size_t)ir->n_rules * sizeof *nfa_accept);
    uint32_t *nfa_end = malloc((size_t)ir->n_rules * sizeof *nfa_end);
    struct out o = {0};
    struct subset_ctx s = {0};
    bool *nullable = NULL, *prod = NULL;
    if (!nfa_start || !nfa_accept || !nfa_end) goto oom;
    for (uint32_t r = 0; r < ir->n_rules; r++) {
        nfa_start[r] = nfa_state(&a);
        nfa_accept[r] = nfa_state(&a);
        thompson(&a, ir, ir->rules[r].ex, nfa_start[r], nfa_accept[r], 0);
        nfa_end[r] = a.n_states;
    }
    if (a.oom) goto oom;
    if (a.full) {
        st = tern_fail(TERN_ERR_RANGE, "grammar: too large: more than %u automaton states after expanding repetitions (bounded repetitions {m,n} cost n copies)",
                       GRAM_MAX_NFA_STATES);
        goto fail;
    }

    /* 2. per rule: subset construction, or the NFA when that grows too big */
    s.ir = ir;
    s.a = &a;
    s.cls = &cls;
    s.set_cls = calloc(ir->n_sets ? ir->n_sets : 1, sizeof *s.set_cls);
    if (!s.set_cls) goto oom;
    for (uint32_t i = 0; i < ir->n_sets; i++)
        for (uint32_t c = 0; c < cls.n; c++)
            if (gram_bset_has(&ir->sets[i], cls.rep[c])) gram_bset_add(&s.set_cls[i], c);
    /* never NULL, so member lists can be addressed even when empty */
    s.pool.v = malloc(64 * sizeof *s.pool.v);
    s.soff.v = malloc(64 * sizeof *s.soff.v);
    if (!s.pool.v || !s.soff.v) goto oom;
    s.pool.cap = s.soff.cap = 64;
    s.stamp = calloc(a.n_states ? a.n_states : 1, sizeof *s.stamp);
    s.dfs = malloc(((size_t)a.n_states + 1) * sizeof *s.dfs);
    s.imp = mark_important(&a);
    if (!s.stamp || !s.dfs || !s.imp) goto oom;
    uint32_t *rule_base = malloc((size_t)ir->n_rules * sizeof *rule_base);
    if (!rule_base) goto oom;
    for (uint32_t r = 0; r < ir->n_rules; r++) {
        s.accept = nfa_accept[r];
        rule_base[r] = o.nodes.n;
        bool too_many;
        if (!subset_rule(&s, r, nfa_start[r], &o, &too_many)) {
            if (s.oom) { free(rule_base); goto oom; }
            uint32_t lo = nfa_start[r], hi = nfa_end[r];
            if (!nfa_rule(&s, r, nfa_start[r], lo, hi, &o)) {
                free(rule_base);
                if (s.oom) goto oom;
                if (s.too_ambiguous)
                    st = tern_fail(TERN_ERR_RANGE, "grammar: too ambiguous: rule '%s' neither determinizes nor fits in %u byte edges as an NFA "
                                   "(typically an unanchored pattern ending in a counted repetition, or a counted repetition inside another); "
                                   "anchor the pattern with ^...$ or lower the counts", ir->rules[r].name, GRAM_MAX_NFA_RANGES);
                else
                    st = tern_fail(TERN_ERR_RANGE, "grammar: too large: rule '%s' needs more than %u automaton nodes",
                                   ir->rules[r].name, GRAM_MAX_NODES);
                goto fail;
            }
        }
        if (o.nodes.n > GRAM_MAX_NODES) {
            free(rule_base);
            st = tern_fail(TERN_ERR_RANGE, "grammar: too large: more than %u automaton nodes", GRAM_MAX_NODES);
            goto fail;
        }
    }
    free(s.stamp); s.stamp = NULL;
    free(s.dfs); s.dfs = NULL;
    free(s.imp); s.imp = NULL;
    free(s.set_cls); s.set_cls = NULL;
    free(s.pool.v); s.pool.v = NULL;
    free(s.soff.v); s.soff.v = NULL;
    free(s.hslot); s.hslot = NULL;
    free(a.head); a.head = NULL;
    free(a.e); a.e = NULL;

    g->nodes = o.nodes.v;
    g->n_nodes = o.nodes.n;
    g->ranges = o.ranges.v;
    g->n_ranges = o.ranges.n;
    g->calls = o.calls.v;
    g->n_calls = o.calls.n;
    o = (struct out){0};
    g->n_rules = ir->n_rules;
    g->rules = calloc(ir->n_rules, sizeof *g->rules);
    if (!g->rules) { free(rule_base); goto oom; }
    for (uint32_t r = 0; r < ir->n_rules; r++) {
        g->rules[r].start = rule_base[r];
        g->rules[r].name = strdup(ir->rules[r].name);
        if (!g->rules[r].name) { free(rule_base); goto oom; }
    }
    free(rule_base);
    g->root = root_rule;
    for (uint32_t r = 0; r < ir->n_rules; r++) {
        const struct gram_ex *e = &ir->ex[ir->rules[r].ex];
        if (e->kind != GX_COUNT) continue;
        uint32_t lo = g->rules[r].start, hi = r + 1 < ir->n_rules ? g->rules[r + 1].start : g->n_nodes;
        const struct gram_node *nd = &g->nodes[lo];
        /* the construction above gives exactly one node calling the body and returning to itself */
        if (hi != lo + 1 || nd->r_n || nd->c_n != 1 || g->calls[nd->c_off].ret != lo || g->calls[nd->c_off].rule != e->a) {
            st = tern_fail(TERN_ERR_RANGE, "grammar: counted repetition '%s' did not compile to a counter", ir->rules[r].name);
            goto fail;
        }
        g->rules[r].counter = true;
        g->rules[r].cmin = e->b;
        g->rules[r].cmax = e->c;
        g->n_counters++;
    }
    set_flags(g);

    /* 3. nullable rules (fixpoint), then left recursion */
    nullable = calloc(g->n_rules, 1);
    bool *comp = calloc(g->n_nodes, 1);
    if (!nullable || !comp) { free(comp); goto oom; }
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = g->n_nodes; i-- > 0;) {
            if (comp[i]) continue;
            const struct gram_node *nd = &g->nodes[i];
            bool c = (nd->flags & GN_FINAL) || ((nd->flags & GN_COUNT) && g->rules[nd->rule].cmin == 0);
            for (uint32_t k = 0; k < nd->c_n && !c && !(nd->flags & GN_COUNT); k++) {
                const struct gram_call *cl = &g->calls[nd->c_off + k];
                c = nullable[cl->rule] && comp[cl->ret];
            }
            if (c) {
                comp[i] = true;
                changed = true;
                if (i == g->rules[nd->rule].start) nullable[nd->rule] = true;
            }
        }
    }
    free(comp);
    for (uint32_t r = 0; r < g->n_rules; r++) g->rules[r].nullable = nullable[r];
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (!g->rules[r].counter) continue;
        uint32_t body = g->calls[g->nodes[g->rules[r].start].c_off].rule;
        if (nullable[body]) { /* a completion that consumes nothing would count forever */
            st = tern_fail(TERN_ERR_UNSUPPORTED, "grammar: counted repetition '%s' of '%s', which can match the empty string "
                           "(counts above %d need a repetition that consumes text)", g->rules[r].name, g->rules[body].name,
                           GRAM_UNROLL_MAX);
            goto fail;
        }
    }
    char msg[512];
    if (find_left_recursion(g, nullable, msg, sizeof msg)) {
        st = tern_fail(TERN_ERR_UNSUPPORTED, "grammar: %s", msg);
        goto fail;
    }

    /* 4. productivity with the bytes the vocabulary can produce, then pruning */
    struct gram_bset all;
    memset(&all, 0xFF, sizeof all);
    const struct gram_bset *avail = vocab ? &vocab->avail : &all;
    prod = malloc(g->n_nodes ? g->n_nodes : 1);
    if (!prod) goto oom;
    productive(g, avail, prod);
    if (!prod[g->rules[root_rule].start]) {
        productive(g, &all, prod);
        if (prod[g->rules[root_rule].start]) {
            st = tern_fail(TERN_ERR_UNSUPPORTED,
                           "grammar: every document needs a byte that no token of the vocabulary contains");
        } else {
            st = tern_fail(TERN_ERR_FORMAT, "grammar: admits no document (rule '%s' can never be completed)",
                           ir->rules[root_rule].name);
        }
        goto fail;
    }
    if ((st = prune(g, avail, prod))) goto fail;
    set_flags(g);
    if ((st = follow_sets(g))) goto fail;
    check_tables(g, root_rule);
    free(nullable);
    free(prod);
    free(nfa_start);
    free(nfa_accept);
    free(nfa_end);
    free(inl);
    return TERN_OK;

oom:
    st = tern_fail(TERN_ERR_NOMEM, "grammar: out of memory");
fail:
    free(inl);
    free(nullable);
    free(prod);
    free(nfa_start);
    free(nfa_accept);
    free(nfa_end);
    free(a.head);
    free(a.e);
    free(s.stamp);
    free(s.dfs);
    free(s.imp);
    free(s.set_cls);
    free(s.pool.v);
    free(s.soff.v);
    free(s.hslot);
    free(o.nodes.v);
    free(o.ranges.v);
    free(o.calls.v);
    gram_free_tables(g);
    return st;
}
