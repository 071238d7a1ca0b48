/* gram_engine.c — advancing a parse state (a set of stacks) by one byte.
 *
 * A stack is (top node, parent frame); frames are interned (return node, parent frame) pairs
 * (gram_internal.h), so the same stack reached twice is the same pair and a state is a sorted,
 * duplicate-free array of pairs. After every step each stack's top is "expanded": a node that
 * calls rules pushes a frame and continues at the callee's start (a call whose return node can
 * only end its rule is a tail call: nothing is pushed, so repetition written as recursion does
 * not grow the stack); a node where its rule may end pops. Expansion stops at nodes that can
 * consume a byte, so the tops of a state are exactly the nodes with byte ranges, plus markers
 * (GRAM_ACCEPT: the document may end here).
 *
 * Expansion terminates: the compiler refuses left recursion, so pushes without consuming are
 * bounded, and a visited set stops nullable loops. In classification mode (sim) the bottom
 * frames are virtual callers: popping one continues at every node that can follow the rule
 * (gram_mask.c explains why). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/check.h"
#include "util/error.h"

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* ---------------------------------------------------------------- frames */

static bool frames_rehash(struct gram_frames *f, uint32_t nmask)
{
    /* the probe loop below ends only if the table keeps an empty slot */
    TERN_ASSERT(f->n - f->n_fixed <= nmask / 2, "frame table grown before it fills");
    uint32_t *ns = malloc(((size_t)nmask + 1) * sizeof *ns);
    if (!ns) return false;
    memset(ns, 0xFF, ((size_t)nmask + 1) * sizeof *ns);
    for (uint32_t i = f->n_fixed; i < f->n; i++) {
        uint32_t k = (uint32_t)mix64((((uint64_t)f->node[i] << 32) | f->parent[i]) ^ ((uint64_t)f->cnt[i] * 0x9E3779B97F4A7C15ull)) & nmask;
        while (ns[k] != GRAM_NONE) k = (k + 1) & nmask;
        ns[k] = i;
    }
    free(f->slot);
    f->slot = ns;
    f->mask = nmask;
    return true;
}

static bool frames_init(struct gram_frames *f, uint32_t n_fixed)
{
    TERN_ASSERT(n_fixed >= 1 && n_fixed <= GRAM_VLEVELS, "one bottom per virtual level");
    memset(f, 0, sizeof *f);
    f->cap = 256;
    f->node = malloc(f->cap * sizeof *f->node);
    f->parent = malloc(f->cap * sizeof *f->parent);
    f->cnt = malloc(f->cap * sizeof *f->cnt);
    f->level = malloc(f->cap);
    if (!f->node || !f->parent || !f->cnt || !f->level) return false;
    f->n_fixed = n_fixed;
    for (uint32_t i = 0; i < n_fixed; i++) {
        f->node[i] = GRAM_NONE;
        f->parent[i] = GRAM_NONE;
        f->cnt[i] = 0;
        f->level[i] = (uint8_t)i;
    }
    f->n = n_fixed;
    return frames_rehash(f, 511);
}

static void frames_free(struct gram_frames *f)
{
    free(f->node);
    free(f->parent);
    free(f->cnt);
    free(f->level);
    free(f->slot);
    memset(f, 0, sizeof *f);
}

