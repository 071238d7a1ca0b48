/* gram_schema.c — JSON Schema -> IR (the keywords tool schemas use; docs/tools.md
 * "Constrained decoding" has the list and the exact semantics).
 *
 * Shape of the output: one expression per schema, built recursively; the JSON value grammars
 * every schema shares (an unconstrained string, number, integer, any value) are rules, so
 * their positions are classified once per grammar; a `$ref` target becomes a rule too (so
 * recursion works). Objects are small automata (GX_DFA with expression edges): a state per
 * (next declared property, whether a comma is due, properties so far when min/maxProperties
 * count), "key": value edges, epsilon edges that skip optional properties, then the extra
 * properties additionalProperties allows. Properties come in schema order.
 *
 * What is not enforced is never ignored silently: an unknown or unsupported keyword, format or
 * combination is an error naming its JSON path, or with `lenient` a warning. Combinators:
 * anyOf is an alternation; allOf is merged keyword by keyword into one schema (anyOf/oneOf
 * inside it are distributed); oneOf is an alternation only when its branches provably cannot
 * both match (disjoint types, or a required property with disjoint const/enum values, or a
 * required property the other branch forbids) — otherwise tern could accept a document that
 * matches two branches, so it refuses the schema. enum/const values are filtered by the rest
 * of their schema (checked with a byte-level match of the value's text).
 *
 * The same schema can come out in Gemma 4's value syntax instead of JSON (opts->gemma: what its
 * template's format_argument writes inside <|tool_call>call:NAME{...}<tool_call|>, and what
 * src/chat/toolcall_formats.c reads back): a string is <|"|>raw text<|"|> (no escapes, so its
 * content is any text without that mark: every string language is intersected with "no mark");
 * an object is {key:value,...} with bare keys, in Jinja dictsort order (case-insensitive);
 * numbers, true, false, null and lists as in JSON; no whitespace. A property name or constant
 * that syntax cannot write (a name with ':' ',' '{' '}', control bytes or edge spaces, a string
 * holding the mark) is refused with its path. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "grammar/gram_internal.h"
#include "util/error.h"
#include "util/utf8.h"

#define SC_MAX_DEPTH 256
#define SC_MAX_ENUM 10000
#define SC_MAX_PROPS 1000
#define SC_MAX_UNIQUE 8
#define SC_MAX_DISTRIBUTE 64

enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_FRAC = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64, T_ALL = 127 };

struct memo {
    const cJSON *node;
    uint32_t rule;
};

struct sc {
    struct gram_ir *ir;
    const struct gram_schema_opts *o;
    const cJSON *root;
    char **warn;
    struct memo *memo;
    uint32_t n_memo, cap_memo;
    uint32_t r_string, r_number, r_integer, r_value, r_strkey;
    uint32_t r_char;       /* one JSON string character: the body of counted strings */
    char path[2048];
    size_t plen;
    int depth;
    cJSON *garbage;     /* synthetic schemas made by merging (references into the input) */
    bool failed;
    tern_status status; /* of the recorded failure */
};

/* ---------------------------------------------------------------- paths and errors */

static size_t path_push(struct sc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_push(struct sc *c, const char *fmt, ...)
{
    size_t old = c->plen;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(c->path + c->plen, sizeof c->path - c->plen, fmt, ap);
    va_end(ap);
    if (k > 0) c->plen += (size_t)k;
    if (c->plen >= sizeof c->path) c->plen = sizeof c->path - 1;
    return old;
}
static void path_pop(struct sc *c, size_t old)
{
    c->plen = old;
    c->path[old] = 0;
}
/* ".name" for identifiers, ["name"] otherwise */
static size_t path_key(struct sc *c, const char *k)
{
    bool ident = *k != 0;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '$'))
            ident = false;
    if (ident) return path_push(c, ".%s", k);
    return path_push(c, "[\"%.*s\"]", (int)util_utf8_prefix(k, strlen(k), 100), k);
}

/* The current path for a message: long ones (deep nesting) keep their start and end. */
static const char *path_text(const struct sc *c, char buf[200])
{
    if (c->plen < 190) return c->path;
    /* cut on character boundaries: messages quote keys, which may be any UTF-8 */
    size_t tail = c->plen - 120;
    while (tail < c->plen && ((unsigned char)c->path[tail] & 0xC0) == 0x80) tail++;
    snprintf(buf, 200, "%.*s ... %s", (int)util_utf8_prefix(c->path, c->plen, 60), c->path, c->path + tail);
    return buf;
}

static uint32_t sfail(struct sc *c, tern_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static uint32_t sfail(struct sc *c, tern_status st, const char *fmt, ...)
{
    if (c->failed) return GRAM_NONE;
    c->failed = true;
    c->status = st;
    char msg[512], pb[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tern_fail(st, "%s: %s", path_text(c, pb), msg);
    return GRAM_NONE;
}

/* Unsupported: an error, or with lenient a warning (returns true to go on ignoring it). */
static bool unsupported(struct sc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool unsupported(struct sc *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->o->lenient) {
        char pb[200];
        gram_warn(c->warn, "%s: %s (ignored: --schema-lenient)", path_text(c, pb), msg);
        return true;
    }
    sfail(c, TERN_ERR_UNSUPPORTED, "%s", msg);
    return false;
}

/* ---------------------------------------------------------------- keywords */

static const char *const ANNOTATIONS[] = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                          "definitions", "$anchor", NULL};
static const char *const SUPPORTED[] = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
                                        "properties", "required", "additionalProperties",
                                        "minProperties", "maxProperties", "items", "prefixItems",
                                        "additionalItems", "minItems", "maxItems", "uniqueItems",
                                        "minLength", "maxLength", "pattern", "format", "minimum",
                                        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                                        NULL};

static bool in_list(const char *k, const char *const *l)
{
    for (; *l; l++)
        if (!strcmp(k, *l)) return true;
    return false;
}

/* Every keyword of s is supported or an annotation; otherwise error / warning. */
static bool check_keywords(struct sc *c, const cJSON *s)
{
    for (const cJSON *k = s->child; k; k = k->next) {
        if (!k->string) continue;
        if (in_list(k->string, ANNOTATIONS) || in_list(k->string, SUPPORTED)) continue;
        size_t old = path_key(c, k->string);
        bool go = unsupported(c, "unsupported keyword \"%s\"", k->string);
        path_pop(c, old);
        if (!go) return false;
    }
    return true;
}

/* Has a keyword that constrains (not an annotation), other than those in except. */
static bool has_constraints(const cJSON *s, const char *const *except)
{
    for (const cJSON *k = s->child; k; k = k->next)
        if (k->string && !in_list(k->string, ANNOTATIONS) && !(except && in_list(k->string, except))) return true;
    return false;
}

/* ---------------------------------------------------------------- whitespace */

static uint32_t ws(struct sc *c)
{
    struct gram_bset s = {{0}};
    gram_bset_add(&s, ' ');
    gram_bset_add(&s, '\t');
    gram_bset_add(&s, '\n');
    gram_bset_add(&s, '\r');
    return gir_rep(c->ir, gir_bytes(c->ir, &s), 0, 20);
}
/* inner whitespace after an opening / before a closing bracket */
static uint32_t wsi(struct sc *c) { return c->o->ws == TERN_GRAMMAR_WS_FLEXIBLE ? ws(c) : gir_empty(c->ir); }
static uint32_t sep_tok(struct sc *c, char ch)
{
    switch (c->o->ws) {
    case TERN_GRAMMAR_WS_MINIFIED: return gir_byte(c->ir, (uint8_t)ch);
    case TERN_GRAMMAR_WS_FLEXIBLE: return gir_seq3(c->ir, ws(c), gir_byte(c->ir, (uint8_t)ch), ws(c));
    case TERN_GRAMMAR_WS_ONE_LINE: return gir_seq2(c->ir, gir_byte(c->ir, (uint8_t)ch), gir_rep(c->ir, gir_byte(c->ir, ' '), 0, 1));
    default: {
        char s[3] = {ch, ' ', 0};
        return gir_str(c->ir, s);
    }
    }
}
static uint32_t comma(struct sc *c) { return sep_tok(c, ','); }
static uint32_t colon(struct sc *c) { return sep_tok(c, ':'); }

/* ---------------------------------------------------------------- JSON text of values */

#define GEMMA_MARK "<|\"|>"

/* A string's opening / closing quote: '"' in JSON, the <|"|> mark in Gemma 4's syntax. */
static uint32_t quote(struct sc *c) { return c->o->gemma ? gir_str(c->ir, GEMMA_MARK) : gir_byte(c->ir, '"'); }

/* Can Gemma 4's syntax write this property name bare (the parser reads a key up to ':', '}',
 * ',' or '{' and trims spaces)? */
static bool gemma_key_ok(const char *k)
{
    size_t n = strlen(k);
    if (!n || k[0] == ' ' || k[n - 1] == ' ' || !strncmp(k, GEMMA_MARK, 5)) return false;
    for (const unsigned char *p = (const unsigned char *)k; *p; p++)
        if (*p < 0x20 || *p == 0x7F || strchr(":,{}", *p)) return false;
    return true;
}

/* Append the JSON encoding of string s (as json.dumps with ensure_ascii=False). */
static void enc_str(char **buf, size_t *n, size_t *cap, const char *s)
{
    size_t need = *n + strlen(s) * 6 + 3;
    if (need > *cap) {
        size_t nc = *cap ? *cap : 64;
        while (nc < need) nc *= 2;
        char *p = realloc(*buf, nc);
        if (!p) return;
        *buf = p;
        *cap = nc;
    }
    char *o = *buf + *n;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': *o++ = '\\'; *o++ = '"'; break;
        case '\\': *o++ = '\\'; *o++ = '\\'; break;
        case '\n': *o++ = '\\'; *o++ = 'n'; break;
        case '\r': *o++ = '\\'; *o++ = 'r'; break;
        case '\t': *o++ = '\\'; *o++ = 't'; break;
        case '\b': *o++ = '\\'; *o++ = 'b'; break;
        case '\f': *o++ = '\\'; *o++ = 'f'; break;
        default:
            if (*p < 0x20) o += sprintf(o, "\\u%04x", *p);
            else *o++ = (char)*p;
        }
    }
    *o++ = '"';
    *n = (size_t)(o - *buf);
}

/* Append string s as a value in the syntax of c (JSON encoding, or Gemma's marks around the raw
 * text); false when Gemma's syntax cannot hold it (the mark inside) or out of memory. */
static bool enc_value_str(bool gemma, char **buf, size_t *n, size_t *cap, const char *s)
{
    if (!gemma) {
        enc_str(buf, n, cap, s);
        return *buf != NULL;
    }
    if (strstr(s, GEMMA_MARK)) return false;
    size_t l = strlen(s), need = *n + l + 11;
    if (need > *cap) {
        size_t nc = *cap ? *cap : 64;
        while (nc < need) nc *= 2;
        char *p = realloc(*buf, nc);
        if (!p) return false;
        *buf = p;
        *cap = nc;
    }
    memcpy(*buf + *n, GEMMA_MARK, 5);
    memcpy(*buf + *n + 5, s, l);
    memcpy(*buf + *n + 5 + l, GEMMA_MARK, 5);
    *n += l + 10;
    return true;
}

/* Shortest decimal text that reads back as d ("1", "0.25", "1e-07"). */
static void num_text(double d, char out[40])
{
    if (d == floor(d) && fabs(d) < 1e17) {
        snprintf(out, 40, "%.0f", d);
        if (!strcmp(out, "-0")) strcpy(out, "0");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, 40, "%.*g", prec, d);
        if (strtod(out, NULL) == d) return;
    }
}

static bool valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = gram_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (!k) return false;
        i += (size_t)k;
    }
    return true;
}

/* The expression of a constant value in the whitespace policy. */
static uint32_t lit_value(struct sc *c, const cJSON *v, int depth)
{
    if (depth > SC_MAX_DEPTH) return sfail(c, TERN_ERR_RANGE, "constant nested deeper than %d", SC_MAX_DEPTH);
    if (cJSON_IsNull(v)) return gir_str(c->ir, "null");
    if (cJSON_IsTrue(v)) return gir_str(c->ir, "true");
    if (cJSON_IsFalse(v)) return gir_str(c->ir, "false");
    if (cJSON_IsNumber(v)) {
        char t[40];
        num_text(v->valuedouble, t);
        return gir_str(c->ir, t);
    }
    if (cJSON_IsString(v)) {
        if (!valid_utf8(v->valuestring)) return sfail(c, TERN_ERR_FORMAT, "string constant is not valid UTF-8");
        char *b = NULL;
        size_t n = 0, cap = 0;
        if (!enc_value_str(c->o->gemma, &b, &n, &cap, v->valuestring)) {
            free(b);
            if (c->o->gemma && strstr(v->valuestring, GEMMA_MARK))
                return sfail(c, TERN_ERR_UNSUPPORTED, "string constant holds <|\"|>, which Gemma 4's syntax cannot write");
            c->ir->oom = true;
            return GRAM_NONE;
        }
        uint32_t x = gir_lit(c->ir, b, n);
        free(b);
        return x;
    }
    bool arr = cJSON_IsArray(v);
    uint32_t cap = 16, n = 0;
    uint32_t *xs = malloc(cap * sizeof *xs);
    if (!xs) { c->ir->oom = true; return GRAM_NONE; }
    xs[n++] = gir_seq2(c->ir, gir_byte(c->ir, arr ? '[' : '{'), wsi(c));
    bool first = true;
    for (const cJSON *e = v->child; e; e = e->next) {
        if (n + 4 > cap) {
            cap *= 2;
            uint32_t *nx = realloc(xs, cap * sizeof *nx);
            if (!nx) { free(xs); c->ir->oom = true; return GRAM_NONE; }
            xs = nx;
        }
        if (!first) xs[n++] = comma(c);
        first = false;
        if (!arr) {
            const char *k = e->string ? e->string : "";
            if (c->o->gemma) {
                if (!gemma_key_ok(k)) { free(xs); return sfail(c, TERN_ERR_UNSUPPORTED, "constant's key \"%.60s\" cannot be written bare in Gemma 4's syntax", k); }
                xs[n++] = gir_str(c->ir, k);
            } else {
                char *b = NULL;
                size_t bn = 0, bc = 0;
                enc_str(&b, &bn, &bc, k);
                if (!b) { free(xs); c->ir->oom = true; return GRAM_NONE; }
                xs[n++] = gir_lit(c->ir, b, bn);
                free(b);
            }
            xs[n++] = colon(c);
        }
        xs[n++] = lit_value(c, e, depth + 1);
    }
    xs[n++] = gir_seq2(c->ir, wsi(c), gir_byte(c->ir, arr ? ']' : '}'));
    uint32_t x = gir_seq(c->ir, xs, n);
    free(xs);
    return x;
}

