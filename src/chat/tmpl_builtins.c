/* tmpl_builtins.c — the filters, tests, methods and global functions templates can call.
 *
 * Read tmpl.h first. Each kind has a table near the end of its section (filters[], tests[],
 * str_methods[] / dict_methods[] / list_methods[], globals[]): one row per name with the C
 * function and its signature, so adding a builtin is a function plus one row. Each follows its
 * Jinja2 3.1 / Python 3 definition (named in the comment where the behaviour is not obvious),
 * e.g. `indent` appends a newline before splitting lines, `unique` compares strings
 * case-insensitively, `map`/`select*` return generators (which `tojson` refuses, as json.dumps
 * does), `title` is Jinja's regex version while the str.title() method is Python's. Methods
 * that would mutate a list or dict are refused with SecurityError, as in the
 * ImmutableSandboxedEnvironment Hugging Face uses. */
#include "chat/tmpl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "util/check.h"

/* name[0..len) == s; the first byte rules out most table rows before any length is taken */
static bool name_is(const char *name, size_t len, const char *s)
{
    return len && s[0] == name[0] && strlen(s) == len && !memcmp(name, s, len);
}

static struct tval mk_list(struct tmpl_ev *ev, size_t n, uint8_t flags)
{
    struct tlist *l = tmpl_ev_alloc(ev, sizeof *l);
    l->v = tmpl_ev_alloc(ev, (n ? n : 1) * sizeof *l->v);
    l->cap = n ? n : 1;
    struct tval v = {0};
    v.kind = TV_LIST;
    v.flags = flags;
    v.u.l = l;
    return v;
}

static struct tval mk_str(struct tmpl_ev *ev, const char *p, size_t n)
{
    char *s = tmpl_ev_alloc(ev, n + 1);
    if (n) memcpy(s, p, n);
    return tv_str(s, n);
}

static struct tval buf_val(struct tmpl_ev *ev, struct tmpl_buf *b)
{
    if (b->oom) tmpl_throw(ev, NULL, "MemoryError", "template rendering exceeded its memory limit");
    return tv_str(b->p ? b->p : "", b->n);
}

static struct tval str_arg(struct tmpl_ev *ev, struct tval v, const struct tmpl_node *at, const char *what)
{
    if (v.kind != TV_STR)
        tmpl_throw(ev, at, "TypeError", "%s must be str, not %s", what, tmpl_type_name(v));
    return v;
}

static int64_t int_arg(struct tmpl_ev *ev, struct tval v, const struct tmpl_node *at, const char *what)
{
    if (v.kind == TV_INT) return v.u.i;
    if (v.kind == TV_BOOL) return v.u.b;
    tmpl_throw(ev, at, "TypeError", "%s must be an integer, not %s", what, tmpl_type_name(v));
}

/* ------------------------------------------------------------------ string helpers */

static int32_t cp_at(const char *p, size_t n, size_t i, size_t *len)
{
    TERN_ASSERT(i < n, "a code point starts inside the string");
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p + i, (utf8proc_ssize_t)(n - i), &cp);
    if (k <= 0) {
        *len = 1;
        return (unsigned char)p[i];
    }
    *len = (size_t)k;
    return cp;
}

static void put_cp(struct tmpl_buf *b, int32_t cp)
{
    utf8proc_uint8_t tmp[4];
    TERN_ASSERT(cp >= 0 && cp <= 0x10FFFF, "a code point utf8proc can encode");
    utf8proc_ssize_t k = utf8proc_encode_char(cp, tmp);
    tmpl_buf_add(b, (const char *)tmp, (size_t)(k > 0 ? k : 0));
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE_PY, CASE_TITLE_JINJA, CASE_CAPITALIZE, CASE_SWAP };

static bool is_alpha_cp(int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}

static struct tval change_case(struct tmpl_ev *ev, struct tval s, int mode)
{
    TERN_ASSERT(s.kind == TV_STR && mode >= CASE_UPPER && mode <= CASE_SWAP, "string methods get a string (str_arg / tmpl_ev_str made it one)");
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    bool word_start = true; /* title: next letter starts a word */
    bool first = true;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t k;
        int32_t cp = cp_at(s.u.s.p, s.u.s.n, i, &k);
        int32_t o = cp;
        switch (mode) {
        case CASE_UPPER: o = utf8proc_toupper(cp); break;
        case CASE_LOWER: o = utf8proc_tolower(cp); break;
        case CASE_CAPITALIZE: o = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
        case CASE_TITLE_PY: /* str.title(): letters after a non-letter start a word */
            if (is_alpha_cp(cp)) {
                o = word_start ? utf8proc_totitle(cp) : utf8proc_tolower(cp);
                word_start = false;
            } else word_start = true;
            break;
        case CASE_TITLE_JINJA: /* jinja do_title: words begin after [-\s({\[<]+ */
            o = word_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            word_start = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
                         tmpl_is_space_cp(cp);
            break;
        }
        put_cp(&b, o);
        first = false;
        i += k;
    }
    return buf_val(ev, &b);
}

static bool in_chars(int32_t cp, struct tval chars)
{
    if (chars.kind != TV_STR) return tmpl_is_space_cp(cp);
    for (size_t i = 0; i < chars.u.s.n;) {
        size_t k;
        if (cp_at(chars.u.s.p, chars.u.s.n, i, &k) == cp) return true;
        i += k;
    }
    return false;
}

static struct tval strip(struct tmpl_ev *ev, struct tval s, struct tval chars, bool left, bool right)
{
    TERN_ASSERT(s.kind == TV_STR, "string methods get a string (str_arg / tmpl_ev_str made it one)");
    size_t b = 0, e = s.u.s.n;
    if (left)
        while (b < e) {
            size_t k;
            int32_t cp = cp_at(s.u.s.p, e, b, &k);
            if (!in_chars(cp, chars)) break;
            b += k;
        }
    if (right)
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)s.u.s.p[st] & 0xC0) == 0x80) st--;
            size_t k;
            int32_t cp = cp_at(s.u.s.p, e, st, &k);
            if (!in_chars(cp, chars)) break;
            e = st;
        }
    return tmpl_ev_substr(ev, s, b, e); /* trim keeps what of the markup it keeps */
}

/* Substring search in linear time (glibc's memmem is two-way): templates can search
 * megabytes of message text in a loop, and the naive scan is quadratic. */
static const char *find_sub(const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    tmpl_meter.work += hn / TMPL_WORK_BYTES;
    return memmem(h, hn, n, nn);
}

static struct tval replace(struct tmpl_ev *ev, struct tval s, struct tval old, struct tval new_,
                           int64_t count)
{
    TERN_ASSERT(s.kind == TV_STR && old.kind == TV_STR && new_.kind == TV_STR, "replace's arguments were checked to be strings");
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    size_t i = 0;
    int64_t done = 0;
    if (old.u.s.n == 0) { /* Python inserts new between every character */
        for (size_t k; i <= s.u.s.n && (count < 0 || done < count); i += k, done++) {
            tmpl_buf_add(&b, new_.u.s.p, new_.u.s.n);
            if (i == s.u.s.n) { i++; break; }
            cp_at(s.u.s.p, s.u.s.n, i, &k);
            tmpl_buf_add(&b, s.u.s.p + i, k);
        }
        if (i < s.u.s.n) tmpl_buf_add(&b, s.u.s.p + i, s.u.s.n - i);
        return buf_val(ev, &b);
    }
    while (count < 0 || done < count) {
        const char *f = find_sub(s.u.s.p + i, s.u.s.n - i, old.u.s.p, old.u.s.n);
        if (!f) break;
        size_t at = (size_t)(f - s.u.s.p);
        tmpl_buf_add(&b, s.u.s.p + i, at - i);
        tmpl_buf_add(&b, new_.u.s.p, new_.u.s.n);
        i = at + old.u.s.n;
        done++;
    }
    tmpl_buf_add(&b, s.u.s.p + i, s.u.s.n - i);
    return buf_val(ev, &b);
}

static struct tval split(struct tmpl_ev *ev, struct tval s, struct tval sep, int64_t maxsplit,
                         const struct tmpl_node *at)
{
    TERN_ASSERT(s.kind == TV_STR, "string methods get a string (str_arg / tmpl_ev_str made it one)");
    struct tval out = mk_list(ev, s.u.s.n + 1, 0);
    size_t k = 0;
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (sep.kind == TV_NONE || sep.kind == TV_UNDEF) {
        size_t i = 0;
        for (;;) {
            while (i < n) { /* skip whitespace */
                size_t l;
                if (!tmpl_is_space_cp(cp_at(p, n, i, &l))) break;
                i += l;
            }
            if (i >= n) break;
            if (maxsplit >= 0 && (int64_t)k >= maxsplit) {
                size_t e = n;
                while (e > i) { /* rstrip the remainder */
                    size_t st = e - 1;
                    while (st > i && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
                    size_t l;
                    if (!tmpl_is_space_cp(cp_at(p, e, st, &l))) break;
                    e = st;
                }
                out.u.l->v[k++] = tv_str(p + i, e - i);
                break;
            }
            size_t st = i;
            while (i < n) {
                size_t l;
                if (tmpl_is_space_cp(cp_at(p, n, i, &l))) break;
                i += l;
            }
            out.u.l->v[k++] = tv_str(p + st, i - st);
        }
    } else {
        str_arg(ev, sep, at, "separator");
        if (sep.u.s.n == 0) tmpl_throw(ev, at, "ValueError", "empty separator");
        size_t i = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || (int64_t)k < maxsplit)
                                ? find_sub(p + i, n - i, sep.u.s.p, sep.u.s.n) : NULL;
            if (!f) {
                out.u.l->v[k++] = tv_str(p + i, n - i);
                break;
            }
            out.u.l->v[k++] = tv_str(p + i, (size_t)(f - (p + i)));
            i = (size_t)(f - p) + sep.u.s.n;
        }
    }
    TERN_ASSERT(k <= s.u.s.n + 1, "at most one piece per byte, plus one");
    out.u.l->n = k;
    return out;
}

static bool affix(struct tval s, struct tval a, bool start)
{
    TERN_ASSERT(s.kind == TV_STR && a.kind == TV_STR, "both sides were checked to be strings");
    if (a.u.s.n > s.u.s.n) return false;
    const char *p = start ? s.u.s.p : s.u.s.p + s.u.s.n - a.u.s.n;
    return !memcmp(p, a.u.s.p, a.u.s.n);
}

