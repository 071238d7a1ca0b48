/* gram_num.c — JSON numbers with bounds and multipleOf, as one automaton.
 *
 * Both constraints are regular languages over decimal text, so they are enforced exactly,
 * digit by digit: the automaton is the product of
 *   - the number syntax: -?(0|[1-9][0-9]*)(\.[0-9]+)?   (no exponent when constrained);
 *   - for each bound, a comparison of the magnitude with the bound's digits: while integer
 *     digits arrive, how many and how the prefix compares; after the point, the fraction
 *     compared digit by digit (the sign picks which bound applies to the magnitude, e.g.
 *     x >= -2.5 means |x| <= 2.5 for negative x);
 *   - for multipleOf m/10^k (m an integer, k fraction digits of the step): the digits read so
 *     far as an integer modulo m, and how many fraction digits were read (beyond k only zeros
 *     can follow: 1.50 is a multiple of 0.25, 1.55 is not);
 * built breadth first over reachable tuples, with tuples that can no longer satisfy a bound
 * dropped early. "-0" (and -0.0 ...) is not produced under constraints: it equals 0 but
 * would need the comparison to ignore the sign; a model has no reason to write it.
 * Unconstrained numbers skip all this and also admit exponents.
 *
 * Every number has a bounded number of digits: at most NUM_INT_DIGITS before the point (19: any
 * int64 and a bit more), NUM_FRAC_DIGITS after it and NUM_EXP_DIGITS in an exponent (more where
 * a bound itself has more). A model that keeps writing digits (a small model loops on "304304")
 * is then made to end the number, so the JSON around it still closes before max_tokens. */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/error.h"

#define NUM_MAX_DIGITS 200
#define NUM_INT_DIGITS 19
#define NUM_FRAC_DIGITS 16
#define NUM_EXP_DIGITS 3
#define NUM_MAX_STATES 200000
#define NUM_MAX_MODULUS 100000

enum { CMP_LT = 0, CMP_EQ = 1, CMP_GT = 2 };
enum { K_ANY = 0, K_GE, K_GT, K_LE, K_LT };
enum { S_START = 0, S_SIGN, S_ZERO, S_INT, S_DOT, S_FRAC };

struct dec {                       /* |value| = int.frac */
    bool neg, zero;
    char i[NUM_MAX_DIGITS + 1];    /* no leading zeros ("" = 0) */
    char f[NUM_MAX_DIGITS + 1];    /* no trailing zeros */
    uint32_t li, lf;
};

/* Parse decimal text (sign, digits, point, exponent) exactly. false if malformed or too long. */
static bool dec_parse(const char *s, struct dec *d)
{
    memset(d, 0, sizeof *d);
    char digits[2 * NUM_MAX_DIGITS + 8];
    size_t nd = 0;
    long point = -1, exp10 = 0;
    if (*s == '-') { d->neg = true; s++; }
    else if (*s == '+') s++;
    bool any = false;
    for (; *s; s++) {
        if (*s >= '0' && *s <= '9') {
            if (nd >= sizeof digits - 1) return false;
            digits[nd++] = *s;
            any = true;
        } else if (*s == '.' && point < 0) {
            point = (long)nd;
        } else {
            break;
        }
    }
    if (!any) return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        bool en = false;
        if (*s == '-') { en = true; s++; }
        else if (*s == '+') s++;
        if (!(*s >= '0' && *s <= '9')) return false;
        for (; *s >= '0' && *s <= '9'; s++) {
            exp10 = exp10 * 10 + (*s - '0');
            if (exp10 > 1000) return false;
        }
        if (en) exp10 = -exp10;
    }
    if (*s) return false;
    if (point < 0) point = (long)nd;
    long ip = point + exp10; /* digits before the point after shifting */
    /* integer part: digits[0 .. ip), fraction: digits[ip ..) with zero padding */
    for (long k = 0; k < ip; k++) {
        char c = k < (long)nd ? digits[k] : '0';
        if (d->li == 0 && c == '0') continue;
        if (d->li >= NUM_MAX_DIGITS) return false;
        d->i[d->li++] = c;
    }
    for (long k = ip < 0 ? ip : (ip > (long)nd ? (long)nd : ip); k < (long)nd; k++) {
        char c = k < 0 ? '0' : digits[k];
        if (d->lf >= NUM_MAX_DIGITS) return false;
        d->f[d->lf++] = c;
    }
    while (d->lf && d->f[d->lf - 1] == '0') d->lf--;
    d->i[d->li] = 0;
    d->f[d->lf] = 0;
    d->zero = d->li == 0 && d->lf == 0;
    if (d->zero) d->neg = false;
    return true;
}