/* Frame for (node, parent, cnt); GRAM_NONE when out of memory or past GRAM_MAX_FRAMES. */
uint32_t gram_frame_intern(struct gram_frames *f, uint32_t node, uint32_t parent, uint32_t cnt)
{
    if ((f->n - f->n_fixed + 1) * 2 > f->mask && !frames_rehash(f, f->mask * 2 + 1)) return GRAM_NONE;
    TERN_ASSERT(f->n >= f->n_fixed && f->n <= f->cap && (f->n - f->n_fixed + 1) * 2 <= f->mask);
    uint32_t k = (uint32_t)mix64((((uint64_t)node << 32) | parent) ^ ((uint64_t)cnt * 0x9E3779B97F4A7C15ull)) & f->mask;
    for (;;) {
        uint32_t i = f->slot[k];
        if (i == GRAM_NONE) break;
        if (f->node[i] == node && f->parent[i] == parent && f->cnt[i] == cnt) return i;
        k = (k + 1) & f->mask;
    }
    if (f->n >= GRAM_MAX_FRAMES) return GRAM_NONE;
    if (f->n == f->cap) {
        uint32_t nc = f->cap * 2;
        uint32_t *a = realloc(f->node, nc * sizeof *a);
        if (!a) return GRAM_NONE;
        f->node = a;
        uint32_t *b = realloc(f->parent, nc * sizeof *b);
        if (!b) return GRAM_NONE;
        f->parent = b;
        uint32_t *q = realloc(f->cnt, nc * sizeof *q);
        if (!q) return GRAM_NONE;
        f->cnt = q;
        uint8_t *c = realloc(f->level, nc);
        if (!c) return GRAM_NONE;
        f->level = c;
        f->cap = nc;
    }
    TERN_ASSERT(parent < f->n, "a frame's parent is interned before it");
    TERN_ASSERT(node != GRAM_NONE, "a frame returns to a node");
    uint32_t id = f->n++;
    f->node[id] = node;
    f->parent[id] = parent;
    f->cnt[id] = cnt;
    f->level[id] = f->level[parent];
    f->slot[k] = id;
    return id;
}

/* ---------------------------------------------------------------- engine */

tern_status gram_engine_init(struct gram_engine *e, const struct tern_grammar *g, bool sim)
{
    memset(e, 0, sizeof *e);
    e->g = g;
    e->sim = sim;
    e->cap_work = 256;
    e->work = malloc(e->cap_work * sizeof *e->work);
    e->visit_mask = 1023;
    e->visit = malloc(((size_t)e->visit_mask + 1) * sizeof *e->visit);
    e->visit_used = malloc(((size_t)e->visit_mask + 1) * sizeof *e->visit_used);
    if (!e->work || !e->visit || !e->visit_used || !frames_init(&e->fr, sim ? GRAM_VLEVELS : 1)) {
        gram_engine_free(e);
        return tern_fail(TERN_ERR_NOMEM, "grammar matcher: out of memory");
    }
    memset(e->visit, 0xFF, ((size_t)e->visit_mask + 1) * sizeof *e->visit);
    return TERN_OK;
}

void gram_engine_free(struct gram_engine *e)
{
    frames_free(&e->fr);
    free(e->work);
    free(e->visit);
    free(e->visit_used);
    memset(e, 0, sizeof *e);
}

/* Forget every frame (a matcher reset). */
void gram_engine_reset(struct gram_engine *e)
{
    TERN_ASSERT(e->fr.slot && e->fr.n >= e->fr.n_fixed, "reset of an engine that was set up");
    e->fr.n = e->fr.n_fixed;
    memset(e->fr.slot, 0xFF, ((size_t)e->fr.mask + 1) * sizeof *e->fr.slot);
}

/* The visited set of one step. true if (node, frame) was new. */
static bool visit(struct gram_engine *e, uint32_t node, uint32_t frame)
{
    uint64_t key = ((uint64_t)node << 32) | frame;
    if (e->n_visit * 2 >= e->visit_mask) {
        /* grow: rebuild from the used list */
        uint32_t nm = e->visit_mask * 2 + 1;
        uint64_t *nv = malloc(((size_t)nm + 1) * sizeof *nv);
        uint32_t *nu = malloc(((size_t)nm + 1) * sizeof *nu);
        if (!nv || !nu) { free(nv); free(nu); e->overflow = true; return false; }
        memset(nv, 0xFF, ((size_t)nm + 1) * sizeof *nv);
        for (uint32_t i = 0; i < e->n_visit; i++) {
            uint64_t k2 = e->visit[e->visit_used[i]];
            uint32_t s = (uint32_t)mix64(k2) & nm;
            while (nv[s] != UINT64_MAX) s = (s + 1) & nm;
            nv[s] = k2;
            nu[i] = s;
        }
        free(e->visit);
        free(e->visit_used);
        e->visit = nv;
        e->visit_used = nu;
        e->visit_mask = nm;
    }
    TERN_ASSERT(e->n_visit * 2 < e->visit_mask, "the visited set keeps an empty slot");
    uint32_t s = (uint32_t)mix64(key) & e->visit_mask;
    while (e->visit[s] != UINT64_MAX) {
        if (e->visit[s] == key) return false;
        s = (s + 1) & e->visit_mask;
    }
    e->visit[s] = key;
    e->visit_used[e->n_visit++] = s;
    return true;
}