static struct tval splitlines(struct tmpl_ev *ev, struct tval s)
{
    TERN_ASSERT(s.kind == TV_STR, "string methods get a string (str_arg / tmpl_ev_str made it one)");
    struct tval out = mk_list(ev, s.u.s.n + 1, 0);
    size_t k = 0, i = 0, st = 0;
    const char *p = s.u.s.p;
    while (i < s.u.s.n) {
        size_t l;
        int32_t cp = cp_at(p, s.u.s.n, i, &l);
        bool br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
                  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (br) {
            out.u.l->v[k++] = tv_str(p + st, i - st);
            i += l;
            if (cp == '\r' && i < s.u.s.n && p[i] == '\n') i++;
            st = i;
        } else i += l;
    }
    if (st < s.u.s.n) out.u.l->v[k++] = tv_str(p + st, s.u.s.n - st);
    TERN_ASSERT(k <= s.u.s.n + 1, "at most one piece per byte, plus one");
    out.u.l->n = k;
    return out;
}

/* ------------------------------------------------------------------ attribute paths (map, selectattr) */

static struct tval attr_path(struct tmpl_ev *ev, struct tval item, struct tval path, const struct tmpl_node *at)
{
    if (path.kind == TV_INT) return tmpl_ev_getitem(ev, item, path, at);
    str_arg(ev, path, at, "attribute");
    size_t i = 0;
    while (i <= path.u.s.n) {
        size_t e = i;
        while (e < path.u.s.n && path.u.s.p[e] != '.') e++;
        struct tval key = tv_str(path.u.s.p + i, e - i);
        bool digits = e > i;
        for (size_t k = i; k < e; k++) digits &= path.u.s.p[k] >= '0' && path.u.s.p[k] <= '9';
        if (digits) key = tv_int(strtoll(path.u.s.p + i, NULL, 10));
        if (item.kind == TV_UNDEF) return item;
        item = tmpl_ev_getitem(ev, item, key, at);
        i = e + 1;
    }
    return item;
}

/* ------------------------------------------------------------------ signatures
 *
 * Every filter, test, method and global is one row of a table below: its name, the function,
 * and its Jinja/Python signature: the parameter names in positional order (a keyword argument
 * must be one of them) and how many are required. `params` NULL means the function takes any
 * arguments and checks them itself (map, select, namespace, range ...). Adding a builtin is one
 * row plus its function. */

struct tmpl_sig {
    const char *params; /* space-separated names, then "/" if all are positional-only (as in
                           Python's signatures); NULL = variadic */
    int required;       /* the first `required` params must be given */
};

/* Python's argument binding for a builtin: no more positional arguments than parameters,
 * keywords only by (keyword-capable) parameter name and not twice, the required ones given.
 * Refusals are TypeError, as Python's. kind/name say what is called ("filter 'round'"). */
static void check_args(struct tmpl_ev *ev, const char *kind, const char *name, struct tmpl_sig sig,
                       const struct tmpl_args *a, const struct tmpl_node *at)
{
    if (!sig.params) return;
    const char *names[8];
    int lens[8], np = 0;
    bool posonly = false;
    for (const char *p = sig.params; *p;) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        if (e - p == 1 && *p == '/') posonly = true;
        else if (e > p && np < 8) {
            names[np] = p;
            lens[np++] = (int)(e - p);
        }
        p = e;
    }
    if (a->n > np)
        tmpl_throw(ev, at, "TypeError", "%s '%s' takes at most %d argument%s (%d given)", kind, name, np,
                   np == 1 ? "" : "s", a->n);
    for (int k = 0; k < a->nk; k++) {
        int j = -1;
        for (int i = 0; i < np && j < 0; i++)
            if ((int)strlen(a->kwn[k]) == lens[i] && !memcmp(a->kwn[k], names[i], (size_t)lens[i])) j = i;
        if (j < 0 || posonly)
            tmpl_throw(ev, at, "TypeError", "%s '%s' got an unexpected keyword argument '%s'", kind, name, a->kwn[k]);
        bool twice = j < a->n;
        for (int k2 = 0; k2 < k && !twice; k2++) twice = !strcmp(a->kwn[k2], a->kwn[k]);
        if (twice) tmpl_throw(ev, at, "TypeError", "%s '%s' got multiple values for argument '%s'", kind, name, a->kwn[k]);
    }
    for (int j = a->n; j < sig.required && j < np; j++) {
        bool given = false;
        for (int k = 0; k < a->nk && !given; k++)
            given = (int)strlen(a->kwn[k]) == lens[j] && !memcmp(a->kwn[k], names[j], (size_t)lens[j]);
        if (!given)
            tmpl_throw(ev, at, "TypeError", "%s '%s' missing required argument '%.*s'", kind, name, lens[j], names[j]);
    }
}

/* ------------------------------------------------------------------ tests */

typedef bool (*test_fn)(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at);

static bool t_defined(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind != TV_UNDEF;
}
static bool t_undefined(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_UNDEF;
}
static bool t_none(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_NONE;
}
static bool t_string(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_STR;
}
static bool t_mapping(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_DICT;
}
static bool t_iterable(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_STR || v.kind == TV_LIST || v.kind == TV_DICT || v.kind == TV_UNDEF;
}
static bool t_sequence(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_STR || (v.kind == TV_LIST && !(v.flags & TVF_GEN)) || v.kind == TV_DICT ||
           v.kind == TV_UNDEF;
}
static bool t_number(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_INT || v.kind == TV_FLOAT || v.kind == TV_BOOL;
}
static bool t_integer(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_INT;
}
static bool t_float(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_FLOAT;
}
static bool t_boolean(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_BOOL;
}
static bool t_true(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_BOOL && v.u.b;
}
static bool t_false(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_BOOL && !v.u.b;
}
static bool t_callable(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_MACRO || v.kind == TV_FUNC || v.kind == TV_METHOD;
}
static bool t_eq(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)at;
    return tmpl_equal(v, x);
}
static bool t_ne(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)at;
    return !tmpl_equal(v, x);
}
static bool t_escaped(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)v, (void)x, (void)at;
    return false;
}
static bool t_in(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    if (x.kind == TV_LIST) {
        for (size_t i = 0; i < x.u.l->n; i++) {
            tmpl_ev_tick(ev, 1, at);
            if (tmpl_equal(x.u.l->v[i], v)) return true;
        }
        return false;
    }
    if (x.kind == TV_DICT) return tmpl_dict_get(x.u.d, v) != NULL;
    if (x.kind == TV_STR && v.kind == TV_STR) return find_sub(x.u.s.p, x.u.s.n, v.u.s.p, v.u.s.n) != NULL;
    tmpl_throw(ev, at, "TypeError", "argument of type '%s' is not iterable", tmpl_type_name(x));
}
static bool t_lower(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)x, (void)at;
    return v.kind == TV_STR && tmpl_equal(change_case(ev, v, CASE_LOWER), v);
}
static bool t_upper(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)x, (void)at;
    return v.kind == TV_STR && tmpl_equal(change_case(ev, v, CASE_UPPER), v);
}
/* Jinja: value % 2 == 1, value % 2 == 0, value % num == 0, with Python's % (floats allowed,
 * INT64_MIN % -1 is 0, not a trap) */
static bool t_odd(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)x;
    return tmpl_equal(tmpl_ev_arith(ev, OP_MOD, v, tv_int(2), at), tv_int(1));
}
static bool t_even(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)x;
    return tmpl_equal(tmpl_ev_arith(ev, OP_MOD, v, tv_int(2), at), tv_int(0));
}
static bool t_divisibleby(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    return tmpl_equal(tmpl_ev_arith(ev, OP_MOD, v, x, at), tv_int(0));
}
static bool t_gt(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    return tmpl_ev_compare(ev, OP_GT, v, x, at);
}
static bool t_ge(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    return tmpl_ev_compare(ev, OP_GE, v, x, at);
}
static bool t_lt(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    return tmpl_ev_compare(ev, OP_LT, v, x, at);
}
static bool t_le(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    return tmpl_ev_compare(ev, OP_LE, v, x, at);
}

static bool t_filter(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at);
static bool t_test(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at);

static const struct {
    const char *name;
    test_fn fn;
    struct tmpl_sig sig;
} tests[] = {
    {"!=", t_ne, {"other /", 1}},          {"<", t_lt, {"other /", 1}},
    {"<=", t_le, {"other /", 1}},          {"==", t_eq, {"other /", 1}},
    {">", t_gt, {"other /", 1}},           {">=", t_ge, {"other /", 1}},
    {"boolean", t_boolean, {"", 0}},     {"callable", t_callable, {"", 0}},
    {"defined", t_defined, {"", 0}},     {"divisibleby", t_divisibleby, {"num", 1}},
    {"eq", t_eq, {"other /", 1}},          {"equalto", t_eq, {"other /", 1}},
    {"escaped", t_escaped, {"", 0}},     {"even", t_even, {"", 0}},
    {"false", t_false, {"", 0}},         {"float", t_float, {"", 0}},
    {"ge", t_ge, {"other /", 1}},          {"gt", t_gt, {"other /", 1}},
    {"in", t_in, {"seq", 1}},            {"integer", t_integer, {"", 0}},
    {"iterable", t_iterable, {"", 0}},   {"le", t_le, {"other /", 1}},
    {"lower", t_lower, {"", 0}},         {"lt", t_lt, {"other /", 1}},
    {"mapping", t_mapping, {"", 0}},     {"ne", t_ne, {"other /", 1}},
    {"none", t_none, {"", 0}},           {"number", t_number, {"", 0}},
    {"odd", t_odd, {"", 0}},             {"sameas", t_eq, {"other", 1}},
    {"sequence", t_sequence, {"", 0}},   {"string", t_string, {"", 0}},
    {"true", t_true, {"", 0}},           {"undefined", t_undefined, {"", 0}},
    {"upper", t_upper, {"", 0}},
    {"greaterthan", t_gt, {"other /", 1}}, {"lessthan", t_lt, {"other /", 1}},
    {"filter", t_filter, {"", 0}},       {"test", t_test, {"", 0}},
};

static int find_test(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (name_is(name, len, tests[i].name)) return (int)i;
    return -1;
}

static int find_filter(const char *name, size_t len);

/* `x is filter` / `x is test`: x names one (Jinja 3.x) */
static bool t_filter(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_STR && find_filter(v.u.s.p, v.u.s.n) >= 0;
}

static bool t_test(struct tmpl_ev *ev, struct tval v, struct tval x, const struct tmpl_node *at)
{
    (void)ev, (void)x, (void)at;
    return v.kind == TV_STR && find_test(v.u.s.p, v.u.s.n) >= 0;
}

