/* gram_regex.c — the regular-expression subset of JSON Schema `pattern` -> IR.
 *
 * Supported (ECMA-262 syntax, the language JSON Schema names): literals; `.` (any character
 * but \n \r U+2028 U+2029); classes [...] and [^...] with ranges and the escapes below;
 * \d \D \w \W \s \S; \t \n \r \f \v \0 \xHH \uHHHH and escaped punctuation; groups (...) and
 * (?:...); alternation |; quantifiers * + ? {n} {n,} {n,m}, greedy or lazy (same language);
 * anchors ^ at the start and $ at the end of a top-level alternative. Not supported (an error
 * naming the offset): backreferences, lookaround, \b \B, named groups, anchors elsewhere.
 *
 * `pattern` is a search: an alternative without ^ may be preceded by anything, one without $
 * followed by anything. With json_escape the expression describes the *encoded* string
 * content: a character that JSON must escape (quote, backslash, controls) matches its escape
 * sequences (\" \\ \n ... or \u00XX), '/' also as \/; every other character matches its raw
 * UTF-8 (a \uXXXX spelling of an ordinary character is not accepted: generation never needs
 * it). The unanchored ends accept any JSON string content, escapes included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/error.h"

#define RE_MAX_NEST 128
#define RE_MAX_RANGES 4096

struct rp {
    const char *s;
    size_t n, pos;
    struct gram_ir *ir;
    bool json;
    int depth;
    bool failed;
    bool anchored;   /* the current top-level alternative starts with ^ */
    bool risky;      /* a counted repetition inside another, or a long one in a search: the
                        automaton may explode (gram_regex_to_ir) */
    size_t err_pos;
    char err[160];
};

/* A code point set under construction. */
struct cset {
    uint32_t r[2 * RE_MAX_RANGES];
    size_t n;
};

static bool rfail(struct rp *p, size_t at, const char *msg)
{
    if (!p->failed) {
        p->failed = true;
        p->err_pos = at;
        snprintf(p->err, sizeof p->err, "%s", msg);
    }
    return false;
}

static bool cset_add(struct rp *p, struct cset *c, uint32_t lo, uint32_t hi)
{
    if (c->n >= RE_MAX_RANGES) return rfail(p, p->pos, "character class too large");
    c->r[2 * c->n] = lo;
    c->r[2 * c->n + 1] = hi;
    c->n++;
    return true;
}

static bool cset_add_neg(struct rp *p, struct cset *dst, const uint32_t *r, size_t n)
{
    /* complement of sorted, disjoint ranges (the fixed tables below are) */
    uint32_t next = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[2 * i] > next && !cset_add(p, dst, next, r[2 * i] - 1)) return false;
        next = r[2 * i + 1] + 1;
    }
    return next > 0x10FFFF || cset_add(p, dst, next, 0x10FFFF);
}

