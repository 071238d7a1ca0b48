/* chat_json.c — the JSON text callers pass to the chat API (messages, tools, extra variables),
 * read straight into template values.
 *
 * Read tmpl.h for the values. The result is what Python's json.loads gives a Hugging Face
 * template: integers stay ints and "1.0" stays a float (cJSON keeps only doubles, so a
 * template printing a number could not tell them apart), object keys keep their order, and a
 * repeated key keeps its first place and its last value. Integers beyond int64 are refused
 * (Python's are unbounded; see tmpl_eval.c on numbers). The reader is strict RFC 8259 JSON:
 * UTF-8 only, no NaN/Infinity, no control characters in strings, no lone surrogates.
 *
 * Errors name the document, the byte offset with line:col, and the JSON path of the innermost
 * container being read: "messages: invalid JSON at byte 41 (line 2:17) in messages[1]:
 * expected ',' or '}' after an object member". Nesting is bounded (CHAT_JSON_MAX_DEPTH) so the
 * recursion cannot exhaust the stack; everything lives in the caller's arena. */
#include "chat/chat.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/error.h"
#include "util/utf8.h"

struct seg {
    const char *key; /* NULL: array index */
    size_t key_n;
    size_t index;    /* NO_SEG: between members (an error names the container itself) */
};
#define NO_SEG SIZE_MAX

struct jp {
    struct tmpl_arena *a;
    const char *s;
    size_t n, i;
    const char *what;
    int depth;
    struct seg path[CHAT_JSON_MAX_DEPTH + 1];
    tern_status st;
};

static void path_str(const struct jp *p, char *out, size_t cap)
{
    /* messages_json may be a request body {"messages": [...]}: its paths start at the key */
    bool body = !strcmp(p->what, "messages") && p->depth > 0 && p->path[0].key;
    size_t k = (size_t)snprintf(out, cap, "%s", body ? "" : p->what);
    for (int d = 0; d < p->depth && k < cap; d++) {
        const struct seg *g = &p->path[d];
        if (!g->key && g->index == NO_SEG) continue;
        if (!g->key) {
            k += (size_t)snprintf(out + k, cap - k, "[%zu]", g->index);
            continue;
        }
        bool ident = g->key_n > 0 && g->key_n <= 40;
        for (size_t j = 0; j < g->key_n && ident; j++) {
            char c = g->key[j];
            ident = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (j && c >= '0' && c <= '9');
        }
        if (ident) k += (size_t)snprintf(out + k, cap - k, "%s%.*s", k ? "." : "", (int)g->key_n, g->key);
        else k += (size_t)snprintf(out + k, cap - k, "[\"%.*s%s\"]", (int)util_utf8_prefix(g->key, g->key_n, 40),
                                   g->key, g->key_n > 40 ? "..." : "");
    }
    /* a path longer than out was cut: not inside a character (the message must stay UTF-8) */
    out[util_utf8_whole(out, strlen(out))] = 0;
}

__attribute__((format(printf, 3, 4))) static bool fail(struct jp *p, size_t at, const char *fmt, ...)
{
    char msg[256], where[320] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = 1, col = 1;
    for (size_t k = 0; k < at && k < p->n; k++) {
        if (p->s[k] == '\n') {
            line++;
            col = 1;
        } else col++;
    }
    if (p->depth > 0) {
        char path[300];
        path_str(p, path, sizeof path);
        snprintf(where, sizeof where, " in %s", path);
    }
    p->st = tern_fail(TERN_ERR_FORMAT, "%s: invalid JSON at byte %zu (line %d:%d)%s: %s", p->what, at,
                      line, col, where, msg);
    return false;
}

static bool oom(struct jp *p)
{
    p->st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory reading the JSON text (%zu bytes)", p->what, p->n);
    return false;
}