bool tmpl_apply_test(struct tmpl_ev *ev, const char *name, struct tval v, const struct tmpl_args *a,
                     const struct tmpl_node *at)
{
    int i = find_test(name, strlen(name));
    if (i < 0) tmpl_throw(ev, at, "TemplateAssertionError", "no test named '%s'", name);
    check_args(ev, "test", name, tests[i].sig, a, at);
    /* the one parameter, by position or by name ("other /" is positional-only) */
    struct tval x = tmpl_arg(a, 0, strchr(tests[i].sig.params, '/') ? NULL : tests[i].sig.params, NULL);
    return tests[i].fn(ev, v, x, at);
}

/* ------------------------------------------------------------------ filters */

static struct tval select_impl(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a,
                               bool by_attr, bool keep, const struct tmpl_node *at)
{
    /* jinja select_or_reject: `if value:` first, so None/empty yield nothing */
    struct tval items = tmpl_truthy(v) ? tmpl_ev_list_of(ev, v, at) : mk_list(ev, 0, 0);
    TERN_ASSERT(items.kind == TV_LIST);
    int first_test = by_attr ? 1 : 0;
    struct tval attr = by_attr ? tmpl_arg(a, 0, "attribute", NULL) : tv_undef();
    struct tval test = tmpl_arg(a, first_test, NULL, NULL);
    struct tmpl_args targs = {a->pos + first_test + 1, a->n > first_test + 1 ? a->n - first_test - 1 : 0,
                              NULL, NULL, 0};
    struct tval out = mk_list(ev, items.u.l->n, TVF_GEN);
    size_t k = 0;
    for (size_t i = 0; i < items.u.l->n; i++) {
        tmpl_ev_tick(ev, 1, at);
        struct tval x = items.u.l->v[i];
        struct tval probe = by_attr ? attr_path(ev, x, attr, at) : x;
        bool r;
        if (test.kind == TV_UNDEF) r = tmpl_truthy(probe);
        else {
            str_arg(ev, test, at, "test name");
            char name[64];
            size_t n = test.u.s.n < sizeof name - 1 ? test.u.s.n : sizeof name - 1;
            memcpy(name, test.u.s.p, n);
            name[n] = '\0';
            r = tmpl_apply_test(ev, name, probe, &targs, at);
        }
        if (r == keep) out.u.l->v[k++] = x;
    }
    TERN_ASSERT(k <= items.u.l->n, "select/reject keeps at most its items");
    out.u.l->n = k;
    return out;
}

static struct tval map_impl(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a,
                            const struct tmpl_node *at)
{
    struct tval items = tmpl_truthy(v) ? tmpl_ev_list_of(ev, v, at) : mk_list(ev, 0, 0); /* `if value:` */
    TERN_ASSERT(items.kind == TV_LIST);
    bool has_attr;
    struct tval attr = tmpl_arg(a, -1, "attribute", &has_attr);
    bool has_def;
    struct tval def = tmpl_arg(a, -1, "default", &has_def);
    struct tval out = mk_list(ev, items.u.l->n, TVF_GEN);
    char fname[64] = "";
    if (!has_attr) {
        struct tval f = str_arg(ev, tmpl_arg(a, 0, NULL, NULL), at, "filter name");
        size_t n = f.u.s.n < sizeof fname - 1 ? f.u.s.n : sizeof fname - 1;
        memcpy(fname, f.u.s.p, n);
        fname[n] = '\0';
    }
    struct tmpl_args fargs = {a->pos + 1, a->n > 1 ? a->n - 1 : 0, a->kwn, a->kwv, a->nk};
    for (size_t i = 0; i < items.u.l->n; i++) {
        tmpl_ev_tick(ev, 1, at);
        struct tval x = items.u.l->v[i];
        if (has_attr) {
            x = attr_path(ev, x, attr, at);
            if (x.kind == TV_UNDEF && has_def) x = def;
        } else x = tmpl_apply_filter(ev, fname, x, &fargs, at);
        out.u.l->v[i] = x;
    }
    out.u.l->n = items.u.l->n;
    return out;
}

static struct tval indent(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    bool present;
    struct tval w = tmpl_arg(a, 0, "width", &present);
    struct tval ind;
    if (!present) ind = tv_str("    ", 4);
    else if (w.kind == TV_STR) ind = w;
    else {
        int64_t n = int_arg(ev, w, at, "width");
        if (n < 0) n = 0;
        if (n > 4096) tmpl_throw(ev, at, "ValueError", "indent width %lld is too large", (long long)n);
        char *p = tmpl_ev_alloc(ev, (size_t)n + 1);
        memset(p, ' ', (size_t)n);
        ind = tv_str(p, (size_t)n);
    }
    bool first = tmpl_truthy(tmpl_arg(a, 1, "first", NULL));
    bool blank = tmpl_truthy(tmpl_arg(a, 2, "blank", NULL));
    /* jinja do_indent: s += "\n", then splitlines() */
    struct tmpl_buf t;
    tmpl_buf_init(&t, tmpl_ev_arena(ev));
    tmpl_buf_add(&t, s.u.s.p, s.u.s.n);
    tmpl_buf_addc(&t, '\n');
    struct tval lines = splitlines(ev, buf_val(ev, &t));
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    if (first) tmpl_buf_add(&b, ind.u.s.p, ind.u.s.n);
    for (size_t i = 0; i < lines.u.l->n; i++) {
        struct tval l = lines.u.l->v[i];
        if (i) {
            tmpl_buf_addc(&b, '\n');
            if (blank || l.u.s.n) tmpl_buf_add(&b, ind.u.s.p, ind.u.s.n);
        }
        tmpl_buf_add(&b, l.u.s.p, l.u.s.n);
    }
    return buf_val(ev, &b);
}

/* ------------------------------------------------------------------ numbers from text */

/* Value of a Unicode decimal digit (category Nd), or -1. Python's int() and float() accept any
 * of them ("٣" is 3); Unicode lays every such digit out in runs of ten starting at zero. */
static int digit_value(int32_t cp)
{
    if (cp >= '0' && cp <= '9') return cp - '0';
    if (cp < 0x80 || utf8proc_category(cp) != UTF8PROC_CATEGORY_ND) return -1;
    int32_t z = cp;
    while (cp - z < 64 && utf8proc_category(z - 1) == UTF8PROC_CATEGORY_ND) z--;
    return (int)((cp - z) % 10);
}

/* Python's _PyUnicode_TransformDecimalAndSpaceToASCII followed by strip(): decimal digits
 * become ASCII digits, whitespace a space, other non-ASCII a byte no grammar accepts. Returns
 * the length written into out (at most cap - 1, NUL-terminated), or -1 when too long. */
static int ascii_number(struct tval s, char *out, size_t cap)
{
    size_t b = 0, e = s.u.s.n;
    while (b < e) { /* strip */
        size_t k;
        if (!tmpl_is_space_cp(cp_at(s.u.s.p, e, b, &k))) break;
        b += k;
    }
    while (e > b) {
        size_t st = e - 1, k;
        while (st > b && ((unsigned char)s.u.s.p[st] & 0xC0) == 0x80) st--;
        if (!tmpl_is_space_cp(cp_at(s.u.s.p, e, st, &k))) break;
        e = st;
    }
    size_t n = 0;
    for (size_t i = b; i < e;) {
        size_t k;
        int32_t cp = cp_at(s.u.s.p, e, i, &k);
        i += k;
        if (n + 1 >= cap) return -1;
        int d = digit_value(cp);
        out[n++] = d >= 0 ? (char)('0' + d) : cp < 0x80 ? (char)cp : tmpl_is_space_cp(cp) ? ' ' : '\x01';
    }
    out[n] = '\0';
    return (int)n;
}

