/* gram_gbnf.c — GBNF (llama.cpp's grammar format) -> IR.
 *
 *   rule      name ::= alternatives            (name: letters, digits, '-', '_')
 *   alts      seq ( "|" seq )*                 (an empty seq is the empty string)
 *   item      "literal" | [class] | [^class] | . | name | ( alts ), then optionally
 *             * + ? {m} {m,} {m,n} {,n}
 *   escapes   \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH
 *   comments  # to the end of the line
 * A rule ends at a newline, except inside parentheses and right after "::=" or "|". Literals
 * and classes are Unicode code points (the text is UTF-8); `.` and negated classes match any
 * code point (never a surrogate), each as its UTF-8 bytes. Every error names line:col. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "util/error.h"
#include "util/utf8.h"

#define GBNF_MAX_NEST 256

struct gp {
    const char *src;
    size_t len, pos;
    struct gram_ir *ir;
    int depth;
    char err[256];
    size_t err_pos;
    bool failed;
};

static void where(const char *src, size_t pos, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < pos; i++) {
        if (src[i] == '\n') { (*line)++; *col = 1; }
        else if (((unsigned char)src[i] & 0xC0) != 0x80) (*col)++;
    }
}

static bool fail(struct gp *p, size_t pos, const char *fmt, const char *arg)
{
    if (p->failed) return false;
    p->failed = true;
    p->err_pos = pos;
    snprintf(p->err, sizeof p->err, fmt, arg ? arg : "");
    return false;
}

static int peek(const struct gp *p, size_t off)
{
    return p->pos + off < p->len ? (unsigned char)p->src[p->pos + off] : -1;
}

static void skip_space(struct gp *p, bool newlines)
{
    while (p->pos < p->len) {
        char c = p->src[p->pos];
        if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->src[p->pos] != '\n' && p->src[p->pos] != '\r') p->pos++;
        } else {
            break;
        }
    }
}

static bool is_name_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class: an escape or a UTF-8 code point. */
static bool parse_char(struct gp *p, uint32_t *cp)
{
    size_t at = p->pos;
    int c = peek(p, 0);
    if (c < 0) return fail(p, at, "unexpected end of grammar%s", NULL);
    if (c == '\\') {
        int e = peek(p, 1);
        p->pos += 2;
        int nhex = 0;
        switch (e) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return true;
        case 'x': nhex = 2; break;
        case 'u': nhex = 4; break;
        case 'U': nhex = 8; break;
        default: {
            char s[2] = {(char)(e < 0 ? '?' : e), 0};
            p->pos = at;
            return fail(p, at, "unknown escape '\\%s'", s);
        }
        }
        uint32_t v = 0;
        for (int i = 0; i < nhex; i++) {
            int h = hexval(peek(p, 0));
            if (h < 0) return fail(p, p->pos, "expected %s hex digits after the escape", nhex == 2 ? "2" : nhex == 4 ? "4" : "8");
            v = v * 16 + (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return fail(p, at, "escape is not a Unicode scalar value%s", NULL);
        *cp = v;
        return true;
    }
    int n = gram_utf8_decode((const unsigned char *)p->src + p->pos, p->len - p->pos, cp);
    if (n == 0) return fail(p, at, "invalid UTF-8%s", NULL);
    p->pos += (size_t)n;
    return true;
}

static uint32_t parse_alts(struct gp *p, bool nested);

static uint32_t parse_literal(struct gp *p)
{
    size_t open = p->pos++;
    size_t cap = 64, n = 0;
    char *buf = malloc(cap);
    if (!buf) { p->ir->oom = true; return GRAM_NONE; }
    for (;;) {
        int c = peek(p, 0);
        if (c < 0 || c == '\n' || c == '\r') {
            free(buf);
            fail(p, open, "unterminated string literal%s", NULL);
            return GRAM_NONE;
        }
        if (c == '"') { p->pos++; break; }
        uint32_t cp;
        if (!parse_char(p, &cp)) { free(buf); return GRAM_NONE; }
        if (n + 4 > cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); p->ir->oom = true; return GRAM_NONE; }
            buf = nb;
        }
        n += (size_t)util_utf8_encode(cp, buf + n);
    }
    uint32_t x = gir_lit(p->ir, buf, n);
    free(buf);
    return x;
}