/* Canonical text of a constant (the form lit_value's grammar accepts in compact style; Gemma's
 * syntax: no spaces, bare keys). */
static char *value_text(const cJSON *v, size_t *len, bool gemma)
{
    char *b = NULL;
    size_t n = 0, cap = 0;
    if (cJSON_IsString(v)) {
        if (!enc_value_str(gemma, &b, &n, &cap, v->valuestring)) {
            free(b);
            return NULL;
        }
    } else if (cJSON_IsNumber(v)) {
        b = malloc(40);
        if (b) { num_text(v->valuedouble, b); n = strlen(b); }
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool arr = cJSON_IsArray(v);
        cap = 256;
        b = malloc(cap);
        if (!b) return NULL;
        b[n++] = arr ? '[' : '{';
        for (const cJSON *e = v->child; e; e = e->next) {
            size_t en;
            char *et = value_text(e, &en, gemma);
            char *kt = NULL;
            size_t kn = 0, kc = 0;
            if (!arr && gemma) {
                kt = strdup(e->string ? e->string : "");
                kn = kt ? strlen(kt) : 0;
            } else if (!arr) {
                enc_str(&kt, &kn, &kc, e->string ? e->string : "");
            }
            if (!et || (!arr && !kt)) { free(et); free(kt); free(b); return NULL; }
            size_t need = n + en + kn + 8;
            if (need > cap) {
                while (cap < need) cap *= 2;
                char *nb = realloc(b, cap);
                if (!nb) { free(et); free(kt); free(b); return NULL; }
                b = nb;
            }
            if (e != v->child) { b[n++] = ','; if (!gemma) b[n++] = ' '; }
            if (!arr) { memcpy(b + n, kt, kn); n += kn; b[n++] = ':'; if (!gemma) b[n++] = ' '; }
            memcpy(b + n, et, en);
            n += en;
            free(et);
            free(kt);
        }
        b[n++] = arr ? ']' : '}';
    } else {
        const char *t = cJSON_IsNull(v) ? "null" : cJSON_IsTrue(v) ? "true" : "false";
        b = strdup(t);
        if (b) n = strlen(t);
    }
    if (b) *len = n;
    return b;
}

static int value_types(const cJSON *v)
{
    if (cJSON_IsNull(v)) return T_NULL;
    if (cJSON_IsBool(v)) return T_BOOL;
    if (cJSON_IsNumber(v)) return v->valuedouble == floor(v->valuedouble) && isfinite(v->valuedouble) ? T_INT : T_FRAC;
    if (cJSON_IsString(v)) return T_STR;
    if (cJSON_IsArray(v)) return T_ARR;
    return T_OBJ;
}

/* ---------------------------------------------------------------- shared value rules */

/* One JSON string character, any escape included (surrogates only as a proper pair); in Gemma's
 * syntax one raw character (any but NUL: the mark is kept out by the no-mark intersection). */
static uint32_t json_char(struct sc *c)
{
    struct gram_ir *ir = c->ir;
    if (c->o->gemma) {
        uint32_t any_r[] = {0x01, 0x10FFFF};
        return gir_cpclass(ir, any_r, 1, false);
    }
    uint32_t plain_r[] = {0x20, 0x21, 0x23, 0x5B, 0x5D, 0x10FFFF};
    uint32_t plain = gir_cpclass(ir, plain_r, 3, false);
    struct gram_bset hex = {{0}}, hex_nd = {{0}}, hi8b = {{0}}, lo_cf = {{0}}, simple = {{0}};
    gram_bset_add_range(&hex, '0', '9');
    gram_bset_add_range(&hex, 'a', 'f');
    gram_bset_add_range(&hex, 'A', 'F');
    hex_nd = hex; /* first hex digit other than d/D */
    hex_nd.w['d' >> 6] &= ~(1ull << ('d' & 63));
    hex_nd.w['D' >> 6] &= ~(1ull << ('D' & 63));
    gram_bset_add_range(&hi8b, '8', '9');
    gram_bset_add_range(&hi8b, 'a', 'b');
    gram_bset_add_range(&hi8b, 'A', 'B');
    gram_bset_add_range(&lo_cf, 'c', 'f');
    gram_bset_add_range(&lo_cf, 'C', 'F');
    const char *sc = "\"\\/bfnrt";
    for (const char *p = sc; *p; p++) gram_bset_add(&simple, (uint8_t)*p);
    struct gram_bset dD = {{0}}, d07 = {{0}};
    gram_bset_add(&dD, 'd');
    gram_bset_add(&dD, 'D');
    gram_bset_add_range(&d07, '0', '7');
    uint32_t H = gir_bytes(ir, &hex);
    /* \uXXXX not a surrogate: first digit not d, or d followed by 0-7 */
    uint32_t bmp = gir_alt2(ir, gir_seq2(ir, gir_bytes(ir, &hex_nd), gir_rep(ir, H, 3, 3)),
                            gir_seq3(ir, gir_bytes(ir, &dD), gir_bytes(ir, &d07), gir_rep(ir, gir_bytes(ir, &hex), 2, 2)));
    uint32_t pair_xs[] = {gir_bytes(ir, &dD), gir_bytes(ir, &hi8b), gir_rep(ir, gir_bytes(ir, &hex), 2, 2),
                          gir_str(ir, "\\u"), gir_bytes(ir, &dD), gir_bytes(ir, &lo_cf),
                          gir_rep(ir, gir_bytes(ir, &hex), 2, 2)};
    uint32_t pair = gir_seq(ir, pair_xs, 7);
    uint32_t esc = gir_seq2(ir, gir_byte(ir, '\\'),
                            gir_alt2(ir, gir_bytes(ir, &simple), gir_seq2(ir, gir_byte(ir, 'u'), gir_alt2(ir, bmp, pair))));
    return gir_alt2(ir, plain, esc);
}

/* String constraints that each describe the content (between the quotes) of a JSON string,
 * built into a private IR so they can be intersected. */
struct strcon {
    int kind;            /* 0 regex, 1 length, 2 no <|"|> (Gemma) */
    const char *re;
    uint32_t lo, hi;
};
static uint32_t intersect(struct sc *c, const struct strcon *ks, int n);

static uint32_t rule_string(struct sc *c)
{
    if (c->r_string == GRAM_NONE) {
        c->r_string = gir_rule_new(c->ir, "string");
        if (c->r_string != GRAM_NONE) c->ir->rules[c->r_string].shared = true; /* one classification for every string */
        if (c->o->gemma) { /* any UTF-8 text without the mark, between marks */
            const struct strcon ks[2] = {{1, NULL, 0, GRAM_INF}, {2, NULL, 0, 0}};
            gir_rule_set(c->ir, c->r_string, intersect(c, ks, 2));
        } else
            gir_rule_set(c->ir, c->r_string,
                         gir_seq3(c->ir, gir_byte(c->ir, '"'), gir_rep(c->ir, json_char(c), 0, GRAM_INF), gir_byte(c->ir, '"')));
    }
    return gir_ref(c->ir, c->r_string);
}

static uint32_t rule_number(struct sc *c, bool is_int)
{
    uint32_t *r = is_int ? &c->r_integer : &c->r_number;
    if (*r == GRAM_NONE) {
        *r = gir_rule_new(c->ir, is_int ? "integer" : "number");
        if (*r != GRAM_NONE) c->ir->rules[*r].shared = true;
        struct gram_num_spec ns = {is_int, NULL, NULL, false, false, NULL};
        uint32_t x;
        if (gram_num_to_ir(&ns, c->ir, &x)) return sfail(c, TERN_ERR_NOMEM, "out of memory");
        gir_rule_set(c->ir, *r, x);
    }
    return gir_ref(c->ir, *r);
}

static uint32_t key_excluding(struct sc *c, const char *const *names, uint32_t n);

/* Any JSON value (schemas `true`, `{}`, items without a schema ...). */
static uint32_t rule_value(struct sc *c)
{
    if (c->r_value != GRAM_NONE) return gir_ref(c->ir, c->r_value);
    struct gram_ir *ir = c->ir;
    c->r_value = gir_rule_new(ir, "value");
    if (c->r_value != GRAM_NONE) ir->rules[c->r_value].shared = true;
    uint32_t r_obj = gir_rule_new(ir, "object"), r_arr = gir_rule_new(ir, "array");
    uint32_t val = gir_ref(ir, c->r_value);
    /* a member's key: a JSON string, or in Gemma's syntax any bare key */
    uint32_t k1 = c->o->gemma ? key_excluding(c, NULL, 0) : rule_string(c);
    uint32_t k2 = c->o->gemma ? key_excluding(c, NULL, 0) : rule_string(c);
    uint32_t member = gir_seq3(ir, k1, colon(c), val);
    uint32_t members = gir_opt(ir, gir_seq2(ir, member, gir_rep(ir, gir_seq2(ir, comma(c), gir_seq3(ir, k2, colon(c), gir_ref(ir, c->r_value))), 0, GRAM_INF)));
    uint32_t ox[] = {gir_byte(ir, '{'), wsi(c), members, wsi(c), gir_byte(ir, '}')};
    gir_rule_set(ir, r_obj, gir_seq(ir, ox, 5));
    uint32_t items = gir_opt(ir, gir_seq2(ir, gir_ref(ir, c->r_value), gir_rep(ir, gir_seq2(ir, comma(c), gir_ref(ir, c->r_value)), 0, GRAM_INF)));
    uint32_t ax[] = {gir_byte(ir, '['), wsi(c), items, wsi(c), gir_byte(ir, ']')};
    gir_rule_set(ir, r_arr, gir_seq(ir, ax, 5));
    uint32_t alts[] = {gir_ref(ir, r_obj), gir_ref(ir, r_arr), rule_string(c), rule_number(c, false),
                       gir_str(ir, "true"), gir_str(ir, "false"), gir_str(ir, "null")};
    gir_rule_set(ir, c->r_value, gir_alt(ir, alts, 7));
    return gir_ref(ir, c->r_value);
}

/* ---------------------------------------------------------------- $ref */

static const cJSON *resolve_ref(struct sc *c, const char *ref)
{
    if (ref[0] != '#') {
        sfail(c, TERN_ERR_UNSUPPORTED, "$ref \"%s\": only local references (#, #/$defs/..., #/definitions/..., JSON pointers) are supported", ref);
        return NULL;
    }
    const cJSON *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') {
        sfail(c, TERN_ERR_UNSUPPORTED, "$ref \"%s\": anchors are not supported", ref);
        return NULL;
    }
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && *p == '0') { ch = '~'; p++; }
            else if (ch == '~' && *p == '1') { ch = '/'; p++; }
            else if (ch == '%' && p[0] && p[1]) {
                int h = 0;
                for (int i = 0; i < 2; i++) {
                    char x = p[i];
                    h = h * 16 + (x >= '0' && x <= '9' ? x - '0' : x >= 'a' && x <= 'f' ? x - 'a' + 10 : x >= 'A' && x <= 'F' ? x - 'A' + 10 : 0);
                }
                ch = (char)h;
                p += 2;
            }
            if (n < sizeof tok - 1) tok[n++] = ch;
        }
        tok[n] = 0;
        const cJSON *next = NULL;
        if (cJSON_IsArray(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            if (*tok && !*end && i >= 0) next = cJSON_GetArrayItem(cur, (int)i);
        } else if (cJSON_IsObject(cur)) {
            for (const cJSON *k = cur->child; k; k = k->next)
                if (k->string && !strcmp(k->string, tok)) { next = k; break; }
        }
        if (!next) {
            sfail(c, TERN_ERR_FORMAT, "$ref \"%s\" does not resolve", ref);
            return NULL;
        }
        cur = next;
    }
    return cur;
}

/* Follow a chain of pure $ref schemas. */
static const cJSON *deref(struct sc *c, const cJSON *s)
{
    for (int i = 0; i < 64 && cJSON_IsObject(s); i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!r) return s;
        if (!cJSON_IsString(r)) { sfail(c, TERN_ERR_FORMAT, "$ref must be a string"); return NULL; }
        s = resolve_ref(c, r->valuestring);
        if (!s) return NULL;
    }
    if (cJSON_IsObject(s) && cJSON_GetObjectItemCaseSensitive(s, "$ref")) {
        sfail(c, TERN_ERR_FORMAT, "$ref chain longer than 64");
        return NULL;
    }
    return s;
}

static uint32_t sch(struct sc *c, const cJSON *s);

/* The rule of a $ref target (created once; recursion refers to it before it is built). */
static uint32_t ref_rule(struct sc *c, const cJSON *target, const char *ref)
{
    for (uint32_t i = 0; i < c->n_memo; i++)
        if (c->memo[i].node == target) return gir_ref(c->ir, c->memo[i].rule);
    if (c->n_memo == c->cap_memo) {
        uint32_t nc = c->cap_memo ? c->cap_memo * 2 : 16;
        struct memo *m = realloc(c->memo, nc * sizeof *m);
        if (!m) { c->ir->oom = true; return GRAM_NONE; }
        c->memo = m;
        c->cap_memo = nc;
    }
    uint32_t r = gir_rule_new(c->ir, "ref:%.100s", ref);
    c->memo[c->n_memo++] = (struct memo){target, r};
    size_t old = path_push(c, "($ref %.200s)", ref);
    uint32_t body = sch(c, target);
    path_pop(c, old);
    if (body == GRAM_NONE) return GRAM_NONE;
    gir_rule_set(c->ir, r, body);
    return gir_ref(c->ir, r);
}