/* Python int(text, base) on the ASCII form. 0 = ok, -1 = ValueError, 1 = does not fit int64. */
static int py_parse_int(const char *p, int base, int64_t *out)
{
    if (base != 0 && (base < 2 || base > 36)) return -1;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    bool prefixed = false;
    if (p[0] == '0' && p[1]) {
        char c = (char)(p[1] | 0x20);
        int pb = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
        if (pb && (base == 0 || base == pb)) {
            base = pb;
            p += 2;
            prefixed = true;
        }
    }
    bool base0 = base == 0;
    if (base0) base = 10;
    /* digits with single underscores between them (and one right after a prefix) */
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool overflow = false, any = false, nonzero = false, prev_us = false;
    const char *first = p;
    for (; *p; p++) {
        if (*p == '_') { /* "0x_1f" is fine, "_1", "1__0" and "1_" are not */
            if (prev_us || !(any || prefixed)) return -1;
            prev_us = true;
            continue;
        }
        int d = *p >= '0' && *p <= '9' ? *p - '0' : (*p | 0x20) >= 'a' && (*p | 0x20) <= 'z' ? (*p | 0x20) - 'a' + 10 : 99;
        if (d >= base) return -1;
        if (d) nonzero = true;
        if (v > (limit - (uint64_t)d) / (uint64_t)base) overflow = true;
        else v = v * (uint64_t)base + (uint64_t)d;
        any = true;
        prev_us = false;
    }
    if (!any || prev_us) return -1;
    if (base0 && !prefixed && first[0] == '0' && nonzero) return -1; /* "010" is not base 0 */
    if (overflow) return 1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* Python float(text) on the ASCII form: decimal with single underscores between digits,
 * inf/infinity/nan in any case. No hex, no "nan(...)" (strtod would take both). */
static bool py_parse_float(const char *p, double *out)
{
    const char *q = p;
    if (*q == '+' || *q == '-') q++;
    static const char *const words[] = {"inf", "infinity", "nan"};
    for (int w = 0; w < 3; w++)
        if (!strcasecmp(q, words[w])) {
            double v = w == 2 ? NAN : INFINITY;
            *out = *p == '-' ? -v : v;
            return true;
        }
    char clean[4400];
    size_t n = 0;
    if (*p == '+' || *p == '-') clean[n++] = *p;
    int digits = 0;
    bool in_digits = false, prev_us = false, dot = false, exp = false;
    for (; *q; q++) {
        char c = *q;
        if (n + 2 >= sizeof clean) return false;
        if (c >= '0' && c <= '9') {
            clean[n++] = c;
            in_digits = true;
            prev_us = false;
            digits++;
        } else if (c == '_') {
            if (!in_digits || prev_us) return false;
            prev_us = true;
        } else if (c == '.' && !dot && !exp && !prev_us) {
            clean[n++] = c;
            dot = true;
            in_digits = false;
        } else if ((c == 'e' || c == 'E') && !exp && digits && !prev_us) {
            clean[n++] = c;
            exp = true;
            in_digits = false;
            if (q[1] == '+' || q[1] == '-') clean[n++] = *++q;
            if (!(q[1] >= '0' && q[1] <= '9')) return false;
        } else return false;
    }
    if (!digits || prev_us) return false;
    clean[n] = '\0';
    char *end;
    *out = strtod(clean, &end);
    return *end == '\0';
}

_Noreturn static void int_too_big(struct tmpl_ev *ev, const struct tmpl_node *at, const char *what)
{
    tmpl_throw(ev, at, "OverflowError", "%s does not fit in a 64-bit integer (Python ints are unbounded, "
               "tern's are not)", what);
}

/* int(f) for a float that is finite: truncation, refused when Python's result is beyond int64. */
static int64_t float_to_int(struct tmpl_ev *ev, double f, const struct tmpl_node *at)
{
    if (!(f > -9223372036854775809.0 && f < 9223372036854775808.0)) {
        char what[64];
        snprintf(what, sizeof what, "int(%g)", f);
        int_too_big(ev, at, what);
    }
    return (int64_t)f;
}

/* Jinja do_int: int(value, base) for strings / int(value) otherwise; on TypeError or ValueError
 * int(float(value)); on failure (or inf, whose OverflowError Jinja also catches) the default. */
static struct tval f_int(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    bool has_def;
    struct tval def = tmpl_arg(a, 0, "default", &has_def);
    if (!has_def) def = tv_int(0);
    struct tval bv = tmpl_arg(a, 1, "base", NULL);
    switch (v.kind) {
    case TV_INT: return v;
    case TV_BOOL: return tv_int(v.u.b);
    case TV_FLOAT:
        if (isnan(v.u.f) || isinf(v.u.f)) return def;
        return tv_int(float_to_int(ev, v.u.f, at));
    case TV_STR: {
        char tmp[4400]; /* Python refuses int() of more than 4300 digits */
        if (ascii_number(v, tmp, sizeof tmp) < 0) return def;
        int64_t base = 10;
        if (bv.kind == TV_INT || bv.kind == TV_BOOL) base = bv.kind == TV_INT ? bv.u.i : bv.u.b;
        else if (bv.kind != TV_UNDEF) base = -1; /* TypeError: the float fallback below */
        int64_t r;
        int rc = base >= 0 && base <= 36 ? py_parse_int(tmp, (int)base, &r) : -1;
        if (rc == 0) return tv_int(r);
        if (rc > 0) {
            char what[80];
            snprintf(what, sizeof what, "'%.40s%s'|int", tmp, strlen(tmp) > 40 ? "..." : "");
            int_too_big(ev, at, what);
        }
        double d;
        if (!py_parse_float(tmp, &d) || isnan(d) || isinf(d)) return def;
        return tv_int(float_to_int(ev, d, at));
    }
    case TV_UNDEF: tmpl_ev_check_defined(ev, v, at); return def;
    default: return def;
    }
}

/* Jinja do_float: float(value), the default on TypeError / ValueError. */
static struct tval f_float(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    bool has_def;
    struct tval def = tmpl_arg(a, 0, "default", &has_def);
    if (!has_def) def = tv_float(0);
    switch (v.kind) {
    case TV_INT: return tv_float((double)v.u.i);
    case TV_BOOL: return tv_float(v.u.b);
    case TV_FLOAT: return v;
    case TV_STR: {
        char tmp[4400];
        double d;
        if (ascii_number(v, tmp, sizeof tmp) < 0 || !py_parse_float(tmp, &d)) return def;
        return tv_float(d);
    }
    case TV_UNDEF: tmpl_ev_check_defined(ev, v, at); return def;
    default: return def;
    }
}

/* Python round(x, ndigits) for a float: the correctly rounded decimal (half to even on exact
 * ties), as CPython's dtoa-based double_round; glibc's printf is exact, so "%.*f" is that for
 * ndigits >= 0, and negative ndigits round the exact integer digits by hand. */
static double round_float(double x, int64_t nd)
{
    if (!isfinite(x) || x == 0) return x;
    if (nd > 323) return x;
    if (nd < -308) return 0.0 * x;
    char buf[720];
    if (nd >= 0) {
        snprintf(buf, sizeof buf, "%.*f", (int)nd, x);
        return strtod(buf, NULL);
    }
    size_t k = (size_t)-nd;
    double ax = fabs(x), ip = floor(ax);
    bool sticky = ax != ip; /* a fraction below the integer digits breaks ties upward */
    char d[720];
    int len = snprintf(d, sizeof d, "%.0f", ip); /* exact: ip is an integer */
    /* remainder = the last k digits (zero-padded on the left), quotient = the rest */
    size_t L = (size_t)len;
    char rem[720];
    size_t pad = k > L ? k - L : 0;
    memset(rem, '0', pad);
    memcpy(rem + pad, d + (L > k ? L - k : 0), L > k ? k : L);
    rem[k] = '\0';
    size_t qn = L > k ? L - k : 0;
    char q[720];
    memcpy(q, d, qn);
    q[qn] = '\0';
    int c = rem[0] - '5';
    if (c == 0) {
        for (size_t i = 1; i < k && !c; i++) c = rem[i] != '0';
        if (!c && sticky) c = 1;
    }
    bool up = c > 0 || (c == 0 && qn && (q[qn - 1] - '0') % 2 == 1);
    if (up) { /* q += 1, in decimal */
        size_t i = qn;
        while (i > 0 && q[i - 1] == '9') q[--i] = '0';
        if (i == 0) {
            memmove(q + 1, q, qn + 1);
            q[0] = '1';
            qn++;
        } else q[i - 1]++;
    }
    if (!qn) return copysign(0.0, x);
    char out[1500];
    snprintf(out, sizeof out, "%s%se%zu", x < 0 ? "-" : "", q, k);
    return strtod(out, NULL);
}

/* Python round(i, ndigits) for an int: half to even at 10**-ndigits, exact or refused. */
static int64_t round_int(struct tmpl_ev *ev, int64_t x, int64_t nd, const struct tmpl_node *at)
{
    if (nd >= 0) return x;
    if (nd < -19) return 0; /* |x| < 10**19 / 2 */
    uint64_t m = 1;
    for (int64_t i = 0; i < -nd && i < 19; i++) m *= 10;
    uint64_t ax = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
    uint64_t q = ax / m, r = ax % m;
    if (r > m - r || (r == m - r && (q & 1))) q++;
    uint64_t lim = x < 0 ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (q && q > lim / m) {
        char what[64];
        snprintf(what, sizeof what, "round(%lld, %lld)", (long long)x, (long long)nd);
        int_too_big(ev, at, what);
    }
    uint64_t y = q * m;
    return x < 0 ? (int64_t)(0 - y) : (int64_t)y;
}

/* Jinja do_round: method 'common' is Python's round(value, precision) (an int stays an int);
 * 'floor'/'ceil' are math.floor/ceil(value * 10**precision) / 10**precision, a float. */
static struct tval f_round(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval pv = tmpl_arg(a, 0, "precision", NULL);
    struct tval m = tmpl_arg(a, 1, "method", NULL);
    bool common = m.kind == TV_UNDEF || tmpl_is_str(m, "common");
    if (!common && !tmpl_is_str(m, "floor") && !tmpl_is_str(m, "ceil"))
        tmpl_throw(ev, at, "FilterArgumentError", "method must be common, ceil or floor");
    int64_t prec = 0;
    if (pv.kind == TV_INT || pv.kind == TV_BOOL) prec = pv.kind == TV_INT ? pv.u.i : pv.u.b;
    else if (pv.kind != TV_UNDEF)
        tmpl_throw(ev, at, "TypeError", "'%s' object cannot be interpreted as an integer", tmpl_type_name(pv));
    if (v.kind != TV_INT && v.kind != TV_BOOL && v.kind != TV_FLOAT)
        tmpl_throw(ev, at, "TypeError", "type %s doesn't define __round__ method", tmpl_type_name(v));
    bool is_int = v.kind != TV_FLOAT;
    int64_t iv = v.kind == TV_INT ? v.u.i : v.kind == TV_BOOL ? v.u.b : 0;
    if (common) return is_int ? tv_int(round_int(ev, iv, prec, at)) : tv_float(round_float(v.u.f, prec));
    bool up = tmpl_is_str(m, "ceil");
    if (prec >= 0 && is_int) { /* exact: value * 10**p is an int, and so is its floor */
        int64_t s = 1;
        for (int64_t i = 0; i < prec; i++)
            if (__builtin_mul_overflow(s, 10, &s)) int_too_big(ev, at, "10 ** precision");
        int64_t y;
        if (__builtin_mul_overflow(iv, s, &y)) int_too_big(ev, at, "value * 10 ** precision");
        return tv_float((double)((long double)y / (long double)s));
    }
    if (prec > 308)
        tmpl_throw(ev, at, "OverflowError", "int too large to convert to float");
    double s = pow(10.0, (double)prec), x = is_int ? (double)iv : v.u.f;
    double y = x * s;
    if (isinf(y)) tmpl_throw(ev, at, "OverflowError", "cannot convert float infinity to integer");
    if (isnan(y)) tmpl_throw(ev, at, "ValueError", "cannot convert float NaN to integer");
    return tv_float((up ? ceil(y) : floor(y)) / s);
}

/* Order of two sort keys of the same class (numbers, or strings compared by bytes, ASCII
 * case folded when ci). The flag is a parameter, not a global: renders run on many threads. */
static int cmp_vals(const struct tval *a, const struct tval *b, bool ci)
{
    if (a->kind == TV_STR && b->kind == TV_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        int c = 0;
        for (size_t i = 0; i < n && !c; i++) {
            int x = (unsigned char)a->u.s.p[i], y = (unsigned char)b->u.s.p[i];
            if (ci) {
                if (x >= 'A' && x <= 'Z') x += 32;
                if (y >= 'A' && y <= 'Z') y += 32;
            }
            c = x - y;
        }
        if (c) return c;
        return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
    }
    if (a->kind != TV_FLOAT && b->kind != TV_FLOAT) { /* ints compare exactly, not as doubles */
        int64_t x = a->kind == TV_INT ? a->u.i : a->kind == TV_BOOL ? a->u.b : 0;
        int64_t y = b->kind == TV_INT ? b->u.i : b->kind == TV_BOOL ? b->u.b : 0;
        return x < y ? -1 : x > y;
    }
    if (a->kind != TV_FLOAT || b->kind != TV_FLOAT) {
        bool a_int = a->kind != TV_FLOAT;
        int c = tmpl_cmp_int_float(a_int ? (a->kind == TV_INT ? a->u.i : a->u.b) : (b->kind == TV_INT ? b->u.i : b->u.b),
                                   a_int ? b->u.f : a->u.f);
        if (c == 2) return 0; /* NaN: unordered, Python's sort leaves it in place */
        return a_int ? c : -c;
    }
    double x = a->u.f, y = b->u.f;
    return x < y ? -1 : x > y;
}

static bool same_sort_class(struct tval a, struct tval b)
{
    bool an = a.kind == TV_INT || a.kind == TV_FLOAT || a.kind == TV_BOOL;
    bool bn = b.kind == TV_INT || b.kind == TV_FLOAT || b.kind == TV_BOOL;
    return (an && bn) || (a.kind == TV_STR && b.kind == TV_STR);
}

/* Stable merge sort of vals[0..n) (with keys[0..n) moved alongside when keys != NULL; the
 * comparison looks at keys, or at vals when keys is NULL). O(n log n) comparisons, each
 * charged to the meter: an insertion sort of a 100000-item list would be 5e9 steps. */
typedef int (*sort_cmp_fn)(struct tmpl_ev *ev, const struct tval *a, const struct tval *b, bool ci,
                           const struct tmpl_node *at);
static void merge_sort(struct tmpl_ev *ev, struct tval *vals, struct tval *keys, size_t n,
                       sort_cmp_fn cmp, bool ci, bool reverse, const struct tmpl_node *at)
{
    if (n < 2) return;
    struct tval *tv = tmpl_ev_alloc(ev, n * sizeof *tv), *tk = keys ? tmpl_ev_alloc(ev, n * sizeof *tk) : NULL;
    struct tval *k = keys ? keys : vals;
    for (size_t w = 1; w < n; w *= 2) {
        tmpl_ev_tick(ev, n, at);
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int c = cmp(ev, &k[j], &k[i], ci, at);
                /* take from the right only when strictly before: keeps equal items in order */
                bool right = reverse ? c > 0 : c < 0;
                size_t s = right ? j++ : i++;
                tv[o] = vals[s];
                if (keys) tk[o] = keys[s];
                o++;
            }
            for (; i < mid; i++, o++) {
                tv[o] = vals[i];
                if (keys) tk[o] = keys[i];
            }
            for (; j < hi; j++, o++) {
                tv[o] = vals[j];
                if (keys) tk[o] = keys[j];
            }
        }
        memcpy(vals, tv, n * sizeof *tv);
        if (keys) memcpy(keys, tk, n * sizeof *tk);
    }
}