static void visit_clear(struct gram_engine *e)
{
    TERN_ASSERT(e->n_visit <= e->visit_mask);
    for (uint32_t i = 0; i < e->n_visit; i++) e->visit[e->visit_used[i]] = UINT64_MAX;
    e->n_visit = 0;
}

static inline void emit(struct gram_engine *e, struct gram_stack *out, uint32_t *n, uint32_t node,
                        uint32_t frame)
{
    if (*n >= GRAM_MAX_STACKS) { e->overflow = true; return; }
    TERN_ASSERT(node < e->g->n_nodes || gram_is_marker(node));
    out[*n] = (struct gram_stack){node, frame};
    (*n)++;
}

static bool work_push(struct gram_engine *e, uint32_t node, uint32_t frame)
{
    if (e->n_work == e->cap_work) {
        uint32_t nc = e->cap_work * 2;
        struct gram_stack *w = realloc(e->work, nc * sizeof *w);
        if (!w) { e->overflow = true; return false; }
        e->work = w;
        e->cap_work = nc;
    }
    TERN_ASSERT(node < e->g->n_nodes && frame < e->fr.n, "work items name a node and a live frame");
    e->work[e->n_work++] = (struct gram_stack){node, frame};
    return true;
}

static void pop_end(struct gram_engine *e, struct gram_stack *out, uint32_t *n, uint32_t node, uint32_t frame);

/* A counter's node L reached with k completions of its body done, the counter rule's frame
 * being `frame` (gram_internal.h, "counters"). unknown: classification reached L through a
 * virtual caller, the count unknown: both ways are taken (a superset, at a virtual level, so
 * it can only make tokens uncertain, never accepted). */
static void count_arrive(struct gram_engine *e, struct gram_stack *out, uint32_t *n, uint32_t L, uint32_t frame,
                         uint32_t k, bool unknown)
{
    const struct tern_grammar *g = e->g;
    const struct gram_node *nd = &g->nodes[L];
    const struct gram_rule *r = &g->rules[nd->rule];
    TERN_ASSERT(nd->flags & GN_COUNT);
    TERN_ASSERT(r->counter && nd->c_n <= 1 && nd->r_n == 0, "a counter node has one call and no ranges");
    TERN_ASSERT(unknown || r->cmax == GRAM_INF || k <= r->cmax, "a count never passes its maximum");
    if (nd->c_n) {
        uint32_t body = g->rules[g->calls[nd->c_off].rule].start;
        if (unknown) {
            work_push(e, body, frame);
        } else if (r->cmax == GRAM_INF || k < r->cmax) {
            /* without a maximum, every count past the minimum behaves alike: it stays there, so
             * a long document does not make a frame per completion */
            uint32_t c = k + 1;
            if (r->cmax == GRAM_INF && c > r->cmin) c = r->cmin > 0 ? r->cmin : 1;
            uint32_t f = gram_frame_intern(&e->fr, L, frame, c);
            if (f == GRAM_NONE) e->overflow = true;
            else work_push(e, body, f);
        }
    }
    if (unknown || k >= r->cmin) pop_end(e, out, n, L, frame);
}

/* node's rule ends with `frame` below it: continue at the return node (a counter's frame: its
 * node with one more completion), or the document ends (matcher), or the caller is virtual
 * (classification). */