/* ---------------------------------------------------------------- types */

static int parse_types(struct sc *c, const cJSON *t)
{
    if (!t) return T_ALL;
    int m = 0;
    const cJSON *one = t;
    bool arr = cJSON_IsArray(t);
    if (arr) one = t->child;
    for (; one; one = arr ? one->next : NULL) {
        if (!cJSON_IsString(one)) { sfail(c, TERN_ERR_FORMAT, "type must be a string or an array of strings"); return -1; }
        const char *n = one->valuestring;
        if (!strcmp(n, "null")) m |= T_NULL;
        else if (!strcmp(n, "boolean")) m |= T_BOOL;
        else if (!strcmp(n, "integer")) m |= T_INT;
        else if (!strcmp(n, "number")) m |= T_INT | T_FRAC;
        else if (!strcmp(n, "string")) m |= T_STR;
        else if (!strcmp(n, "array")) m |= T_ARR;
        else if (!strcmp(n, "object")) m |= T_OBJ;
        else { sfail(c, TERN_ERR_FORMAT, "unknown type \"%s\"", n); return -1; }
        if (!arr) break;
    }
    return m;
}

static bool get_uint(struct sc *c, const cJSON *s, const char *key, uint32_t *out, bool *present)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    *present = v != NULL;
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
        sfail(c, TERN_ERR_FORMAT, "%s must be a non-negative integer", key);
        return false;
    }
    if (v->valuedouble > GRAM_MAX_COUNT) {
        /* counts are 31-bit: a maximum beyond is no bound on any document a model writes; a
         * minimum beyond admits none tern could finish */
        if (!strncmp(key, "max", 3)) {
            *present = false;
            return true;
        }
        sfail(c, TERN_ERR_RANGE, "%s %.0f is above tern's limit of %u", key, v->valuedouble, GRAM_MAX_COUNT);
        return false;
    }
    *out = (uint32_t)v->valuedouble;
    return true;
}

/* ---------------------------------------------------------------- strings */

static uint32_t regex_string(struct sc *c, const char *re, const char *what)
{
    uint32_t x;
    bool risky = false;
    tern_status st = gram_regex_to_ir(re, strlen(re), true, c->ir, &x, &risky);
    if (!st && risky) {
        /* an automaton that may be refused when the whole grammar compiles: compile the
         * pattern alone now, so the refusal names its schema path and the pattern */
        struct gram_ir tmp;
        gir_init(&tmp);
        uint32_t y;
        st = gram_regex_to_ir(re, strlen(re), true, &tmp, &y, NULL);
        uint32_t r = st ? GRAM_NONE : gir_rule_new(&tmp, "pattern");
        gir_rule_set(&tmp, r, y);
        struct tern_grammar *one = st ? NULL : calloc(1, sizeof *one);
        if (one) {
            st = gram_compile(&tmp, r, NULL, one);
            if (st) free(one);
            else tern_grammar_free(one);
        } else if (!st) {
            st = TERN_ERR_NOMEM;
        }
        gir_free(&tmp);
        if (st == TERN_ERR_RANGE) {
            const char *e = tern_last_error(), *cut = strstr(e, "; anchor");
            char msg[400];
            snprintf(msg, sizeof msg, "%.*s", cut ? (int)(cut - e) : (int)strlen(e), e);
            return sfail(c, st, "%s: %s: the pattern's automaton is too large or too ambiguous (pattern \"%.120s\"; "
                         "anchor it with ^...$ or lower the counts)", what, msg, re);
        }
        if (st) return sfail(c, st, "%s: %s", what, tern_last_error());
    }
    if (st) {
        if (st == TERN_ERR_NOMEM) return sfail(c, st, "out of memory");
        char msg[400];
        snprintf(msg, sizeof msg, "%s", tern_last_error());
        if (!strcmp(what, "pattern") ? unsupported(c, "%s: %s (pattern \"%.120s\")", what, msg, re) : unsupported(c, "%s: %s", what, msg))
            return rule_string(c);
        return GRAM_NONE;
    }
    return gir_seq3(c->ir, gir_byte(c->ir, '"'), x, gir_byte(c->ir, '"'));
}


static uint32_t content_expr(struct sc *c, struct gram_ir *ir, const struct strcon *k)
{
    if (k->kind == 0) {
        uint32_t x;
        tern_status st = gram_regex_to_ir(k->re, strlen(k->re), !c->o->gemma, ir, &x, NULL);
        return st ? GRAM_NONE : x;
    }
    if (k->kind == 2) /* Gemma: text without the closing mark */
        return gram_until(ir, GEMMA_MARK, false);
    struct gram_ir *keep = c->ir;
    c->ir = ir;
    uint32_t x = gir_rep(ir, json_char(c), k->lo, k->hi); /* one rule: the product needs it */
    c->ir = keep;
    return x;
}

/* The intersection of several content languages as one automaton (product of their DFAs),
 * wrapped in quotes. Each must determinize within the compiler's limit. */
#define SC_MAX_PRODUCT 200000
static uint32_t intersect(struct sc *c, const struct strcon *ks, int n)
{
    struct tern_grammar *gs[3] = {0};
    struct gram_ir irs[3];
    uint32_t out = GRAM_NONE;
    uint32_t *map = NULL, *queue = NULL, *pairs = NULL;
    struct gram_dfa d;
    gdfa_init(&d);
    for (int i = 0; i < n; i++) {
        gir_init(&irs[i]);
        irs[i].no_counters = true; /* combined by product: every count a state */
    }
    for (int i = 0; i < n; i++) {
        uint32_t x = content_expr(c, &irs[i], &ks[i]);
        if (x == GRAM_NONE) {
            if (irs[i].oom) c->ir->oom = true;
            else sfail(c, TERN_ERR_UNSUPPORTED, "%s", tern_last_error());
            goto done;
        }
        uint32_t r = gir_rule_new(&irs[i], "content");
        gir_rule_set(&irs[i], r, x);
        gs[i] = calloc(1, sizeof *gs[i]);
        if (!gs[i]) { c->ir->oom = true; goto done; }
        if (gram_compile(&irs[i], r, NULL, gs[i])) {
            /* a constraint no string satisfies: so is the intersection */
            free(gs[i]);
            gs[i] = NULL;
            tern_clear_error();
            out = gir_nothing(c->ir);
            goto done;
        }
        if (gs[i]->n_counters) {
            sfail(c, TERN_ERR_UNSUPPORTED, "string constraints too complex to combine (a repetition count above %d)", GRAM_MAX_REPEAT);
            goto done;
        }
        for (uint32_t k = 0; k < gs[i]->n_nodes; k++)
            if (gs[i]->nodes[k].flags & GN_NONDET) {
                sfail(c, TERN_ERR_RANGE, "string constraints too complex to combine (their automaton is not deterministic within %d states)",
                      GRAM_MAX_DFA_PER_RULE);
                goto done;
            }
    }
    /* product over pairs, left to right (n is 2 or 3: fold) */
    {
        uint32_t na = gs[0]->n_nodes, nb = gs[1]->n_nodes, nc = n == 3 ? gs[2]->n_nodes : 1;
        uint64_t total = (uint64_t)na * nb * nc;
        if (total > 50u * 1000 * 1000) { sfail(c, TERN_ERR_RANGE, "string constraints too large to combine"); goto done; }
        /* map[(a * nb + b) * nc + cc] -> state; kept as a hash to stay small */
        uint32_t hmask = 1023;
        map = malloc((hmask + 1) * sizeof *map);
        pairs = malloc((hmask + 1) * 3 * sizeof *pairs);
        queue = malloc((hmask + 1) * sizeof *queue);
        if (!map || !pairs || !queue) { c->ir->oom = true; goto done; }
        memset(map, 0xFF, (hmask + 1) * sizeof *map);
        uint32_t nstates = 0, qh = 0;
#define KEYOF(a, b, cc) (((uint64_t)(a) * nb + (b)) * nc + (cc))
        uint32_t start[3] = {gs[0]->rules[gs[0]->root].start, gs[1]->rules[gs[1]->root].start, n == 3 ? gs[2]->rules[gs[2]->root].start : 0};
        /* interning: linear probe on the packed key */
        uint32_t st0 = GRAM_NONE;
        for (int pass = 0; pass < 1; pass++) {
            uint64_t key = KEYOF(start[0], start[1], start[2]);
            uint32_t h = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 40) & hmask;
            map[h] = 0;
            pairs[0] = start[0]; pairs[1] = start[1]; pairs[2] = start[2];
            queue[0] = 0;
            nstates = 1;
            bool fin = (gs[0]->nodes[start[0]].flags & GN_FINAL) && (gs[1]->nodes[start[1]].flags & GN_FINAL) &&
                       (n < 3 || (gs[2]->nodes[start[2]].flags & GN_FINAL));
            st0 = gdfa_state(&d, fin);
        }
        uint32_t qt = 1;
        bool ok = st0 != GRAM_NONE;
        while (qh < qt && ok) {
            uint32_t sid = queue[qh++];
            uint32_t a = pairs[3 * sid], b = pairs[3 * sid + 1], cc = pairs[3 * sid + 2];
            const struct gram_node *A = &gs[0]->nodes[a], *B = &gs[1]->nodes[b];
            const struct gram_node *C = n == 3 ? &gs[2]->nodes[cc] : NULL;
            for (uint32_t i = 0; i < A->r_n && ok; i++) {
                const struct gram_range *ra = &gs[0]->ranges[A->r_off + i];
                for (uint32_t j = 0; j < B->r_n && ok; j++) {
                    const struct gram_range *rb = &gs[1]->ranges[B->r_off + j];
                    unsigned lo = ra->lo > rb->lo ? ra->lo : rb->lo, hi = ra->hi < rb->hi ? ra->hi : rb->hi;
                    if (lo > hi) continue;
                    uint32_t kmax = C ? C->r_n : 1;
                    for (uint32_t k = 0; k < kmax && ok; k++) {
                        unsigned lo2 = lo, hi2 = hi;
                        uint32_t tc = 0;
                        if (C) {
                            const struct gram_range *rc = &gs[2]->ranges[C->r_off + k];
                            lo2 = lo > rc->lo ? lo : rc->lo;
                            hi2 = hi < rc->hi ? hi : rc->hi;
                            if (lo2 > hi2) continue;
                            tc = rc->to;
                        }
                        uint64_t key = KEYOF(ra->to, rb->to, tc);
                        uint32_t h = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 40) & hmask, id = GRAM_NONE;
                        while (map[h] != GRAM_NONE) {
                            uint32_t q = map[h];
                            if (pairs[3 * q] == ra->to && pairs[3 * q + 1] == rb->to && pairs[3 * q + 2] == tc) { id = q; break; }
                            h = (h + 1) & hmask;
                        }
                        if (id == GRAM_NONE) {
                            if (nstates >= SC_MAX_PRODUCT) {
                                sfail(c, TERN_ERR_RANGE, "string constraints combine into more than %d states", SC_MAX_PRODUCT);
                                goto done;
                            }
                            if ((nstates + 1) * 2 > hmask) { /* grow and rehash */
                                uint32_t nm = hmask * 2 + 1;
                                uint32_t *m2 = malloc(((size_t)nm + 1) * sizeof *m2);
                                uint32_t *p2 = realloc(pairs, ((size_t)nm + 1) * 3 * sizeof *p2);
                                uint32_t *q2 = realloc(queue, ((size_t)nm + 1) * sizeof *q2);
                                if (p2) pairs = p2;
                                if (q2) queue = q2;
                                if (!m2 || !p2 || !q2) { free(m2); c->ir->oom = true; goto done; }
                                memset(m2, 0xFF, ((size_t)nm + 1) * sizeof *m2);
                                for (uint32_t q = 0; q < nstates; q++) {
                                    uint64_t k2 = KEYOF(pairs[3 * q], pairs[3 * q + 1], pairs[3 * q + 2]);
                                    uint32_t h2 = (uint32_t)(k2 * 0x9E3779B97F4A7C15ull >> 40) & nm;
                                    while (m2[h2] != GRAM_NONE) h2 = (h2 + 1) & nm;
                                    m2[h2] = q;
                                }
                                free(map);
                                map = m2;
                                hmask = nm;
                                h = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 40) & hmask;
                                while (map[h] != GRAM_NONE) h = (h + 1) & hmask;
                            }
                            id = nstates++;
                            map[h] = id;
                            pairs[3 * id] = ra->to;
                            pairs[3 * id + 1] = rb->to;
                            pairs[3 * id + 2] = tc;
                            queue[qt++] = id;
                            bool fin = (gs[0]->nodes[ra->to].flags & GN_FINAL) && (gs[1]->nodes[rb->to].flags & GN_FINAL) &&
                                       (!C || (gs[2]->nodes[tc].flags & GN_FINAL));
                            ok &= gdfa_state(&d, fin) == id;
                        }
                        ok &= gdfa_edge(&d, sid, (uint8_t)lo2, (uint8_t)hi2, id);
                    }
                }
            }
        }
#undef KEYOF
        if (!ok) { c->ir->oom = true; goto done; }
        d.start = 0;
        out = gir_seq3(c->ir, quote(c), gir_dfa(c->ir, &d), quote(c));
    }
done:
    gdfa_free(&d);
    free(map);
    free(pairs);
    free(queue);
    for (int i = 0; i < n; i++) {
        tern_grammar_free(gs[i]);
        gir_free(&irs[i]);
    }
    return c->failed ? GRAM_NONE : out;
}

/* Compiles each regex constraint of ks alone (pattern first when has_pat, then format), so an
 * error names its keyword before the constraints are intersected. false: one failed, and *out is
 * what string_expr returns (a plain string when unsupported keywords are allowed, else none). */