static int sort_cmp(struct tmpl_ev *ev, const struct tval *a, const struct tval *b, bool ci,
                    const struct tmpl_node *at)
{
    (void)ev;
    (void)at;
    return cmp_vals(a, b, ci);
}

/* Python's sort raises on keys it cannot order (an int and a str): dictsort and min/max check
 * each comparison */
static int checked_cmp(struct tmpl_ev *ev, const struct tval *x, const struct tval *y, bool ci,
                       const struct tmpl_node *at)
{
    if (!same_sort_class(*x, *y))
        tmpl_throw(ev, at, "TypeError", "'<' not supported between instances of '%s' and '%s'",
                   tmpl_type_name(*x), tmpl_type_name(*y));
    return cmp_vals(x, y, ci);
}

typedef struct tval (*filter_fn)(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a,
                                 const struct tmpl_node *at);

static struct tval f_default(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)ev, (void)at;
    bool has;
    struct tval def = tmpl_arg(a, 0, "default_value", &has);
    if (!has) def = tv_str("", 0);
    bool boolean = tmpl_truthy(tmpl_arg(a, 1, "boolean", NULL));
    if (v.kind == TV_UNDEF || (boolean && !tmpl_truthy(v))) return def;
    return v;
}

/* Hugging Face replaces Jinja's tojson (which HTML-escapes) with
 * tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) = json.dumps with
 * those arguments; note the first positional argument is ensure_ascii, not indent. */
static struct tval f_tojson(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval ind = tmpl_arg(a, 1, "indent", NULL), sep = tmpl_arg(a, 2, "separators", NULL);
    struct tmpl_json_opts o = {.item_sep = ", ", .item_sep_n = 2, .key_sep = ": ", .key_sep_n = 2};
    o.ensure_ascii = tmpl_truthy(tmpl_arg(a, 0, "ensure_ascii", NULL));
    o.sort_keys = tmpl_truthy(tmpl_arg(a, 3, "sort_keys", NULL));
    if (ind.kind != TV_UNDEF && ind.kind != TV_NONE) {
        o.pretty = true;
        o.item_sep = ",";
        o.item_sep_n = 1;
        if (ind.kind == TV_STR) {
            o.indent = ind.u.s.p;
            o.indent_n = ind.u.s.n;
        } else {
            int64_t n = int_arg(ev, ind, at, "indent");
            if (n < 0) n = 0; /* Python: ' ' * -1 is '', i.e. newlines only */
            char *sp = tmpl_ev_alloc(ev, (size_t)n + 1); /* a huge n is a MemoryError here */
            memset(sp, ' ', (size_t)n);
            o.indent = sp;
            o.indent_n = (size_t)n;
        }
    }
    if (sep.kind != TV_UNDEF && sep.kind != TV_NONE) {
        if (sep.kind != TV_LIST || (sep.flags & TVF_GEN) || sep.u.l->n != 2 ||
            sep.u.l->v[0].kind != TV_STR || sep.u.l->v[1].kind != TV_STR)
            tmpl_throw(ev, at, "TypeError", "separators must be an (item_separator, key_separator) pair of strings");
        o.item_sep = sep.u.l->v[0].u.s.p;
        o.item_sep_n = sep.u.l->v[0].u.s.n;
        o.key_sep = sep.u.l->v[1].u.s.p;
        o.key_sep_n = sep.u.l->v[1].u.s.n;
    }
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    struct tmpl_json_error err;
    if (!tmpl_to_json(&b, v, &o, 0, &err)) tmpl_throw(ev, at, err.kind, "%s", err.msg);
    return buf_val(ev, &b);
}

static struct tval f_string(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return tmpl_ev_str(ev, v);
}

static struct tval f_safe(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    struct tval s = tmpl_ev_str(ev, v);
    s.flags |= TVF_SAFE;
    return s;
}

static struct tval f_forceescape(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    struct tval s = tmpl_ev_str(ev, v);
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    tmpl_html_escape(&b, s.u.s.p, s.u.s.n);
    s = buf_val(ev, &b);
    s.flags |= TVF_SAFE;
    return s;
}

/* markupsafe.escape: a Markup string is already escaped */
static struct tval f_escape(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval s = tmpl_ev_str(ev, v);
    if (s.flags & TVF_SAFE) return s;
    return f_forceescape(ev, s, a, at);
}

static struct tval f_trim(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)at;
    return strip(ev, tmpl_ev_str(ev, v), tmpl_arg(a, 0, "chars", NULL), true, true);
}

static struct tval f_upper(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, tmpl_ev_str(ev, v), CASE_UPPER);
}

static struct tval f_lower(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, tmpl_ev_str(ev, v), CASE_LOWER);
}

static struct tval f_title(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, tmpl_ev_str(ev, v), CASE_TITLE_JINJA);
}

static struct tval f_capitalize(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, tmpl_ev_str(ev, v), CASE_CAPITALIZE);
}

static struct tval f_replace(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval s = tmpl_ev_str(ev, v);
    struct tval old = tmpl_ev_str(ev, tmpl_arg(a, 0, "old", NULL));
    struct tval nw = tmpl_ev_str(ev, tmpl_arg(a, 1, "new", NULL));
    bool has;
    struct tval c = tmpl_arg(a, 2, "count", &has);
    return replace(ev, s, old, nw, has && c.kind != TV_NONE ? int_arg(ev, c, at, "count") : -1);
}

static struct tval f_indent(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return indent(ev, tmpl_ev_str(ev, v), a, at);
}

static struct tval f_length(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    switch (v.kind) {
    case TV_UNDEF: return tv_int(0);
    case TV_STR: return tv_int((int64_t)tmpl_utf8_count(v.u.s.p, v.u.s.n));
    case TV_LIST:
        if (v.flags & TVF_GEN) break;
        return tv_int((int64_t)v.u.l->n);
    case TV_DICT: return tv_int((int64_t)v.u.d->n);
    default: break;
    }
    tmpl_throw(ev, at, "TypeError", "object of type '%s' has no len()", tmpl_type_name(v));
}

static struct tval f_list(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    struct tval l = tmpl_ev_list_of(ev, v, at);
    struct tval r = mk_list(ev, l.u.l->n, 0);
    memcpy(r.u.l->v, l.u.l->v, l.u.l->n * sizeof(struct tval));
    r.u.l->n = l.u.l->n;
    return r;
}

static struct tval f_first(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    struct tval l = tmpl_ev_list_of(ev, v, at);
    return l.u.l->n ? l.u.l->v[0] : tv_undef();
}

static struct tval f_last(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    struct tval l = tmpl_ev_list_of(ev, v, at);
    return l.u.l->n ? l.u.l->v[l.u.l->n - 1] : tv_undef();
}

static struct tval f_reverse(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    struct tval l = tmpl_ev_list_of(ev, v, at);
    if (v.kind == TV_STR) {
        struct tmpl_buf b;
        tmpl_buf_init(&b, tmpl_ev_arena(ev));
        tmpl_buf_add(&b, "", 0);
        for (size_t i = l.u.l->n; i-- > 0;) tmpl_buf_add(&b, l.u.l->v[i].u.s.p, l.u.l->v[i].u.s.n);
        return buf_val(ev, &b);
    }
    struct tval r = mk_list(ev, l.u.l->n, TVF_GEN);
    for (size_t i = 0; i < l.u.l->n; i++) r.u.l->v[i] = l.u.l->v[l.u.l->n - 1 - i];
    r.u.l->n = l.u.l->n;
    return r;
}