static void pop_end(struct gram_engine *e, struct gram_stack *out, uint32_t *n, uint32_t node, uint32_t frame)
{
    const struct tern_grammar *g = e->g;
    TERN_ASSERT(node < g->n_nodes && frame < e->fr.n);
    if (frame >= e->fr.n_fixed) {
        if (e->fr.cnt[frame]) count_arrive(e, out, n, e->fr.node[frame], e->fr.parent[frame], e->fr.cnt[frame], false);
        else work_push(e, e->fr.node[frame], e->fr.parent[frame]);
        return;
    }
    if (!e->sim) {
        emit(e, out, n, GRAM_ACCEPT, 0);
        return;
    }
    uint32_t lvl = frame;
    TERN_ASSERT(lvl < GRAM_VLEVELS, "virtual bottoms are the fixed frames");
    const struct gram_node *nd = &g->nodes[node];
    const struct gram_rule *r = &g->rules[nd->rule];
    emit(e, out, n, lvl == 0 ? GRAM_POPPED : GRAM_VPOPPED, 0);
    if (r->doc_end && g->lazy) emit(e, out, n, GRAM_OVERFLOW, 0); /* free text may follow */
    /* continue at every node that can follow the rule's end (a few levels deep, and only
     * when there are few: a rule used everywhere would make every later byte step
     * dozens of stacks; its tokens are left to the matcher, which knows the caller) */
    if (lvl + 1 < GRAM_VLEVELS && r->fol_n <= GRAM_VFOLLOW_MAX) {
        for (uint32_t i = 0; i < r->fol_n; i++) work_push(e, g->follow[r->fol_off + i], lvl + 1);
    } else if (r->fol_n) {
        /* not followed: the next few bytes must still be ones some caller can take
         * there (an array item's end is followed by ", " or "]", not by ");") */
        if (gram_follow_bytes(g, nd->rule)) emit(e, out, n, GRAM_FOLBYTES, nd->rule * GRAM_FOLLOW_BYTES);
        else emit(e, out, n, GRAM_OVERFLOW, 0);
    }
}

/* Expand everything on the worklist into out. */
static void drain(struct gram_engine *e, struct gram_stack *out, uint32_t *n)
{
    const struct tern_grammar *g = e->g;
    while (e->n_work) {
        struct gram_stack s = e->work[--e->n_work];
        TERN_ASSERT(s.node < g->n_nodes && s.frame < e->fr.n);
        if (!visit(e, s.node, s.frame)) continue;
        const struct gram_node *nd = &g->nodes[s.node];
        if (nd->flags & GN_COUNT) { /* entered (k = 0), or a virtual caller's return (unknown) */
            count_arrive(e, out, n, s.node, s.frame, 0, e->sim && s.frame > 0 && s.frame < e->fr.n_fixed);
            continue;
        }
        if (nd->r_n) emit(e, out, n, s.node, s.frame);
        for (uint32_t k = 0; k < nd->c_n; k++) {
            const struct gram_call *c = &g->calls[nd->c_off + k];
            uint32_t f = s.frame;
            if (!(g->nodes[c->ret].flags & GN_POPONLY)) {
                f = gram_frame_intern(&e->fr, c->ret, s.frame, 0);
                if (f == GRAM_NONE) { e->overflow = true; continue; }
            }
            work_push(e, g->rules[c->rule].start, f);
        }
        if (!(nd->flags & GN_FINAL)) continue;
        pop_end(e, out, n, s.node, s.frame); /* the rule of s.node ends */
    }
    TERN_ASSERT(*n <= GRAM_MAX_STACKS);
    visit_clear(e);
}

/* Stacks sort by (node, frame): one 64-bit key. A highly ambiguous grammar keeps thousands of
 * stacks alive and sorts them after every byte, so the sort is inline (glibc's qsort, a merge
 * sort through a comparison callback, took 60 % of such a matcher's time). */
static inline uint64_t stack_key(const struct gram_stack *s) { return (uint64_t)s->node << 32 | s->frame; }

static void insertion_sort(struct gram_stack *s, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        struct gram_stack x = s[i];
        const uint64_t kx = stack_key(&x);
        uint32_t j = i;
        while (j && stack_key(&s[j - 1]) > kx) { s[j] = s[j - 1]; j--; }
        s[j] = x;
    }
}

/* Quicksort (median of three, Hoare partition), recursing into the smaller part so the depth
 * stays under log2(n); short runs by insertion. */