static bool regexes_compile(struct sc *c, const struct strcon *ks, int n, bool has_pat, bool anchored,
                            uint32_t *out)
{
    for (int i = 0; i < n; i++) {
        if (ks[i].kind != 0) continue;
        struct gram_ir tmp;
        gir_init(&tmp);
        uint32_t x;
        tern_status st = gram_regex_to_ir(ks[i].re, strlen(ks[i].re), anchored, &tmp, &x, NULL);
        gir_free(&tmp);
        if (!st) continue;
        size_t old = path_push(c, (has_pat && i == 0) ? ".pattern" : ".format");
        char msg[400];
        snprintf(msg, sizeof msg, "%s", tern_last_error());
        bool go = st != TERN_ERR_NOMEM && ((has_pat && i == 0) ? unsupported(c, "%s (pattern \"%.120s\")", msg, ks[i].re)
                                                                : unsupported(c, "%s", msg));
        path_pop(c, old);
        *out = go ? rule_string(c) : st == TERN_ERR_NOMEM ? sfail(c, st, "out of memory") : GRAM_NONE;
        return false;
    }
    return true;
}

static uint32_t string_expr(struct sc *c, const cJSON *s)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    uint32_t lo = 0, hi = GRAM_INF;
    bool has_lo, has_hi;
    if (!get_uint(c, s, "minLength", &lo, &has_lo) || !get_uint(c, s, "maxLength", &hi, &has_hi)) return GRAM_NONE;
    if (!has_hi) hi = GRAM_INF;
    if (!has_lo) lo = 0;
    if (pat && !cJSON_IsString(pat)) return sfail(c, TERN_ERR_FORMAT, "pattern must be a string");
    if (fmt && !cJSON_IsString(fmt)) return sfail(c, TERN_ERR_FORMAT, "format must be a string");
    if (hi != GRAM_INF && hi < lo) return gir_nothing(c->ir);
    const char *fre = NULL;
    if (fmt) {
        fre = gram_format_regex(fmt->valuestring);
        if (!fre) {
            size_t old = path_push(c, ".format");
            bool go = unsupported(c, "unsupported format \"%s\"", fmt->valuestring);
            path_pop(c, old);
            if (!go) return GRAM_NONE;
        }
    }
    struct strcon ks[3];
    int n = 0;
    if (pat) ks[n++] = (struct strcon){0, pat->valuestring, 0, 0};
    if (fre) ks[n++] = (struct strcon){0, fre, 0, 0};
    if (has_lo || has_hi) ks[n++] = (struct strcon){1, NULL, lo, hi};
    if (n == 0) return rule_string(c);
    if (c->o->gemma && ((has_lo && lo > GRAM_MAX_REPEAT) || (has_hi && hi > GRAM_MAX_REPEAT))) {
        if (unsupported(c, "%s above %d in Gemma 4's syntax", has_hi && hi > GRAM_MAX_REPEAT ? "maxLength" : "minLength",
                        GRAM_MAX_REPEAT))
            return rule_string(c);
        return GRAM_NONE;
    }
    if (c->o->gemma) {
        /* Gemma: every constrained content also keeps the closing mark out */
        if (n == 3) {
            if (unsupported(c, "pattern, format and length together: too many string constraints for Gemma 4's syntax"))
                return rule_string(c);
            return GRAM_NONE;
        }
        uint32_t bad;
        if (!regexes_compile(c, ks, n, pat != NULL, false, &bad)) return bad;
        ks[n++] = (struct strcon){2, NULL, 0, 0};
        return intersect(c, ks, n);
    }
    if (n == 1 && ks[0].kind == 0) {
        size_t old = path_push(c, pat ? ".pattern" : ".format");
        uint32_t x = regex_string(c, ks[0].re, pat ? "pattern" : "format");
        path_pop(c, old);
        return x;
    }
    if (n == 1) {
        /* counted: one rule per (min, max), shared */
        char name[64];
        snprintf(name, sizeof name, "string{%u,%u}", lo, hi);
        uint32_t r = gir_rule(c->ir, name, strlen(name));
        if (r == GRAM_NONE) return GRAM_NONE;
        /* not marked shared: used once, the compiler inlines it, so the string's end is not a
         * rule end and tokens closing it are judged exactly */
        if (c->ir->rules[r].ex == GRAM_NONE) {
            uint32_t body;
            if (lo <= GRAM_UNROLL_MAX && (hi == GRAM_INF || hi <= GRAM_UNROLL_MAX)) {
                body = gir_rep(c->ir, json_char(c), lo, hi);
            } else { /* large bounds: a counter over one shared character rule */
                if (c->r_char == GRAM_NONE) {
                    c->r_char = gir_rule_new(c->ir, "char");
                    gir_rule_set(c->ir, c->r_char, json_char(c));
                }
                body = gir_count(c->ir, gir_ref(c->ir, c->r_char), lo, hi);
            }
            gir_rule_set(c->ir, r, gir_seq3(c->ir, gir_byte(c->ir, '"'), body, gir_byte(c->ir, '"')));
        }
        return gir_ref(c->ir, r);
    }
    if ((has_lo && lo > GRAM_MAX_REPEAT) || (has_hi && hi > GRAM_MAX_REPEAT)) {
        /* pattern / format and length are intersected as one automaton, which counts in states */
        const char *what = has_hi && hi > GRAM_MAX_REPEAT ? "maxLength" : "minLength";
        if (unsupported(c, "%s %u together with %s: lengths above %d combine with a pattern or format only when "
                        "alone (drop the length, or bound it within %d)", what, has_hi && hi > GRAM_MAX_REPEAT ? hi : lo,
                        pat ? "pattern" : "format", GRAM_MAX_REPEAT, GRAM_MAX_REPEAT))
            return rule_string(c);
        return GRAM_NONE;
    }
    /* several: check each alone first (errors then name the keyword), then intersect */
    uint32_t bad;
    if (!regexes_compile(c, ks, n, pat != NULL, true, &bad)) return bad;
    return intersect(c, ks, n);
}

/* ---------------------------------------------------------------- numbers */

static bool bound_text(struct sc *c, const cJSON *v, const char *key, char out[40])
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        sfail(c, TERN_ERR_FORMAT, "%s must be a number", key);
        return false;
    }
    num_text(v->valuedouble, out);
    return true;
}

static uint32_t number_expr(struct sc *c, const cJSON *s, bool is_int)
{
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
    const cJSON *emn = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum");
    const cJSON *emx = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
    const cJSON *mul = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    char lo_t[40], hi_t[40], st_t[40];
    struct gram_num_spec ns = {is_int, NULL, NULL, false, false, NULL};
    double lo = -INFINITY, hi = INFINITY;
    if (mn) {
        if (!bound_text(c, mn, "minimum", lo_t)) return GRAM_NONE;
        lo = mn->valuedouble;
        ns.min = lo_t;
    }
    if (emn) {
        if (cJSON_IsBool(emn)) { /* draft 4: modifies minimum */
            ns.min_excl = cJSON_IsTrue(emn) && mn;
        } else {
            char t[40];
            if (!bound_text(c, emn, "exclusiveMinimum", t)) return GRAM_NONE;
            if (emn->valuedouble >= lo) { strcpy(lo_t, t); ns.min = lo_t; ns.min_excl = true; lo = emn->valuedouble; }
        }
    }
    if (mx) {
        if (!bound_text(c, mx, "maximum", hi_t)) return GRAM_NONE;
        hi = mx->valuedouble;
        ns.max = hi_t;
    }
    if (emx) {
        if (cJSON_IsBool(emx)) {
            ns.max_excl = cJSON_IsTrue(emx) && mx;
        } else {
            char t[40];
            if (!bound_text(c, emx, "exclusiveMaximum", t)) return GRAM_NONE;
            if (emx->valuedouble <= hi) { strcpy(hi_t, t); ns.max = hi_t; ns.max_excl = true; hi = emx->valuedouble; }
        }
    }
    if (mul) {
        if (!bound_text(c, mul, "multipleOf", st_t)) return GRAM_NONE;
        if (mul->valuedouble <= 0) return sfail(c, TERN_ERR_FORMAT, "multipleOf must be greater than 0");
        ns.step = st_t;
    }
    if (!ns.min && !ns.max && !ns.step) return rule_number(c, is_int);
    uint32_t x;
    tern_status st = gram_num_to_ir(&ns, c->ir, &x);
    if (st) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s", tern_last_error());
        return sfail(c, st, "%s", msg);
    }
    return x;
}

/* ---------------------------------------------------------------- objects */

/* The escape sequences of an extra key (key_excluding), as DFA states ending in `to`: `free`
 * starts after the backslash of a key that already differs from every declared name (any
 * escape: \" \\ \/ \b \f \n \r \t, \uXXXX but a lone surrogate, or a surrogate pair); `near`
 * after one of a key that may still become a declared name: only escapes of characters no
 * declared name has (quote, backslash, controls, and non-ASCII characters when every name is
 * ASCII), so an escaped spelling of a declared name (\u0061 for "a") stays impossible. */
static bool key_escapes(struct gram_dfa *d, uint32_t to, bool ascii_names, uint32_t *free_bs, uint32_t *near_bs)
{
    uint32_t s[20];
    for (int i = 0; i < 20; i++)
        if ((s[i] = gdfa_state(d, false)) == GRAM_NONE) return false;
    enum { BS, U1, A2, A3, A4, D1, S2, S3, S4, S5, S6, S7, S8, S9, NBS, R1, R2, R3, R4, R5 };
    bool ok = true;
#define E(f, lo, hi, t) (ok &= gdfa_edge(d, s[f], (uint8_t)(lo), (uint8_t)(hi), (t)))
#define HEX(f, t) (E(f, '0', '9', t), E(f, 'a', 'f', t), E(f, 'A', 'F', t))
    for (const char *p = "\"\\/bfnrt"; *p; p++) E(BS, *p, *p, to);
    E(BS, 'u', 'u', s[U1]);
    /* \uXXXX: not a surrogate (first digit not d, or d then 0-7), or a high one then \u low */
    E(U1, '0', '9', s[A2]), E(U1, 'a', 'c', s[A2]), E(U1, 'e', 'f', s[A2]), E(U1, 'A', 'C', s[A2]), E(U1, 'E', 'F', s[A2]);
    E(U1, 'd', 'd', s[D1]), E(U1, 'D', 'D', s[D1]);
    HEX(A2, s[A3]);
    HEX(A3, s[A4]);
    HEX(A4, to);
    E(D1, '0', '7', s[A3]);
    E(D1, '8', '9', s[S2]), E(D1, 'a', 'b', s[S2]), E(D1, 'A', 'B', s[S2]);
    HEX(S2, s[S3]);
    HEX(S3, s[S4]);
    E(S4, '\\', '\\', s[S5]);
    E(S5, 'u', 'u', s[S6]);
    E(S6, 'd', 'd', s[S7]), E(S6, 'D', 'D', s[S7]);
    E(S7, 'c', 'f', s[S8]), E(S7, 'C', 'F', s[S8]);
    HEX(S8, s[S9]);
    HEX(S9, to);
    /* near a declared name: no \/ (a name may hold '/'), \u only for what no name holds */
    for (const char *p = "\"\\bfnrt"; *p; p++) E(NBS, *p, *p, to);
    E(NBS, 'u', 'u', s[R1]);
    E(R1, '0', '0', s[R2]);
    E(R2, '0', '0', s[R3]);
    E(R3, '0', '1', s[A4]);                  /* U+0000..U+001F */
    E(R3, '2', '2', s[R4]), E(R4, '2', '2', to); /* U+0022 */
    E(R3, '5', '5', s[R5]), E(R5, 'c', 'c', to), E(R5, 'C', 'C', to); /* U+005C */
    if (ascii_names) {                       /* U+0080 and above */
        E(R3, '8', '9', s[A4]), E(R3, 'a', 'f', s[A4]), E(R3, 'A', 'F', s[A4]);
        E(R2, '1', '9', s[A3]), E(R2, 'a', 'f', s[A3]), E(R2, 'A', 'F', s[A3]);
        E(R1, '1', '9', s[A2]), E(R1, 'a', 'c', s[A2]), E(R1, 'e', 'f', s[A2]), E(R1, 'A', 'C', s[A2]), E(R1, 'E', 'F', s[A2]);
        E(R1, 'd', 'd', s[D1]), E(R1, 'D', 'D', s[D1]);
    }
#undef HEX
#undef E
    *free_bs = s[BS];
    *near_bs = s[NBS];
    return ok;
}

/* A JSON string that is none of names[0..n) (escapes as key_escapes allows them: none when a
 * declared name itself needs one); in Gemma's syntax a bare key (printable characters but space
 * : , { } < " , or non-ASCII ones) that is none of them. */