/* Magnitude comparator state. */
struct cmpst {
    uint16_t ilen;
    uint8_t cpre, rint, cf, phase;
    uint16_t j;
};

struct bound {
    int kind;         /* K_* */
    const struct dec *b;
};

struct nstate {
    uint8_t syn, neg, f, pad;
    uint16_t ni, nf;      /* digits before / after the point, counted up to their caps */
    uint32_t r;
    struct cmpst lo, hi;
};

struct branch {
    bool none;
    struct bound lo, hi;  /* lower: K_ANY/K_GE/K_GT; upper: K_ANY/K_LE/K_LT */
};

struct numctx {
    bool is_int;
    struct branch br[2];  /* [0] non-negative, [1] negative */
    uint32_t m;           /* multipleOf numerator (0 = none) */
    uint32_t k;           /* its fraction digits */
    uint32_t pow10k_mod;  /* unused: kept for clarity of end check */
    uint32_t max_int, max_frac; /* digit caps (NUM_INT_DIGITS ...) */
    bool count_int;       /* some sign branch has no upper bound on its magnitude: count */
};

static void cmp_digit(struct cmpst *c, const struct dec *b, int d)
{
    if (!b) return;
    if (c->phase == 0) {
        if (c->ilen < b->li) {
            if (c->cpre == CMP_EQ) {
                int bd = b->i[c->ilen] - '0';
                c->cpre = d < bd ? CMP_LT : d > bd ? CMP_GT : CMP_EQ;
            }
            c->ilen++;
        } else {
            c->ilen = (uint16_t)(b->li + 1);
            c->cpre = CMP_GT;
        }
    } else {
        if (c->rint != CMP_EQ || c->cf != CMP_EQ) return;
        if (c->j < b->lf) {
            int bd = b->f[c->j] - '0';
            c->cf = d < bd ? CMP_LT : d > bd ? CMP_GT : CMP_EQ;
            c->j++;
        } else if (d != 0) {
            c->cf = CMP_GT;
        }
        if (c->cf != CMP_EQ) c->j = 0; /* decided: forget the position */
    }
}

static void cmp_point(struct cmpst *c, const struct dec *b)
{
    if (!b) return;
    c->phase = 1;
    c->rint = c->ilen < b->li ? CMP_LT : c->ilen > b->li ? CMP_GT : c->cpre;
    c->ilen = 0;
    c->cpre = CMP_EQ;
    c->j = 0;
    c->cf = CMP_EQ;
}

static int cmp_result(const struct cmpst *c, const struct dec *b)
{
    if (c->phase == 0) {
        if (c->ilen < b->li) return CMP_LT;
        if (c->ilen > b->li) return CMP_GT;
        if (c->cpre != CMP_EQ) return c->cpre;
        return b->lf ? CMP_LT : CMP_EQ;
    }
    if (c->rint != CMP_EQ) return c->rint;
    if (c->cf != CMP_EQ) return c->cf;
    return c->j < b->lf ? CMP_LT : CMP_EQ;
}

static bool bound_ok_end(const struct bound *bd, const struct cmpst *c)
{
    if (bd->kind == K_ANY) return true;
    int r = cmp_result(c, bd->b);
    switch (bd->kind) {
    case K_GE: return r != CMP_LT;
    case K_GT: return r == CMP_GT;
    case K_LE: return r != CMP_GT;
    case K_LT: return r == CMP_LT;
    }
    return true;
}

/* Can this comparator state still end satisfied? */
static bool bound_alive(const struct bound *bd, const struct cmpst *c)
{
    if (bd->kind == K_ANY) return true;
    if (bd->kind == K_LE || bd->kind == K_LT) {
        if (c->phase == 0) return !(c->ilen > bd->b->li || (c->ilen == bd->b->li && c->cpre == CMP_GT));
        if (c->rint == CMP_GT || (c->rint == CMP_EQ && c->cf == CMP_GT)) return false;
        return true;
    }
    if (c->phase == 1 && (c->rint == CMP_LT || (c->rint == CMP_EQ && c->cf == CMP_LT))) return false;
    return true;
}

