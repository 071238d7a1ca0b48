/* gram_ir.c — the grammar IR every front end builds (see gram_internal.h): expressions over
 * byte sets, sequences, alternatives, bounded or unbounded repetition, rule references and
 * embedded automata, plus the code point class -> UTF-8 expansion.
 *
 * Builders never fail loudly: an allocation failure or a limit sets a flag and makes every
 * later call return GRAM_NONE, so front ends check once (gir_status) instead of after each
 * call. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/check.h"
#include "util/error.h"
#include "util/utf8.h"

void gir_init(struct gram_ir *ir)
{
    memset(ir, 0, sizeof *ir);
}

void gir_free(struct gram_ir *ir)
{
    for (uint32_t i = 0; i < ir->n_rules; i++) free(ir->rules[i].name);
    for (uint32_t i = 0; i < ir->n_dfas; i++) gdfa_free(&ir->dfas[i]);
    free(ir->ex);
    free(ir->kids);
    free(ir->sets);
    free(ir->rules);
    free(ir->dfas);
    memset(ir, 0, sizeof *ir);
}

tern_status gir_status(const struct gram_ir *ir, const char *what)
{
    if (ir->oom) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory", what);
    if (ir->too_big)
        return tern_fail(TERN_ERR_RANGE, "%s: grammar too large (more than %u expressions or %u rules)",
                         what, GRAM_MAX_EXPRS, GRAM_MAX_RULES);
    return TERN_OK;
}

/* Grow *p (elements of size sz) to hold at least need; false (and ir->oom) on failure. */
static bool grow(struct gram_ir *ir, void **p, uint32_t *cap, uint32_t need, size_t sz)
{
    if (need <= *cap) return true;
    uint32_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > UINT32_MAX / 2) { ir->too_big = true; return false; }
        nc *= 2;
    }
    void *q = realloc(*p, (size_t)nc * sz);
    if (!q) { ir->oom = true; return false; }
    *p = q;
    *cap = nc;
    return true;
}

static bool ir_ok(const struct gram_ir *ir) { return !ir->oom && !ir->too_big; }

static uint32_t new_ex(struct gram_ir *ir, uint32_t kind, uint32_t a, uint32_t b, uint32_t c)
{
    if (!ir_ok(ir)) return GRAM_NONE;
    if (ir->n_ex >= GRAM_MAX_EXPRS) { ir->too_big = true; return GRAM_NONE; }
    if (!grow(ir, (void **)&ir->ex, &ir->cap_ex, ir->n_ex + 1, sizeof *ir->ex)) return GRAM_NONE;
    /* what an expression names exists already: the IR is built bottom-up, without cycles
     * except through rules */
    TERN_ASSERT(kind != GX_BYTES || a < ir->n_sets);
    TERN_ASSERT((kind != GX_SEQ && kind != GX_ALT) || ((uint64_t)a + b <= ir->n_kids && b >= 2));
    TERN_ASSERT((kind != GX_REP && kind != GX_COUNT) || (c == GRAM_INF || b <= c));
    TERN_ASSERT(kind != GX_REP || a < ir->n_ex);
    TERN_ASSERT((kind != GX_REF && kind != GX_COUNT) || a < ir->n_rules);
    TERN_ASSERT(kind != GX_DFA || a < ir->n_dfas);
    ir->ex[ir->n_ex] = (struct gram_ex){kind, a, b, c};
    return ir->n_ex++;
}

uint32_t gir_nothing(struct gram_ir *ir) { return new_ex(ir, GX_NOTHING, 0, 0, 0); }
uint32_t gir_empty(struct gram_ir *ir) { return new_ex(ir, GX_EMPTY, 0, 0, 0); }

uint32_t gir_bytes(struct gram_ir *ir, const struct gram_bset *s)
{
    if (!ir_ok(ir)) return GRAM_NONE;
    if (gram_bset_empty(s)) return gir_nothing(ir);
    if (!grow(ir, (void **)&ir->sets, &ir->cap_sets, ir->n_sets + 1, sizeof *ir->sets)) return GRAM_NONE;
    ir->sets[ir->n_sets] = *s;
    return new_ex(ir, GX_BYTES, ir->n_sets++, 0, 0);
}