static uint32_t key_excluding(struct sc *c, const char *const *names, uint32_t n)
{
    const bool gm = c->o->gemma;
    /* trie of the names (plain ones only: a name needing escapes can never equal a plain key) */
    struct tnode { uint32_t child[256]; bool end; };
    uint32_t cap = 64, nt = 1;
    struct tnode *t = calloc(cap, sizeof *t);
    if (!t) { c->ir->oom = true; return GRAM_NONE; }
    memset(t[0].child, 0xFF, sizeof t[0].child);
    bool escapes = !gm, ascii_names = true;
    for (uint32_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)names[i];
        bool plain = true;
        for (const unsigned char *q = p; *q; q++) {
            if (*q < 0x20 || *q == '"' || *q == '\\') plain = false;
            if (*q >= 0x80) ascii_names = false;
        }
        if (!valid_utf8(names[i])) continue;
        if (!plain) escapes = false; /* its escaped spelling is a key: keys stay plain */
        if (!plain) continue;
        uint32_t cur = 0;
        for (; *p; p++) {
            if (t[cur].child[*p] == GRAM_NONE) {
                if (nt == cap) {
                    cap *= 2;
                    struct tnode *nn = realloc(t, cap * sizeof *nn);
                    if (!nn) { free(t); c->ir->oom = true; return GRAM_NONE; }
                    t = nn;
                }
                memset(t[nt].child, 0xFF, sizeof t[nt].child);
                t[nt].end = false;
                t[cur].child[*p] = nt++;
            }
            cur = t[cur].child[*p];
        }
        t[cur].end = true;
    }
    /* product: (UTF-8 position, trie node or FREE) */
    enum { U_START, U_C1, U_C2, U_C3, U_E0, U_ED, U_F0, U_F4, U_N };
    const uint32_t FREE = nt;
    uint32_t n_prod = U_N * (nt + 1);
    uint32_t *id = malloc(n_prod * sizeof *id);
    uint32_t *queue = malloc(n_prod * sizeof *queue);
    struct gram_dfa d;
    gdfa_init(&d);
    if (!id || !queue) { free(t); free(id); free(queue); c->ir->oom = true; return GRAM_NONE; }
    memset(id, 0xFF, n_prod * sizeof *id);
    uint32_t qh = 0, qt = 0;
    uint32_t start = gdfa_state(&d, false);
    uint32_t accept = gm ? GRAM_NONE : gdfa_state(&d, true);
    uint32_t body0 = gm ? start : gdfa_state(&d, false);
    if (!gm) gdfa_edge(&d, start, '"', '"', body0);
    id[U_START * (nt + 1) + 0] = body0;
    queue[qt++] = U_START * (nt + 1) + 0;
    bool ok = true;
    /* escapes lead to a key that differs from every name: (U_START, FREE) */
    uint32_t free_bs = GRAM_NONE, near_bs = GRAM_NONE;
    if (escapes) {
        uint32_t kf = U_START * (nt + 1) + FREE;
        if (id[kf] == GRAM_NONE) {
            id[kf] = gdfa_state(&d, false);
            queue[qt++] = kf;
        }
        ok = id[kf] != GRAM_NONE && key_escapes(&d, id[kf], ascii_names, &free_bs, &near_bs);
    }
    while (qh < qt && ok) {
        uint32_t key = queue[qh++];
        uint32_t u = key / (nt + 1), tn = key % (nt + 1);
        uint32_t from = id[key];
        if (!gm && u == U_START && (tn == FREE || !t[tn].end)) ok &= gdfa_edge(&d, from, '"', '"', accept);
        for (unsigned b = 0; b < 256 && ok; b++) {
            uint32_t nu;
            switch (u) {
            case U_START:
                if (b == '\\' && escapes) {
                    ok &= gdfa_edge(&d, from, '\\', '\\', tn == FREE ? free_bs : near_bs);
                    continue;
                }
                if (gm ? b > 0x20 && b < 0x7F && !strchr(":,{}<\"", (int)b)
                       : b >= 0x20 && b < 0x80 && b != '"' && b != '\\') /* DEL needs no escape */
                    nu = U_START;
                else if (b >= 0xC2 && b <= 0xDF) nu = U_C1;
                else if (b == 0xE0) nu = U_E0;
                else if (b == 0xED) nu = U_ED;
                else if (b >= 0xE1 && b <= 0xEF) nu = U_C2;
                else if (b == 0xF0) nu = U_F0;
                else if (b == 0xF4) nu = U_F4;
                else if (b >= 0xF1 && b <= 0xF3) nu = U_C3;
                else continue;
                break;
            case U_C1: if (b < 0x80 || b > 0xBF) continue; nu = U_START; break;
            case U_C2: if (b < 0x80 || b > 0xBF) continue; nu = U_C1; break;
            case U_C3: if (b < 0x80 || b > 0xBF) continue; nu = U_C2; break;
            case U_E0: if (b < 0xA0 || b > 0xBF) continue; nu = U_C1; break;
            case U_ED: if (b < 0x80 || b > 0x9F) continue; nu = U_C1; break;
            case U_F0: if (b < 0x90 || b > 0xBF) continue; nu = U_C2; break;
            default:   if (b < 0x80 || b > 0x8F) continue; nu = U_C2; break; /* U_F4 */
            }
            uint32_t ntn = tn == FREE ? FREE : (t[tn].child[b] == GRAM_NONE ? FREE : t[tn].child[b]);
            uint32_t k2 = nu * (nt + 1) + ntn;
            if (id[k2] == GRAM_NONE) {
                /* Gemma: a key may end (the ':' follows) wherever a character ends and it is no
                 * declared name */
                id[k2] = gdfa_state(&d, gm && nu == U_START && (ntn == FREE || !t[ntn].end));
                if (id[k2] == GRAM_NONE) { ok = false; break; }
                queue[qt++] = k2;
            }
            ok &= gdfa_edge(&d, from, (uint8_t)b, (uint8_t)b, id[k2]);
        }
    }
    free(t);
    free(id);
    free(queue);
    if (!ok) { gdfa_free(&d); c->ir->oom = true; return GRAM_NONE; }
    d.start = start;
    return gir_dfa(c->ir, &d);
}

struct prop {
    const char *name;
    const cJSON *schema;   /* NULL = what additionalProperties allows / any value */
    bool required;
};

static uint32_t object_expr(struct sc *c, const cJSON *s)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    uint32_t minp = 0, maxp = 0;
    bool has_min, has_max;
    if (!get_uint(c, s, "minProperties", &minp, &has_min) || !get_uint(c, s, "maxProperties", &maxp, &has_max)) return GRAM_NONE;
    if (props && !cJSON_IsObject(props)) return sfail(c, TERN_ERR_FORMAT, "properties must be an object");
    if (req && !cJSON_IsArray(req)) return sfail(c, TERN_ERR_FORMAT, "required must be an array");
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl)) return sfail(c, TERN_ERR_FORMAT, "additionalProperties must be a boolean or a schema");
    if (has_max && has_min && minp > maxp) return gir_nothing(c->ir);
    /* strict: an object that declares properties admits no others unless it says so; one that
     * declares none ({"type": "object"}) stays free-form, as in llama.cpp's tool grammars */
    bool extras = addl ? !cJSON_IsFalse(addl) : !c->o->strict_props || !props;
    const cJSON *extra_schema = addl && cJSON_IsObject(addl) ? addl : NULL;

    uint32_t np = (uint32_t)(props ? cJSON_GetArraySize(props) : 0), nr = (uint32_t)(req ? cJSON_GetArraySize(req) : 0);
    if (np + nr > SC_MAX_PROPS) return sfail(c, TERN_ERR_RANGE, "more than %d properties", SC_MAX_PROPS);
    struct prop *p = calloc(np + nr + 1, sizeof *p);
    const char **names = calloc(np + nr + 1, sizeof *names);
    uint32_t *val = malloc((np + nr + 1) * sizeof *val), *key = malloc((np + nr + 1) * sizeof *key);
    uint32_t *S = NULL, *K = NULL;
    struct gram_dfa d;
    gdfa_init(&d);
    uint32_t out = GRAM_NONE;
    if (!p || !names || !val || !key) { c->ir->oom = true; goto done; }
    uint32_t n = 0;
    for (const cJSON *k = props ? props->child : NULL; k; k = k->next) {
        if (!k->string) continue;
        bool dup = false;
        for (uint32_t i = 0; i < n; i++) dup |= !strcmp(p[i].name, k->string);
        if (!dup) p[n++] = (struct prop){k->string, k, false};
    }
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) { sfail(c, TERN_ERR_FORMAT, "required must list strings"); goto done; }
        uint32_t i = 0;
        while (i < n && strcmp(p[i].name, r->valuestring)) i++;
        if (i == n) { /* required but not declared: its value is what additionalProperties allows */
            if (!extras) {
                sfail(c, TERN_ERR_FORMAT, "required property \"%s\" is not allowed (not in properties, and additionalProperties is false)",
                      r->valuestring);
                goto done;
            }
            p[n++] = (struct prop){r->valuestring, extra_schema, true};
        }
        p[i].required = true;
    }
    if (c->o->gemma) /* the template writes a mapping in dictsort order (case-insensitive, stable) */
        for (uint32_t i = 1; i < n; i++)
            for (uint32_t j = i; j > 0 && strcasecmp(p[j - 1].name, p[j].name) > 0; j--) {
                struct prop t = p[j];
                p[j] = p[j - 1];
                p[j - 1] = t;
            }
    for (uint32_t i = 0; i < n; i++) {
        names[i] = p[i].name;
        if (!valid_utf8(p[i].name)) { sfail(c, TERN_ERR_FORMAT, "property name is not valid UTF-8"); goto done; }
        if (c->o->gemma && !gemma_key_ok(p[i].name)) {
            sfail(c, TERN_ERR_UNSUPPORTED, "property name \"%.60s\" cannot be written bare in Gemma 4's syntax "
                  "(':', ',', '{', '}', control bytes or edge spaces)", p[i].name);
            goto done;
        }
    }
    /* values and keys */
    for (uint32_t i = 0; i <= n; i++) {
        size_t old = c->plen;
        if (i < n && p[i].schema == (props ? cJSON_GetObjectItemCaseSensitive(props, p[i].name) : NULL) && p[i].schema) {
            path_push(c, ".properties");
            path_key(c, p[i].name);
        } else {
            path_push(c, ".additionalProperties");
        }
        const cJSON *vs = i < n ? p[i].schema : extra_schema;
        if (i == n && !extras) val[i] = GRAM_NONE;
        else val[i] = vs ? sch(c, vs) : rule_value(c);
        path_pop(c, old);
        if (c->failed) goto done;
        if (i < n && c->o->gemma) {
            key[i] = gir_str(c->ir, p[i].name);
        } else if (i < n) {
            char *b = NULL;
            size_t bn = 0, bc = 0;
            enc_str(&b, &bn, &bc, p[i].name);
            if (!b) { c->ir->oom = true; goto done; }
            key[i] = gir_lit(c->ir, b, bn);
            free(b);
        }
    }
    /* without extra properties the declared ones bound the count */
    if (!extras && has_min && minp > n) { out = gir_nothing(c->ir); goto done; }
    if (!extras && has_max && maxp >= n) has_max = false;
    if (!extras && has_min && !has_max && minp == 0) has_min = false;
    /* properties so far: exact up to maxProperties, or saturating at minProperties */
    uint32_t C = has_max ? maxp : has_min ? minp : 0;
    bool exact = has_max;
    /* large bounds past the declared properties: the declared part counts in states (at most
     * n), the extra properties after it under a counter for what is left of the bounds */
    const bool big = extras && C > n && (C > GRAM_UNROLL_MAX || (uint64_t)(n + 1) * 3 * ((uint64_t)C + 1) > 300000);
    if (big) C = n;
    if (!big && (uint64_t)(n + 1) * 3 * ((uint64_t)C + 1) > 300000) {
        sfail(c, TERN_ERR_RANGE, "minProperties/maxProperties too large for %u properties", n);
        goto done;
    }
    if (C > 0) /* a value is copied once per count: keep the copies small */
        for (uint32_t i = 0; i <= n; i++) {
            if (val[i] == GRAM_NONE || c->ir->ex[val[i]].kind == GX_REF) continue;
            uint32_t r = gir_rule_new(c->ir, "property%u", i);
            gir_rule_set(c->ir, r, val[i]);
            val[i] = gir_ref(c->ir, r);
        }
    uint32_t xkey = extras ? key_excluding(c, names, n) : GRAM_NONE;

    /* S(i, e, k): before declared property i (i == n: the extra ones), e: a comma is due,
     * k: properties so far. K(i, k): after the key of property i. */
    uint32_t NS = (n + 1) * 2 * (C + 1), NK = (n + 1) * (C + 1);
    S = malloc(NS * sizeof *S);
    K = malloc(NK * sizeof *K);
    if (!S || !K) { c->ir->oom = true; goto done; }
    bool ok = true;
    for (uint32_t i = 0; i < NS; i++) {
        uint32_t k = i % (C + 1), ii = i / (C + 1) / 2;
        S[i] = gdfa_state(&d, !big && ii == n && k >= minp);
        ok &= S[i] != GRAM_NONE;
    }
    uint32_t fin = big ? gdfa_state(&d, true) : GRAM_NONE, unit = GRAM_NONE, kv = GRAM_NONE;
    if (big && val[n] != GRAM_NONE && xkey != GRAM_NONE) {
        kv = gir_seq3(c->ir, xkey, colon(c), val[n]);
        uint32_t r = gir_rule_new(c->ir, "extra-property");
        gir_rule_set(c->ir, r, gir_seq2(c->ir, comma(c), kv));
        unit = gir_ref(c->ir, r);
    }
    for (uint32_t i = 0; i < NK; i++) {
        K[i] = gdfa_state(&d, false);
        ok &= K[i] != GRAM_NONE;
    }
#define SI(i, e, k) (((i) * 2 + (e)) * (C + 1) + (k))
    for (uint32_t i = 0; i <= n && ok; i++)
        for (uint32_t e = 0; e < 2 && ok; e++)
            for (uint32_t k = 0; k <= C && ok; k++) {
                uint32_t from = S[SI(i, e, k)];
                bool room = !exact || k + 1 <= C;
                uint32_t nk = exact ? (room ? k + 1 : k) : (k + 1 > C ? C : k + 1);
                if (i < n && !p[i].required) ok &= gdfa_xedge(&d, from, gir_empty(c->ir), S[SI(i + 1, e, k)]);
                uint32_t kx = i < n ? key[i] : xkey;
                if (big && i == n) { /* the extra properties: minp - k .. maxp - k more */
                    if (unit == GRAM_NONE) {
                        if (!has_min || minp <= k) ok &= gdfa_xedge(&d, from, gir_empty(c->ir), fin);
                        continue;
                    }
                    uint32_t lo = has_min && minp > k ? minp - k : 0, hi = has_max ? maxp - k : GRAM_INF;
                    uint32_t x;
                    if (e) x = gir_count(c->ir, unit, lo, hi);
                    else if (lo == 0) x = gir_opt(c->ir, gir_seq2(c->ir, kv, gir_count(c->ir, unit, 0, hi == GRAM_INF ? GRAM_INF : hi - 1)));
                    else x = gir_seq2(c->ir, kv, gir_count(c->ir, unit, lo - 1, hi == GRAM_INF ? GRAM_INF : hi - 1));
                    ok &= gdfa_xedge(&d, from, x, fin);
                    continue;
                }
                if (val[i] == GRAM_NONE || kx == GRAM_NONE || !room) continue;
                ok &= gdfa_xedge(&d, from, e ? gir_seq2(c->ir, comma(c), kx) : kx, K[i * (C + 1) + k]);
                if (e == 0) /* one value edge per (i, k) */
                    ok &= gdfa_xedge(&d, K[i * (C + 1) + k], gir_seq2(c->ir, colon(c), val[i]), S[SI(i < n ? i + 1 : n, 1, nk)]);
            }