static const uint32_t DIGIT[] = {'0', '9'};
static const uint32_t WORD[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
static const uint32_t SPACE[] = {0x09, 0x0D, 0x20, 0x20, 0xA0, 0xA0, 0x1680, 0x1680, 0x2000, 0x200A,
                                 0x2028, 0x2029, 0x202F, 0x202F, 0x205F, 0x205F, 0x3000, 0x3000,
                                 0xFEFF, 0xFEFF};
static const uint32_t DOT_EXCL[] = {0x0A, 0x0A, 0x0D, 0x0D, 0x2028, 0x2029};

static int hexv(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int peekc(const struct rp *p, size_t off)
{
    return p->pos + off < p->n ? (unsigned char)p->s[p->pos + off] : -1;
}

/* An escape after '\' (p->pos at the backslash). Either a single code point (*cp) or a class
 * added to *set (returns 2). 0 on error, 1 for a code point. */
static int parse_escape(struct rp *p, uint32_t *cp, struct cset *set, bool in_class)
{
    size_t at = p->pos;
    int e = peekc(p, 1);
    p->pos += 2;
    switch (e) {
    case 'd': return cset_add(p, set, '0', '9') ? 2 : 0;
    case 'D': return cset_add_neg(p, set, DIGIT, 1) ? 2 : 0;
    case 'w':
        for (int i = 0; i < 4; i++)
            if (!cset_add(p, set, WORD[2 * i], WORD[2 * i + 1])) return 0;
        return 2;
    case 'W': return cset_add_neg(p, set, WORD, 4) ? 2 : 0;
    case 's':
        for (size_t i = 0; i < sizeof SPACE / sizeof SPACE[0] / 2; i++)
            if (!cset_add(p, set, SPACE[2 * i], SPACE[2 * i + 1])) return 0;
        return 2;
    case 'S': return cset_add_neg(p, set, SPACE, sizeof SPACE / sizeof SPACE[0] / 2) ? 2 : 0;
    case 't': *cp = '\t'; return 1;
    case 'n': *cp = '\n'; return 1;
    case 'r': *cp = '\r'; return 1;
    case 'f': *cp = '\f'; return 1;
    case 'v': *cp = '\v'; return 1;
    case '0':
        if (peekc(p, 0) >= '0' && peekc(p, 0) <= '9') { rfail(p, at, "octal escapes are not supported"); return 0; }
        *cp = 0;
        return 1;
    case 'x': case 'u': {
        int nd = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int i = 0; i < nd; i++) {
            int h = hexv(peekc(p, 0));
            if (h < 0) { rfail(p, at, e == 'x' ? "\\x needs 2 hex digits" : "\\u needs 4 hex digits"); return 0; }
            v = v * 16 + (uint32_t)h;
            p->pos++;
        }
        if (v >= 0xD800 && v <= 0xDFFF) { rfail(p, at, "surrogate escapes are not supported"); return 0; }
        *cp = v;
        return 1;
    }
    case 'b':
        if (in_class) { *cp = '\b'; return 1; }
        rfail(p, at, "word boundary \\b is not supported");
        return 0;
    case 'B': rfail(p, at, "\\B is not supported"); return 0;
    case 'k': rfail(p, at, "named backreferences are not supported"); return 0;
    case 'c': case 'p': case 'P': rfail(p, at, "this escape is not supported"); return 0;
    case -1: rfail(p, at, "pattern ends with a backslash"); return 0;
    default:
        if (e >= '1' && e <= '9') { rfail(p, at, "backreferences are not supported"); return 0; }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) { rfail(p, at, "unknown escape"); return 0; }
        if (e >= 0x80) { /* escaped non-ASCII: the character itself */
            p->pos--;
            int k = gram_utf8_decode((const unsigned char *)p->s + p->pos, p->n - p->pos, cp);
            if (!k) { rfail(p, at, "invalid UTF-8"); return 0; }
            p->pos += (size_t)k;
            return 1;
        }
        *cp = (uint32_t)e;
        return 1;
    }
}

/* The expression for a set of code points, encoded per p->json. */
static uint32_t set_expr(struct rp *p, const uint32_t *r, size_t n)
{
    if (!p->json) return gir_cpclass(p->ir, r, n, false);
    /* raw part: the set minus what JSON must escape */
    struct cset *raw = malloc(sizeof *raw);
    if (!raw) { p->ir->oom = true; return GRAM_NONE; }
    raw->n = 0;
    bool need[0x20] = {0}, quote = false, bslash = false, slash = false;
    for (size_t i = 0; i < n; i++) {
        uint32_t lo = r[2 * i], hi = r[2 * i + 1];
        for (uint32_t c = lo; c <= hi && c < 0x20; c++) need[c] = true;
        if (lo <= '"' && '"' <= hi) quote = true;
        if (lo <= '\\' && '\\' <= hi) bslash = true;
        if (lo <= '/' && '/' <= hi) slash = true;
        /* pieces of [lo, hi] outside 0x00-0x1F, '"' and '\\' */
        uint32_t a = lo < 0x20 ? 0x20 : lo;
        const uint32_t cuts[2] = {'"', '\\'};
        for (int k = 0; k < 2 && a <= hi; k++) {
            if (cuts[k] < a || cuts[k] > hi) continue;
            if (cuts[k] > a && raw->n < RE_MAX_RANGES) { raw->r[2 * raw->n] = a; raw->r[2 * raw->n + 1] = cuts[k] - 1; raw->n++; }
            a = cuts[k] + 1;
        }
        if (a <= hi && raw->n < RE_MAX_RANGES) { raw->r[2 * raw->n] = a; raw->r[2 * raw->n + 1] = hi; raw->n++; }
    }
    uint32_t alts[40];
    uint32_t na = 0;
    if (raw->n) alts[na++] = gir_cpclass(p->ir, raw->r, raw->n, false);
    free(raw);
    if (quote) alts[na++] = gir_str(p->ir, "\\\"");
    if (bslash) alts[na++] = gir_str(p->ir, "\\\\");
    if (slash) alts[na++] = gir_str(p->ir, "\\/");
    static const char short_esc[0x20] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
    bool any_ctl = false;
    struct gram_bset lo_hex = {{0}};
    for (int c = 0; c < 0x20; c++) {
        if (!need[c]) continue;
        any_ctl = true;
        if (short_esc[c]) {
            char e[3] = {'\\', short_esc[c], 0};
            alts[na++] = gir_str(p->ir, e);
        }
        (void)lo_hex;
    }
    if (any_ctl) { /* \u00XX for each control character in the set (either hex case) */
        uint32_t hx[32];
        uint32_t nh = 0;
        for (int hi4 = 0; hi4 < 2; hi4++) {
            struct gram_bset low = {{0}};
            bool any = false;
            for (int lo4 = 0; lo4 < 16; lo4++)
                if (need[hi4 * 16 + lo4]) {
                    any = true;
                    gram_bset_add(&low, (unsigned)(lo4 < 10 ? '0' + lo4 : 'a' + lo4 - 10));
                    if (lo4 >= 10) gram_bset_add(&low, (unsigned)('A' + lo4 - 10));
                }
            if (!any) continue;
            uint32_t parts[3] = {gir_str(p->ir, hi4 ? "\\u001" : "\\u000"), gir_bytes(p->ir, &low), 0};
            hx[nh++] = gir_seq(p->ir, parts, 2);
        }
        alts[na++] = gir_alt(p->ir, hx, nh);
    }
    return gir_alt(p->ir, alts, na);
}