static struct tval f_join(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval l = tmpl_ev_list_of(ev, v, at);
    struct tval sep = tmpl_arg(a, 0, "d", NULL);
    sep = sep.kind == TV_UNDEF ? tv_str("", 0) : tmpl_ev_str(ev, sep);
    bool has_attr;
    struct tval attr = tmpl_arg(a, 1, "attribute", &has_attr);
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    for (size_t i = 0; i < l.u.l->n; i++) {
        tmpl_ev_tick(ev, 1, at);
        if (i) tmpl_buf_add(&b, sep.u.s.p, sep.u.s.n);
        struct tval x = has_attr ? attr_path(ev, l.u.l->v[i], attr, at) : l.u.l->v[i];
        tmpl_py_str(&b, x);
    }
    return buf_val(ev, &b);
}

static struct tval f_items(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    if (v.kind == TV_UNDEF) return mk_list(ev, 0, 0);
    if (v.kind != TV_DICT) tmpl_throw(ev, at, "TypeError", "Can only get item pairs from a mapping.");
    struct tval r = mk_list(ev, v.u.d->n, TVF_GEN);
    for (size_t i = 0; i < v.u.d->n; i++) {
        struct tval t = mk_list(ev, 2, TVF_TUPLE);
        t.u.l->v[0] = v.u.d->k[i];
        t.u.l->v[1] = v.u.d->v[i];
        t.u.l->n = 2;
        r.u.l->v[i] = t;
    }
    r.u.l->n = v.u.d->n;
    return r;
}

/* Jinja do_dictsort: sorted(d.items(), key=item[0 or 1], reverse=reverse), strings compared
 * case-insensitively unless case_sensitive */
static struct tval f_dictsort(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    bool ci = !tmpl_truthy(tmpl_arg(a, 0, "case_sensitive", NULL));
    bool has_by;
    struct tval by = tmpl_arg(a, 1, "by", &has_by);
    bool rev = tmpl_truthy(tmpl_arg(a, 2, "reverse", NULL));
    int pos = 0;
    if (has_by && !tmpl_is_str(by, "key")) {
        if (!tmpl_is_str(by, "value"))
            tmpl_throw(ev, at, "FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
        pos = 1;
    }
    if (v.kind != TV_DICT) tmpl_throw(ev, at, "TypeError", "You can only sort by either \"key\" or \"value\"");
    struct tval r = f_items(ev, v, &(struct tmpl_args){0}, at);
    r.flags = 0;
    size_t n = r.u.l->n;
    struct tval *keys = tmpl_ev_alloc(ev, (n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = r.u.l->v[i].u.l->v[pos];
    merge_sort(ev, r.u.l->v, keys, n, checked_cmp, ci, rev, at);
    return r;
}

static struct tval f_map(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return map_impl(ev, v, a, at);
}

static struct tval f_select(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return select_impl(ev, v, a, false, true, at);
}

static struct tval f_reject(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return select_impl(ev, v, a, false, false, at);
}

static struct tval f_selectattr(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return select_impl(ev, v, a, true, true, at);
}

static struct tval f_rejectattr(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return select_impl(ev, v, a, true, false, at);
}

static struct tval f_unique(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval l = tmpl_ev_list_of(ev, v, at);
    bool cs = tmpl_truthy(tmpl_arg(a, 0, "case_sensitive", NULL));
    bool has_attr;
    struct tval attr = tmpl_arg(a, 1, "attribute", &has_attr);
    struct tval r = mk_list(ev, l.u.l->n, TVF_GEN), seen = mk_list(ev, l.u.l->n, 0);
    size_t k = 0;
    for (size_t i = 0; i < l.u.l->n; i++) {
        struct tval key = has_attr ? attr_path(ev, l.u.l->v[i], attr, at) : l.u.l->v[i];
        if (!cs && key.kind == TV_STR) key = change_case(ev, key, CASE_LOWER);
        bool dup = false;
        tmpl_ev_tick(ev, k, at);
        for (size_t j = 0; j < k && !dup; j++) dup = tmpl_equal(seen.u.l->v[j], key);
        if (dup) continue;
        seen.u.l->v[k] = key;
        r.u.l->v[k++] = l.u.l->v[i];
    }
    r.u.l->n = k;
    return r;
}

static struct tval f_sort(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval l = tmpl_ev_list_of(ev, v, at);
    bool rev = tmpl_truthy(tmpl_arg(a, 0, "reverse", NULL));
    bool ci = !tmpl_truthy(tmpl_arg(a, 1, "case_sensitive", NULL));
    bool has_attr;
    struct tval attr = tmpl_arg(a, 2, "attribute", &has_attr);
    size_t n = l.u.l->n;
    struct tval r = mk_list(ev, n, 0), keys = mk_list(ev, n, 0);
    memcpy(r.u.l->v, l.u.l->v, n * sizeof(struct tval));
    for (size_t i = 0; i < n; i++) keys.u.l->v[i] = has_attr ? attr_path(ev, r.u.l->v[i], attr, at) : r.u.l->v[i];
    for (size_t i = 1; i < n; i++) {
        if (!same_sort_class(keys.u.l->v[0], keys.u.l->v[i]))
            tmpl_throw(ev, at, "TypeError", "'<' not supported between instances of '%s' and '%s'",
                       tmpl_type_name(keys.u.l->v[i]), tmpl_type_name(keys.u.l->v[0]));
    }
    merge_sort(ev, r.u.l->v, keys.u.l->v, n, sort_cmp, ci, rev, at);
    r.u.l->n = n;
    return r;
}

static struct tval f_abs(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    if (v.kind == TV_INT) {
        if (v.u.i == INT64_MIN) int_too_big(ev, at, "abs(-9223372036854775808)");
        return tv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    if (v.kind == TV_FLOAT) return tv_float(fabs(v.u.f));
    if (v.kind == TV_BOOL) return tv_int(v.u.b);
    tmpl_throw(ev, at, "TypeError", "bad operand type for abs(): '%s'", tmpl_type_name(v));
}

static struct tval f_sum(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval l = tmpl_ev_list_of(ev, v, at);
    bool has_attr;
    struct tval attr = tmpl_arg(a, 0, "attribute", &has_attr);
    bool has_start;
    struct tval acc = tmpl_arg(a, 1, "start", &has_start);
    if (!has_start) acc = tv_int(0);
    for (size_t i = 0; i < l.u.l->n; i++) { /* Python sum(): start + x0 + x1 ... */
        tmpl_ev_tick(ev, 1, at);
        struct tval x = has_attr ? attr_path(ev, l.u.l->v[i], attr, at) : l.u.l->v[i];
        if (acc.kind == TV_STR) tmpl_throw(ev, at, "TypeError", "sum() can't sum strings [use ''.join(seq) instead]");
        acc = tmpl_ev_arith(ev, OP_ADD, acc, x, at);
    }
    return acc;
}

/* Jinja _min_or_max: min/max(items, key=attribute of each, strings case-folded unless
 * case_sensitive); the first of equal items wins, as in Python */
static struct tval min_max(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, bool want_max,
                           const struct tmpl_node *at)
{
    struct tval l = tmpl_ev_list_of(ev, v, at);
    if (l.u.l->n == 0) return tv_undef();
    bool ci = !tmpl_truthy(tmpl_arg(a, 0, "case_sensitive", NULL));
    bool has_attr;
    struct tval attr = tmpl_arg(a, 1, "attribute", &has_attr);
    size_t best = 0;
    struct tval best_key = has_attr ? attr_path(ev, l.u.l->v[0], attr, at) : l.u.l->v[0];
    tmpl_ev_tick(ev, l.u.l->n, at);
    for (size_t i = 1; i < l.u.l->n; i++) {
        struct tval key = has_attr ? attr_path(ev, l.u.l->v[i], attr, at) : l.u.l->v[i];
        int c = checked_cmp(ev, &key, &best_key, ci, at);
        if (want_max ? c > 0 : c < 0) {
            best = i;
            best_key = key;
        }
    }
    return l.u.l->v[best];
}

static struct tval f_min(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return min_max(ev, v, a, false, at);
}

static struct tval f_max(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return min_max(ev, v, a, true, at);
}

static struct tval f_attr(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval n = str_arg(ev, tmpl_arg(a, 0, "name", NULL), at, "attribute name");
    return tmpl_ev_getattr(ev, v, n.u.s.p, n.u.s.n, at);
}

static struct tval f_wordcount(struct tmpl_ev *ev, struct tval v, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a;
    struct tval s = tmpl_ev_str(ev, v);
    return tv_int((int64_t)split(ev, s, tv_none(), -1, at).u.l->n);
}

static const struct {
    const char *name;
    filter_fn fn;
    struct tmpl_sig sig;
} filters[] = {
    {"abs", f_abs, {"", 0}},
    {"attr", f_attr, {"name", 1}},
    {"capitalize", f_capitalize, {"", 0}},
    {"count", f_length, {"", 0}},
    {"d", f_default, {"default_value boolean", 0}},
    {"default", f_default, {"default_value boolean", 0}},
    {"dictsort", f_dictsort, {"case_sensitive by reverse", 0}},
    {"e", f_escape, {"", 0}},
    {"escape", f_escape, {"", 0}},
    {"first", f_first, {"", 0}},
    {"float", f_float, {"default", 0}},
    {"forceescape", f_forceescape, {"", 0}},
    {"indent", f_indent, {"width first blank", 0}},
    {"int", f_int, {"default base", 0}},
    {"items", f_items, {"", 0}},
    {"join", f_join, {"d attribute", 0}},
    {"last", f_last, {"", 0}},
    {"length", f_length, {"", 0}},
    {"list", f_list, {"", 0}},
    {"lower", f_lower, {"", 0}},
    {"map", f_map, {NULL, 0}},
    {"max", f_max, {"case_sensitive attribute", 0}},
    {"min", f_min, {"case_sensitive attribute", 0}},
    {"reject", f_reject, {NULL, 0}},
    {"rejectattr", f_rejectattr, {NULL, 0}},
    {"replace", f_replace, {"old new count", 2}},
    {"reverse", f_reverse, {"", 0}},
    {"round", f_round, {"precision method", 0}},
    {"safe", f_safe, {"", 0}},
    {"select", f_select, {NULL, 0}},
    {"selectattr", f_selectattr, {NULL, 0}},
    {"sort", f_sort, {"reverse case_sensitive attribute", 0}},
    {"string", f_string, {"", 0}},
    {"strip", f_trim, {"chars", 0}}, /* not Jinja's; kept for templates written for tern */
    {"sum", f_sum, {"attribute start", 0}},
    {"title", f_title, {"", 0}},
    {"tojson", f_tojson, {"ensure_ascii indent separators sort_keys", 0}},
    {"trim", f_trim, {"chars", 0}},
    {"unique", f_unique, {"case_sensitive attribute", 0}},
    {"upper", f_upper, {"", 0}},
    {"wordcount", f_wordcount, {"", 0}},
};

static int find_filter(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (name_is(name, len, filters[i].name)) return (int)i;
    return -1;
}

struct tval tmpl_apply_filter(struct tmpl_ev *ev, const char *name, struct tval v,
                              const struct tmpl_args *a, const struct tmpl_node *at)
{
    int i = find_filter(name, strlen(name));
    if (i < 0) tmpl_throw(ev, at, "TemplateAssertionError", "no filter named '%s'", name);
    check_args(ev, "filter", name, filters[i].sig, a, at);
    return filters[i].fn(ev, v, a, at);
}

/* ------------------------------------------------------------------ methods
 *
 * Python methods of str, dict and list that templates call (`s.strip()`, `d.get(k)`). A row
 * without a function is a method Python has that tern does not run: str ones fail with
 * NotImplementedError, and the dict/list ones that mutate fail with SecurityError, as in
 * Hugging Face's ImmutableSandboxedEnvironment. Attribute lookup (`x.name`) finds methods
 * before dict keys, as jinja2's getattr does, so every row here shadows a key of that name. */

typedef struct tval (*method_fn)(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a,
                                 const struct tmpl_node *at);

struct method {
    const char *name;
    method_fn fn; /* NULL: exists in Python, refused here */
    struct tmpl_sig sig;
};

static bool all_cp(struct tval s, int kind)
{
    if (s.u.s.n == 0) return false;
    tmpl_meter.work += s.u.s.n / 16; /* a utf8proc lookup per code point */
    bool cased = false;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t k;
        int32_t cp = cp_at(s.u.s.p, s.u.s.n, i, &k);
        i += k;
        utf8proc_category_t c = utf8proc_category(cp);
        switch (kind) {
        case 0: if (!(c == UTF8PROC_CATEGORY_ND)) return false; break;
        case 1: if (!is_alpha_cp(cp)) return false; break;
        case 2: if (!is_alpha_cp(cp) && c != UTF8PROC_CATEGORY_ND && c != UTF8PROC_CATEGORY_NL && c != UTF8PROC_CATEGORY_NO) return false; break;
        case 3: if (!tmpl_is_space_cp(cp)) return false; break;
        case 4: if (c == UTF8PROC_CATEGORY_LL) return false; if (c == UTF8PROC_CATEGORY_LU) cased = true; break;
        case 5: if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) return false; if (c == UTF8PROC_CATEGORY_LL) cased = true; break;
        }
    }
    return kind >= 4 ? cased : true;
}

static struct tval strip_chars(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a,
                               bool left, bool right, const struct tmpl_node *at)
{
    struct tval chars = tmpl_arg(a, 0, "chars", NULL);
    if (chars.kind != TV_UNDEF && chars.kind != TV_NONE) str_arg(ev, chars, at, "strip arg");
    return strip(ev, s, chars, left, right);
}

static struct tval m_strip(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return strip_chars(ev, s, a, true, true, at);
}

static struct tval m_lstrip(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return strip_chars(ev, s, a, true, false, at);
}

static struct tval m_rstrip(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return strip_chars(ev, s, a, false, true, at);
}

static struct tval split_args(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, bool right,
                              const struct tmpl_node *at)
{
    struct tval sep = tmpl_arg(a, 0, "sep", NULL);
    struct tval ms = tmpl_arg(a, 1, "maxsplit", NULL);
    int64_t maxsplit = ms.kind == TV_UNDEF ? -1 : int_arg(ev, ms, at, "maxsplit");
    if (right && maxsplit >= 0)
        tmpl_throw(ev, at, "NotImplementedError", "rsplit with maxsplit is not supported");
    return split(ev, s, sep, maxsplit, at);
}

static struct tval m_split(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return split_args(ev, s, a, false, at);
}

static struct tval m_rsplit(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return split_args(ev, s, a, true, at);
}

static struct tval starts_ends(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, bool start,
                               const struct tmpl_node *at)
{
    struct tval x = tmpl_arg(a, 0, NULL, NULL);
    if (x.kind == TV_LIST && (x.flags & TVF_TUPLE)) {
        for (size_t i = 0; i < x.u.l->n; i++)
            if (affix(s, str_arg(ev, x.u.l->v[i], at, "prefix"), start)) return tv_bool(true);
        return tv_bool(false);
    }
    str_arg(ev, x, at, start ? "startswith first arg" : "endswith first arg");
    return tv_bool(affix(s, x, start));
}

static struct tval m_startswith(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return starts_ends(ev, s, a, true, at);
}

static struct tval m_endswith(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return starts_ends(ev, s, a, false, at);
}

static struct tval m_upper(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, s, CASE_UPPER);
}

static struct tval m_lower(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, s, CASE_LOWER);
}