#undef SI
    if (!ok || c->ir->oom) { c->ir->oom = true; goto done; }
    d.start = S[0];
    uint32_t body = gir_dfa(c->ir, &d);
    uint32_t xs[] = {gir_byte(c->ir, '{'), wsi(c), body, wsi(c), gir_byte(c->ir, '}')};
    out = gir_seq(c->ir, xs, 5);
done:
    gdfa_free(&d);
    free(S);
    free(K);
    free(p);
    free(names);
    free(val);
    free(key);
    return out;
}

/* ---------------------------------------------------------------- enum / const */

static uint32_t sch_inner(struct sc *c, const cJSON *s);

/* Does the canonical text of v satisfy schema s (compiled on its own, compact whitespace)? */
static bool value_satisfies(struct sc *c, const cJSON *s, const cJSON *v, bool *ok)
{
    *ok = true;
    struct gram_ir ir;
    gir_init(&ir);
    struct gram_schema_opts o = *c->o;
    o.ws = c->o->gemma ? TERN_GRAMMAR_WS_MINIFIED : TERN_GRAMMAR_WS_COMPACT; /* value_text's form */
    struct sc sub = *c;
    sub.ir = &ir;
    sub.o = &o;
    sub.memo = NULL;
    sub.n_memo = sub.cap_memo = 0;
    sub.r_string = sub.r_number = sub.r_integer = sub.r_value = sub.r_strkey = sub.r_char = GRAM_NONE;
    sub.warn = NULL;
    uint32_t x = sch_inner(&sub, s);
    bool result = false;
    if (x == GRAM_NONE || sub.failed) {
        *ok = false;
        c->failed = sub.failed;
        c->status = sub.status;
        if (!sub.failed) sfail(c, gir_status(&ir, "json schema") ? TERN_ERR_NOMEM : TERN_ERR_FORMAT, "enum check failed");
    } else {
        uint32_t root = gir_rule_new(&ir, "root");
        gir_rule_set(&ir, root, x);
        struct tern_grammar *g = calloc(1, sizeof *g);
        if (g && !gram_compile(&ir, root, NULL, g) && !gram_cache_create(g)) {
            struct tern_grammar_matcher *m;
            size_t len;
            char *t = value_text(v, &len, c->o->gemma);
            if (t && !tern_grammar_matcher_create(g, &m)) {
                result = !tern_grammar_matcher_accept_bytes(m, t, len, NULL) && tern_grammar_matcher_is_complete(m);
                tern_grammar_matcher_free(m);
            }
            free(t);
        }
        /* a schema admitting nothing is not an error here: the value just fails */
        tern_grammar_free(g);
        tern_clear_error();
    }
    free(sub.memo);
    gir_free(&ir);
    return result;
}

static uint32_t enum_expr(struct sc *c, const cJSON *s)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (en && !cJSON_IsArray(en)) return sfail(c, TERN_ERR_FORMAT, "enum must be an array");
    int types = parse_types(c, cJSON_GetObjectItemCaseSensitive(s, "type"));
    if (types < 0) return GRAM_NONE;
    /* values that pass the rest of the schema, checked by matching their text */
    static const char *const simple[] = {"enum", "const", "type", NULL};
    cJSON *rest = NULL;
    if (has_constraints(s, simple)) {
        rest = cJSON_CreateObject();
        if (!rest) { c->ir->oom = true; return GRAM_NONE; }
        for (const cJSON *k = s->child; k; k = k->next)
            if (k->string && strcmp(k->string, "enum") && strcmp(k->string, "const"))
                cJSON_AddItemReferenceToObject(rest, k->string, (cJSON *)k);
    }
    uint32_t n = 0, cap = 16;
    uint32_t *xs = malloc(cap * sizeof *xs);
    if (!xs) { cJSON_Delete(rest); c->ir->oom = true; return GRAM_NONE; }
    const cJSON *list = cn ? NULL : en->child;
    const cJSON *one = cn;
    int count = 0;
    for (const cJSON *v = one ? one : list; v; v = one ? NULL : v->next) {
        if (++count > SC_MAX_ENUM) { free(xs); cJSON_Delete(rest); return sfail(c, TERN_ERR_RANGE, "enum with more than %d values", SC_MAX_ENUM); }
        int vt = value_types(v);
        if (!(vt & types)) continue;
        if (cn && en) { /* both: the const must also be in the enum */
            bool in = false;
            for (const cJSON *e = en->child; e && !in; e = e->next) in = cJSON_Compare(e, v, true);
            if (!in) continue;
        }
        if (rest) {
            bool okk;
            bool sat = value_satisfies(c, rest, v, &okk);
            if (!okk) { free(xs); cJSON_Delete(rest); return GRAM_NONE; }
            if (!sat) continue;
        }
        if (n == cap) {
            cap *= 2;
            uint32_t *nx = realloc(xs, cap * sizeof *nx);
            if (!nx) { free(xs); cJSON_Delete(rest); c->ir->oom = true; return GRAM_NONE; }
            xs = nx;
        }
        xs[n++] = lit_value(c, v, 0);
        if (c->failed) break;
    }
    cJSON_Delete(rest);
    uint32_t x = c->failed ? GRAM_NONE : gir_alt(c->ir, xs, n);
    free(xs);
    return x;
}

/* ---------------------------------------------------------------- arrays */

/* The allowed values of an item schema when it is a finite set (enum, const, boolean, null),
 * for uniqueItems; NULL if not finite. *n = count. Caller frees. */
static const cJSON **finite_values(struct sc *c, const cJSON *s, uint32_t *n, cJSON **owned)
{
    *n = 0;
    *owned = NULL;
    if (!cJSON_IsObject(s)) return NULL;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON **v = malloc((SC_MAX_UNIQUE + 2) * sizeof *v);
    if (!v) return NULL;
    if (cn) {
        v[(*n)++] = cn;
    } else if (en && cJSON_IsArray(en)) {
        for (const cJSON *e = en->child; e; e = e->next) {
            if (*n > SC_MAX_UNIQUE) break;
            v[(*n)++] = e;
        }
    } else {
        int t = parse_types(c, cJSON_GetObjectItemCaseSensitive(s, "type"));
        if (t == T_BOOL) {
            *owned = cJSON_CreateArray();
            if (!*owned) { free(v); return NULL; }
            cJSON_AddItemToArray(*owned, cJSON_CreateTrue());
            cJSON_AddItemToArray(*owned, cJSON_CreateFalse());
            v[(*n)++] = (*owned)->child;
            v[(*n)++] = (*owned)->child->next;
        } else if (t == T_NULL) {
            *owned = cJSON_CreateArray();
            if (!*owned) { free(v); return NULL; }
            cJSON_AddItemToArray(*owned, cJSON_CreateNull());
            v[(*n)++] = (*owned)->child;
        } else {
            free(v);
            return NULL;
        }
    }
    return v;
}

static uint32_t array_expr(struct sc *c, const cJSON *s)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *addi = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    const cJSON *uniq = cJSON_GetObjectItemCaseSensitive(s, "uniqueItems");
    uint32_t lo = 0, hi = GRAM_INF;
    bool has_lo, has_hi;
    if (!get_uint(c, s, "minItems", &lo, &has_lo) || !get_uint(c, s, "maxItems", &hi, &has_hi)) return GRAM_NONE;
    if (!has_lo) lo = 0;
    if (!has_hi) hi = GRAM_INF;
    if (hi != GRAM_INF && hi < lo) return gir_nothing(c->ir);
    /* tuple form: prefixItems (2020-12) or items as an array (draft 4-7) */
    const cJSON *tuple = NULL, *tail = NULL;
    bool tail_allowed = true;
    if (prefix) {
        if (!cJSON_IsArray(prefix)) return sfail(c, TERN_ERR_FORMAT, "prefixItems must be an array");
        tuple = prefix;
        tail = items;
    } else if (items && cJSON_IsArray(items)) {
        tuple = items;
        tail = addi;
    } else {
        tail = items;
    }
    if (tail && cJSON_IsFalse(tail)) tail_allowed = false;
    if (tail && !cJSON_IsBool(tail) && !cJSON_IsObject(tail)) return sfail(c, TERN_ERR_FORMAT, "items must be a schema");
    uint32_t k = tuple ? (uint32_t)cJSON_GetArraySize(tuple) : 0;
    if (k > SC_MAX_PROPS) return sfail(c, TERN_ERR_RANGE, "more than %d prefixItems", SC_MAX_PROPS);
    bool unique = uniq && cJSON_IsTrue(uniq) && !(hi != GRAM_INF && hi <= 1);
    uint32_t open = gir_seq2(c->ir, gir_byte(c->ir, '['), wsi(c));
    uint32_t close = gir_seq2(c->ir, wsi(c), gir_byte(c->ir, ']'));

    if (unique) {
        const cJSON *it = tail ? deref(c, tail) : NULL;
        if (c->failed) return GRAM_NONE;
        uint32_t nv = 0;
        cJSON *owned = NULL;
        const cJSON **vals = (!tuple && it) ? finite_values(c, it, &nv, &owned) : NULL;
        if (!vals || nv > SC_MAX_UNIQUE) {
            free(vals);
            cJSON_Delete(owned);
            if (!unsupported(c, "uniqueItems is enforced only for items that are an enum or const of at most %d values (or boolean/null)",
                             SC_MAX_UNIQUE))
                return GRAM_NONE;
            unique = false;
        } else {
            /* states: the set of values used so far */
            struct gram_dfa d;
            gdfa_init(&d);
            uint32_t ns = 1u << nv;
            bool ok = true;
            uint32_t *lit = malloc(nv * sizeof *lit);
            if (!lit) { free(vals); cJSON_Delete(owned); c->ir->oom = true; return GRAM_NONE; }
            size_t old = path_push(c, ".items");
            for (uint32_t i = 0; i < nv; i++) lit[i] = lit_value(c, vals[i], 0);
            path_pop(c, old);
            for (uint32_t m = 0; m < ns && ok; m++) {
                uint32_t cnt = (uint32_t)__builtin_popcount(m);
                ok &= gdfa_state(&d, cnt >= lo && cnt <= hi) != GRAM_NONE;
            }
            for (uint32_t m = 0; m < ns && ok; m++) {
                uint32_t cnt = (uint32_t)__builtin_popcount(m);
                if (hi != GRAM_INF && cnt >= hi) continue;
                for (uint32_t i = 0; i < nv && ok; i++)
                    if (!(m & (1u << i))) ok &= gdfa_xedge(&d, m, m ? gir_seq2(c->ir, comma(c), lit[i]) : lit[i], m | (1u << i));
            }
            free(lit);
            free(vals);
            cJSON_Delete(owned);
            if (!ok) { gdfa_free(&d); c->ir->oom = true; return GRAM_NONE; }
            d.start = 0;
            return gir_seq3(c->ir, open, gir_dfa(c->ir, &d), close);
        }
    }

    /* E(i): after i prefix items (i >= 1 means a comma is due) */
    uint32_t *px = calloc(k + 1, sizeof *px);
    if (!px) { c->ir->oom = true; return GRAM_NONE; }
    for (uint32_t i = 0; i < k; i++) {
        size_t old = path_push(c, "%s[%u]", prefix ? ".prefixItems" : ".items", i);
        px[i] = sch(c, cJSON_GetArrayItem(tuple, (int)i));
        path_pop(c, old);
        if (c->failed) { free(px); return GRAM_NONE; }
    }
    /* the tail: items after the prefix */
    uint32_t tail_lo = lo > k ? lo - k : 0;
    uint32_t tail_hi = hi == GRAM_INF ? GRAM_INF : (hi > k ? hi - k : 0);
    uint32_t item = GRAM_NONE;
    if (tail_allowed && tail_hi > 0) {
        size_t old = path_push(c, ".items");
        item = tail && cJSON_IsObject(tail) ? sch(c, tail) : rule_value(c);
        path_pop(c, old);
        if (c->failed) { free(px); return GRAM_NONE; }
        /* the item appears twice below (first, then after each comma) and bounded repetition
         * copies it: behind a rule, nested arrays stay linear in size (the compiler inlines it
         * again when it is tiny) */
        if (c->ir->ex[item].kind != GX_REF) {
            uint32_t r = gir_rule_new(c->ir, "item");
            gir_rule_set(c->ir, r, item);
            item = gir_ref(c->ir, r);
        }
    }
    uint32_t tailx; /* the tail when at least one item came before */
    if (item == GRAM_NONE) tailx = tail_lo ? gir_nothing(c->ir) : gir_empty(c->ir);
    else tailx = gir_count(c->ir, gir_seq2(c->ir, comma(c), item), tail_lo, tail_hi);
    uint32_t tail0; /* the tail when nothing came before */
    if (item == GRAM_NONE) tail0 = tail_lo ? gir_nothing(c->ir) : gir_empty(c->ir);
    else if (tail_lo == 0) tail0 = gir_opt(c->ir, gir_seq2(c->ir, item, gir_count(c->ir, gir_seq2(c->ir, comma(c), item), 0, tail_hi == GRAM_INF ? GRAM_INF : tail_hi - 1)));
    else tail0 = gir_seq2(c->ir, item, gir_count(c->ir, gir_seq2(c->ir, comma(c), item), tail_lo - 1, tail_hi == GRAM_INF ? GRAM_INF : tail_hi - 1));
    /* build from the back: E(k) = tail; E(i) = [if i >= lo: may stop] item_i E(i+1) */
    uint32_t e = GRAM_NONE;
    for (uint32_t i = k + 1; i-- > 0;) {
        if (i == k) { e = k ? tailx : tail0; continue; }
        uint32_t this_item = i ? gir_seq2(c->ir, comma(c), px[i]) : px[i];
        uint32_t cont = gir_seq2(c->ir, this_item, e);
        e = i >= lo ? gir_opt(c->ir, cont) : cont;
    }
    free(px);
    return gir_seq3(c->ir, open, e, close);
}

