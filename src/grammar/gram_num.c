/* gram_num.c — JSON numbers with bounds and multipleOf, as one automaton.
 *
 * Both constraints are regular languages over decimal text, so they are enforced exactly,
 * digit by digit: the automaton is the product of
 *   - the number syntax: -?(0|[1-9][0-9]*)(\.[0-9]+)?, and for a number that is not an integer
 *     and has no multipleOf also scientific notation -?[1-9](\.[0-9]+)?[eE][+-]?[0-9]{1,3} (the
 *     only exponent form JSON serializers write: Python's 1e-06, JavaScript's 1e-7, printf's %e);
 *   - for each bound, a comparison of the magnitude with the bound's digits: while integer
 *     digits arrive, how many and how the prefix compares; after the point, the fraction
 *     compared digit by digit (the sign picks which bound applies to the magnitude, e.g.
 *     x >= -2.5 means |x| <= 2.5 for negative x);
 *   - for multipleOf m/10^k (m an integer, k fraction digits of the step): the digits read so
 *     far as an integer modulo m, and how many fraction digits were read (beyond k only zeros
 *     can follow: 1.50 is a multiple of 0.25, 1.55 is not);
 *   - for scientific notation, each bound compared as significand and order of magnitude: the
 *     mantissa d.ddd is 0.dddd x 10^1, a bound b is 0.sig(b) x 10^p(b), so the digits are compared
 *     with sig(b) as they arrive and, at the 'e', the comparison turns into a range of exponents
 *     E that satisfy the bound (x >= b: 1+E > p(b), or 1+E = p(b) and dddd >= sig(b)); the
 *     exponent's digits are then counted against that range;
 * built breadth first over reachable tuples, with tuples that can no longer satisfy a bound
 * dropped early, then minimized (Moore's partition refinement: the exponent's counters and the
 * two notations' comparators make many tuples that accept the same suffixes). "-0" (and -0.0 ...) equals 0: it is admitted wherever 0 is.
 * Unconstrained numbers skip all this and also admit exponents.
 *
 * Every number has a bounded number of digits: at most NUM_INT_DIGITS before the point (21: any
 * int64, any double JavaScript or Python writes without an exponent), NUM_FRAC_DIGITS after it and NUM_EXP_DIGITS in an exponent (more where
 * a bound itself has more). A model that keeps writing digits (a small model loops on "304304")
 * is then made to end the number, so the JSON around it still closes before max_tokens. */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/error.h"

#define NUM_MAX_DIGITS 200
#define NUM_INT_DIGITS 21   /* JavaScript prints doubles below 1e21 positionally */
#define NUM_FRAC_DIGITS 24  /* ... and above 1e-7: 6 zeros and 17 significant digits */
#define NUM_EXP_DIGITS 3
#define NUM_MAX_STATES 200000
#define NUM_MAX_MODULUS 100000

enum { CMP_LT = 0, CMP_EQ = 1, CMP_GT = 2 };
enum { K_ANY = 0, K_GE, K_GT, K_LE, K_LT };
enum { S_START = 0, S_SIGN, S_ZERO, S_INT, S_DOT, S_FRAC, S_E, S_ESIGN, S_EXP };
#define THR_NONE 30000 /* an exponent threshold that does not bind */

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
    /* scientific notation: b = 0.sig x 10^p (sig without leading or trailing zeros) */
    char sig[2 * NUM_MAX_DIGITS + 1];
    uint32_t lsig;
    int p;
};

/* The significand comparator of scientific notation (digits of d.ddd against sig(b)). */
struct scist {
    uint8_t cf;           /* CMP_* of the digits so far against sig's prefix */
    uint16_t j;           /* sig digits compared (while cf is CMP_EQ) */
};