/* Next state on byte ch, false if none. */
static bool nstep(const struct numctx *x, const struct nstate *s, int ch, struct nstate *o)
{
    *o = *s;
    bool digit = ch >= '0' && ch <= '9';
    int d = ch - '0';
    switch (s->syn) {
    case S_START:
        if (ch == '-') {
            if (x->br[1].none) return false;
            o->syn = S_SIGN;
            o->neg = 1;
            return true;
        }
        if (x->br[0].none) return false;
        if (ch == '0') { o->syn = S_ZERO; break; }
        if (digit) { o->syn = S_INT; break; }
        return false;
    case S_SIGN:
        if (ch == '0') { o->syn = S_ZERO; break; }
        if (digit) { o->syn = S_INT; break; }
        return false;
    case S_ZERO:
        if (ch == '.' && !x->is_int) { o->syn = S_DOT; break; }
        return false;
    case S_INT:
        if (digit) break;
        if (ch == '.' && !x->is_int) { o->syn = S_DOT; break; }
        return false;
    case S_DOT:
    case S_FRAC:
        if (digit) { o->syn = S_FRAC; break; }
        return false;
    }
    /* the digit caps (counted only where no bound already limits them, so bounded numbers keep
     * their small automata) */
    if (digit && (o->syn == S_INT || o->syn == S_ZERO) && x->count_int && ++o->ni > x->max_int) return false;
    if (digit && o->syn == S_FRAC && ++o->nf > x->max_frac) return false;
    const struct branch *br = &x->br[o->neg];
    if (ch == '.') {
        cmp_point(&o->lo, br->lo.b);
        cmp_point(&o->hi, br->hi.b);
    } else if (digit && !(o->syn == S_ZERO)) {
        cmp_digit(&o->lo, br->lo.b, d);
        cmp_digit(&o->hi, br->hi.b, d);
    }
    if (digit && x->m) {
        bool frac = o->syn == S_FRAC;
        if (frac && o->f >= x->k) {
            if (d != 0) return false;
        } else {
            o->r = (uint32_t)(((uint64_t)o->r * 10 + (uint64_t)d) % x->m);
            if (frac) o->f++;
        }
    }
    return bound_alive(&br->lo, &o->lo) && bound_alive(&br->hi, &o->hi);
}

static bool nfinal(const struct numctx *x, const struct nstate *s)
{
    if (s->syn != S_ZERO && s->syn != S_INT && s->syn != S_FRAC) return false;
    const struct branch *br = &x->br[s->neg];
    if (!bound_ok_end(&br->lo, &s->lo) || !bound_ok_end(&br->hi, &s->hi)) return false;
    if (x->m) {
        uint64_t v = s->r;
        for (uint32_t i = s->f; i < x->k; i++) v = v * 10 % x->m;
        if (v % x->m) return false;
    }
    return true;
}