static void sort_stacks(struct gram_stack *s, uint32_t n)
{
    while (n > 16) {
        const uint64_t a = stack_key(&s[0]), b = stack_key(&s[n / 2]), c = stack_key(&s[n - 1]);
        const uint64_t pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        uint32_t i = 0, j = n - 1;
        for (;;) {
            while (stack_key(&s[i]) < pivot) i++;
            while (stack_key(&s[j]) > pivot) j--;
            if (i >= j) break;
            struct gram_stack t = s[i];
            s[i] = s[j];
            s[j] = t;
            i++;
            j--;
        }
        /* [0, j] <= pivot <= [j + 1, n) */
        const uint32_t left = j + 1, right = n - left;
        if (left < right) {
            sort_stacks(s, left);
            s += left;
            n = right;
        } else {
            sort_stacks(s + left, right);
            n = left;
        }
    }
    insertion_sort(s, n);
}

static uint32_t sort_unique(struct gram_stack *s, uint32_t n)
{
    if (n < 2) return n;
    sort_stacks(s, n);
    uint32_t m = 1;
    for (uint32_t i = 1; i < n; i++)
        if (s[i].node != s[m - 1].node || s[i].frame != s[m - 1].frame) s[m++] = s[i];
    return m;
}

uint32_t gram_engine_start(struct gram_engine *e, uint32_t node, uint32_t frame,
                           struct gram_stack *out)
{
    uint32_t n = 0;
    TERN_ASSERT(e->n_visit == 0, "the previous step cleared its visited set");
    e->overflow = false;
    e->n_work = 0;
    work_push(e, node, frame);
    drain(e, out, &n);
    return sort_unique(out, n);
}

uint32_t gram_engine_step(struct gram_engine *e, const struct gram_stack *in, uint32_t n_in,
                          uint8_t byte, struct gram_stack *out)
{
    const struct tern_grammar *g = e->g;
    uint32_t n = 0;
    TERN_ASSERT(e->n_visit == 0 && (n_in == 0 || in != out), "stepping in place would overwrite the input");
    e->overflow = false;
    e->n_work = 0;
    for (uint32_t i = 0; i < n_in; i++) {
        uint32_t node = in[i].node;
        if (node == GRAM_FOLBYTES) { /* classification: k bytes past an unfollowed rule end */
            uint32_t k = in[i].frame % GRAM_FOLLOW_BYTES;
            TERN_ASSERT(e->sim && in[i].frame / GRAM_FOLLOW_BYTES < g->n_rules);
            const struct gram_bset *fb = gram_follow_bytes(g, in[i].frame / GRAM_FOLLOW_BYTES);
            if (!fb || gram_bset_has(&fb[k], byte))
                emit(e, out, &n, k + 1 < GRAM_FOLLOW_BYTES && fb ? GRAM_FOLBYTES : GRAM_OVERFLOW,
                     k + 1 < GRAM_FOLLOW_BYTES && fb ? in[i].frame + 1 : 0);
            continue;
        }
        if (gram_is_marker(node)) continue;
        TERN_ASSERT(node < g->n_nodes && in[i].frame < e->fr.n);
        const struct gram_node *nd = &g->nodes[node];
        const struct gram_range *r = g->ranges + nd->r_off;
        for (uint32_t k = 0; k < nd->r_n; k++) {
            if (r[k].lo > byte) break;
            if (byte > r[k].hi) continue;
            uint32_t t = r[k].to;
            /* one input stack cannot produce duplicates here; several go through the visited
             * set when classifying (their order does not matter there) */
            if ((g->nodes[t].flags & GN_PLAIN) && (n_in == 1 || !e->sim)) emit(e, out, &n, t, in[i].frame);
            else work_push(e, t, in[i].frame);
            if (!(nd->flags & GN_NONDET)) break;
        }
    }
    if (e->n_work) drain(e, out, &n);
    TERN_ASSERT(n <= GRAM_MAX_STACKS && e->n_work == 0);
    /* the matcher keys its cache on the state: canonical order; classification needs none */
    return e->sim ? n : sort_unique(out, n);
}