/* ---------------------------------------------------------------- allOf: merging */

static const cJSON *merge_all(struct sc *c, const cJSON *const *in, uint32_t n_in);

static cJSON *new_schema(struct sc *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) { c->ir->oom = true; return NULL; }
    cJSON_AddItemToArray(c->garbage, o);
    return o;
}

static void add_ref(cJSON *obj, const char *k, const cJSON *v) { cJSON_AddItemReferenceToObject(obj, k, (cJSON *)v); }

/* {"allOf": [list]} or the single schema */
static const cJSON *all_of(struct sc *c, const cJSON **list, uint32_t n)
{
    if (n == 1) return list[0];
    cJSON *o = new_schema(c);
    cJSON *arr = cJSON_CreateArray();
    if (!o || !arr) { cJSON_Delete(arr); c->ir->oom = true; return NULL; }
    for (uint32_t i = 0; i < n; i++) cJSON_AddItemReferenceToArray(arr, (cJSON *)list[i]);
    cJSON_AddItemToObject(o, "allOf", arr);
    return o;
}

static int type_bits_to_json(cJSON *o, int t)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return -1;
    if (t & T_NULL) cJSON_AddItemToArray(arr, cJSON_CreateString("null"));
    if (t & T_BOOL) cJSON_AddItemToArray(arr, cJSON_CreateString("boolean"));
    if ((t & (T_INT | T_FRAC)) == (T_INT | T_FRAC)) cJSON_AddItemToArray(arr, cJSON_CreateString("number"));
    else if (t & T_INT) cJSON_AddItemToArray(arr, cJSON_CreateString("integer"));
    if (t & T_STR) cJSON_AddItemToArray(arr, cJSON_CreateString("string"));
    if (t & T_ARR) cJSON_AddItemToArray(arr, cJSON_CreateString("array"));
    if (t & T_OBJ) cJSON_AddItemToArray(arr, cJSON_CreateString("object"));
    cJSON_AddItemToObject(o, "type", arr);
    return 0;
}

static bool oneof_check(struct sc *c, const cJSON *arr);

/* Flatten: deref, split $ref+siblings, expand nested allOf. Returns false on error. */
static bool flatten(struct sc *c, const cJSON *s, const cJSON ***list, uint32_t *n, uint32_t *cap, int depth)
{
    if (depth > 32) { sfail(c, TERN_ERR_RANGE, "allOf / $ref nested too deep (recursive allOf?)"); return false; }
    if (cJSON_IsTrue(s)) return true;
    if (*n + 2 > *cap) {
        *cap = *cap * 2 + 8;
        const cJSON **nl = realloc(*list, *cap * sizeof *nl);
        if (!nl) { c->ir->oom = true; return false; }
        *list = nl;
    }
    if (!cJSON_IsObject(s)) { (*list)[(*n)++] = s; return true; }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (!ref && !all) { (*list)[(*n)++] = s; return true; }
    /* the rest of s (without $ref / allOf) */
    cJSON *rest = new_schema(c);
    if (!rest) return false;
    for (const cJSON *k = s->child; k; k = k->next)
        if (k->string && strcmp(k->string, "$ref") && strcmp(k->string, "allOf")) add_ref(rest, k->string, k);
    (*list)[(*n)++] = rest;
    if (ref) {
        if (!cJSON_IsString(ref)) { sfail(c, TERN_ERR_FORMAT, "$ref must be a string"); return false; }
        const cJSON *t = resolve_ref(c, ref->valuestring);
        if (!t || !flatten(c, t, list, n, cap, depth + 1)) return false;
    }
    if (all) {
        if (!cJSON_IsArray(all) || !all->child) { sfail(c, TERN_ERR_FORMAT, "allOf must be a non-empty array"); return false; }
        int i = 0;
        for (const cJSON *e = all->child; e; e = e->next, i++) {
            size_t old = path_push(c, ".allOf[%d]", i);
            bool ok = flatten(c, e, list, n, cap, depth + 1);
            path_pop(c, old);
            if (!ok) return false;
        }
    }
    return true;
}

static double eff_bound(const cJSON *s, bool lower, bool *excl, bool *present)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(s, lower ? "minimum" : "maximum");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, lower ? "exclusiveMinimum" : "exclusiveMaximum");
    double v = lower ? -INFINITY : INFINITY;
    *excl = false;
    *present = false;
    if (b && cJSON_IsNumber(b)) { v = b->valuedouble; *present = true; }
    if (e && cJSON_IsBool(e)) *excl = cJSON_IsTrue(e) && *present;
    else if (e && cJSON_IsNumber(e)) {
        if ((lower && e->valuedouble >= v) || (!lower && e->valuedouble <= v)) { v = e->valuedouble; *excl = true; }
        *present = true;
    }
    return v;
}

static const cJSON *merge_all(struct sc *c, const cJSON *const *in, uint32_t n_in)
{
    uint32_t n = 0, cap = 0;
    const cJSON **l = NULL;
    for (uint32_t i = 0; i < n_in; i++)
        if (!flatten(c, in[i], &l, &n, &cap, 0)) { free(l); return NULL; }
    const cJSON *out = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (cJSON_IsFalse(l[i])) {
            cJSON *f = cJSON_CreateFalse();
            if (f) cJSON_AddItemToArray(c->garbage, f);
            free(l);
            return f;
        }
        if (!cJSON_IsObject(l[i])) { free(l); sfail(c, TERN_ERR_FORMAT, "allOf: a schema must be an object or a boolean"); return NULL; }
        if (!check_keywords(c, l[i])) { free(l); return NULL; }
    }
    /* distribute the first anyOf / oneOf over the rest */
    for (uint32_t i = 0; i < n; i++) {
        const cJSON *any = cJSON_GetObjectItemCaseSensitive(l[i], "anyOf");
        const cJSON *one = cJSON_GetObjectItemCaseSensitive(l[i], "oneOf");
        const cJSON *alts = any ? any : one;
        if (!alts) continue;
        if (!cJSON_IsArray(alts) || !alts->child) { free(l); sfail(c, TERN_ERR_FORMAT, "anyOf/oneOf must be a non-empty array"); return NULL; }
        if (!any && !oneof_check(c, alts)) { free(l); return NULL; }
        if (cJSON_GetArraySize(alts) > SC_MAX_DISTRIBUTE || c->depth > SC_MAX_DEPTH / 2) {
            free(l);
            sfail(c, TERN_ERR_RANGE, "allOf combined with anyOf/oneOf expands to too many branches");
            return NULL;
        }
        cJSON *restx = new_schema(c);
        cJSON *res = new_schema(c);
        cJSON *arr = cJSON_CreateArray();
        if (!restx || !res || !arr) { cJSON_Delete(arr); free(l); c->ir->oom = true; return NULL; }
        cJSON_AddItemToObject(res, "anyOf", arr);
        for (const cJSON *k = l[i]->child; k; k = k->next)
            if (k->string && k != alts && !(any && one && k == one)) add_ref(restx, k->string, k);
        const cJSON **sub = malloc((n + 1) * sizeof *sub);
        if (!sub) { free(l); c->ir->oom = true; return NULL; }
        for (const cJSON *b = alts->child; b; b = b->next) {
            uint32_t m = 0;
            for (uint32_t j = 0; j < n; j++) sub[m++] = j == i ? restx : l[j];
            sub[m++] = b;
            c->depth++;
            const cJSON *mb = merge_all(c, sub, m);
            c->depth--;
            if (!mb) { free(sub); free(l); return NULL; }
            cJSON_AddItemReferenceToArray(arr, (cJSON *)mb);
        }
        free(sub);
        free(l);
        return res;
    }
    cJSON *o = new_schema(c);
    if (!o) { free(l); return NULL; }
    /* type */
    int t = T_ALL;
    bool any_type = false;
    for (uint32_t i = 0; i < n; i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(l[i], "type");
        if (!ty) continue;
        int m = parse_types(c, ty);
        if (m < 0) { free(l); return NULL; }
        t &= m;
        any_type = true;
    }
    if (any_type && type_bits_to_json(o, t) < 0) { free(l); c->ir->oom = true; return NULL; }
    /* enum / const: intersection */
    cJSON *vals = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(l[i], "enum");
        const cJSON *cn = cJSON_GetObjectItemCaseSensitive(l[i], "const");
        if (!en && !cn) continue;
        cJSON *cur = cJSON_CreateArray();
        if (!cur) { free(l); c->ir->oom = true; return NULL; }
        if (cn) cJSON_AddItemReferenceToArray(cur, (cJSON *)cn);
        else if (cJSON_IsArray(en))
            for (const cJSON *e = en->child; e; e = e->next) cJSON_AddItemReferenceToArray(cur, (cJSON *)e);
        if (!vals) {
            vals = cur;
        } else {
            cJSON *keep = cJSON_CreateArray();
            for (const cJSON *a = vals->child; a && keep; a = a->next) {
                bool in = false;
                for (const cJSON *b = cur->child; b && !in; b = b->next) in = cJSON_Compare(a, b, true);
                if (in) cJSON_AddItemReferenceToArray(keep, a->type & cJSON_IsReference ? a->child : (cJSON *)a);
            }
            cJSON_Delete(vals);
            cJSON_Delete(cur);
            vals = keep;
            if (!vals) { free(l); c->ir->oom = true; return NULL; }
        }
    }
    if (vals) cJSON_AddItemToObject(o, "enum", vals);
    /* numeric and size bounds */
    static const char *const maxes[] = {"minLength", "minItems", "minProperties", NULL};
    static const char *const mins[] = {"maxLength", "maxItems", "maxProperties", NULL};
    for (int w = 0; w < 2; w++)
        for (const char *const *k = w ? mins : maxes; *k; k++) {
            double best = w ? INFINITY : -1;
            for (uint32_t i = 0; i < n; i++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(l[i], *k);
                if (!v || !cJSON_IsNumber(v)) continue;
                if (w ? v->valuedouble < best : v->valuedouble > best) best = v->valuedouble;
            }
            if ((w && best != INFINITY) || (!w && best >= 0)) cJSON_AddNumberToObject(o, *k, best);
        }
    for (int lower = 1; lower >= 0; lower--) {
        double best = lower ? -INFINITY : INFINITY;
        bool best_ex = false, have = false;
        for (uint32_t i = 0; i < n; i++) {
            bool ex, pr;
            double v = eff_bound(l[i], lower, &ex, &pr);
            if (!pr) continue;
            if (!have || (lower ? (v > best || (v == best && ex)) : (v < best || (v == best && ex)))) { best = v; best_ex = ex; }
            have = true;
        }
        if (have) cJSON_AddNumberToObject(o, best_ex ? (lower ? "exclusiveMinimum" : "exclusiveMaximum") : (lower ? "minimum" : "maximum"), best);
    }
    /* keywords that must agree */
    static const char *const same[] = {"multipleOf", "pattern", "format", "prefixItems", NULL};
    for (const char *const *k = same; *k; k++) {
        const cJSON *first = NULL;
        for (uint32_t i = 0; i < n; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(l[i], *k);
            if (!v) continue;
            if (!first) { first = v; continue; }
            if (!cJSON_Compare(first, v, true)) {
                if (!unsupported(c, "allOf: two different \"%s\" values cannot be combined", *k)) { free(l); return NULL; }
            }
        }
        if (first) add_ref(o, *k, first);
    }
    bool uniq = false;
    for (uint32_t i = 0; i < n; i++) uniq |= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l[i], "uniqueItems"));
    if (uniq) cJSON_AddTrueToObject(o, "uniqueItems");
    /* items / additionalItems: all of them */
    static const char *const lists[] = {"items", "additionalItems", NULL};
    const cJSON **tmp = malloc((n + 1) * sizeof *tmp);
    if (!tmp) { free(l); c->ir->oom = true; return NULL; }
    for (const char *const *k = lists; *k; k++) {
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(l[i], *k);
            if (v) tmp[m++] = v;
        }
        if (m) {
            const cJSON *x = all_of(c, tmp, m);
            if (!x) { free(tmp); free(l); return NULL; }
            add_ref(o, *k, x);
        }
    }
    /* properties: every name of any input; each input constrains it through its properties or
     * its additionalProperties */
    cJSON *props = cJSON_CreateObject();
    if (!props) { free(tmp); free(l); c->ir->oom = true; return NULL; }
    bool any_props = false;
    for (uint32_t i = 0; i < n; i++) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(l[i], "properties");
        for (const cJSON *p = ps ? ps->child : NULL; p; p = p->next) {
            if (!p->string || cJSON_GetObjectItemCaseSensitive(props, p->string)) continue;
            uint32_t m = 0;
            for (uint32_t j = 0; j < n; j++) {
                const cJSON *pj = cJSON_GetObjectItemCaseSensitive(l[j], "properties");
                const cJSON *v = pj ? cJSON_GetObjectItemCaseSensitive(pj, p->string) : NULL;
                if (!v) v = cJSON_GetObjectItemCaseSensitive(l[j], "additionalProperties");
                if (v && !cJSON_IsTrue(v)) tmp[m++] = v;
            }
            const cJSON *x = m ? all_of(c, tmp, m) : NULL;
            if (m && !x) { cJSON_Delete(props); free(tmp); free(l); return NULL; }
            if (x) cJSON_AddItemReferenceToObject(props, p->string, (cJSON *)x);
            else cJSON_AddItemToObject(props, p->string, cJSON_CreateObject());
            any_props = true;
        }
    }
    if (any_props) cJSON_AddItemToObject(o, "properties", props);
    else cJSON_Delete(props);
    /* additionalProperties: all of them (false wins) */
    {
        uint32_t m = 0;
        bool fals = false;
        for (uint32_t i = 0; i < n; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(l[i], "additionalProperties");
            if (!v || cJSON_IsTrue(v)) continue;
            if (cJSON_IsFalse(v)) fals = true;
            else tmp[m++] = v;
        }
        if (fals) cJSON_AddFalseToObject(o, "additionalProperties");
        else if (m) {
            const cJSON *x = all_of(c, tmp, m);
            if (!x) { free(tmp); free(l); return NULL; }
            add_ref(o, "additionalProperties", x);
        }
    }
    /* required: union */
    cJSON *req = cJSON_CreateArray();
    bool any_req = false;
    for (uint32_t i = 0; i < n && req; i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(l[i], "required");
        for (const cJSON *e = r ? r->child : NULL; e; e = e->next) {
            if (!cJSON_IsString(e)) continue;
            bool dup = false;
            for (const cJSON *q = req->child; q && !dup; q = q->next) dup = !strcmp(q->valuestring, e->valuestring);
            if (!dup) cJSON_AddItemToArray(req, cJSON_CreateString(e->valuestring));
            any_req = true;
        }
    }
    if (any_req) cJSON_AddItemToObject(o, "required", req);
    else cJSON_Delete(req);
    free(tmp);
    free(l);
    out = o;
    return out;
}