uint32_t gir_byte_range(struct gram_ir *ir, uint8_t lo, uint8_t hi)
{
    struct gram_bset s = {{0}};
    gram_bset_add_range(&s, lo, hi);
    return gir_bytes(ir, &s);
}

uint32_t gir_byte(struct gram_ir *ir, uint8_t b) { return gir_byte_range(ir, b, b); }

static uint32_t list_ex(struct gram_ir *ir, uint32_t kind, const uint32_t *xs, uint32_t n)
{
    if (!ir_ok(ir)) return GRAM_NONE;
    for (uint32_t i = 0; i < n; i++)
        if (xs[i] == GRAM_NONE) return GRAM_NONE;
    if (n == 0) return kind == GX_SEQ ? gir_empty(ir) : gir_nothing(ir);
    if (n == 1) return xs[0];
    if (!grow(ir, (void **)&ir->kids, &ir->cap_kids, ir->n_kids + n, sizeof *ir->kids)) return GRAM_NONE;
    uint32_t off = ir->n_kids;
    memcpy(ir->kids + off, xs, n * sizeof *xs);
    ir->n_kids += n;
    return new_ex(ir, kind, off, n, 0);
}

uint32_t gir_seq(struct gram_ir *ir, const uint32_t *xs, uint32_t n) { return list_ex(ir, GX_SEQ, xs, n); }
uint32_t gir_alt(struct gram_ir *ir, const uint32_t *xs, uint32_t n) { return list_ex(ir, GX_ALT, xs, n); }
uint32_t gir_seq2(struct gram_ir *ir, uint32_t a, uint32_t b)
{
    uint32_t xs[2] = {a, b};
    return gir_seq(ir, xs, 2);
}
uint32_t gir_seq3(struct gram_ir *ir, uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t xs[3] = {a, b, c};
    return gir_seq(ir, xs, 3);
}
uint32_t gir_alt2(struct gram_ir *ir, uint32_t a, uint32_t b)
{
    uint32_t xs[2] = {a, b};
    return gir_alt(ir, xs, 2);
}

uint32_t gir_lit(struct gram_ir *ir, const char *s, size_t n)
{
    if (!ir_ok(ir)) return GRAM_NONE;
    if (n == 0) return gir_empty(ir);
    if (n > GRAM_MAX_EXPRS / 2) { ir->too_big = true; return GRAM_NONE; }
    uint32_t stackbuf[64];
    uint32_t *xs = n <= 64 ? stackbuf : malloc(n * sizeof *xs);
    if (!xs) { ir->oom = true; return GRAM_NONE; }
    for (size_t i = 0; i < n; i++) xs[i] = gir_byte(ir, (uint8_t)s[i]);
    uint32_t r = gir_seq(ir, xs, (uint32_t)n);
    if (xs != stackbuf) free(xs);
    return r;
}

uint32_t gir_str(struct gram_ir *ir, const char *s) { return gir_lit(ir, s, strlen(s)); }

uint32_t gir_token(struct gram_ir *ir, int32_t id)
{
    uint8_t b[GRAM_CTL_LEN];
    gram_ctl_encode(id, b);
    return gir_lit(ir, (const char *)b, sizeof b);
}

uint32_t gir_rep(struct gram_ir *ir, uint32_t x, uint32_t min, uint32_t max)
{
    if (x == GRAM_NONE) return GRAM_NONE;
    if (max != GRAM_INF && max < min) return gir_nothing(ir);
    if (max == 0) return gir_empty(ir);
    if (min == 1 && max == 1) return x;
    return new_ex(ir, GX_REP, x, min, max);
}

uint32_t gir_opt(struct gram_ir *ir, uint32_t x) { return gir_rep(ir, x, 0, 1); }

uint32_t gir_count(struct gram_ir *ir, uint32_t x, uint32_t min, uint32_t max)
{
    if (min <= GRAM_UNROLL_MAX && (max == GRAM_INF || max <= GRAM_UNROLL_MAX)) return gir_rep(ir, x, min, max);
    return gir_counter(ir, x, min, max);
}