static void skip_ws(struct jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static bool parse_value(struct jp *p, struct tval *out);

static int hex4(const char *s)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 (overlong forms, surrogates and
 * code points past U+10FFFF are not well-formed). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* bytes copied as they are: printable ASCII except the backslash */
static const bool plain[256] = {
    [0x20] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, [0x5d] = 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

/* p->s[p->i] is the opening quote. The decoded text never outgrows the source. */
static bool parse_string(struct jp *p, const char **out, size_t *out_n)
{
    size_t start = p->i++;
    size_t end = p->i;
    for (;;) { /* the closing quote: the next '"' not escaped by an odd run of backslashes */
        const char *q = memchr(p->s + end, '"', p->n - end);
        if (!q) return fail(p, start, "unterminated string");
        size_t qi = (size_t)(q - p->s), bs = 0;
        while (qi - bs > p->i && p->s[qi - bs - 1] == '\\') bs++;
        end = qi;
        if (bs % 2 == 0) break;
        end++;
    }
    char *o = tmpl_arena_alloc(p->a, end - p->i + 1);
    if (!o) return oom(p);
    size_t k = 0;
    while (p->i < end) {
        /* plain ASCII runs (most of any text) are copied in one go */
        size_t run = p->i;
        while (run < end && plain[(unsigned char)p->s[run]]) run++;
        if (run > p->i) {
            memcpy(o + k, p->s + p->i, run - p->i);
            k += run - p->i;
            p->i = run;
            continue;
        }
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) return fail(p, p->i, "control character 0x%02x in a string (escape it)", c);
        if (c >= 0x80) {
            size_t l = utf8_len((const unsigned char *)p->s + p->i, end - p->i);
            if (!l) return fail(p, p->i, "invalid UTF-8 in a string");
            memcpy(o + k, p->s + p->i, l);
            k += l;
            p->i += l;
            continue;
        }
        if (c != '\\') {
            o[k++] = (char)c;
            p->i++;
            continue;
        }
        size_t esc = p->i;
        char e = p->s[p->i + 1];
        p->i += 2;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            int u = p->i + 4 <= end ? hex4(p->s + p->i) : -1;
            if (u < 0) return fail(p, esc, "\\u needs four hex digits");
            p->i += 4;
            uint32_t cp = (uint32_t)u;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate must pair with a low one */
                int lo = p->i + 6 <= end && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u' ? hex4(p->s + p->i + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(p, esc, "lone surrogate \\u%04x (UTF-8 cannot hold it)", u);
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                p->i += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(p, esc, "lone surrogate \\u%04x (UTF-8 cannot hold it)", u);
            k += (size_t)util_utf8_encode(cp, o + k);
            break;
        }
        default: return fail(p, esc, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
        }
    }
    p->i = end + 1;
    o[k] = '\0';
    *out = o;
    *out_n = k;
    return true;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool parse_number(struct jp *p, struct tval *out)
{
    size_t start = p->i, i = p->i;
    bool neg = false, flt = false;
    if (i < p->n && p->s[i] == '-') {
        neg = true;
        i++;
    }
    if (i >= p->n || !is_digit(p->s[i])) return fail(p, start, "invalid number");
    if (p->s[i] == '0') i++;
    else
        while (i < p->n && is_digit(p->s[i])) i++;
    if (i < p->n && p->s[i] == '.') {
        flt = true;
        i++;
        if (i >= p->n || !is_digit(p->s[i])) return fail(p, start, "invalid number (digits must follow '.')");
        while (i < p->n && is_digit(p->s[i])) i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        flt = true;
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->n || !is_digit(p->s[i])) return fail(p, start, "invalid number (digits must follow the exponent)");
        while (i < p->n && is_digit(p->s[i])) i++;
    }
    p->i = i;
    if (!flt) {
        uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (size_t k = start + neg; k < i; k++) {
            uint64_t d = (uint64_t)(p->s[k] - '0');
            if (v > (lim - d) / 10)
                return fail(p, start, "integer %.*s%s does not fit in 64 bits", (int)(i - start > 30 ? 30 : i - start),
                            p->s + start, i - start > 30 ? "..." : "");
            v = v * 10 + d;
        }
        *out = tv_int(neg ? (int64_t)(0 - v) : (int64_t)v);
        return true;
    }
    char *num = tmpl_arena_alloc(p->a, i - start + 1); /* strtod needs a terminated copy */
    if (!num) return oom(p);
    memcpy(num, p->s + start, i - start);
    *out = tv_float(strtod(num, NULL)); /* 1e400 is inf, as json.loads gives */
    return true;
}