struct nstate {
    uint8_t syn, neg, f, pad;
    uint16_t ni, nf;      /* digits before / after the point, counted up to their caps */
    uint32_t r;
    struct cmpst lo, hi;
    uint8_t plain;        /* the digits so far can still end a number without exponent in range */
    uint8_t sci;          /* ... or be the mantissa of scientific notation (one digit 1-9 before
                             the point) */
    struct scist slo, shi;
    /* exponent: the range [tlo, thi] of values it must take (THR_NONE: unbounded side), its
     * sign, digits and value (saturated past both thresholds) */
    int16_t tlo, thi;
    int8_t esign;
    uint8_t ed;
    uint16_t e;
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
    bool sci;             /* scientific notation admitted */
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

/* sig(b) and p(b) of a bound (scientific notation compares with them). */
static void bound_sig(struct bound *bd)
{
    const struct dec *b = bd->b;
    bd->lsig = 0;
    bd->p = 0;
    if (!b || b->zero) return;
    if (b->li) {
        memcpy(bd->sig, b->i, b->li);
        memcpy(bd->sig + b->li, b->f, b->lf);
        bd->lsig = b->li + b->lf;
        bd->p = (int)b->li;
    } else {
        uint32_t lz = 0;
        while (lz < b->lf && b->f[lz] == '0') lz++;
        memcpy(bd->sig, b->f + lz, b->lf - lz);
        bd->lsig = b->lf - lz;
        bd->p = -(int)lz;
    }
    while (bd->lsig && bd->sig[bd->lsig - 1] == '0') bd->lsig--;
}

static void sci_digit(struct scist *c, const struct bound *bd, int d)
{
    if (bd->kind == K_ANY || c->cf != CMP_EQ) return;
    if (c->j < bd->lsig) {
        int bdig = bd->sig[c->j] - '0';
        c->cf = d < bdig ? CMP_LT : d > bdig ? CMP_GT : CMP_EQ;
        c->j++;
    } else if (d != 0) {
        c->cf = CMP_GT;
    }
    if (c->cf != CMP_EQ) c->j = 0;
}

/* The exponents E for which d.ddd x 10^E satisfies the bound: E >= the result for a lower bound
 * (-THR_NONE: any E, THR_NONE: none), E <= it for an upper one (THR_NONE: any, -THR_NONE: none). */
static int sci_threshold(const struct scist *c, const struct bound *bd, bool upper)
{
    if (bd->kind == K_ANY) return upper ? THR_NONE : -THR_NONE;
    if (bd->b->zero) return -THR_NONE; /* lower: |x| > 0 holds for any E; upper: |x| <= 0 never */
    int r = c->cf != CMP_EQ ? c->cf : c->j < bd->lsig ? CMP_LT : CMP_EQ;
    int need = bd->p - 1; /* d.ddd = 0.dddd x 10^1 */
    switch (bd->kind) {
    case K_GE: return need + (r == CMP_LT);
    case K_GT: return need + (r != CMP_GT);
    case K_LE: return need - (r == CMP_GT);
    default: return need - (r != CMP_LT);
    }
}

static int exp_value(const struct nstate *s)
{
    return s->esign < 0 ? -(int)s->e : (int)s->e;
}

/* Next state on byte ch, false if none. */
static bool nstep(const struct numctx *x, const struct nstate *s, int ch, struct nstate *o)
{
    *o = *s;
    bool digit = ch >= '0' && ch <= '9';
    int d = ch - '0';
    const struct branch *br = &x->br[s->neg];
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
        if (digit) { o->syn = S_INT; o->sci = x->sci; break; }
        return false;
    case S_SIGN:
        if (ch == '0') { o->syn = S_ZERO; break; }
        if (digit) { o->syn = S_INT; o->sci = x->sci; break; }
        return false;
    case S_ZERO:
        if (ch == '.' && !x->is_int) { o->syn = S_DOT; break; }
        return false;
    case S_INT:
        if (digit) { o->sci = 0; memset(&o->slo, 0, sizeof o->slo); memset(&o->shi, 0, sizeof o->shi); break; }
        if (ch == '.' && !x->is_int) { o->syn = S_DOT; break; }
        if ((ch == 'e' || ch == 'E') && s->sci) goto exponent;
        return false;
    case S_DOT:
        if (digit) { o->syn = S_FRAC; break; }
        return false;
    case S_FRAC:
        if (digit) break;
        if ((ch == 'e' || ch == 'E') && s->sci) goto exponent;
        return false;
    case S_E:
        if (ch == '-' || ch == '+') { o->syn = S_ESIGN; o->esign = ch == '-' ? -1 : 1; return true; }
        /* fall through */
    case S_ESIGN:
    case S_EXP: {
        if (!digit || s->ed >= NUM_EXP_DIGITS) return false;
        o->syn = S_EXP;
        o->ed++;
        /* the value matters only up to past both thresholds: saturate there */
        int lim = 0;
        if (s->tlo != -THR_NONE) lim = abs(s->tlo);
        if (s->thi != THR_NONE && abs(s->thi) > lim) lim = abs(s->thi);
        uint32_t e = (uint32_t)s->e * 10u + (uint32_t)d;
        o->e = (uint16_t)(e > (uint32_t)lim + 1 ? (uint32_t)lim + 1 : e);
        /* digits only move E away from 0: past the upper threshold (positive) or below the
         * lower one (negative) nothing can come back */
        if (o->esign >= 0 && o->thi != THR_NONE && exp_value(o) > o->thi) return false;
        if (o->esign < 0 && o->tlo != -THR_NONE && exp_value(o) < o->tlo) return false;
        return true;
    }
    }
    /* the digit caps (counted only where no bound already limits them, so bounded numbers keep
     * their small automata) */
    if (digit && (o->syn == S_INT || o->syn == S_ZERO) && x->count_int && ++o->ni > x->max_int) return false;
    if (digit && o->syn == S_FRAC && ++o->nf > x->max_frac) return false;
    br = &x->br[o->neg];
    if (o->plain) {
        if (ch == '.') {
            cmp_point(&o->lo, br->lo.b);
            cmp_point(&o->hi, br->hi.b);
        } else if (digit && !(o->syn == S_ZERO)) {
            cmp_digit(&o->lo, br->lo.b, d);
            cmp_digit(&o->hi, br->hi.b, d);
        }
        if (!bound_alive(&br->lo, &o->lo) || !bound_alive(&br->hi, &o->hi)) {
            /* only scientific notation can still follow: forget the positional comparison */
            o->plain = 0;
            memset(&o->lo, 0, sizeof o->lo);
            memset(&o->hi, 0, sizeof o->hi);
        }
    }
    if (o->sci && digit) {
        sci_digit(&o->slo, &br->lo, d);
        sci_digit(&o->shi, &br->hi, d);
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
    return o->plain || o->sci;
exponent:
    /* the mantissa's comparisons become a range of exponents; everything else is forgotten */
    {
        int tlo = sci_threshold(&s->slo, &br->lo, false), thi = sci_threshold(&s->shi, &br->hi, true);
        struct nstate e;
        memset(&e, 0, sizeof e);
        e.syn = S_E;
        e.neg = s->neg;
        e.tlo = (int16_t)(tlo < -999 ? -THR_NONE : tlo);
        e.thi = (int16_t)(thi > 999 ? THR_NONE : thi);
        if (tlo > 999 || thi < -999 || e.tlo > e.thi) return false; /* also the "none"s */
        *o = e;
        return true;
    }
}

static bool nfinal(const struct numctx *x, const struct nstate *s)
{
    if (s->syn == S_EXP) {
        int v = exp_value(s);
        return (s->tlo == -THR_NONE || v >= s->tlo) && (s->thi == THR_NONE || v <= s->thi);
    }
    if (s->syn != S_ZERO && s->syn != S_INT && s->syn != S_FRAC) return false;
    if (!s->plain) return false;
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
    /* word at a time: the BFS hashes every candidate state (15 per state) */
    const unsigned char *p = (const unsigned char *)s;
    uint64_t h = 1469598103934665603ull;
    size_t i = 0;
    for (; i + 8 <= sizeof *s; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < sizeof *s; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h ^ (h >> 32);
}

/* Bounds of one sign branch from x >= lo / x <= hi (either may be NULL). */
static void set_branches(struct numctx *x, const struct dec *lo, bool lo_ex, const struct dec *hi,
                         bool hi_ex, const struct dec *zero)
{
    struct branch *p = &x->br[0], *n = &x->br[1];
    memset(x->br, 0, sizeof x->br);
    /* the negative branch never produces -0: its magnitude is > 0 */
    n->lo = (struct bound){.kind = K_GT, .b = zero};
    if (lo) {
        if (!lo->neg) { /* lo >= 0 */
            p->lo = (struct bound){.kind = lo_ex ? K_GT : K_GE, .b = lo};
            n->none = true;
        } else {        /* lo < 0: every non-negative x passes; negative need |x| <= |lo| */
            n->hi = (struct bound){.kind = lo_ex ? K_LT : K_LE, .b = lo};
        }
    }
    if (hi) {
        if (!hi->neg) {
            if (hi->zero && hi_ex) p->none = true;
            else p->hi = (struct bound){.kind = hi_ex ? K_LT : K_LE, .b = hi};
        } else {        /* hi < 0: no non-negative x; negative need |x| >= |hi| */
            p->none = true;
            n->lo = (struct bound){.kind = hi_ex ? K_GT : K_GE, .b = hi};
        }
    }
    /* -0 (Python writes -0.0) equals 0: where 0 is in range, the negative branch also takes
     * magnitude 0 */
    bool zero_in = (!lo || lo->neg || (lo->zero && !lo_ex)) && (!hi || (!hi->neg && !(hi->zero && hi_ex)));
    if (zero_in && n->none) {
        n->none = false;
        n->lo = (struct bound){.kind = K_GE, .b = zero};
        n->hi = (struct bound){.kind = K_LE, .b = zero};
    } else if (zero_in && n->lo.kind == K_GT && n->lo.b == zero) {
        n->lo.kind = K_GE;
    }
}

/* The symbols a number's automaton reads, in byte order within runs ("0".."9" become ranges). */
static const char num_alphabet[] = "-.0123456789Ee+";
enum { N_ALPHA = 15 };

/* Signature interning for the minimization below: a signature is (final, class of each
 * target); tab maps it to the state that first had it. */
struct sigtab {
    uint32_t *sig, *tab, hm;
};
enum { SIG_W = N_ALPHA + 1 };

static uint32_t sig_class(struct sigtab *t, uint32_t i, const uint32_t *g, uint32_t *cls_of_first, uint32_t *n_cls)
{
    memcpy(t->sig + (size_t)i * SIG_W, g, SIG_W * sizeof *g);
    uint64_t h = 1469598103934665603ull;
    for (int w = 0; w < SIG_W; w++) h = (h ^ g[w]) * 1099511628211ull;
    uint32_t k = (uint32_t)(h ^ (h >> 32)) & t->hm;
    while (t->tab[k] != GRAM_NONE && memcmp(t->sig + (size_t)t->tab[k] * SIG_W, g, SIG_W * sizeof *g))
        k = (k + 1) & t->hm;
    if (t->tab[k] == GRAM_NONE) {
        t->tab[k] = i;
        cls_of_first[i] = (*n_cls)++;
    }
    return cls_of_first[t->tab[k]];
}

/* Minimize the automaton trans[n][N_ALPHA] (GRAM_NONE: no edge): cls[i] = the class of state
 * i, numbered by first appearance (state 0 in class 0). A number's automaton has no cycle (every
 * byte counts toward a digit cap), so one pass in reverse topological order merges states with
 * the same finality and the same targets' classes; should a cycle ever appear, Moore's
 * partition refinement does it (rounds up to the longest distinguishing suffix). Returns the
 * number of classes, or GRAM_NONE when out of memory. */
static uint32_t num_minimize(uint32_t n, const uint32_t *trans, const uint8_t *fin, uint32_t *cls)
{
    struct sigtab t;
    t.hm = 1;
    while (t.hm < 2 * n) t.hm <<= 1;
    t.sig = malloc((size_t)n * SIG_W * sizeof *t.sig);
    t.tab = malloc((size_t)t.hm * sizeof *t.tab);
    uint32_t *first = malloc((size_t)n * sizeof *first), *stack = malloc((size_t)n * sizeof *stack);
    uint8_t *color = calloc(n, 1);
    uint32_t n_cls = GRAM_NONE;
    if (!t.sig || !t.tab || !first || !stack || !color) goto out;
    t.hm--;
    memset(t.tab, 0xFF, ((size_t)t.hm + 1) * sizeof *t.tab);
    uint32_t g[SIG_W], k = 0;
    bool cyclic = false;
    /* depth-first from the start: a state is classified once all its targets are (color 2) */
    n_cls = 0;
    stack[k++] = 0;
    color[0] = 1;
    while (k && !cyclic) {
        uint32_t i = stack[k - 1];
        const uint32_t *row = trans + (size_t)i * N_ALPHA;
        bool pushed = false;
        for (int a = 0; a < N_ALPHA; a++) {
            uint32_t j = row[a];
            if (j == GRAM_NONE || color[j] == 2) continue;
            if (color[j] == 1) { cyclic = true; break; }
            color[j] = 1;
            stack[k++] = j;
            pushed = true;
            break;
        }
        if (cyclic || pushed) continue;
        g[0] = fin[i];
        for (int a = 0; a < N_ALPHA; a++) g[a + 1] = row[a] == GRAM_NONE ? GRAM_NONE : cls[row[a]];
        cls[i] = sig_class(&t, i, g, first, &n_cls);
        color[i] = 2;
        k--;
    }
    if (cyclic) {
        for (uint32_t i = 0; i < n; i++) cls[i] = fin[i];
        for (uint32_t prev = 0;;) {
            memset(t.tab, 0xFF, ((size_t)t.hm + 1) * sizeof *t.tab);
            n_cls = 0;
            for (uint32_t i = 0; i < n; i++) {
                g[0] = cls[i];
                for (int a = 0; a < N_ALPHA; a++) {
                    uint32_t j = trans[(size_t)i * N_ALPHA + a];
                    g[a + 1] = j == GRAM_NONE ? GRAM_NONE : cls[j];
                }
                stack[i] = sig_class(&t, i, g, first, &n_cls);
            }
            memcpy(cls, stack, (size_t)n * sizeof *cls);
            if (n_cls == prev) break; /* stable: a round only ever splits classes */
            prev = n_cls;
        }
    }
    /* renumber by first appearance in state order */
    memset(first, 0xFF, (size_t)n * sizeof *first);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (first[cls[i]] == GRAM_NONE) first[cls[i]] = m++;
        cls[i] = first[cls[i]];
    }
    n_cls = m;
out:
    free(t.sig);
    free(t.tab);
    free(first);
    free(stack);
    free(color);
    return n_cls;
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
    /* scientific notation where a multiple's remainder need not follow the exponent */
    x.sci = !x.is_int && !x.m;
    for (int b = 0; b < 2; b++) {
        bound_sig(&x.br[b].lo);
        bound_sig(&x.br[b].hi);
    }

    struct nstate *states = NULL;
    uint32_t *trans = NULL, *cls = NULL;
    uint8_t *fin = NULL;
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
    s0.slo.cf = s0.shi.cf = CMP_EQ;
    s0.plain = 1;
    /* intern s0 */
    cap = 256;
    states = malloc(cap * sizeof *states);
    trans = malloc((size_t)cap * N_ALPHA * sizeof *trans);
    fin = malloc(cap);
    if (!states || !trans || !fin) goto oom;
    states[n++] = s0;
    slot[nhash(&s0) & hmask] = 0;
    for (uint32_t i = 0; i < n; i++) {
        fin[i] = nfinal(&x, &states[i]);
        for (int a = 0; a < N_ALPHA; a++) {
            struct nstate o, cur = states[i];
            trans[(size_t)i * N_ALPHA + a] = GRAM_NONE;
            if (!nstep(&x, &cur, num_alphabet[a], &o)) continue;
            uint64_t h = nhash(&o);
            uint32_t k = (uint32_t)h & hmask, id = GRAM_NONE;
            while (slot[k] != GRAM_NONE) {
                if (!memcmp(&states[slot[k]], &o, sizeof o)) { id = slot[k]; break; }
                k = (k + 1) & hmask;
            }
            if (id == GRAM_NONE) {
                if (n >= NUM_MAX_STATES) {
                    st = tern_fail(TERN_ERR_RANGE, "number constraints need more than %d automaton states", NUM_MAX_STATES);
                    goto fail;
                }
                if (n == cap) {
                    cap *= 2;
                    struct nstate *ns = realloc(states, cap * sizeof *ns);
                    if (ns) states = ns;
                    uint32_t *nt = realloc(trans, (size_t)cap * N_ALPHA * sizeof *nt);
                    if (nt) trans = nt;
                    uint8_t *nf = realloc(fin, cap);
                    if (nf) fin = nf;
                    if (!ns || !nt || !nf) goto oom;
                }
                states[n] = o;
                id = n++;
                slot[k] = id;
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
            trans[(size_t)i * N_ALPHA + a] = id;
        }
    }
    free(slot);
    slot = NULL;
    free(states);
    states = NULL;
    cls = malloc((size_t)n * sizeof *cls);
    if (!cls) goto oom;
    uint32_t n_cls = num_minimize(n, trans, fin, cls);
    if (n_cls == GRAM_NONE) goto oom;
    struct gram_dfa d;
    gdfa_init(&d);
    /* class c's row is the one of its first state; class ids follow first appearance, so the
     * start state (0) is class 0 */
    uint32_t done = 0;
    for (uint32_t c = 0; c < n_cls; c++)
        if (gdfa_state(&d, false) == GRAM_NONE) { gdfa_free(&d); goto oom; }
    for (uint32_t i = 0; i < n; i++) {
        if (cls[i] != done) continue; /* not the first of its class */
        done++;
        d.final[cls[i]] = fin[i];
        const uint32_t *t = trans + (size_t)i * N_ALPHA;
        uint32_t tc[N_ALPHA];
        for (int a = 0; a < N_ALPHA; a++) tc[a] = t[a] == GRAM_NONE ? GRAM_NONE : cls[t[a]];
        bool ok = true;
        for (int a = 0; a < N_ALPHA && ok;) { /* equal targets of adjacent symbols share a range */
            int z = a;
            while (z + 1 < N_ALPHA && num_alphabet[z + 1] == num_alphabet[z] + 1 && tc[z + 1] == tc[a]) z++;
            if (tc[a] != GRAM_NONE)
                ok = gdfa_edge(&d, cls[i], (uint8_t)num_alphabet[a], (uint8_t)num_alphabet[z], tc[a]);
            a = z + 1;
        }
        if (!ok) { gdfa_free(&d); goto oom; }
    }
    free(trans);
    free(fin);
    free(cls);
    d.start = 0;
    *ex = gir_dfa(ir, &d);
    st = gir_status(ir, "number");
    goto out;
oom:
    st = tern_fail(TERN_ERR_NOMEM, "number: out of memory");
fail:
    free(slot);
    free(states);
    free(trans);
    free(fin);
    free(cls);
out:
    free(all);
    return st;
}