uint32_t gir_counter(struct gram_ir *ir, uint32_t x, uint32_t min, uint32_t max)
{
    if (x == GRAM_NONE) return GRAM_NONE;
    if (max != GRAM_INF && max < min) return gir_nothing(ir);
    if (ir->no_counters || max == 0 || (min == 1 && max == 1)) return gir_rep(ir, x, min, max);
    if (!ir_ok(ir)) return GRAM_NONE;
    /* the body: a rule of its own (a reference is that rule already), never inlined into the
     * counter: its end is where the count moves */
    uint32_t body;
    if (ir->ex[x].kind == GX_REF) {
        body = ir->ex[x].a;
    } else {
        body = gir_rule_new(ir, "count-body");
        gir_rule_set(ir, body, x);
    }
    uint32_t r = max == GRAM_INF ? gir_rule_new(ir, "count{%u,}", min) : gir_rule_new(ir, "count{%u,%u}", min, max);
    if (body == GRAM_NONE || r == GRAM_NONE) return GRAM_NONE;
    ir->rules[r].shared = true;
    gir_rule_set(ir, r, new_ex(ir, GX_COUNT, body, min, max));
    return gir_ref(ir, r);
}

static bool nullable_rec(const struct gram_ir *ir, uint32_t x, uint8_t *seen, int depth)
{
    if (x == GRAM_NONE || depth > 2000) return false;
    const struct gram_ex *e = &ir->ex[x];
    switch (e->kind) {
    case GX_EMPTY: return true;
    case GX_SEQ:
        for (uint32_t i = 0; i < e->b; i++)
            if (!nullable_rec(ir, ir->kids[e->a + i], seen, depth + 1)) return false;
        return true;
    case GX_ALT:
        for (uint32_t i = 0; i < e->b; i++)
            if (nullable_rec(ir, ir->kids[e->a + i], seen, depth + 1)) return true;
        return false;
    case GX_REP: return e->b == 0 || nullable_rec(ir, e->a, seen, depth + 1);
    case GX_COUNT: return e->b == 0 || nullable_rec(ir, ir->rules[e->a].ex, seen, depth + 1);
    case GX_REF: {
        if (!seen || seen[e->a]) return false;
        seen[e->a] = 1;
        bool r = nullable_rec(ir, ir->rules[e->a].ex, seen, depth + 1);
        seen[e->a] = 0;
        return r;
    }
    case GX_DFA: {
        const struct gram_dfa *d = &ir->dfas[e->a];
        return d->n_states && d->start < d->n_states && d->final[d->start]; /* xedges: conservative */
    }
    default: return false;
    }
}

bool gir_nullable(const struct gram_ir *ir, uint32_t x)
{
    uint8_t *seen = calloc(ir->n_rules ? ir->n_rules : 1, 1);
    bool r = nullable_rec(ir, x, seen, 0);
    free(seen);
    return r;
}

uint32_t gir_ref(struct gram_ir *ir, uint32_t rule)
{
    if (rule == GRAM_NONE) return GRAM_NONE;
    return new_ex(ir, GX_REF, rule, 0, 0);
}

uint32_t gir_dfa(struct gram_ir *ir, struct gram_dfa *d)
{
    if (!ir_ok(ir) || !grow(ir, (void **)&ir->dfas, &ir->cap_dfas, ir->n_dfas + 1, sizeof *ir->dfas)) {
        gdfa_free(d);
        return GRAM_NONE;
    }
    ir->dfas[ir->n_dfas] = *d;
    memset(d, 0, sizeof *d);
    return new_ex(ir, GX_DFA, ir->n_dfas++, 0, 0);
}

uint32_t gir_rule(struct gram_ir *ir, const char *name, size_t len)
{
    if (!ir_ok(ir)) return GRAM_NONE;
    for (uint32_t i = 0; i < ir->n_rules; i++)
        if (strlen(ir->rules[i].name) == len && !memcmp(ir->rules[i].name, name, len)) return i;
    if (ir->n_rules >= GRAM_MAX_RULES) { ir->too_big = true; return GRAM_NONE; }
    if (!grow(ir, (void **)&ir->rules, &ir->cap_rules, ir->n_rules + 1, sizeof *ir->rules)) return GRAM_NONE;
    char *nm = malloc(len + 1);
    if (!nm) { ir->oom = true; return GRAM_NONE; }
    memcpy(nm, name, len);
    nm[len] = 0;
    ir->rules[ir->n_rules] = (struct gram_irule){nm, GRAM_NONE, 0, 0, false};
    return ir->n_rules++;
}