/* growable array of values in the arena */
struct vec {
    struct tval *v;
    size_t n, cap;
};

static bool vec_push(struct jp *p, struct vec *v, struct tval x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        struct tval *nv = tmpl_arena_alloc(p->a, cap * sizeof *nv);
        if (!nv) return oom(p);
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    TERN_ASSERT(v->n < v->cap);
    v->v[v->n++] = x;
    return true;
}

static int key_order(const void *pa, const void *pb, void *ctx)
{
    const struct tval *k = ctx;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    size_t n = k[a].u.s.n < k[b].u.s.n ? k[a].u.s.n : k[b].u.s.n;
    int c = memcmp(k[a].u.s.p, k[b].u.s.p, n);
    if (c) return c;
    if (k[a].u.s.n != k[b].u.s.n) return k[a].u.s.n < k[b].u.s.n ? -1 : 1;
    return a < b ? -1 : a > b; /* equal keys: in document order */
}

/* A repeated key: the first occurrence keeps its place and takes the last value (a Python
 * dict built from the pairs). Sorting the key indices keeps big objects O(n log n). */
static bool dedupe(struct jp *p, struct vec *keys, struct vec *vals)
{
    size_t n = keys->n;
    if (n < 2) return true;
    if (n <= 16) { /* the common small object: pairwise is cheaper than sorting */
        bool any = false;
        for (size_t i = 1; i < n && !any; i++)
            for (size_t j = 0; j < i && !any; j++)
                any = keys->v[i].u.s.n == keys->v[j].u.s.n &&
                      !memcmp(keys->v[i].u.s.p, keys->v[j].u.s.p, keys->v[i].u.s.n);
        if (!any) return true;
    }
    bool *gone = tmpl_arena_alloc(p->a, n * sizeof *gone);
    size_t *ord = tmpl_arena_alloc(p->a, n * sizeof *ord);
    if (!gone || !ord) return oom(p);
    for (size_t i = 0; i < n; i++) ord[i] = i;
    qsort_r(ord, n, sizeof *ord, key_order, keys->v);
    bool any = false;
    for (size_t i = 0; i + 1 < n;) {
        size_t j = i + 1;
        while (j < n && tmpl_equal(keys->v[ord[i]], keys->v[ord[j]])) j++;
        if (j > i + 1) {
            vals->v[ord[i]] = vals->v[ord[j - 1]];
            for (size_t k = i + 1; k < j; k++) gone[ord[k]] = true;
            any = true;
        }
        i = j;
    }
    if (!any) return true;
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (!gone[i]) {
            keys->v[w] = keys->v[i];
            vals->v[w++] = vals->v[i];
        }
    keys->n = vals->n = w;
    return true;
}