static struct tval m_title(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, s, CASE_TITLE_PY);
}

static struct tval m_capitalize(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return change_case(ev, s, CASE_CAPITALIZE);
}

static struct tval m_swapcase(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    for (size_t i = 0; i < s.u.s.n;) {
        size_t k;
        int32_t cp = cp_at(s.u.s.p, s.u.s.n, i, &k);
        int32_t u = utf8proc_toupper(cp);
        put_cp(&b, u != cp ? u : utf8proc_tolower(cp));
        i += k;
    }
    return buf_val(ev, &b);
}

static struct tval m_replace(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval old = str_arg(ev, tmpl_arg(a, 0, NULL, NULL), at, "replace arg 1");
    struct tval nw = str_arg(ev, tmpl_arg(a, 1, NULL, NULL), at, "replace arg 2");
    struct tval c = tmpl_arg(a, 2, "count", NULL);
    return replace(ev, s, old, nw, c.kind == TV_UNDEF ? -1 : int_arg(ev, c, at, "count"));
}

static struct tval m_count(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval sub = str_arg(ev, tmpl_arg(a, 0, NULL, NULL), at, "substring");
    int64_t c = 0;
    if (sub.u.s.n == 0) return tv_int((int64_t)tmpl_utf8_count(s.u.s.p, s.u.s.n) + 1);
    for (size_t i = 0; i + sub.u.s.n <= s.u.s.n;) {
        const char *f = find_sub(s.u.s.p + i, s.u.s.n - i, sub.u.s.p, sub.u.s.n);
        if (!f) break;
        c++;
        i = (size_t)(f - s.u.s.p) + sub.u.s.n;
    }
    return tv_int(c);
}

static struct tval find_index(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, bool raise,
                              const struct tmpl_node *at)
{
    struct tval sub = str_arg(ev, tmpl_arg(a, 0, NULL, NULL), at, "substring");
    const char *f = find_sub(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n);
    if (!f) {
        if (raise) tmpl_throw(ev, at, "ValueError", "substring not found");
        return tv_int(-1);
    }
    return tv_int((int64_t)tmpl_utf8_count(s.u.s.p, (size_t)(f - s.u.s.p)));
}

static struct tval m_find(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return find_index(ev, s, a, false, at);
}

static struct tval m_str_index(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return find_index(ev, s, a, true, at);
}

static struct tval m_join(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval l = tmpl_ev_list_of(ev, tmpl_arg(a, 0, NULL, NULL), at);
    struct tmpl_buf b;
    tmpl_buf_init(&b, tmpl_ev_arena(ev));
    tmpl_buf_add(&b, "", 0);
    for (size_t i = 0; i < l.u.l->n; i++) {
        tmpl_ev_tick(ev, 1, at);
        if (i) tmpl_buf_add(&b, s.u.s.p, s.u.s.n);
        struct tval x = l.u.l->v[i];
        if (x.kind != TV_STR)
            tmpl_throw(ev, at, "TypeError", "sequence item %zu: expected str instance, %s found", i, tmpl_type_name(x));
        tmpl_buf_add(&b, x.u.s.p, x.u.s.n);
    }
    return buf_val(ev, &b);
}

static struct tval m_splitlines(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    return splitlines(ev, s);
}

#define CLASS_METHOD(fname, kind)                                                                          \
    static struct tval fname(struct tmpl_ev *ev, struct tval s, const struct tmpl_args *a,                   \
                             const struct tmpl_node *at)                                                     \
    {                                                                                                        \
        (void)ev, (void)a, (void)at;                                                                         \
        return tv_bool(all_cp(s, kind));                                                                     \
    }
CLASS_METHOD(m_isdigit, 0)
CLASS_METHOD(m_isalpha, 1)
CLASS_METHOD(m_isalnum, 2)
CLASS_METHOD(m_isspace, 3)
CLASS_METHOD(m_isupper, 4)
CLASS_METHOD(m_islower, 5)
#undef CLASS_METHOD

static const struct method str_methods[] = {
    {"capitalize", m_capitalize, {"", 0}},
    {"center", NULL, {NULL, 0}},
    {"count", m_count, {"sub /", 1}},
    {"endswith", m_endswith, {"suffix /", 1}},
    {"find", m_find, {"sub /", 1}},
    {"format", NULL, {NULL, 0}},
    {"index", m_str_index, {"sub /", 1}},
    {"isalnum", m_isalnum, {"", 0}},
    {"isalpha", m_isalpha, {"", 0}},
    {"isdigit", m_isdigit, {"", 0}},
    {"islower", m_islower, {"", 0}},
    {"isspace", m_isspace, {"", 0}},
    {"isupper", m_isupper, {"", 0}},
    {"join", m_join, {"iterable /", 1}},
    {"ljust", NULL, {NULL, 0}},
    {"lower", m_lower, {"", 0}},
    {"lstrip", m_lstrip, {"chars /", 0}},
    {"partition", NULL, {NULL, 0}},
    {"replace", m_replace, {"old new count /", 2}},
    {"rjust", NULL, {NULL, 0}},
    {"rsplit", m_rsplit, {"sep maxsplit", 0}},
    {"rstrip", m_rstrip, {"chars /", 0}},
    {"split", m_split, {"sep maxsplit", 0}},
    {"splitlines", m_splitlines, {"", 0}},
    {"startswith", m_startswith, {"prefix /", 1}},
    {"strip", m_strip, {"chars /", 0}},
    {"swapcase", m_swapcase, {"", 0}},
    {"title", m_title, {"", 0}},
    {"upper", m_upper, {"", 0}},
    {"zfill", NULL, {NULL, 0}},
};

static struct tval m_items(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return f_items(ev, self, a, at);
}

static struct tval m_keys(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    struct tval r = mk_list(ev, self.u.d->n, 0);
    memcpy(r.u.l->v, self.u.d->k, self.u.d->n * sizeof(struct tval));
    r.u.l->n = self.u.d->n;
    return r;
}