static uint32_t parse_class(struct gp *p)
{
    size_t open = p->pos++;
    bool neg = false;
    if (peek(p, 0) == '^') { neg = true; p->pos++; }
    size_t cap = 32, n = 0;
    uint32_t *r = malloc(cap * 2 * sizeof *r);
    if (!r) { p->ir->oom = true; return GRAM_NONE; }
    for (;;) {
        int c = peek(p, 0);
        if (c < 0 || c == '\n' || c == '\r') {
            free(r);
            fail(p, open, "unterminated character class%s", NULL);
            return GRAM_NONE;
        }
        if (c == ']') { p->pos++; break; }
        uint32_t lo, hi;
        if (!parse_char(p, &lo)) { free(r); return GRAM_NONE; }
        hi = lo;
        if (peek(p, 0) == '-' && peek(p, 1) != ']' && peek(p, 1) >= 0) {
            size_t at = p->pos;
            p->pos++;
            if (!parse_char(p, &hi)) { free(r); return GRAM_NONE; }
            if (hi < lo) { free(r); fail(p, at, "character range is reversed%s", NULL); return GRAM_NONE; }
        }
        if (n == cap) {
            cap *= 2;
            uint32_t *nr = realloc(r, cap * 2 * sizeof *nr);
            if (!nr) { free(r); p->ir->oom = true; return GRAM_NONE; }
            r = nr;
        }
        r[2 * n] = lo;
        r[2 * n + 1] = hi;
        n++;
    }
    uint32_t x = gir_cpclass(p->ir, r, n, neg);
    free(r);
    return x;
}

static bool parse_uint(struct gp *p, uint32_t *out)
{
    size_t at = p->pos;
    uint64_t v = 0;
    if (peek(p, 0) < '0' || peek(p, 0) > '9') return fail(p, at, "expected a number%s", NULL);
    while (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
        v = v * 10 + (uint64_t)(peek(p, 0) - '0');
        if (v > GRAM_MAX_REPEAT) {
            char lim[32];
            snprintf(lim, sizeof lim, "%d", GRAM_MAX_REPEAT);
            return fail(p, at, "repetition count above the limit of %s", lim);
        }
        p->pos++;
    }
    *out = (uint32_t)v;
    return true;
}

/* A primary with its repetition suffix; GRAM_NONE on error. */
static uint32_t parse_item(struct gp *p, bool nested)
{
    size_t at = p->pos;
    int c = peek(p, 0);
    uint32_t x;
    if (c == '"') {
        x = parse_literal(p);
    } else if (c == '[') {
        x = parse_class(p);
    } else if (c == '.') {
        p->pos++;
        x = gir_cpclass(p->ir, NULL, 0, true);
    } else if (c == '(') {
        if (++p->depth > GBNF_MAX_NEST) { fail(p, at, "parentheses nested too deep%s", NULL); return GRAM_NONE; }
        p->pos++;
        skip_space(p, true);
        x = parse_alts(p, true);
        if (x == GRAM_NONE) return GRAM_NONE;
        skip_space(p, true);
        if (peek(p, 0) != ')') { fail(p, p->pos, "expected ')'%s", NULL); return GRAM_NONE; }
        p->pos++;
        p->depth--;
    } else if (is_name_char(c)) {
        size_t s = p->pos;
        while (is_name_char(peek(p, 0))) p->pos++;
        uint32_t r = gir_rule(p->ir, p->src + s, p->pos - s);
        if (r == GRAM_NONE) return GRAM_NONE;
        if (p->ir->rules[r].ex == GRAM_NONE && p->ir->rules[r].line == 0) {
            int line, col;
            where(p->src, s, &line, &col);
            p->ir->rules[r].line = (uint32_t)line;
            p->ir->rules[r].col = (uint32_t)col;
        }
        x = gir_ref(p->ir, r);
    } else {
        char s[8];
        if (c < 0) snprintf(s, sizeof s, "end");
        else if (c >= 0x20 && c < 0x7F) snprintf(s, sizeof s, "'%c'", c);
        else snprintf(s, sizeof s, "0x%02X", c);
        fail(p, at, "unexpected %s", s);
        return GRAM_NONE;
    }
    if (x == GRAM_NONE) return GRAM_NONE;
    (void)nested;
    for (;;) { /* repetition suffixes (may stack: x*? is x*, as in llama.cpp's parser loop) */
        int r = peek(p, 0);
        if (r == '*') { p->pos++; x = gir_rep(p->ir, x, 0, GRAM_INF); }
        else if (r == '+') { p->pos++; x = gir_rep(p->ir, x, 1, GRAM_INF); }
        else if (r == '?') { p->pos++; x = gir_rep(p->ir, x, 0, 1); }
        else if (r == '{') {
            size_t at2 = p->pos++;
            skip_space(p, false);
            uint32_t lo = 0, hi;
            if (peek(p, 0) != ',' && !parse_uint(p, &lo)) return GRAM_NONE;
            skip_space(p, false);
            if (peek(p, 0) == ',') {
                p->pos++;
                skip_space(p, false);
                if (peek(p, 0) == '}') hi = GRAM_INF;
                else if (!parse_uint(p, &hi)) return GRAM_NONE;
            } else {
                hi = lo;
            }
            skip_space(p, false);
            if (peek(p, 0) != '}') { fail(p, p->pos, "expected '}'%s", NULL); return GRAM_NONE; }
            p->pos++;
            if (hi != GRAM_INF && hi < lo) { fail(p, at2, "repetition {m,n} with n < m%s", NULL); return GRAM_NONE; }
            x = gir_rep(p->ir, x, lo, hi);
        } else {
            break;
        }
        if (x == GRAM_NONE) return GRAM_NONE;
    }
    return x;
}