static bool parse_container(struct jp *p, struct tval *out, bool object)
{
    size_t open = p->i++;
    if (p->depth >= CHAT_JSON_MAX_DEPTH) return fail(p, open, "nested deeper than %d levels", CHAT_JSON_MAX_DEPTH);
    struct seg *g = &p->path[p->depth++];
    memset(g, 0, sizeof *g);
    size_t count = 0;
    struct vec keys = {0}, vals = {0};
    skip_ws(p);
    char close = object ? '}' : ']';
    if (p->i < p->n && p->s[p->i] == close) p->i++;
    else
        for (;;) {
            skip_ws(p);
            g->key = NULL;
            g->index = object ? NO_SEG : count;
            if (object) {
                if (p->i >= p->n || p->s[p->i] != '"')
                    return fail(p, p->i, p->i >= p->n ? "unexpected end of the JSON text" : "expected a string key");
                const char *k;
                size_t kn;
                if (!parse_string(p, &k, &kn) || !vec_push(p, &keys, tv_str(k, kn))) return false;
                g->key = k;
                g->key_n = kn;
                skip_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') return fail(p, p->i, "expected ':' after the key");
                p->i++;
            }
            struct tval v;
            if (!parse_value(p, &v) || !vec_push(p, &vals, v)) return false;
            count++;
            g->key = NULL;
            g->index = NO_SEG;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == close) {
                p->i++;
                break;
            }
            return fail(p, p->i, p->i >= p->n ? "unexpected end of the JSON text"
                                 : object ? "expected ',' or '}' after an object member"
                                          : "expected ',' or ']' after an array element");
        }
    TERN_ASSERT(p->depth >= 1 && p->depth <= CHAT_JSON_MAX_DEPTH, "a container closes the level it opened");
    p->depth--;
    /* an object has a value per key; an array counted each element */
    TERN_ASSERT(object ? keys.n == vals.n && vals.n == count : vals.n == count);
    struct tval r = {0};
    if (object) {
        if (!dedupe(p, &keys, &vals)) return false;
        TERN_ASSERT(keys.n == vals.n && keys.n <= count, "deduplication drops keys with their values");
        struct tdict *d = tmpl_arena_alloc(p->a, sizeof *d);
        if (!d) return oom(p);
        d->n = d->cap = keys.n;
        d->k = keys.v;
        d->v = vals.v;
        r.kind = TV_DICT;
        r.u.d = d;
    } else {
        struct tlist *l = tmpl_arena_alloc(p->a, sizeof *l);
        if (!l) return oom(p);
        l->n = l->cap = vals.n;
        l->v = vals.v;
        r.kind = TV_LIST;
        r.u.l = l;
    }
    if (!r.u.l->v && !(r.u.l->v = tmpl_arena_alloc(p->a, sizeof(struct tval)))) return oom(p); /* never NULL */
    *out = r;
    return true;
}

static bool literal(struct jp *p, const char *word, struct tval v, struct tval *out)
{
    size_t n = strlen(word);
    if (p->n - p->i < n || memcmp(p->s + p->i, word, n)) return fail(p, p->i, "expected a value");
    p->i += n;
    *out = v;
    return true;
}

static bool parse_value(struct jp *p, struct tval *out)
{
    skip_ws(p);
    if (p->i >= p->n) return fail(p, p->i, "unexpected end of the JSON text");
    switch (p->s[p->i]) {
    case '{': return parse_container(p, out, true);
    case '[': return parse_container(p, out, false);
    case '"': {
        const char *s;
        size_t n;
        if (!parse_string(p, &s, &n)) return false;
        *out = tv_str(s, n);
        return true;
    }
    case 't': return literal(p, "true", tv_bool(true), out);
    case 'f': return literal(p, "false", tv_bool(false), out);
    case 'n': return literal(p, "null", tv_none(), out);
    default:
        if (p->s[p->i] == '-' || is_digit(p->s[p->i])) return parse_number(p, out);
        return fail(p, p->i, "expected a value");
    }
}

tern_status chat_json_parse(struct tmpl_arena *a, const char *what, const char *text, size_t len,
                            struct tval *out)
{
    struct jp *p = malloc(sizeof *p); /* the path stack is too big for small thread stacks */
    if (!p) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory reading the JSON text", what);
    memset(p, 0, offsetof(struct jp, path));
    p->a = a;
    p->s = text;
    p->n = len;
    p->what = what;
    tern_status st = TERN_OK;
    if (!parse_value(p, out)) st = p->st;
    else {
        skip_ws(p);
        if (p->i < p->n) {
            fail(p, p->i, "unexpected data after the JSON value");
            st = p->st;
        }
    }
    free(p);
    return st;
}