static struct tval m_values(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)a, (void)at;
    struct tval r = mk_list(ev, self.u.d->n, 0);
    memcpy(r.u.l->v, self.u.d->v, self.u.d->n * sizeof(struct tval));
    r.u.l->n = self.u.d->n;
    return r;
}

static struct tval m_get(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)ev, (void)at;
    struct tval *v = tmpl_dict_get(self.u.d, tmpl_arg(a, 0, NULL, NULL));
    if (v) return *v;
    bool has;
    struct tval def = tmpl_arg(a, 1, "default", &has);
    return has ? def : tv_none();
}

/* templates cannot mutate, so a copy may share the original */
static struct tval m_copy(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, const struct tmpl_node *at)
{
    (void)ev, (void)a, (void)at;
    return self;
}

static const struct method dict_methods[] = {
    {"clear", NULL, {NULL, 0}},
    {"copy", m_copy, {"", 0}},
    {"get", m_get, {"key default /", 1}},
    {"items", m_items, {"", 0}},
    {"keys", m_keys, {"", 0}},
    {"pop", NULL, {NULL, 0}},
    {"popitem", NULL, {NULL, 0}},
    {"setdefault", NULL, {NULL, 0}},
    {"update", NULL, {NULL, 0}},
    {"values", m_values, {"", 0}},
};

static struct tval list_find(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, bool index,
                             const struct tmpl_node *at)
{
    struct tval x = tmpl_arg(a, 0, NULL, NULL);
    int64_t c = 0;
    tmpl_ev_tick(ev, self.u.l->n, at);
    for (size_t i = 0; i < self.u.l->n; i++)
        if (tmpl_equal(self.u.l->v[i], x)) {
            if (index) return tv_int((int64_t)i);
            c++;
        }
    if (index) tmpl_throw(ev, at, "ValueError", "value is not in list");
    return tv_int(c);
}

static struct tval m_list_index(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return list_find(ev, self, a, true, at);
}

static struct tval m_list_count(struct tmpl_ev *ev, struct tval self, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return list_find(ev, self, a, false, at);
}

static const struct method list_methods[] = {
    {"append", NULL, {NULL, 0}},
    {"clear", NULL, {NULL, 0}},
    {"copy", m_copy, {"", 0}},
    {"count", m_list_count, {"value /", 1}},
    {"extend", NULL, {NULL, 0}},
    {"index", m_list_index, {"value /", 1}},
    {"insert", NULL, {NULL, 0}},
    {"pop", NULL, {NULL, 0}},
    {"remove", NULL, {NULL, 0}},
    {"reverse", NULL, {NULL, 0}},
    {"sort", NULL, {NULL, 0}},
};

#define N_OF(t) (sizeof(t) / sizeof((t)[0]))

static const struct method *find_method(struct tval self, const char *name, size_t len)
{
    const struct method *m;
    size_t n;
    switch (self.kind) {
    case TV_STR: m = str_methods, n = N_OF(str_methods); break;
    case TV_DICT: m = dict_methods, n = N_OF(dict_methods); break;
    case TV_LIST:
        if (self.flags & TVF_GEN) return NULL;
        m = list_methods, n = N_OF(list_methods);
        break;
    default: return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (name_is(name, len, m[i].name)) return &m[i];
    return NULL;
}

bool tmpl_has_method(struct tval self, const char *name, size_t len)
{
    return find_method(self, name, len) != NULL;
}

struct tval tmpl_call_method(struct tmpl_ev *ev, struct tval self, const char *name,
                             const struct tmpl_args *a, const struct tmpl_node *at)
{
    if (self.kind == TV_LOOP && !strcmp(name, "cycle")) {
        if (a->n == 0) tmpl_throw(ev, at, "TypeError", "no items for cycling given");
        return a->pos[self.u.loop->index0 % a->n];
    }
    const struct method *m = find_method(self, name, strlen(name));
    if (m && m->fn) {
        char what[32];
        snprintf(what, sizeof what, "%s.%s", tmpl_type_name(self), m->name);
        check_args(ev, "method", what, m->sig, a, at);
        return m->fn(ev, self, a, at);
    }
    if (self.kind == TV_STR)
        tmpl_throw(ev, at, "NotImplementedError", "str.%s() is not supported by tern's template engine", name);
    tmpl_throw(ev, at, "SecurityError", "access to attribute '%s' of '%s' object is unsafe.", name,
               tmpl_type_name(self));
}

/* ------------------------------------------------------------------ globals */

typedef struct tval (*global_fn)(struct tmpl_ev *ev, const struct tmpl_args *a, const struct tmpl_node *at);

static struct tval g_raise_exception(struct tmpl_ev *ev, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval m = tmpl_ev_str(ev, tmpl_arg(a, 0, "message", NULL));
    tmpl_throw(ev, at, "TemplateError", "%.*s", (int)(m.u.s.n > 600 ? 600 : m.u.s.n), m.u.s.p);
}

static struct tval g_strftime_now(struct tmpl_ev *ev, const struct tmpl_args *a, const struct tmpl_node *at)
{
    struct tval f = str_arg(ev, tmpl_ev_str(ev, tmpl_arg(a, 0, "format", NULL)), at, "format");
    int64_t now = tmpl_ev_now(ev);
    const bool clock = now == TERN_CHAT_NOW_CLOCK;
    time_t t = clock ? time(NULL) : (time_t)now;
    struct tm tm;
    if (!(clock ? localtime_r(&t, &tm) : gmtime_r(&t, &tm)))
        tmpl_throw(ev, at, "OverflowError", "timestamp %lld out of range for strftime_now", (long long)now);
    char fmt[256], out[512];
    if (f.u.s.n >= sizeof fmt) tmpl_throw(ev, at, "ValueError", "strftime format too long");
    memcpy(fmt, f.u.s.p, f.u.s.n);
    fmt[f.u.s.n] = '\0';
    size_t n = strftime(out, sizeof out, fmt, &tm);
    return mk_str(ev, out, n);
}

/* dict(d, **kw) and namespace(d, **kw): a copy of d updated with the keywords */
static struct tval make_dict(struct tmpl_ev *ev, const struct tmpl_args *a, bool ns, const struct tmpl_node *at)
{
    struct tdict *d = tmpl_ev_alloc(ev, sizeof *d);
    size_t cap = (size_t)a->nk + 1;
    struct tval init = tmpl_arg(a, 0, NULL, NULL);
    if (init.kind == TV_DICT) cap += init.u.d->n;
    d->k = tmpl_ev_alloc(ev, cap * sizeof *d->k);
    d->v = tmpl_ev_alloc(ev, cap * sizeof *d->v);
    d->cap = cap;
    if (init.kind == TV_DICT) {
        memcpy(d->k, init.u.d->k, init.u.d->n * sizeof *d->k);
        memcpy(d->v, init.u.d->v, init.u.d->n * sizeof *d->v);
        d->n = init.u.d->n;
    } else if (init.kind != TV_UNDEF)
        tmpl_throw(ev, at, "TypeError", "%s() positional argument must be a dict", ns ? "namespace" : "dict");
    for (int i = 0; i < a->nk; i++) {
        struct tval k = tv_str(a->kwn[i], strlen(a->kwn[i]));
        struct tval *slot = tmpl_dict_get(d, k);
        if (slot) *slot = a->kwv[i];
        else {
            d->k[d->n] = k;
            d->v[d->n++] = a->kwv[i];
        }
    }
    struct tval v = {0};
    v.kind = ns ? TV_NS : TV_DICT;
    v.u.d = d;
    return v;
}

static struct tval g_namespace(struct tmpl_ev *ev, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return make_dict(ev, a, true, at);
}

static struct tval g_dict(struct tmpl_ev *ev, const struct tmpl_args *a, const struct tmpl_node *at)
{
    return make_dict(ev, a, false, at);
}

static struct tval g_range(struct tmpl_ev *ev, const struct tmpl_args *a, const struct tmpl_node *at)
{
    int64_t start = 0, stop, step = 1;
    if (a->n == 1) stop = int_arg(ev, a->pos[0], at, "range stop");
    else if (a->n == 2 || a->n == 3) {
        start = int_arg(ev, a->pos[0], at, "range start");
        stop = int_arg(ev, a->pos[1], at, "range stop");
        if (a->n == 3) step = int_arg(ev, a->pos[2], at, "range step");
    } else tmpl_throw(ev, at, "TypeError", "range expected 1 to 3 arguments, got %d", a->n);
    if (step == 0) tmpl_throw(ev, at, "ValueError", "range() arg 3 must not be zero");
    /* exact length in unsigned arithmetic: (stop - start) can exceed int64 */
    uint64_t cnt = 0;
    if (step > 0 && start < stop)
        cnt = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
    else if (step < 0 && start > stop)
        cnt = ((uint64_t)start - (uint64_t)stop - 1) / (0 - (uint64_t)step) + 1;
    if (cnt > 100000) /* the sandbox's MAX_RANGE */
        tmpl_throw(ev, at, "OverflowError", "Range too big. The sandbox blocks ranges larger than "
                   "MAX_RANGE (100000); this one has %llu items", (unsigned long long)cnt);
    tmpl_ev_tick(ev, cnt, at);
    struct tval r = mk_list(ev, (size_t)cnt, 0);
    /* every element lies between start and stop, so the wrapping sum is the exact value */
    for (size_t i = 0; i < (size_t)cnt; i++)
        r.u.l->v[i] = tv_int((int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step));
    r.u.l->n = (size_t)cnt;
    return r;
}

static const struct {
    const char *name;
    global_fn fn;
    struct tmpl_sig sig;
} globals[] = {
    {"dict", g_dict, {NULL, 0}},
    {"namespace", g_namespace, {NULL, 0}},
    {"raise_exception", g_raise_exception, {"message", 0}},
    {"range", g_range, {NULL, 0}},
    {"strftime_now", g_strftime_now, {"format", 0}},
};

int tmpl_global_index(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OF(globals); i++)
        if (name_is(name, len, globals[i].name)) return (int)i;
    return -1;
}

struct tval tmpl_call_global(struct tmpl_ev *ev, int fn, const struct tmpl_args *a,
                             const struct tmpl_node *at)
{
    TERN_ASSERT(fn >= 0 && (size_t)fn < N_OF(globals));
    check_args(ev, "function", globals[fn].name, globals[fn].sig, a, at);
    return globals[fn].fn(ev, a, at);
}