static uint32_t single(struct rp *p, uint32_t cp)
{
    uint32_t r[2] = {cp, cp};
    return set_expr(p, r, 1);
}

static uint32_t parse_class(struct rp *p)
{
    size_t open = p->pos++;
    bool neg = false;
    if (peekc(p, 0) == '^') { neg = true; p->pos++; }
    struct cset *c = malloc(sizeof *c);
    if (!c) { p->ir->oom = true; return GRAM_NONE; }
    c->n = 0;
    bool first = true;
    for (;;) {
        int ch = peekc(p, 0);
        if (ch < 0) { free(c); rfail(p, open, "unterminated character class"); return GRAM_NONE; }
        if (ch == ']' && !first) { p->pos++; break; }
        if (ch == ']' && first) { /* ECMA: [] matches nothing, [^] anything */
            p->pos++;
            free(c);
            return neg ? set_expr(p, (const uint32_t[]){0, 0x10FFFF}, 1) : gir_nothing(p->ir);
        }
        first = false;
        uint32_t lo;
        int kind;
        if (ch == '\\') {
            kind = parse_escape(p, &lo, c, true);
            if (!kind) { free(c); return GRAM_NONE; }
            if (kind == 2) continue;
        } else {
            int k = gram_utf8_decode((const unsigned char *)p->s + p->pos, p->n - p->pos, &lo);
            if (!k) { free(c); rfail(p, p->pos, "invalid UTF-8"); return GRAM_NONE; }
            p->pos += (size_t)k;
        }
        uint32_t hi = lo;
        if (peekc(p, 0) == '-' && peekc(p, 1) != ']' && peekc(p, 1) >= 0) {
            size_t at = p->pos;
            p->pos++;
            if (peekc(p, 0) == '\\') {
                struct cset tmp;
                tmp.n = 0;
                int k2 = parse_escape(p, &hi, &tmp, true);
                if (k2 != 1) { free(c); if (k2 == 2) rfail(p, at, "a class escape cannot end a range"); return GRAM_NONE; }
            } else {
                int k = gram_utf8_decode((const unsigned char *)p->s + p->pos, p->n - p->pos, &hi);
                if (!k) { free(c); rfail(p, p->pos, "invalid UTF-8"); return GRAM_NONE; }
                p->pos += (size_t)k;
            }
            if (hi < lo) { free(c); rfail(p, at, "range out of order in character class"); return GRAM_NONE; }
        }
        if (!cset_add(p, c, lo, hi)) { free(c); return GRAM_NONE; }
    }
    uint32_t x;
    if (neg) {
        /* complement: sort and merge, then invert */
        if (!p->json) {
            x = gir_cpclass(p->ir, c->r, c->n, true);
            free(c);
            return x;
        }
        /* build the complement ranges explicitly for the JSON encoder */
        for (size_t i = 1; i < c->n; i++) { /* insertion sort by lo */
            uint32_t a = c->r[2 * i], b = c->r[2 * i + 1];
            size_t j = i;
            while (j && c->r[2 * (j - 1)] > a) { c->r[2 * j] = c->r[2 * (j - 1)]; c->r[2 * j + 1] = c->r[2 * (j - 1) + 1]; j--; }
            c->r[2 * j] = a;
            c->r[2 * j + 1] = b;
        }
        struct cset *inv = malloc(sizeof *inv);
        if (!inv) { free(c); p->ir->oom = true; return GRAM_NONE; }
        inv->n = 0;
        uint32_t next = 0;
        for (size_t i = 0; i < c->n; i++) {
            if (c->r[2 * i] > next) cset_add(p, inv, next, c->r[2 * i] - 1);
            if (c->r[2 * i + 1] + 1 > next) next = c->r[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) cset_add(p, inv, next, 0x10FFFF);
        x = set_expr(p, inv->r, inv->n);
        free(inv);
    } else {
        x = set_expr(p, c->r, c->n);
    }
    free(c);
    return x;
}

static uint32_t parse_alt(struct rp *p, bool top, bool *anch_start, bool *anch_end);

/* Automaton states x would take unrolled (capped). */
static uint64_t weight(const struct gram_ir *ir, uint32_t x, int depth)
{
    const struct gram_ex *e = &ir->ex[x];
    uint64_t w = 1;
    if (depth > 200) return 1ull << 40;
    if (e->kind == GX_SEQ || e->kind == GX_ALT) {
        w = 0;
        for (uint32_t i = 0; i < e->b && w < (1ull << 40); i++) w += weight(ir, ir->kids[e->a + i], depth + 1);
    } else if (e->kind == GX_REP) {
        uint64_t k = e->c == GRAM_INF ? (uint64_t)e->b + 1 : e->c;
        w = weight(ir, e->a, depth + 1) * (k ? k : 1);
    }
    return w < (1ull << 40) ? w : 1ull << 40;
}

static bool parse_count(struct rp *p, uint32_t *v)
{
    uint64_t x = 0;
    if (peekc(p, 0) < '0' || peekc(p, 0) > '9') return false;
    while (peekc(p, 0) >= '0' && peekc(p, 0) <= '9') {
        x = x * 10 + (uint64_t)(peekc(p, 0) - '0');
        if (x > GRAM_MAX_COUNT) return rfail(p, p->pos, "repetition count above the limit (2147483647)");
        p->pos++;
    }
    *v = (uint32_t)x;
    return true;
}

/* A sequence up to '|' or ')' or the end. In a top-level alternative, a leading ^ and a
 * trailing $ are reported through the flags. */
static uint32_t parse_seq(struct rp *p, bool top, bool *anch_start, bool *anch_end)
{
    uint32_t cap = 16, n = 0;
    uint32_t *xs = malloc(cap * sizeof *xs);
    if (!xs) { p->ir->oom = true; return GRAM_NONE; }
    size_t seq_start = p->pos;
    if (top) p->anchored = false;
    for (;;) {
        int c = peekc(p, 0);
        if (c < 0 || c == '|' || c == ')') break;
        size_t at = p->pos;
        uint32_t x;
        if (c == '^') {
            p->pos++;
            if (!top || at != seq_start) { free(xs); rfail(p, at, "'^' is supported only at the start of a top-level alternative"); return GRAM_NONE; }
            *anch_start = true;
            p->anchored = true;
            continue;
        }
        if (c == '$') {
            p->pos++;
            if (!top || (peekc(p, 0) >= 0 && peekc(p, 0) != '|')) { free(xs); rfail(p, at, "'$' is supported only at the end of a top-level alternative"); return GRAM_NONE; }
            *anch_end = true;
            break;
        }
        if (c == '(') {
            if (++p->depth > RE_MAX_NEST) { free(xs); rfail(p, at, "groups nested too deep"); return GRAM_NONE; }
            p->pos++;
            if (peekc(p, 0) == '?') {
                if (peekc(p, 1) == ':') p->pos += 2;
                else { free(xs); rfail(p, at, peekc(p, 1) == '<' && peekc(p, 2) != '=' && peekc(p, 2) != '!' ? "named groups are not supported" : "lookaround is not supported"); return GRAM_NONE; }
            }
            x = parse_alt(p, false, NULL, NULL);
            if (x == GRAM_NONE) { free(xs); return GRAM_NONE; }
            if (peekc(p, 0) != ')') { free(xs); rfail(p, at, "unclosed group"); return GRAM_NONE; }
            p->pos++;
            p->depth--;
        } else if (c == '[') {
            x = parse_class(p);
        } else if (c == '.') {
            p->pos++;
            struct cset *s = malloc(sizeof *s);
            if (!s) { free(xs); p->ir->oom = true; return GRAM_NONE; }
            s->n = 0;
            cset_add_neg(p, s, DOT_EXCL, 3);
            x = set_expr(p, s->r, s->n);
            free(s);
        } else if (c == '\\') {
            struct cset *s = malloc(sizeof *s);
            if (!s) { free(xs); p->ir->oom = true; return GRAM_NONE; }
            s->n = 0;
            uint32_t cp;
            int k = parse_escape(p, &cp, s, false);
            x = k == 1 ? single(p, cp) : k == 2 ? set_expr(p, s->r, s->n) : GRAM_NONE;
            free(s);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (c == '{' && !(peekc(p, 1) >= '0' && peekc(p, 1) <= '9')) { /* a literal brace */
                p->pos++;
                x = single(p, '{');
            } else {
                free(xs);
                rfail(p, at, "quantifier without anything to repeat");
                return GRAM_NONE;
            }
        } else {
            uint32_t cp;
            int k = gram_utf8_decode((const unsigned char *)p->s + p->pos, p->n - p->pos, &cp);
            if (!k) { free(xs); rfail(p, at, "invalid UTF-8"); return GRAM_NONE; }
            p->pos += (size_t)k;
            x = single(p, cp);
        }
        if (x == GRAM_NONE) { free(xs); return GRAM_NONE; }
        /* quantifier */
        int q = peekc(p, 0);
        if (q == '*' || q == '+' || q == '?') {
            p->pos++;
            x = gir_rep(p->ir, x, q == '+' ? 1 : 0, q == '?' ? 1 : GRAM_INF);
            if (peekc(p, 0) == '?') p->pos++; /* lazy: same language */
        } else if (q == '{' && peekc(p, 1) >= '0' && peekc(p, 1) <= '9') {
            size_t qa = p->pos++;
            uint32_t lo = 0, hi;
            if (!parse_count(p, &lo)) { free(xs); if (!p->failed) rfail(p, qa, "bad repetition"); return GRAM_NONE; }
            if (peekc(p, 0) == ',') {
                p->pos++;
                if (peekc(p, 0) == '}') hi = GRAM_INF;
                else if (!parse_count(p, &hi)) { free(xs); if (!p->failed) rfail(p, qa, "bad repetition"); return GRAM_NONE; }
            } else {
                hi = lo;
            }
            if (peekc(p, 0) != '}') { free(xs); rfail(p, qa, "unclosed repetition {m,n}"); return GRAM_NONE; }
            p->pos++;
            if (hi != GRAM_INF && hi < lo) { free(xs); rfail(p, qa, "repetition {m,n} with n < m"); return GRAM_NONE; }
            const bool huge = lo > GRAM_MAX_REPEAT || (hi != GRAM_INF && hi > GRAM_MAX_REPEAT);
            const uint64_t top_count = hi == GRAM_INF ? lo : hi;
            const uint64_t wx = weight(p->ir, x, 0);
            /* a counter where the copies would be many: a long count, or a count of something big */
            const bool big = top_count > GRAM_UNROLL_MAX || (top_count > 1 && wx * top_count > 4096);
            if ((top_count >= 16 && wx >= 16 * 4) || (!p->anchored && top_count > 64)) p->risky = true;
            if (huge || (big && p->anchored && !p->ir->no_counters && !gir_nullable(p->ir, x))) {
                /* a counter, not copies: where a search may start at any character, every
                 * start would keep a count of its own alive */
                if (!p->anchored && !p->ir->no_counters) {
                    free(xs);
                    rfail(p, qa, "repetition counts above 10000 need a pattern anchored at the start (^): "
                                 "a search would count from every character");
                    return GRAM_NONE;
                }
                if (!p->ir->no_counters && gir_nullable(p->ir, x)) {
                    free(xs);
                    rfail(p, qa, "repetition counts above 10000 need a repeated part that cannot be empty");
                    return GRAM_NONE;
                }
                x = gir_counter(p->ir, x, lo, hi);
            } else {
                x = gir_rep(p->ir, x, lo, hi); /* one rule (string constraints are intersected) */
            }
            if (peekc(p, 0) == '?') p->pos++;
        }
        if (peekc(p, 0) == '*' || peekc(p, 0) == '+' || (peekc(p, 0) == '{' && peekc(p, 1) >= '0' && peekc(p, 1) <= '9')) {
            free(xs);
            rfail(p, p->pos, "nothing to repeat (double quantifier)");
            return GRAM_NONE;
        }
        if (n == cap) {
            cap *= 2;
            uint32_t *nx = realloc(xs, cap * sizeof *nx);
            if (!nx) { free(xs); p->ir->oom = true; return GRAM_NONE; }
            xs = nx;
        }
        xs[n++] = x;
    }
    uint32_t r = gir_seq(p->ir, xs, n);
    free(xs);
    return r;
}

/* Any JSON string content (the unanchored ends). */
static uint32_t any_content(struct rp *p)
{
    uint32_t r[2] = {0, 0x10FFFF};
    return gir_rep(p->ir, set_expr(p, r, 1), 0, GRAM_INF);
}

/* x{m,n} (m >= 1) -> x{m}; anything else unchanged */
static uint32_t rep_to_min(struct rp *p, uint32_t x)
{
    const struct gram_ex *e = &p->ir->ex[x];
    if (e->kind == GX_REP && e->b >= 1 && e->c != e->b) return gir_rep(p->ir, e->a, e->b, e->b);
    return x;
}

/* A search (JSON Schema's `pattern`): an alternative P without ^ matches where .*P matches,
 * without $ where P.* does. Those are the same languages with P's ends trimmed: an item that
 * may match nothing at an open end is absorbed by the .* there, and x{m,n} at an open end
 * matches exactly where x{m} does (the other repetitions belong to the .*). Trimming keeps the
 * automaton small where the untrimmed search explodes (`x.{0,4000}` is the search `x`). */
static uint32_t search_trim(struct rp *p, uint32_t x, bool open_start, bool open_end)
{
    const struct gram_ex *e = &p->ir->ex[x];
    uint32_t n = e->kind == GX_SEQ ? e->b : 1, lo = 0, hi = n;
    uint32_t *xs = malloc((n + 1) * sizeof *xs);
    if (!xs) { p->ir->oom = true; return GRAM_NONE; }
    if (e->kind == GX_SEQ) memcpy(xs, p->ir->kids + e->a, n * sizeof *xs);
    else xs[0] = x;
    bool changed = false;
    if (open_start) {
        while (lo < hi && gir_nullable(p->ir, xs[lo])) lo++;
        if (lo < hi) xs[lo] = rep_to_min(p, xs[lo]);
    }
    if (open_end) {
        while (hi > lo && gir_nullable(p->ir, xs[hi - 1])) hi--;
        if (hi > lo) xs[hi - 1] = rep_to_min(p, xs[hi - 1]);
    }
    changed = lo > 0 || hi < n || (lo < hi && (xs[lo] != (e->kind == GX_SEQ ? p->ir->kids[e->a + lo] : x) ||
                                                xs[hi - 1] != (e->kind == GX_SEQ ? p->ir->kids[e->a + hi - 1] : x)));
    uint32_t r = changed ? gir_seq(p->ir, xs + lo, hi - lo) : x;
    free(xs);
    return r;
}

static uint32_t parse_alt(struct rp *p, bool top, bool *anch_start, bool *anch_end)
{
    uint32_t cap = 8, n = 0;
    uint32_t *xs = malloc(cap * sizeof *xs);
    if (!xs) { p->ir->oom = true; return GRAM_NONE; }
    for (;;) {
        bool as = false, ae = false;
        uint32_t x = parse_seq(p, top, &as, &ae);
        if (x == GRAM_NONE) { free(xs); return GRAM_NONE; }
        if (top) {
            if (!as || !ae) x = search_trim(p, x, !as, !ae);
            uint32_t parts[3];
            uint32_t k = 0;
            if (!as) parts[k++] = any_content(p);
            if (x != GRAM_NONE) parts[k++] = x;
            if (!ae) parts[k++] = any_content(p);
            x = x == GRAM_NONE ? GRAM_NONE : gir_seq(p->ir, parts, k);
        }
        (void)anch_start;
        (void)anch_end;
        if (n == cap) {
            cap *= 2;
            uint32_t *nx = realloc(xs, cap * sizeof *nx);
            if (!nx) { free(xs); p->ir->oom = true; return GRAM_NONE; }
            xs = nx;
        }
        xs[n++] = x;
        if (peekc(p, 0) != '|') break;
        p->pos++;
    }
    uint32_t r = gir_alt(p->ir, xs, n);
    free(xs);
    return r;
}

tern_status gram_regex_to_ir(const char *re, size_t len, bool json_escape, struct gram_ir *ir,
                             uint32_t *ex, bool *risky)
{
    struct rp p = {re, len, 0, ir, json_escape, 0, false, false, false, 0, {0}};
    uint32_t x = parse_alt(&p, true, NULL, NULL);
    if (!p.failed && p.pos < len) rfail(&p, p.pos, "unmatched ')'");
    tern_status st = gir_status(ir, "pattern");
    if (st) return st;
    if (p.failed) return tern_fail(TERN_ERR_UNSUPPORTED, "pattern offset %zu: %s", p.err_pos, p.err);
    *ex = x;
    if (risky) *risky = p.risky;
    return TERN_OK;
}

/* Formats as anchored patterns over plain ASCII (they never need escapes). Semantics, stated
 * in docs/tools.md "Constrained decoding":
 *   date       RFC 3339 full-date with the real month lengths; Feb 29 only in leap years
 *   time       RFC 3339 full-time: hh:mm:ss, optional fraction, Z or +hh:mm / -hh:mm (second 60
 *              allowed, as RFC 3339 does for leap seconds); t and z in either case
 *   date-time  date T time
 *   email      dot-atom local part @ hostname (no quoted local parts, no IP literals)
 *   hostname   dot-separated labels of 1-63 letters, digits, hyphens, not starting or ending
 *              with a hyphen (the 253-byte total is not enforced)
 *   ipv4       four decimal octets 0-255 without leading zeros
 *   ipv6       RFC 4291 text forms, :: compression, optional trailing IPv4
 *   uuid       8-4-4-4-12 hex digits, either case
 *   uri        RFC 3986 absolute URI: scheme ":" then characters of the URI set (unreserved,
 *              reserved, percent escapes) and IPv6 literals in brackets (http://[::1]:8080/:
 *              RFC 3986 reserves "[" and "]" for IP literals, so a lone bracket is refused), no
 *              spaces */
#define D2 "[0-9]{2}"
#define LEAP "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
#define DATE "([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)" \
             "|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])|" LEAP "-02-29)"
#define TIME "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define LABEL "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define HOST LABEL "(\\." LABEL ")*"
#define OCT "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define IPV4 OCT "\\." OCT "\\." OCT "\\." OCT
#define H16 "[0-9A-Fa-f]{1,4}"
#define LS32 "(" H16 ":" H16 "|" IPV4 ")"
#define IPV6 "((" H16 ":){6}" LS32 "|::(" H16 ":){5}" LS32 "|(" H16 ")?::(" H16 ":){4}" LS32 \
             "|((" H16 ":){0,1}" H16 ")?::(" H16 ":){3}" LS32 "|((" H16 ":){0,2}" H16 ")?::(" H16 ":){2}" LS32 \
             "|((" H16 ":){0,3}" H16 ")?::" H16 ":" LS32 "|((" H16 ":){0,4}" H16 ")?::" LS32 \
             "|((" H16 ":){0,5}" H16 ")?::" H16 "|((" H16 ":){0,6}" H16 ")?::)"
#define ATEXT "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"

const char *gram_format_regex(const char *f)
{
    if (!strcmp(f, "date")) return "^" DATE "$";
    if (!strcmp(f, "time")) return "^" TIME "$";
    if (!strcmp(f, "date-time")) return "^" DATE "[Tt]" TIME "$";
    if (!strcmp(f, "email")) return "^" ATEXT "+(\\." ATEXT "+)*@" HOST "$";
    if (!strcmp(f, "hostname")) return "^" HOST "$";
    if (!strcmp(f, "ipv4")) return "^" IPV4 "$";
    if (!strcmp(f, "ipv6")) return "^" IPV6 "$";
    if (!strcmp(f, "uuid")) return "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$";
    if (!strcmp(f, "uri"))
        return "^[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~:/?#@!$&'()*+,;=-]|%[0-9A-Fa-f]{2}|\\[" IPV6 "\\])*$";
    return NULL;
}