void gram_engine_next_bytes(const struct tern_grammar *g, const struct gram_stack *in, uint32_t n,
                            struct gram_bset *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < n; i++) {
        if (gram_is_marker(in[i].node)) continue;
        TERN_ASSERT(in[i].node < g->n_nodes);
        const struct gram_node *nd = &g->nodes[in[i].node];
        TERN_ASSERT((uint64_t)nd->r_off + nd->r_n <= g->n_ranges);
        for (uint32_t k = 0; k < nd->r_n; k++)
            gram_bset_add_range(out, g->ranges[nd->r_off + k].lo, g->ranges[nd->r_off + k].hi);
    }
}

bool gram_state_accepting(const struct gram_stack *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (s[i].node == GRAM_ACCEPT) return true;
    return false;
}

uint64_t gram_state_hash(const struct gram_stack *s, uint32_t n)
{
    uint64_t h = 0x84222325CBF29CE4ull ^ n;
    for (uint32_t i = 0; i < n; i++) h = mix64(h ^ (((uint64_t)s[i].node << 32) | s[i].frame));
    return h;
}

/* ---------------------------------------------------------------- bytes after a rule's end */

/* fb[k] = every byte that can come k bytes after the rule ends, over all its follow nodes
 * together (their stacks merged level by level: a superset, which is what a rejection needs).
 * Where a follow node's own rule can end, its caller is unknown: every byte from there on. */
static bool follow_bytes_of(const struct tern_grammar *g, uint32_t rule, struct gram_bset *fb)
{
    const uint32_t cap = 4 * GRAM_MAX_STACKS;
    struct gram_engine e;
    if (gram_engine_init(&e, g, false)) return false;
    struct gram_stack *cur = malloc((cap + GRAM_MAX_STACKS + 8) * sizeof *cur);
    struct gram_stack *nxt = malloc((cap + GRAM_MAX_STACKS + 8) * sizeof *nxt);
    if (!cur || !nxt) { free(cur); free(nxt); gram_engine_free(&e); return false; }
    const struct gram_rule *r = &g->rules[rule];
    TERN_ASSERT((uint64_t)r->fol_off + r->fol_n <= g->n_follow);
    uint32_t n = 0;
    bool any = false; /* every byte from here on */
    for (uint32_t i = 0; i < r->fol_n && !any; i++) {
        /* a counter's body ends: what follows depends on the count (not known here) */
        if (g->nodes[g->follow[r->fol_off + i]].flags & GN_COUNT) { any = true; break; }
        n += gram_engine_start(&e, g->follow[r->fol_off + i], 0, cur + n);
        if (e.overflow || n > cap) any = true;
    }
    n = any ? 0 : sort_unique(cur, n);
    for (int k = 0; k < GRAM_FOLLOW_BYTES; k++) {
        if (!any && gram_state_accepting(cur, n)) any = true;
        if (any) { memset(&fb[k], 0xFF, sizeof fb[k]); continue; }
        gram_engine_next_bytes(g, cur, n, &fb[k]);
        if (k + 1 == GRAM_FOLLOW_BYTES) break;
        uint32_t m = 0;
        for (unsigned b = 0; b < 256 && !any; b++) {
            if (!gram_bset_has(&fb[k], b)) continue;
            m += gram_engine_step(&e, cur, n, (uint8_t)b, nxt + m);
            if (e.overflow || m > cap) any = true;
            else m = sort_unique(nxt, m);
        }
        struct gram_stack *t = cur;
        cur = nxt;
        nxt = t;
        n = any ? 0 : m;
    }
    free(cur);
    free(nxt);
    gram_engine_free(&e);
    return true;
}

const struct gram_bset *gram_follow_bytes(const struct tern_grammar *g, uint32_t rule)
{
    TERN_ASSERT(rule < g->n_rules && g->cache);
    struct gram_bset *fb = atomic_load_explicit(&g->cache->folb[rule], memory_order_acquire);
    if (fb) return fb;
    fb = malloc(GRAM_FOLLOW_BYTES * sizeof *fb);
    if (!fb) return NULL;
    if (!follow_bytes_of(g, rule, fb)) { free(fb); return NULL; }
    struct gram_bset *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&g->cache->folb[rule], &expected, fb, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(fb); /* another thread's is the same */
        return expected;
    }
    return fb;
}