static uint32_t parse_seq(struct gp *p, bool nested)
{
    uint32_t cap = 16, n = 0;
    uint32_t *xs = malloc(cap * sizeof *xs);
    if (!xs) { p->ir->oom = true; return GRAM_NONE; }
    for (;;) {
        skip_space(p, nested);
        int c = peek(p, 0);
        if (c < 0 || c == '|' || c == ')' || c == '\n' || c == '\r') break;
        uint32_t x = parse_item(p, nested);
        if (x == GRAM_NONE) { free(xs); return GRAM_NONE; }
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

static uint32_t parse_alts(struct gp *p, bool nested)
{
    uint32_t cap = 8, n = 0;
    uint32_t *xs = malloc(cap * sizeof *xs);
    if (!xs) { p->ir->oom = true; return GRAM_NONE; }
    for (;;) {
        uint32_t x = parse_seq(p, nested);
        if (x == GRAM_NONE) { free(xs); return GRAM_NONE; }
        if (n == cap) {
            cap *= 2;
            uint32_t *nx = realloc(xs, cap * sizeof *nx);
            if (!nx) { free(xs); p->ir->oom = true; return GRAM_NONE; }
            xs = nx;
        }
        xs[n++] = x;
        if (peek(p, 0) != '|') break;
        p->pos++;
        skip_space(p, true);
    }
    uint32_t r = gir_alt(p->ir, xs, n);
    free(xs);
    return r;
}

tern_status gram_gbnf_to_ir(const char *text, size_t len, const char *root_name, struct gram_ir *ir,
                            uint32_t *root)
{
    struct gp p = {text, len, 0, ir, 0, {0}, 0, false};
    if (!root_name) root_name = "root";
    if (memchr(text, 0, len)) {
        size_t at = (size_t)((const char *)memchr(text, 0, len) - text);
        fail(&p, at, "NUL byte in the grammar%s", NULL);
        goto err;
    }
    skip_space(&p, true);
    while (p.pos < len) {
        size_t s = p.pos;
        while (is_name_char(peek(&p, 0))) p.pos++;
        if (p.pos == s) {
            fail(&p, s, "expected a rule name%s", NULL);
            goto err;
        }
        uint32_t r = gir_rule(ir, text + s, p.pos - s);
        if (r == GRAM_NONE) break;
        skip_space(&p, false);
        if (!(peek(&p, 0) == ':' && peek(&p, 1) == ':' && peek(&p, 2) == '=')) {
            fail(&p, p.pos, "expected '::=' after the rule name%s", NULL);
            goto err;
        }
        if (ir->rules[r].ex != GRAM_NONE) {
            fail(&p, s, "rule '%s' is defined twice", ir->rules[r].name);
            goto err;
        }
        p.pos += 3;
        skip_space(&p, true);
        uint32_t body = parse_alts(&p, false);
        if (body == GRAM_NONE) {
            if (p.failed) goto err;
            break;
        }
        gir_rule_set(ir, r, body);
        int line, col;
        where(text, s, &line, &col);
        ir->rules[r].line = (uint32_t)line;
        ir->rules[r].col = (uint32_t)col;
        if (peek(&p, 0) == ')') {
            fail(&p, p.pos, "unmatched ')'%s", NULL);
            goto err;
        }
        if (p.pos < len && peek(&p, 0) != '\n' && peek(&p, 0) != '\r') {
            fail(&p, p.pos, "expected a newline after the rule%s", NULL);
            goto err;
        }
        skip_space(&p, true);
    }
    tern_status st = gir_status(ir, "gbnf");
    if (st) return st;
    for (uint32_t r = 0; r < ir->n_rules; r++)
        if (ir->rules[r].ex == GRAM_NONE)
            return tern_fail(TERN_ERR_FORMAT, "gbnf: line %u:%u: undefined rule '%s'", ir->rules[r].line,
                             ir->rules[r].col, ir->rules[r].name);
    for (uint32_t r = 0; r < ir->n_rules; r++)
        if (!strcmp(ir->rules[r].name, root_name)) {
            *root = r;
            return TERN_OK;
        }
    return tern_fail(TERN_ERR_FORMAT, "gbnf: no rule named '%s' (the start rule)", root_name);
err:;
    tern_status st2 = gir_status(ir, "gbnf");
    if (st2) return st2;
    int line, col;
    where(text, p.err_pos, &line, &col);
    return tern_fail(TERN_ERR_FORMAT, "gbnf: line %d:%d: %s", line, col, p.err);
}