static uint64_t nhash(const struct nstate *s)
{
    const unsigned char *p = (const unsigned char *)s;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *s; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Bounds of one sign branch from x >= lo / x <= hi (either may be NULL). */
static void set_branches(struct numctx *x, const struct dec *lo, bool lo_ex, const struct dec *hi,
                         bool hi_ex, const struct dec *zero)
{
    struct branch *p = &x->br[0], *n = &x->br[1];
    memset(x->br, 0, sizeof x->br);
    /* the negative branch never produces -0: its magnitude is > 0 */
    n->lo = (struct bound){K_GT, zero};
    if (lo) {
        if (!lo->neg) { /* lo >= 0 */
            p->lo = (struct bound){lo_ex ? K_GT : K_GE, lo};
            n->none = true;
        } else {        /* lo < 0: every non-negative x passes; negative need |x| <= |lo| */
            n->hi = (struct bound){lo_ex ? K_LT : K_LE, lo};
        }
    }
    if (hi) {
        if (!hi->neg) {
            if (hi->zero && hi_ex) p->none = true;
            else p->hi = (struct bound){hi_ex ? K_LT : K_LE, hi};
        } else {        /* hi < 0: no non-negative x; negative need |x| >= |hi| */
            p->none = true;
            n->lo = (struct bound){hi_ex ? K_GT : K_GE, hi};
        }
    }
}

tern_status gram_num_to_ir(const struct gram_num_spec *s, struct gram_ir *ir, uint32_t *ex)
{
    if (!s->min && !s->max && !s->step) {
        /* unconstrained: the plain JSON number syntax */
        uint32_t sign = gir_opt(ir, gir_byte(ir, '-'));
        uint32_t intp = gir_alt2(ir, gir_byte(ir, '0'),
                                 gir_seq2(ir, gir_byte_range(ir, '1', '9'),
                                          gir_rep(ir, gir_byte_range(ir, '0', '9'), 0, NUM_INT_DIGITS - 1)));
        if (s->is_int) {
            *ex = gir_seq2(ir, sign, intp);
        } else {
            uint32_t digits = gir_rep(ir, gir_byte_range(ir, '0', '9'), 1, NUM_FRAC_DIGITS);
            uint32_t frac = gir_opt(ir, gir_seq2(ir, gir_byte(ir, '.'), digits));
            struct gram_bset e = {{0}}, pm = {{0}};
            gram_bset_add(&e, 'e');
            gram_bset_add(&e, 'E');
            gram_bset_add(&pm, '+');
            gram_bset_add(&pm, '-');
            uint32_t expo = gir_opt(ir, gir_seq3(ir, gir_bytes(ir, &e), gir_opt(ir, gir_bytes(ir, &pm)),
                                                 gir_rep(ir, gir_byte_range(ir, '0', '9'), 1, NUM_EXP_DIGITS)));
            uint32_t xs[4] = {sign, intp, frac, expo};
            *ex = gir_seq(ir, xs, 4);
        }
        return gir_status(ir, "number");
    }
    struct dec *lo = NULL, *hi = NULL, *step = NULL, *zero = NULL;
    struct dec *all = calloc(4, sizeof *all);
    if (!all) return tern_fail(TERN_ERR_NOMEM, "number: out of memory");
    zero = &all[3];
    dec_parse("0", zero);
    struct numctx x;
    memset(&x, 0, sizeof x);
    x.is_int = s->is_int;
    tern_status st = TERN_OK;
    if (s->min) {
        lo = &all[0];
        if (!dec_parse(s->min, lo)) { st = tern_fail(TERN_ERR_RANGE, "minimum %s: more than %d digits", s->min, NUM_MAX_DIGITS); goto out; }
    }
    if (s->max) {
        hi = &all[1];
        if (!dec_parse(s->max, hi)) { st = tern_fail(TERN_ERR_RANGE, "maximum %s: more than %d digits", s->max, NUM_MAX_DIGITS); goto out; }
    }
    if (s->step) {
        step = &all[2];
        if (!dec_parse(s->step, step) || step->neg || step->zero) {
            st = tern_fail(TERN_ERR_FORMAT, "multipleOf %s: must be a number greater than 0", s->step);
            goto out;
        }
        /* step = m / 10^k with m an integer */
        uint64_t m = 0;
        for (uint32_t i = 0; i < step->li; i++) {
            m = m * 10 + (uint64_t)(step->i[i] - '0');
            if (m > NUM_MAX_MODULUS) break;
        }
        for (uint32_t i = 0; i < step->lf && m <= NUM_MAX_MODULUS; i++) m = m * 10 + (uint64_t)(step->f[i] - '0');
        if (m > NUM_MAX_MODULUS || step->lf > 12) {
            st = tern_fail(TERN_ERR_RANGE, "multipleOf %s: tern supports steps of at most %d units of their last digit (and 12 decimals)",
                           s->step, NUM_MAX_MODULUS);
            goto out;
        }
        /* strip common factors of 10 between m and 10^k (0.50 -> 1/2) is not needed: exact as is */
        x.m = (uint32_t)m;
        x.k = step->lf;
    }
    set_branches(&x, lo, s->min_excl, hi, s->max_excl, zero);
    /* caps, widened to what a bound spells out (x >= 1e30 needs 31 integer digits) */
    x.max_int = NUM_INT_DIGITS;
    x.max_frac = NUM_FRAC_DIGITS;
    for (int b = 0; b < 2; b++) {
        const struct dec *d = b ? hi : lo;
        if (!d) continue;
        if (d->li + 1 > x.max_int) x.max_int = d->li + 1;
        if (d->lf + 1 > x.max_frac) x.max_frac = d->lf + 1;
    }
    if (x.k + 1 > x.max_frac) x.max_frac = x.k + 1;
    x.count_int = (!x.br[0].none && x.br[0].hi.kind == K_ANY) || (!x.br[1].none && x.br[1].hi.kind == K_ANY);

    struct gram_dfa d;
    gdfa_init(&d);
    struct nstate *states = NULL;
    uint32_t cap = 0, n = 0;
    uint32_t hmask = 4095;
    uint32_t *slot = malloc((hmask + 1) * sizeof *slot);
    if (!slot) { st = tern_fail(TERN_ERR_NOMEM, "number: out of memory"); goto out; }
    memset(slot, 0xFF, (hmask + 1) * sizeof *slot);
    struct nstate s0;
    memset(&s0, 0, sizeof s0);
    s0.lo.cpre = s0.hi.cpre = CMP_EQ;
    s0.lo.rint = s0.hi.rint = CMP_EQ;
    s0.lo.cf = s0.hi.cf = CMP_EQ;
    static const char alphabet[] = "-.0123456789";
    /* intern s0 */
    cap = 256;
    states = malloc(cap * sizeof *states);
    if (!states) { free(slot); st = tern_fail(TERN_ERR_NOMEM, "number: out of memory"); goto out; }
    states[n++] = s0;
    slot[nhash(&s0) & hmask] = 0;
    if (gdfa_state(&d, nfinal(&x, &s0)) == GRAM_NONE) goto oom;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tgt[12];
        for (int a = 0; a < 12; a++) {
            struct nstate o, cur = states[i];
            tgt[a] = GRAM_NONE;
            if (!nstep(&x, &cur, alphabet[a], &o)) continue;
            uint64_t h = nhash(&o);
            uint32_t k = (uint32_t)h & hmask, id = GRAM_NONE;
            while (slot[k] != GRAM_NONE) {
                if (!memcmp(&states[slot[k]], &o, sizeof o)) { id = slot[k]; break; }
                k = (k + 1) & hmask;
            }
            if (id == GRAM_NONE) {
                if (n >= NUM_MAX_STATES) {
                    free(slot);
                    free(states);
                    gdfa_free(&d);
                    st = tern_fail(TERN_ERR_RANGE, "number constraints need more than %d automaton states", NUM_MAX_STATES);
                    goto out;
                }
                if (n == cap) {
                    cap *= 2;
                    struct nstate *ns = realloc(states, cap * sizeof *ns);
                    if (!ns) goto oom;
                    states = ns;
                }
                states[n] = o;
                id = n++;
                slot[k] = id;
                if (gdfa_state(&d, nfinal(&x, &o)) == GRAM_NONE) goto oom;
                if (n * 2 > hmask) { /* rehash */
                    uint32_t nm = hmask * 2 + 1;
                    uint32_t *ns2 = malloc(((size_t)nm + 1) * sizeof *ns2);
                    if (!ns2) goto oom;
                    memset(ns2, 0xFF, ((size_t)nm + 1) * sizeof *ns2);
                    for (uint32_t q = 0; q < n; q++) {
                        uint32_t kk = (uint32_t)nhash(&states[q]) & nm;
                        while (ns2[kk] != GRAM_NONE) kk = (kk + 1) & nm;
                        ns2[kk] = q;
                    }
                    free(slot);
                    slot = ns2;
                    hmask = nm;
                }
            }
            tgt[a] = id;
        }
        if (tgt[0] != GRAM_NONE && !gdfa_edge(&d, i, '-', '-', tgt[0])) goto oom;
        if (tgt[1] != GRAM_NONE && !gdfa_edge(&d, i, '.', '.', tgt[1])) goto oom;
        for (int a = 2; a < 12;) { /* digits: coalesce equal targets into ranges */
            int b = a;
            while (b + 1 < 12 && tgt[b + 1] == tgt[a]) b++;
            if (tgt[a] != GRAM_NONE && !gdfa_edge(&d, i, (uint8_t)alphabet[a], (uint8_t)alphabet[b], tgt[a])) goto oom;
            a = b + 1;
        }
    }
    free(slot);
    free(states);
    d.start = 0;
    *ex = gir_dfa(ir, &d);
    st = gir_status(ir, "number");
    goto out;
oom:
    free(slot);
    free(states);
    gdfa_free(&d);
    st = tern_fail(TERN_ERR_NOMEM, "number: out of memory");
out:
    free(all);
    return st;
}