/* Generated rules get unique names without a lookup (the names only show in messages). */
uint32_t gir_rule_new(struct gram_ir *ir, const char *fmt, ...)
{
    if (!ir_ok(ir)) return GRAM_NONE;
    if (ir->n_rules >= GRAM_MAX_RULES) { ir->too_big = true; return GRAM_NONE; }
    if (!grow(ir, (void **)&ir->rules, &ir->cap_rules, ir->n_rules + 1, sizeof *ir->rules)) return GRAM_NONE;
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *nm = strdup(buf);
    if (!nm) { ir->oom = true; return GRAM_NONE; }
    ir->rules[ir->n_rules] = (struct gram_irule){nm, GRAM_NONE, 0, 0, false};
    return ir->n_rules++;
}

void gir_rule_set(struct gram_ir *ir, uint32_t rule, uint32_t ex)
{
    if (rule == GRAM_NONE || rule >= ir->n_rules) return;
    TERN_ASSERT(ex == GRAM_NONE || ex < ir->n_ex, "a rule's body is an expression of this IR");
    ir->rules[rule].ex = ex;
}

/* ---------------------------------------------------------------- DFA fragments */

void gdfa_init(struct gram_dfa *d) { memset(d, 0, sizeof *d); }
void gdfa_free(struct gram_dfa *d)
{
    free(d->final);
    free(d->edges);
    free(d->xedges);
    memset(d, 0, sizeof *d);
}

uint32_t gdfa_state(struct gram_dfa *d, bool final)
{
    if (d->n_states >= (1u << 24)) return GRAM_NONE;
    /* capacity: 16, then doubled whenever the count reaches a power of two >= 16 */
    if (d->n_states == 0 || (d->n_states >= 16 && (d->n_states & (d->n_states - 1)) == 0)) {
        uint32_t nc = d->n_states ? d->n_states * 2 : 16;
        uint8_t *f = realloc(d->final, nc);
        if (!f) return GRAM_NONE;
        d->final = f;
    }
    TERN_ASSERT(d->final);
    d->final[d->n_states] = final;
    return d->n_states++;
}

bool gdfa_edge(struct gram_dfa *d, uint32_t from, uint8_t lo, uint8_t hi, uint32_t to)
{
    if (from == GRAM_NONE || to == GRAM_NONE) return false;
    TERN_ASSERT(from < d->n_states && to < d->n_states && lo <= hi, "edges join states already made");
    if (d->n_edges == d->cap_edges) {
        uint32_t nc = d->cap_edges ? d->cap_edges * 2 : 64;
        struct gram_dfa_edge *e = realloc(d->edges, nc * sizeof *e);
        if (!e) return false;
        d->edges = e;
        d->cap_edges = nc;
    }
    d->edges[d->n_edges++] = (struct gram_dfa_edge){from, to, lo, hi};
    return true;
}

bool gdfa_xedge(struct gram_dfa *d, uint32_t from, uint32_t ex, uint32_t to)
{
    if (from == GRAM_NONE || to == GRAM_NONE || ex == GRAM_NONE) return false;
    TERN_ASSERT(from < d->n_states && to < d->n_states);
    if (d->n_xedges == d->cap_xedges) {
        uint32_t nc = d->cap_xedges ? d->cap_xedges * 2 : 32;
        struct gram_dfa_xedge *e = realloc(d->xedges, nc * sizeof *e);
        if (!e) return false;
        d->xedges = e;
        d->cap_xedges = nc;
    }
    d->xedges[d->n_xedges++] = (struct gram_dfa_xedge){from, to, ex};
    return true;
}

/* ---------------------------------------------------------------- UTF-8 */

int gram_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

/* ---------------------------------------------------------------- code point classes */

struct cprange {
    uint32_t lo, hi;
};

