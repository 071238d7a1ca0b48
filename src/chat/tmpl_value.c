/* tmpl_value.c — template values: the arena they live in, Python-compatible printing (str,
 * repr, float repr), json.dumps-compatible tojson, truthiness and equality.
 *
 * Read tmpl.h first. Everything here is pure (no evaluator state): helpers report problems by
 * return value and the evaluator turns them into template errors. */
#include "chat/tmpl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

/* ------------------------------------------------------------------ arena */

struct tmpl_chunk {
    struct tmpl_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void tmpl_arena_init(struct tmpl_arena *a, size_t limit)
{
    a->head = NULL;
    a->total = 0;
    a->limit = limit;
}

void tmpl_arena_free(struct tmpl_arena *a)
{
    struct tmpl_chunk *c = a->head;
    while (c) {
        struct tmpl_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

void *tmpl_arena_alloc(struct tmpl_arena *a, size_t n)
{
    if (n > a->limit) return NULL; /* also keeps the rounding below from wrapping */
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    struct tmpl_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = 64 * 1024;
        if (c && c->cap < (8u << 20)) cap = c->cap * 2; /* grow chunk sizes geometrically */
        if (cap < n) cap = n;
        if (a->total + cap > a->limit) {
            if (a->total + n > a->limit) return NULL;
            cap = n;
        }
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    /* 16-byte granules inside the chunk: values and pointers stored in the arena are aligned */
    TERN_ASSERT(n % 16 == 0 && c->used % 16 == 0 && c->cap - c->used >= n && a->total <= a->limit);
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

/* ------------------------------------------------------------------ buffers */

void tmpl_buf_init(struct tmpl_buf *b, struct tmpl_arena *a)
{
    b->p = NULL;
    b->n = b->cap = 0;
    b->a = a;
    b->oom = false;
    b->marks = NULL;
}

void tmpl_buf_add(struct tmpl_buf *b, const char *p, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = tmpl_arena_alloc(b->a, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    TERN_ASSERT(b->p && b->n + n < b->cap, "room for the bytes and the NUL");
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void tmpl_buf_adds(struct tmpl_buf *b, const char *s) { tmpl_buf_add(b, s, strlen(s)); }
void tmpl_buf_addc(struct tmpl_buf *b, char c) { tmpl_buf_add(b, &c, 1); }

/* ------------------------------------------------------------------ meter */

_Thread_local struct tmpl_meter tmpl_meter;

/* ------------------------------------------------------------------ UTF-8 */

/* Strings are UTF-8, but a template literal can hold any bytes. A character starts at every
 * byte that is not a continuation byte (10xxxxxx), and at byte 0 whatever it is, so stray
 * continuation bytes at the start form one character: count, offset and the splitting in
 * tmpl_ev_list_of all use this one rule (they must agree, or a split overruns its list). */
static bool char_start(const char *p, size_t i) { return i == 0 || ((unsigned char)p[i] & 0xC0) != 0x80; }

size_t tmpl_utf8_count(const char *p, size_t n)
{
    tmpl_meter.work += n / TMPL_WORK_BYTES;
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += char_start(p, i);
    return c;
}

size_t tmpl_utf8_offset(const char *p, size_t n, int64_t ci)
{
    if (ci <= 0) return 0;
    tmpl_meter.work += n / TMPL_WORK_BYTES;
    int64_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (char_start(p, i) && k++ == ci) return i;
    TERN_ASSERT(k <= ci, "an offset inside the string was returned above");
    return n;
}

bool tmpl_is_space_cp(int32_t cp)
{
    /* Python's str.isspace() set. */
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f)) return true;
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* ------------------------------------------------------------------ printing */

const char *tmpl_type_name(struct tval v)
{
    switch (v.kind) {
    case TV_UNDEF: return "Undefined";
    case TV_NONE: return "NoneType";
    case TV_BOOL: return "bool";
    case TV_INT: return "int";
    case TV_FLOAT: return "float";
    case TV_STR: return "str";
    case TV_LIST: return (v.flags & TVF_GEN) ? "generator" : (v.flags & TVF_TUPLE) ? "tuple" : "list";
    case TV_DICT: return "dict";
    case TV_NS: return "Namespace";
    case TV_MACRO: return "Macro";
    case TV_FUNC: return "function";
    case TV_METHOD: return "builtin_function_or_method";
    case TV_LOOP: return "LoopContext";
    }
    return "object";
}

void tmpl_py_float(struct tmpl_buf *b, double f)
{
    if (isnan(f)) { tmpl_buf_adds(b, "nan"); return; }
    if (isinf(f)) { tmpl_buf_adds(b, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { tmpl_buf_adds(b, signbit(f) ? "-0.0" : "0.0"); return; }
    /* Shortest digits that round-trip (what Python's repr uses), then Python's layout rule:
     * positional when -4 <= exponent < 16, scientific otherwise. */
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char digits[32];
    int nd = 0;
    const char *q = tmp;
    bool neg = false;
    if (*q == '-') { neg = true; q++; }
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    if (neg) tmpl_buf_addc(b, '-');
    if (exp10 >= 16 || exp10 < -4) {
        tmpl_buf_addc(b, digits[0]);
        if (nd > 1) {
            tmpl_buf_addc(b, '.');
            tmpl_buf_add(b, digits + 1, (size_t)nd - 1);
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
        tmpl_buf_adds(b, e);
    } else if (exp10 < 0) {
        tmpl_buf_adds(b, "0.");
        for (int i = 0; i < -exp10 - 1; i++) tmpl_buf_addc(b, '0');
        tmpl_buf_add(b, digits, (size_t)nd);
    } else {
        for (int i = 0; i <= exp10; i++) tmpl_buf_addc(b, i < nd ? digits[i] : '0');
        tmpl_buf_addc(b, '.');
        if (nd > exp10 + 1) tmpl_buf_add(b, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
        else tmpl_buf_addc(b, '0');
    }
}

static void py_str_repr(struct tmpl_buf *b, const char *p, size_t n)
{
    bool has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    tmpl_buf_addc(b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == (unsigned char)q || c == '\\') {
            tmpl_buf_addc(b, '\\');
            tmpl_buf_addc(b, (char)c);
        } else if (c == '\n') tmpl_buf_adds(b, "\\n");
        else if (c == '\r') tmpl_buf_adds(b, "\\r");
        else if (c == '\t') tmpl_buf_adds(b, "\\t");
        else if (c < 0x20 || c == 0x7f) {
            char e[8];
            snprintf(e, sizeof e, "\\x%02x", c);
            tmpl_buf_adds(b, e);
        } else tmpl_buf_addc(b, (char)c);
    }
    tmpl_buf_addc(b, q);
}

static void py_str(struct tmpl_buf *b, struct tval v, int depth);

static void py_repr(struct tmpl_buf *b, struct tval v, int depth)
{
    switch (v.kind) {
    case TV_STR: py_str_repr(b, v.u.s.p, v.u.s.n); return;
    case TV_UNDEF: tmpl_buf_adds(b, "Undefined"); return;
    default: py_str(b, v, depth); return;
    }
}

void tmpl_py_repr(struct tmpl_buf *b, struct tval v) { py_repr(b, v, 0); }
void tmpl_py_str(struct tmpl_buf *b, struct tval v) { py_str(b, v, 0); }

static void py_str(struct tmpl_buf *b, struct tval v, int depth)
{
    char tmp[32];
    if ((v.kind == TV_LIST || v.kind == TV_DICT || v.kind == TV_NS) && depth >= TMPL_MAX_DATA_DEPTH) {
        tmpl_meter.too_deep = true;
        return;
    }
    tmpl_meter.work++;
    switch (v.kind) {
    case TV_UNDEF: return;
    case TV_NONE: tmpl_buf_adds(b, "None"); return;
    case TV_BOOL: tmpl_buf_adds(b, v.u.b ? "True" : "False"); return;
    case TV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        tmpl_buf_adds(b, tmp);
        return;
    case TV_FLOAT: tmpl_py_float(b, v.u.f); return;
    case TV_STR: tmpl_buf_add(b, v.u.s.p, v.u.s.n); return;
    case TV_LIST: {
        if (v.flags & TVF_GEN) { tmpl_buf_adds(b, "<generator object>"); return; }
        bool tuple = v.flags & TVF_TUPLE;
        tmpl_buf_addc(b, tuple ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n && !b->oom && !tmpl_meter.too_deep; i++) {
            if (i) tmpl_buf_adds(b, ", ");
            py_repr(b, v.u.l->v[i], depth + 1);
        }
        if (tuple && v.u.l->n == 1) tmpl_buf_addc(b, ',');
        tmpl_buf_addc(b, tuple ? ')' : ']');
        return;
    }
    case TV_DICT:
    case TV_NS:
        if (v.kind == TV_NS) tmpl_buf_adds(b, "<Namespace ");
        tmpl_buf_addc(b, '{');
        for (size_t i = 0; i < v.u.d->n && !b->oom && !tmpl_meter.too_deep; i++) {
            if (i) tmpl_buf_adds(b, ", ");
            py_repr(b, v.u.d->k[i], depth + 1);
            tmpl_buf_adds(b, ": ");
            py_repr(b, v.u.d->v[i], depth + 1);
        }
        tmpl_buf_addc(b, '}');
        if (v.kind == TV_NS) tmpl_buf_addc(b, '>');
        return;
    case TV_MACRO: tmpl_buf_adds(b, "<Macro>"); return;
    case TV_FUNC: tmpl_buf_adds(b, "<function>"); return;
    case TV_METHOD: tmpl_buf_adds(b, "<built-in method>"); return;
    case TV_LOOP: tmpl_buf_adds(b, "<LoopContext>"); return;
    }
}

static void json_u16(struct tmpl_buf *b, unsigned u) /* u < 0x10000 */
{
    char e[16];
    snprintf(e, sizeof e, "\\u%04x", u & 0xFFFF);
    tmpl_buf_adds(b, e);
}

/* A JSON string as json.dumps writes it: ensure_ascii escapes everything above 0x7f as \uXXXX
 * (a surrogate pair beyond the BMP); a byte that is not valid UTF-8 (template literals can
 * hold them, Python strings cannot) is escaped as the code point of its value. */
static void json_str(struct tmpl_buf *b, const char *p, size_t n, bool ascii)
{
    tmpl_buf_addc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        const char *esc = NULL;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        /* Python's ESCAPE_ASCII is [^ -~]: DEL (0x7f) is escaped too */
        if (!esc && c >= 0x20 && (!ascii || c < 0x7f)) {
            run++;
            continue;
        }
        tmpl_buf_add(b, p + i - run, run);
        run = 0;
        if (esc) tmpl_buf_adds(b, esc);
        else if (c < 0x80) json_u16(b, c); /* control characters, DEL */
        else {
            size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            uint32_t cp = len == 1 ? c : c & (0x3F >> (len - 1));
            bool ok = len > 1 && i + len <= n;
            for (size_t k = 1; ok && k < len; k++) {
                unsigned char cc = (unsigned char)p[i + k];
                ok = (cc & 0xC0) == 0x80;
                cp = (cp << 6) | (cc & 0x3F);
            }
            if (!ok) cp = c, len = 1;
            if (cp >= 0x10000) {
                json_u16(b, 0xD800 + ((cp - 0x10000) >> 10));
                json_u16(b, 0xDC00 + ((cp - 0x10000) & 0x3FF));
            } else json_u16(b, cp);
            i += len - 1;
        }
    }
    tmpl_buf_add(b, p + n - run, run);
    tmpl_buf_addc(b, '"');
}

static void json_newline(struct tmpl_buf *b, const struct tmpl_json_opts *o, int depth)
{
    tmpl_buf_addc(b, '\n');
    /* stops at the memory limit: a huge indent must not spin on a dead buffer */
    for (int d = 0; d < depth && !b->oom; d++) tmpl_buf_add(b, o->indent, o->indent_n);
}

static bool is_number(struct tval v) { return v.kind == TV_BOOL || v.kind == TV_INT || v.kind == TV_FLOAT; }

struct key_sort {
    const struct tdict *d;
    const char *mixed_a, *mixed_b; /* set when two keys cannot be ordered */
};

/* sorted(d.items()) compares keys: str with str (by code point = by UTF-8 bytes), numbers with
 * numbers; anything else is Python's TypeError, reported after the sort. */
static int key_cmp(const void *pa, const void *pb, void *ctx)
{
    struct key_sort *ks = ctx;
    struct tval a = ks->d->k[*(const size_t *)pa], b = ks->d->k[*(const size_t *)pb];
    if (a.kind == TV_STR && b.kind == TV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, n);
        if (c) return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (is_number(a) && is_number(b)) {
        if (a.kind != TV_FLOAT && b.kind != TV_FLOAT) {
            int64_t x = a.kind == TV_INT ? a.u.i : a.u.b, y = b.kind == TV_INT ? b.u.i : b.u.b;
            return x < y ? -1 : x > y;
        }
        int c = a.kind != TV_FLOAT ? tmpl_cmp_int_float(a.kind == TV_INT ? a.u.i : a.u.b, b.u.f)
              : b.kind != TV_FLOAT ? -tmpl_cmp_int_float(b.kind == TV_INT ? b.u.i : b.u.b, a.u.f)
              : (a.u.f < b.u.f ? -1 : a.u.f > b.u.f);
        return c == 2 || c == -2 ? 0 : c;
    }
    if (!ks->mixed_a) {
        ks->mixed_a = tmpl_type_name(b);
        ks->mixed_b = tmpl_type_name(a);
    }
    return 0;
}

bool tmpl_to_json(struct tmpl_buf *b, struct tval v, const struct tmpl_json_opts *o, int depth,
                  struct tmpl_json_error *err)
{
    if (depth > TMPL_MAX_DATA_DEPTH) {
        snprintf(err->msg, sizeof err->msg, "values nested deeper than %d levels", TMPL_MAX_DATA_DEPTH);
        err->kind = "RecursionError";
        return false;
    }
    if (b->oom) return true; /* the caller reports the memory limit */
    tmpl_meter.work++;
    switch (v.kind) {
    case TV_NONE: tmpl_buf_adds(b, "null"); return true;
    case TV_BOOL: tmpl_buf_adds(b, v.u.b ? "true" : "false"); return true;
    case TV_INT: tmpl_py_str(b, v); return true;
    case TV_FLOAT:
        if (isnan(v.u.f)) tmpl_buf_adds(b, "NaN");
        else if (isinf(v.u.f)) tmpl_buf_adds(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else tmpl_py_float(b, v.u.f);
        return true;
    case TV_STR: json_str(b, v.u.s.p, v.u.s.n, o->ensure_ascii); return true;
    case TV_LIST:
        if (v.flags & TVF_GEN) break;
        if (v.u.l->n == 0) { tmpl_buf_adds(b, "[]"); return true; }
        tmpl_buf_addc(b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) tmpl_buf_add(b, o->item_sep, o->item_sep_n);
            if (o->pretty) json_newline(b, o, depth + 1);
            if (!tmpl_to_json(b, v.u.l->v[i], o, depth + 1, err)) return false;
        }
        if (o->pretty) json_newline(b, o, depth);
        tmpl_buf_addc(b, ']');
        return true;
    case TV_DICT: {
        const struct tdict *d = v.u.d;
        if (d->n == 0) { tmpl_buf_adds(b, "{}"); return true; }
        size_t *order = NULL;
        if (o->sort_keys) {
            order = tmpl_arena_alloc(b->a, d->n * sizeof *order);
            if (!order) {
                b->oom = true;
                return true;
            }
            for (size_t i = 0; i < d->n; i++) order[i] = i;
            struct key_sort ks = {d, NULL, NULL};
            tmpl_meter.work += d->n * 20; /* n log n comparisons */
            qsort_r(order, d->n, sizeof *order, key_cmp, &ks);
            if (ks.mixed_a) {
                snprintf(err->msg, sizeof err->msg, "'<' not supported between instances of '%s' and '%s'",
                         ks.mixed_a, ks.mixed_b);
                err->kind = "TypeError";
                return false;
            }
        }
        tmpl_buf_addc(b, '{');
        for (size_t j = 0; j < d->n; j++) {
            size_t i = order ? order[j] : j;
            if (j) tmpl_buf_add(b, o->item_sep, o->item_sep_n);
            if (o->pretty) json_newline(b, o, depth + 1);
            struct tval k = d->k[i];
            if (k.kind == TV_STR) json_str(b, k.u.s.p, k.u.s.n, o->ensure_ascii);
            else if (k.kind == TV_INT || k.kind == TV_FLOAT || k.kind == TV_BOOL || k.kind == TV_NONE) {
                tmpl_buf_addc(b, '"'); /* json.dumps turns these keys into their JSON text */
                if (!tmpl_to_json(b, k, o, depth + 1, err)) return false;
                tmpl_buf_addc(b, '"');
            } else {
                snprintf(err->msg, sizeof err->msg, "keys must be str, int, float, bool or None, not %s",
                         tmpl_type_name(k));
                err->kind = "TypeError";
                return false;
            }
            tmpl_buf_add(b, o->key_sep, o->key_sep_n);
            if (!tmpl_to_json(b, d->v[i], o, depth + 1, err)) return false;
        }
        if (o->pretty) json_newline(b, o, depth);
        tmpl_buf_addc(b, '}');
        return true;
    }
    default: break;
    }
    snprintf(err->msg, sizeof err->msg, "Object of type %s is not JSON serializable", tmpl_type_name(v));
    err->kind = "TypeError";
    return false;
}

/* ------------------------------------------------------------------ truth and equality */

bool tmpl_truthy(struct tval v)
{
    switch (v.kind) {
    case TV_UNDEF:
    case TV_NONE: return false;
    case TV_BOOL: return v.u.b;
    case TV_INT: return v.u.i != 0;
    case TV_FLOAT: return v.u.f != 0;
    case TV_STR: return v.u.s.n != 0;
    case TV_LIST: return (v.flags & TVF_GEN) || v.u.l->n != 0;
    case TV_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

static bool is_num(struct tval v) { return v.kind == TV_BOOL || v.kind == TV_INT || v.kind == TV_FLOAT; }

int tmpl_cmp_int_float(int64_t i, double f)
{
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    double t = trunc(f);
    int64_t ti = (int64_t)t; /* |t| <= 2^63 and t = 2^63 was excluded: exact */
    if (i != ti) return i < ti ? -1 : 1;
    return t == f ? 0 : f > t ? -1 : 1;
}

static bool equal(struct tval a, struct tval b, int depth)
{
    tmpl_meter.work++;
    if (is_num(a) && is_num(b)) {
        int64_t x = a.kind == TV_INT ? a.u.i : a.kind == TV_BOOL ? a.u.b : 0;
        int64_t y = b.kind == TV_INT ? b.u.i : b.kind == TV_BOOL ? b.u.b : 0;
        if (a.kind != TV_FLOAT && b.kind != TV_FLOAT) return x == y;
        if (a.kind != TV_FLOAT) return tmpl_cmp_int_float(x, b.u.f) == 0;
        if (b.kind != TV_FLOAT) return tmpl_cmp_int_float(y, a.u.f) == 0;
        return a.u.f == b.u.f;
    }
    if (a.kind != b.kind) return false;
    TERN_ASSERT(depth >= 0 && depth <= TMPL_MAX_DATA_DEPTH, "equal() stops at the data depth limit");
    switch (a.kind) {
    case TV_UNDEF:
    case TV_NONE: return true;
    case TV_STR:
        tmpl_meter.work += a.u.s.n / TMPL_WORK_BYTES;
        return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case TV_LIST:
        if ((a.flags & TVF_TUPLE) != (b.flags & TVF_TUPLE)) return false;
        if (a.u.l->n != b.u.l->n) return false;
        if (depth >= TMPL_MAX_DATA_DEPTH) {
            tmpl_meter.too_deep = true;
            return false;
        }
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case TV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        if (depth >= TMPL_MAX_DATA_DEPTH) {
            tmpl_meter.too_deep = true;
            return false;
        }
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct tval *o = tmpl_dict_get(b.u.d, a.u.d->k[i]);
            if (!o || !equal(a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case TV_NS: return a.u.d == b.u.d;
    case TV_MACRO: return a.u.node == b.u.node;
    case TV_FUNC: return a.u.i == b.u.i;
    default: return false;
    }
}

bool tmpl_equal(struct tval a, struct tval b) { return equal(a, b, 0); }

struct tval *tmpl_dict_get(const struct tdict *d, struct tval key)
{
    tmpl_meter.work += d->n / 8; /* a key comparison is a few instructions */
    TERN_ASSERT(d->n <= d->cap && (!d->n || (d->k && d->v)));
    for (size_t i = 0; i < d->n; i++) {
        const struct tval *k = &d->k[i];
        if (key.kind == TV_STR && k->kind == TV_STR) {
            if (k->u.s.n == key.u.s.n && !memcmp(k->u.s.p, key.u.s.p, key.u.s.n)) return &d->v[i];
        } else if (tmpl_equal(*k, key)) return &d->v[i];
    }
    return NULL;
}

bool tmpl_is_str(struct tval v, const char *s)
{
    size_t n = strlen(s);
    return v.kind == TV_STR && v.u.s.n == n && !memcmp(v.u.s.p, s, n);
}

void tmpl_html_escape(struct tmpl_buf *b, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
                      : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
        if (r) tmpl_buf_adds(b, r);
        else tmpl_buf_addc(b, c);
    }
}