/* ---------------------------------------------------------------- oneOf */

static int schema_types(struct sc *c, const cJSON *s, int depth)
{
    if (depth > 16) return T_ALL;
    if (cJSON_IsFalse(s)) return 0;
    if (!cJSON_IsObject(s)) return T_ALL;
    s = deref(c, s);
    if (!s || !cJSON_IsObject(s)) return T_ALL;
    int t = parse_types(c, cJSON_GetObjectItemCaseSensitive(s, "type"));
    if (t < 0) t = T_ALL;
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cn) t &= value_types(cn) | (value_types(cn) == T_INT ? T_INT : 0);
    else if (en && cJSON_IsArray(en)) {
        int vt = 0;
        for (const cJSON *e = en->child; e; e = e->next) vt |= value_types(e);
        t &= vt;
    }
    static const char *const combos[] = {"anyOf", "oneOf"};
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(s, combos[k]);
        if (!a || !cJSON_IsArray(a)) continue;
        int u = 0;
        for (const cJSON *b = a->child; b; b = b->next) u |= schema_types(c, b, depth + 1);
        t &= u;
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    for (const cJSON *b = all && cJSON_IsArray(all) ? all->child : NULL; b; b = b->next) t &= schema_types(c, b, depth + 1);
    return t;
}

/* The const/enum values of property p of s, as an array (caller deletes), or NULL. */
static cJSON *prop_values(struct sc *c, const cJSON *s, const char *p)
{
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *v = ps ? cJSON_GetObjectItemCaseSensitive(ps, p) : NULL;
    if (!v) return NULL;
    v = deref(c, v);
    if (!v || !cJSON_IsObject(v)) return NULL;
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(v, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(v, "enum");
    if (!cn && !(en && cJSON_IsArray(en))) return NULL;
    cJSON *a = cJSON_CreateArray();
    if (!a) return NULL;
    if (cn) cJSON_AddItemReferenceToArray(a, (cJSON *)cn);
    else for (const cJSON *e = en->child; e; e = e->next) cJSON_AddItemReferenceToArray(a, (cJSON *)e);
    return a;
}

static bool is_required(const cJSON *s, const char *p)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "required");
    for (const cJSON *e = r ? r->child : NULL; e; e = e->next)
        if (cJSON_IsString(e) && !strcmp(e->valuestring, p)) return true;
    return false;
}

static bool forbids(const cJSON *s, const char *p)
{
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *v = ps ? cJSON_GetObjectItemCaseSensitive(ps, p) : NULL;
    if (v) return cJSON_IsFalse(v);
    return ap && cJSON_IsFalse(ap);
}

/* Can no object satisfy both a and b? (a discriminating required property) */
static bool objects_disjoint(struct sc *c, const cJSON *a, const cJSON *b)
{
    for (int w = 0; w < 2; w++) {
        const cJSON *x = w ? b : a, *y = w ? a : b;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(x, "required");
        for (const cJSON *e = r ? r->child : NULL; e; e = e->next) {
            if (!cJSON_IsString(e)) continue;
            const char *p = e->valuestring;
            if (forbids(y, p)) return true;
            if (!is_required(y, p)) continue;
            cJSON *vx = prop_values(c, x, p), *vy = prop_values(c, y, p);
            bool disj = vx && vy;
            for (const cJSON *i = vx ? vx->child : NULL; i && disj; i = i->next)
                for (const cJSON *j = vy->child; j && disj; j = j->next)
                    if (cJSON_Compare(i->type & cJSON_IsReference ? i->child : i, j->type & cJSON_IsReference ? j->child : j, true)) disj = false;
            cJSON_Delete(vx);
            cJSON_Delete(vy);
            if (disj) return true;
        }
    }
    return false;
}

static bool values_disjoint(struct sc *c, const cJSON *a, const cJSON *b)
{
    const cJSON *ea = cJSON_GetObjectItemCaseSensitive(a, "enum"), *ca = cJSON_GetObjectItemCaseSensitive(a, "const");
    const cJSON *eb = cJSON_GetObjectItemCaseSensitive(b, "enum"), *cb = cJSON_GetObjectItemCaseSensitive(b, "const");
    (void)c;
    if (!(ea || ca) || !(eb || cb)) return false;
    const cJSON *la = ca ? ca : ea->child, *lb = cb ? cb : eb->child;
    for (const cJSON *x = la; x; x = ca ? NULL : x->next)
        for (const cJSON *y = lb; y; y = cb ? NULL : y->next)
            if (cJSON_Compare(x, y, true)) return false;
    return true;
}

static bool oneof_check(struct sc *c, const cJSON *arr)
{
    int i = 0;
    for (const cJSON *a = arr->child; a; a = a->next, i++) {
        int j = i + 1;
        for (const cJSON *b = a->next; b; b = b->next, j++) {
            int ta = schema_types(c, a, 0), tb = schema_types(c, b, 0);
            if (c->failed) return false;
            int both = ta & tb;
            if (!both) continue;
            const cJSON *da = deref(c, a), *db = deref(c, b);
            if (c->failed) return false;
            if (cJSON_IsObject(da) && cJSON_IsObject(db)) {
                if (values_disjoint(c, da, db)) continue;
                if (both == T_OBJ && objects_disjoint(c, da, db)) continue;
            }
            if (!unsupported(c, "oneOf: branches %d and %d may both match, and tern cannot enforce that exactly one does "
                                "(make them disjoint by type or by a required const property, or use anyOf)", i, j))
                return false;
            return true; /* lenient: treated as anyOf (warned once) */
        }
    }
    return true;
}

/* ---------------------------------------------------------------- the schema */

static uint32_t alternatives(struct sc *c, const cJSON *arr, const char *kw)
{
    if (!cJSON_IsArray(arr) || !arr->child) return sfail(c, TERN_ERR_FORMAT, "%s must be a non-empty array", kw);
    uint32_t n = 0, cap = 8;
    uint32_t *xs = malloc(cap * sizeof *xs);
    if (!xs) { c->ir->oom = true; return GRAM_NONE; }
    int i = 0;
    for (const cJSON *b = arr->child; b; b = b->next, i++) {
        size_t old = path_push(c, ".%s[%d]", kw, i);
        uint32_t x = sch(c, b);
        path_pop(c, old);
        if (x == GRAM_NONE) { free(xs); return GRAM_NONE; }
        if (n == cap) {
            cap *= 2;
            uint32_t *nx = realloc(xs, cap * sizeof *nx);
            if (!nx) { free(xs); c->ir->oom = true; return GRAM_NONE; }
            xs = nx;
        }
        xs[n++] = x;
    }
    uint32_t x = gir_alt(c->ir, xs, n);
    free(xs);
    return x;
}

/* s is an object with supported keywords, no $ref/allOf/anyOf/oneOf left to combine. */
static uint32_t sch_inner(struct sc *c, const cJSON *s)
{
    if (cJSON_IsTrue(s)) return rule_value(c);
    if (cJSON_IsFalse(s)) return gir_nothing(c->ir);
    if (cJSON_GetObjectItemCaseSensitive(s, "enum") || cJSON_GetObjectItemCaseSensitive(s, "const")) return enum_expr(c, s);
    int t = parse_types(c, cJSON_GetObjectItemCaseSensitive(s, "type"));
    if (t < 0) return GRAM_NONE;
    uint32_t xs[8];
    uint32_t n = 0;
    if (t & T_NULL) xs[n++] = gir_str(c->ir, "null");
    if (t & T_BOOL) xs[n++] = gir_alt2(c->ir, gir_str(c->ir, "true"), gir_str(c->ir, "false"));
    if (t & T_FRAC) xs[n++] = number_expr(c, s, false);
    else if (t & T_INT) xs[n++] = number_expr(c, s, true);
    if (t & T_STR) xs[n++] = string_expr(c, s);
    if (t & T_ARR) xs[n++] = array_expr(c, s);
    if (t & T_OBJ) xs[n++] = object_expr(c, s);
    if (c->failed) return GRAM_NONE;
    return gir_alt(c->ir, xs, n);
}

static uint32_t sch(struct sc *c, const cJSON *s)
{
    if (c->failed) return GRAM_NONE;
    if (++c->depth > SC_MAX_DEPTH) {
        c->depth--;
        return sfail(c, TERN_ERR_RANGE, "schema nested deeper than %d", SC_MAX_DEPTH);
    }
    uint32_t x = GRAM_NONE;
    if (cJSON_IsBool(s)) { x = sch_inner(c, s); goto out; }
    if (!cJSON_IsObject(s)) { x = sfail(c, TERN_ERR_FORMAT, "a schema must be an object or a boolean"); goto out; }
    if (!check_keywords(c, s)) goto out;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    static const char *const ref_ok[] = {"$ref", NULL};
    if (ref && !all && !has_constraints(s, ref_ok)) {
        if (!cJSON_IsString(ref)) { x = sfail(c, TERN_ERR_FORMAT, "$ref must be a string"); goto out; }
        const cJSON *t = resolve_ref(c, ref->valuestring);
        if (t) x = ref_rule(c, t, ref->valuestring);
        goto out;
    }
    static const char *const alt_ok[] = {"anyOf", "oneOf", NULL};
    bool combine = ref || all || (any && one) || ((any || one) && has_constraints(s, alt_ok));
    if (combine) {
        const cJSON *m = merge_all(c, &s, 1);
        if (m)
            x = cJSON_IsObject(m) && (cJSON_GetObjectItemCaseSensitive(m, "anyOf") || cJSON_GetObjectItemCaseSensitive(m, "oneOf"))
                    ? sch(c, m) : sch_inner(c, m);
        goto out;
    }
    if (any) { x = alternatives(c, any, "anyOf"); goto out; }
    if (one) {
        if (!cJSON_IsArray(one) || !one->child) { x = sfail(c, TERN_ERR_FORMAT, "oneOf must be a non-empty array"); goto out; }
        if (!oneof_check(c, one)) goto out;
        x = alternatives(c, one, "oneOf");
        goto out;
    }
    x = sch_inner(c, s);
out:
    c->depth--;
    return c->failed ? GRAM_NONE : x;
}

/* ---------------------------------------------------------------- entry points */

tern_status gram_schema_json_to_ir(const cJSON *schema, const char *path, const struct gram_schema_opts *o,
                                   struct gram_ir *ir, uint32_t *root, char **warn)
{
    struct sc c;
    memset(&c, 0, sizeof c);
    c.ir = ir;
    c.o = o;
    c.root = schema;
    c.warn = warn;
    c.r_string = c.r_number = c.r_integer = c.r_value = c.r_strkey = c.r_char = GRAM_NONE;
    c.garbage = cJSON_CreateArray();
    if (!c.garbage) return tern_fail(TERN_ERR_NOMEM, "json schema: out of memory");
    path_push(&c, "%s", path ? path : "$");
    uint32_t x = sch(&c, schema);
    tern_status st = gir_status(ir, "json schema");
    if (!st && (x == GRAM_NONE || c.failed)) st = c.failed ? c.status : tern_fail(TERN_ERR_FORMAT, "json schema: invalid");
    if (!st) {
        *root = gir_rule_new(ir, "root");
        gir_rule_set(ir, *root, x);
        st = gir_status(ir, "json schema");
    }
    free(c.memo);
    cJSON_Delete(c.garbage);
    return st;
}

tern_status gram_schema_to_ir(const char *text, size_t len, const struct gram_schema_opts *o,
                              struct gram_ir *ir, uint32_t *root, char **warn)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (text[i] == '\n') { line++; col = 1; }
            else if (((unsigned char)text[i] & 0xC0) != 0x80) col++;
        }
        return tern_fail(TERN_ERR_FORMAT, "json schema: line %d:%d: malformed JSON", line, col);
    }
    size_t off = (size_t)(end - text);
    while (off < len && (text[off] == ' ' || text[off] == '\t' || text[off] == '\n' || text[off] == '\r')) off++;
    if (off < len) {
        cJSON_Delete(j);
        int line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (text[i] == '\n') { line++; col = 1; }
            else if (((unsigned char)text[i] & 0xC0) != 0x80) col++;
        }
        return tern_fail(TERN_ERR_FORMAT, "json schema: line %d:%d: text after the schema", line, col);
    }
    tern_status st = gram_schema_json_to_ir(j, "$", o, ir, root, warn);
    cJSON_Delete(j);
    return st;
}