static int cmp_cprange(const void *a, const void *b)
{
    const struct cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A range of code points of one encoded length whose bytes line up: one byte range per
 * position (the classic split, so each piece is a product of byte ranges). */
static uint32_t utf8_piece(struct gram_ir *ir, uint32_t lo, uint32_t hi)
{
    char a[4], b[4];
    int n = util_utf8_encode(lo, a);
    util_utf8_encode(hi, b);
    uint32_t xs[4];
    for (int i = 0; i < n; i++) xs[i] = gir_byte_range(ir, (uint8_t)a[i], (uint8_t)b[i]);
    return gir_seq(ir, xs, (uint32_t)n);
}

/* Split [lo, hi] (same encoded length) until each piece's trailing 6-bit groups span fully. */
static void utf8_split(struct gram_ir *ir, uint32_t lo, uint32_t hi, int n, uint32_t *alts,
                       uint32_t *n_alts, uint32_t cap)
{
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_split(ir, lo, lo | m, n, alts, n_alts, cap);
                utf8_split(ir, (lo | m) + 1, hi, n, alts, n_alts, cap);
                return;
            }
            if ((hi & m) != m) {
                utf8_split(ir, lo, (hi & ~m) - 1, n, alts, n_alts, cap);
                utf8_split(ir, hi & ~m, hi, n, alts, n_alts, cap);
                return;
            }
        }
    }
    if (*n_alts < cap) alts[(*n_alts)++] = utf8_piece(ir, lo, hi);
    else ir->too_big = true;
}

uint32_t gir_cpclass(struct gram_ir *ir, const uint32_t *ranges, size_t n_ranges, bool negate)
{
    if (!ir_ok(ir)) return GRAM_NONE;
    struct cprange *r = malloc((n_ranges + 4) * sizeof *r);
    if (!r) { ir->oom = true; return GRAM_NONE; }
    size_t n = 0;
    for (size_t i = 0; i < n_ranges; i++) {
        uint32_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
        if (lo > hi) continue;
        if (hi > 0x10FFFF) hi = 0x10FFFF;
        if (lo > 0x10FFFF) continue;
        r[n++] = (struct cprange){lo, hi};
    }
    qsort(r, n, sizeof *r, cmp_cprange);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    n = m;
    if (negate) { /* complement in place into a fresh array */
        struct cprange *c = malloc((n + 2) * sizeof *c);
        if (!c) { free(r); ir->oom = true; return GRAM_NONE; }
        size_t k = 0;
        uint32_t next = 0;
        for (size_t i = 0; i < n; i++) {
            if (r[i].lo > next) c[k++] = (struct cprange){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF) c[k++] = (struct cprange){next, 0x10FFFF};
        free(r);
        r = c;
        n = k;
    }
    /* cut at encoding-length boundaries and around the surrogates */
    static const uint32_t bounds[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF},
                                         {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
    static const int lens[] = {1, 2, 3, 3, 4};
    uint32_t cap = 4096, n_alts = 0;
    uint32_t *alts = malloc(cap * sizeof *alts);
    if (!alts) { free(r); ir->oom = true; return GRAM_NONE; }
    struct gram_bset ascii = {{0}};
    bool any_ascii = false;
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < 5; b++) {
            uint32_t lo = r[i].lo > bounds[b][0] ? r[i].lo : bounds[b][0];
            uint32_t hi = r[i].hi < bounds[b][1] ? r[i].hi : bounds[b][1];
            if (lo > hi) continue;
            if (lens[b] == 1) { /* all single bytes go into one set */
                gram_bset_add_range(&ascii, lo, hi);
                any_ascii = true;
                continue;
            }
            utf8_split(ir, lo, hi, lens[b], alts, &n_alts, cap);
        }
    }
    free(r);
    if (any_ascii && n_alts < cap) alts[n_alts++] = gir_bytes(ir, &ascii);
    uint32_t out = gir_alt(ir, alts, n_alts);
    free(alts);
    return out;
}

void gram_warn(char **warn, const char *fmt, ...)
{
    if (!warn) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k >= sizeof buf) k = sizeof buf - 1;
    size_t old = *warn ? strlen(*warn) : 0;
    char *p = realloc(*warn, old + (size_t)k + 2);
    if (!p) return;
    memcpy(p + old, buf, (size_t)k);
    p[old + (size_t)k] = '\n';
    p[old + (size_t)k + 1] = 0;
    *warn = p;
}
