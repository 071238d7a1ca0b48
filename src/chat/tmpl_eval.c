/* tmpl_eval.c — runs a compiled template (AST from tmpl_parse.c) and produces its text.
 *
 * Read tmpl.h first. Scoping follows Jinja: the root frame holds the caller's variables and
 * top-level {% set %}s; a for loop gets its own frame (assignments inside do not leak out; use
 * namespace() for that); a macro call gets a frame whose parent is the root frame; `if` blocks
 * share their surroundings. Undefined values follow jinja2.Undefined: printing, testing,
 * iterating and `~` are fine, while attribute/item access, arithmetic and ordering raise
 * UndefinedError carrying the reason the value is undefined ("'dict object' has no attribute
 * 'description'"). Python's type rules apply to + - * / etc. (str + dict is a TypeError).
 *
 * Numbers: Python ints are unbounded, tern's are int64. Every integer operation is checked, and
 * a result int64 cannot hold is refused ("OverflowError: integer result does not fit in 64
 * bits"), never wrapped: a wrapped number would render something Python never would. Division
 * by zero and float overflow fail as in Python.
 *
 * Errors longjmp to tmpl_render (see tmpl.h); messages look like
 * "line 12:7: UndefinedError: 'functions' is undefined". Recursion (macro calls, evaluation
 * depth) and work (the meter of tmpl.h) are bounded so a hostile template fails cleanly
 * instead of exhausting the stack or spinning forever. */
#include "chat/tmpl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/check.h"
#include "util/error.h"

#define TMPL_MAX_CALL_DEPTH 200
/* eval()/exec_node() frames on the C stack at once: a macro level costs a few, an expression
 * one per nesting level. A few hundred bytes each in an optimized build, so this stays well
 * inside 1 MB of stack; TMPL_MAX_STACK also bounds the bytes, for builds (sanitizers, -O0)
 * whose frames are ten times larger. Real templates stay under 100 frames. */
#define TMPL_MAX_EVAL_DEPTH 3000
#define TMPL_MAX_STACK (2u << 20)

struct frame {
    struct frame *parent;
    int n, cap;
    const char **names;
    size_t *lens;
    struct tval *vals;
};

struct tmpl_ev {
    struct tmpl_arena *a;
    jmp_buf jb;
    tern_status st;
    struct frame *root;
    int64_t now;
    int depth;  /* macro calls in progress */
    int rdepth; /* eval/exec_node frames in progress */
    uintptr_t stack_base; /* frame address at tmpl_render */
    uint64_t max_work;
};

enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

/* ------------------------------------------------------------------ errors, memory */

_Noreturn void tmpl_throw(struct tmpl_ev *ev, const struct tmpl_node *at, const char *kind,
                          const char *fmt, ...)
{
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tern_status st = !strcmp(kind, "MemoryError") ? TERN_ERR_NOMEM : TERN_ERR_FORMAT;
    if (at) ev->st = tern_fail(st, "line %d:%d: %s: %s", at->line, at->col, kind, msg);
    else ev->st = tern_fail(st, "%s: %s", kind, msg);
    longjmp(ev->jb, 1);
}

void *tmpl_ev_alloc(struct tmpl_ev *ev, size_t n)
{
    void *p = tmpl_arena_alloc(ev->a, n);
    if (!p) tmpl_throw(ev, NULL, "MemoryError", "template rendering exceeded its memory limit");
    return p;
}

struct tmpl_arena *tmpl_ev_arena(struct tmpl_ev *ev) { return ev->a; }

void tmpl_ev_tick(struct tmpl_ev *ev, uint64_t units, const struct tmpl_node *at)
{
    tmpl_meter.work += units;
    if (__builtin_expect(!tmpl_meter.too_deep && tmpl_meter.work <= ev->max_work, 1)) return;
    if (tmpl_meter.too_deep)
        tmpl_throw(ev, at, "RecursionError", "values nested deeper than %d levels", TMPL_MAX_DATA_DEPTH);
    if (tmpl_meter.work > ev->max_work)
        tmpl_throw(ev, at, "TemplateRuntimeError",
                   "the template did more than %llu steps of work (an endless or very long loop?)",
                   (unsigned long long)ev->max_work);
}
int64_t tmpl_ev_now(struct tmpl_ev *ev) { return ev->now; }

static void check_buf(struct tmpl_ev *ev, const struct tmpl_buf *b, const struct tmpl_node *at)
{
    if (b->oom) tmpl_throw(ev, at, "MemoryError", "template output exceeded the memory limit");
    if (tmpl_meter.too_deep)
        tmpl_throw(ev, at, "RecursionError", "values nested deeper than %d levels", TMPL_MAX_DATA_DEPTH);
}

struct tval tmpl_ev_str(struct tmpl_ev *ev, struct tval v)
{
    if (v.kind == TV_STR) return v;
    struct tmpl_buf b;
    tmpl_buf_init(&b, ev->a);
    tmpl_py_str(&b, v);
    check_buf(ev, &b, NULL);
    return tv_str(b.p ? b.p : "", b.n);
}

void tmpl_ev_check_defined(struct tmpl_ev *ev, struct tval v, const struct tmpl_node *at)
{
    if (v.kind == TV_UNDEF)
        tmpl_throw(ev, at, "UndefinedError", "%s", v.u.s.p ? v.u.s.p : "value is undefined");
}

/* noinline: its message buffer would otherwise sit in eval's frame at every recursion level */
static struct tval undef_why(struct tmpl_ev *ev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noinline));
static struct tval undef_why(struct tmpl_ev *ev, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    char *s = tmpl_ev_alloc(ev, (size_t)n + 1);
    memcpy(s, msg, (size_t)n);
    struct tval v = tv_undef();
    v.u.s.p = s;
    return v;
}

/* ------------------------------------------------------------------ frames */

static struct frame *frame_new(struct tmpl_ev *ev, struct frame *parent)
{
    struct frame *f = tmpl_ev_alloc(ev, sizeof *f);
    f->parent = parent;
    return f;
}

static void frame_set(struct tmpl_ev *ev, struct frame *f, const char *name, size_t len, struct tval v)
{
    for (int i = 0; i < f->n; i++)
        if (f->lens[i] == len && !memcmp(f->names[i], name, len)) {
            f->vals[i] = v;
            return;
        }
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 8;
        const char **names = tmpl_ev_alloc(ev, (size_t)cap * sizeof *names);
        size_t *lens = tmpl_ev_alloc(ev, (size_t)cap * sizeof *lens);
        struct tval *vals = tmpl_ev_alloc(ev, (size_t)cap * sizeof *vals);
        if (f->n) {
            memcpy(names, f->names, (size_t)f->n * sizeof *names);
            memcpy(lens, f->lens, (size_t)f->n * sizeof *lens);
            memcpy(vals, f->vals, (size_t)f->n * sizeof *vals);
        }
        f->names = names;
        f->lens = lens;
        f->vals = vals;
        f->cap = cap;
    }
    TERN_ASSERT(f->n < f->cap && name, "a scope has room for the new name");
    f->names[f->n] = name;
    f->lens[f->n] = len;
    f->vals[f->n] = v;
    f->n++;
}

static struct tval lookup(struct tmpl_ev *ev, struct frame *f, const char *name, size_t len)
{
    for (; f; f = f->parent)
        for (int i = f->n - 1; i >= 0; i--)
            if (f->lens[i] == len && !memcmp(f->names[i], name, len)) return f->vals[i];
    int g = tmpl_global_index(name, len);
    if (g >= 0) {
        struct tval v = {0};
        v.kind = TV_FUNC;
        v.u.i = g;
        return v;
    }
    return undef_why(ev, "'%.*s' is undefined", (int)len, name);
}

/* ------------------------------------------------------------------ containers */

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

static void dict_set(struct tmpl_ev *ev, struct tdict *d, struct tval k, struct tval v)
{
    struct tval *slot = tmpl_dict_get(d, k);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct tval *nk = tmpl_ev_alloc(ev, cap * sizeof *nk), *nv = tmpl_ev_alloc(ev, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    TERN_ASSERT(d->n < d->cap);
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

/* Materialize anything iterable as a list of items (dict -> keys, str -> characters).
 * Undefined iterates as empty, as jinja2.Undefined does. */
struct tval tmpl_ev_list_of(struct tmpl_ev *ev, struct tval v, const struct tmpl_node *at)
{
    switch (v.kind) {
    case TV_LIST: return v;
    case TV_UNDEF: return mk_list(ev, 0, 0);
    case TV_DICT:
    case TV_NS: {
        struct tval l = mk_list(ev, v.u.d->n, 0);
        for (size_t i = 0; i < v.u.d->n; i++) l.u.l->v[i] = v.u.d->k[i];
        l.u.l->n = v.u.d->n;
        return l;
    }
    case TV_STR: {
        size_t n = tmpl_utf8_count(v.u.s.p, v.u.s.n); /* characters as tmpl_value.c splits them */
        struct tval l = mk_list(ev, n, 0);
        size_t i = 0, k = 0;
        while (i < v.u.s.n) {
            size_t j = i + 1;
            while (j < v.u.s.n && ((unsigned char)v.u.s.p[j] & 0xC0) == 0x80) j++;
            TERN_ASSERT(k < n); /* the arena would not notice an overrun */
            l.u.l->v[k++] = tv_str(v.u.s.p + i, j - i);
            i = j;
        }
        TERN_ASSERT(k == n, "every character of the string is an item");
        l.u.l->n = k;
        return l;
    }
    default:
        tmpl_throw(ev, at, "TypeError", "'%s' object is not iterable", tmpl_type_name(v));
    }
}

/* ------------------------------------------------------------------ attribute / item access */

static struct tval loop_attr(struct tmpl_ev *ev, struct tloop *L, const char *name, size_t len,
                             bool *found)
{
    *found = true;
#define IS(s) (len == sizeof(s) - 1 && !memcmp(name, s, len))
    if (IS("index")) return tv_int(L->index0 + 1);
    if (IS("index0")) return tv_int(L->index0);
    if (IS("revindex")) return tv_int(L->length - L->index0);
    if (IS("revindex0")) return tv_int(L->length - L->index0 - 1);
    if (IS("first")) return tv_bool(L->index0 == 0);
    if (IS("last")) return tv_bool(L->index0 == L->length - 1);
    if (IS("length")) return tv_int(L->length);
    if (IS("depth")) return tv_int(L->depth0 + 1);
    if (IS("depth0")) return tv_int(L->depth0);
    if (IS("previtem")) {
        if (L->index0 > 0) return L->items->v[L->index0 - 1];
        return undef_why(ev, "there is no previous item");
    }
    if (IS("nextitem")) {
        if (L->index0 + 1 < L->length) return L->items->v[L->index0 + 1];
        return undef_why(ev, "there is no next item");
    }
#undef IS
    *found = false;
    return tv_undef();
}

static const char *obj_desc(struct tval v)
{
    switch (v.kind) {
    case TV_DICT: return "'dict object'";
    case TV_STR: return "'str object'";
    case TV_LIST: return (v.flags & TVF_TUPLE) ? "'tuple object'" : "'list object'";
    case TV_NONE: return "'None'";
    case TV_INT: return "'int object'";
    case TV_FLOAT: return "'float object'";
    case TV_BOOL: return "'bool object'";
    case TV_NS: return "'jinja2.utils.Namespace object'";
    default: return "'object'";
    }
}

static struct tval method_val(struct tmpl_ev *ev, struct tval self, const char *name, size_t len)
{
    struct tmethod *m = tmpl_ev_alloc(ev, sizeof *m);
    char *s = tmpl_ev_alloc(ev, len + 1);
    memcpy(s, name, len);
    m->self = self;
    m->name = s;
    struct tval v = {0};
    v.kind = TV_METHOD;
    v.u.method = m;
    return v;
}

struct tval tmpl_ev_getattr(struct tmpl_ev *ev, struct tval obj, const char *name, size_t len,
                            const struct tmpl_node *at)
{
    tmpl_ev_check_defined(ev, obj, at);
    if (obj.kind == TV_LOOP) {
        bool found;
        struct tval v = loop_attr(ev, obj.u.loop, name, len, &found);
        if (found) return v;
        if (len == 5 && !memcmp(name, "cycle", 5)) return method_val(ev, obj, name, len);
        return undef_why(ev, "'LoopContext object' has no attribute '%.*s'", (int)len, name);
    }
    /* Python attributes (methods) win over items for `.name`, as in jinja2's getattr */
    if (obj.kind != TV_NS && tmpl_has_method(obj, name, len)) return method_val(ev, obj, name, len);
    if (obj.kind == TV_DICT || obj.kind == TV_NS) {
        struct tval *v = tmpl_dict_get(obj.u.d, tv_str(name, len));
        if (v) return *v;
    }
    return undef_why(ev, "%s has no attribute '%.*s'", obj_desc(obj), (int)len, name);
}

struct tval tmpl_ev_getitem(struct tmpl_ev *ev, struct tval obj, struct tval key,
                            const struct tmpl_node *at)
{
    tmpl_ev_check_defined(ev, obj, at);
    if (obj.kind == TV_DICT || obj.kind == TV_NS) {
        struct tval *v = tmpl_dict_get(obj.u.d, key);
        if (v) return *v;
    } else if ((obj.kind == TV_LIST || obj.kind == TV_STR) &&
               (key.kind == TV_INT || key.kind == TV_BOOL)) {
        int64_t i = key.kind == TV_INT ? key.u.i : key.u.b, orig = i;
        if (obj.kind == TV_LIST) {
            int64_t n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.u.l->v[i];
            return undef_why(ev, "%s has no element %lld", obj_desc(obj), (long long)orig);
        }
        int64_t n = (int64_t)tmpl_utf8_count(obj.u.s.p, obj.u.s.n);
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
            size_t s = tmpl_utf8_offset(obj.u.s.p, obj.u.s.n, i);
            size_t e = tmpl_utf8_offset(obj.u.s.p, obj.u.s.n, i + 1);
            /* count and offset split characters by the same rule: character i exists */
            TERN_ASSERT(s < e && e <= obj.u.s.n, "character i lies inside the string");
            return tv_str(obj.u.s.p + s, e - s);
        }
        return undef_why(ev, "%s has no element %lld", obj_desc(obj), (long long)orig);
    } else if (obj.kind == TV_LOOP && key.kind == TV_STR) {
        return tmpl_ev_getattr(ev, obj, key.u.s.p, key.u.s.n, at);
    }
    if (key.kind == TV_STR && obj.kind != TV_NS && tmpl_has_method(obj, key.u.s.p, key.u.s.n))
        return method_val(ev, obj, key.u.s.p, key.u.s.n);
    struct tmpl_buf b;
    tmpl_buf_init(&b, ev->a);
    tmpl_py_str(&b, key);
    check_buf(ev, &b, at);
    return undef_why(ev, "%s has no attribute '%.*s'", obj_desc(obj), (int)(b.n > 100 ? 100 : b.n),
                     b.p ? b.p : "");
}

/* ------------------------------------------------------------------ markup ranges (tmpl.h) */

const struct tmpl_mark *tmpl_str_marks(const struct tval *v, struct tmpl_mark *one, size_t *n)
{
    *n = 0;
    if (v->kind != TV_STR || !v->u.s.n) return NULL;
    if (v->flags & TVF_MARKUP) {
        *one = (struct tmpl_mark){0, v->u.s.n};
        *n = 1;
        return one;
    }
    if (!(v->flags & TVF_MARKS)) return NULL;
    const struct tmpl_marks *mk;
    memcpy(&mk, v->u.s.p - sizeof mk, sizeof mk);
    *n = mk->n;
    return mk->m;
}

static void marks_add(struct tmpl_ev *ev, struct tmpl_marks *mk, size_t off, size_t len)
{
    if (!len) return;
    /* ranges are added in output order: sorted and disjoint */
    TERN_ASSERT(!mk->n || mk->m[mk->n - 1].off + mk->m[mk->n - 1].len <= off, "markup ranges grow left to right");
    if (mk->n && mk->m[mk->n - 1].off + mk->m[mk->n - 1].len == off) {
        mk->m[mk->n - 1].len += len;
        return;
    }
    if (mk->n == mk->cap) {
        size_t cap = mk->cap ? mk->cap * 2 : 8;
        struct tmpl_mark *m = tmpl_ev_alloc(ev, cap * sizeof *m);
        if (mk->n) memcpy(m, mk->m, mk->n * sizeof *m);
        mk->m = m;
        mk->cap = cap;
    }
    mk->m[mk->n++] = (struct tmpl_mark){off, len};
}

/* v's markup, shifted to start at base, added to mk. */
static void marks_add_str(struct tmpl_ev *ev, struct tmpl_marks *mk, struct tval v, size_t base)
{
    struct tmpl_mark one;
    size_t n;
    const struct tmpl_mark *m = tmpl_str_marks(&v, &one, &n);
    for (size_t i = 0; i < n; i++) marks_add(ev, mk, base + m[i].off, m[i].len);
}

static struct tmpl_marks *marks_new(struct tmpl_ev *ev) { return tmpl_ev_alloc(ev, sizeof(struct tmpl_marks)); }

/* The string p[0..n) with the markup ranges mk (NULL: content); copied when only part of it is
 * markup, to make room for the ranges' pointer in front. */
static struct tval marked_str(struct tmpl_ev *ev, const char *p, size_t n, const struct tmpl_marks *mk)
{
    struct tval v = tv_str(p, n);
    if (!mk || !mk->n) return v;
    TERN_ASSERT(mk->m[mk->n - 1].off + mk->m[mk->n - 1].len <= n, "markup lies inside its string");
    if (mk->n == 1 && mk->m[0].off == 0 && mk->m[0].len == n) {
        v.flags = TVF_MARKUP;
        return v;
    }
    struct tmpl_marks *keep = tmpl_ev_alloc(ev, sizeof *keep);
    keep->m = tmpl_ev_alloc(ev, mk->n * sizeof *keep->m);
    memcpy(keep->m, mk->m, mk->n * sizeof *keep->m);
    keep->n = keep->cap = mk->n;
    char *s = tmpl_ev_alloc(ev, sizeof keep + n + 1);
    memcpy(s, &keep, sizeof keep);
    memcpy(s + sizeof keep, p, n);
    v.u.s.p = s + sizeof keep;
    v.flags = TVF_MARKS;
    return v;
}

struct tval tmpl_ev_substr(struct tmpl_ev *ev, struct tval s, size_t b, size_t e)
{
    struct tmpl_mark one;
    size_t n;
    TERN_ASSERT(s.kind == TV_STR && b <= e && e <= s.u.s.n, "a substring of the string");
    const struct tmpl_mark *m = tmpl_str_marks(&s, &one, &n);
    if (!n) return tv_str(s.u.s.p + b, e - b);
    struct tmpl_marks mk = {0};
    for (size_t i = 0; i < n; i++) {
        size_t lo = m[i].off > b ? m[i].off : b, hi = m[i].off + m[i].len < e ? m[i].off + m[i].len : e;
        if (lo < hi) marks_add(ev, &mk, lo - b, hi - lo);
    }
    return marked_str(ev, s.u.s.p + b, e - b, &mk);
}

/* x + y for two strings, keeping both sides' markup. */
static struct tval concat(struct tmpl_ev *ev, struct tval x, struct tval y)
{
    TERN_ASSERT(x.kind == TV_STR && y.kind == TV_STR, "+ on strings only (tmpl_ev_arith checked)");
    char *p = tmpl_ev_alloc(ev, x.u.s.n + y.u.s.n + 1);
    memcpy(p, x.u.s.p, x.u.s.n);
    memcpy(p + x.u.s.n, y.u.s.p, y.u.s.n);
    if (!((x.flags | y.flags) & (TVF_MARKUP | TVF_MARKS))) return tv_str(p, x.u.s.n + y.u.s.n);
    struct tmpl_marks mk = {0};
    marks_add_str(ev, &mk, x, 0);
    marks_add_str(ev, &mk, y, x.u.s.n);
    return marked_str(ev, p, x.u.s.n + y.u.s.n, &mk);
}

/* str(v) appended to out, with v's markup when out tracks it. */
static void emit(struct tmpl_ev *ev, struct tmpl_buf *out, struct tval v)
{
    const size_t at = out->n;
    tmpl_py_str(out, v);
    if (out->marks && v.kind == TV_STR && !out->oom) marks_add_str(ev, out->marks, v, at);
}

static int64_t norm_index(int64_t i, int64_t n, bool neg_step)
{
    if (i < 0) {
        i += n;
        if (i < 0) i = neg_step ? -1 : 0;
    } else if (i > n) i = neg_step ? n - 1 : n;
    else if (neg_step && i == n) i = n - 1;
    return i;
}

static struct tval slice(struct tmpl_ev *ev, struct tval obj, struct tval s0, struct tval s1,
                         struct tval s2, const struct tmpl_node *at)
{
    tmpl_ev_check_defined(ev, obj, at);
    int64_t step = 1;
    if (s2.kind == TV_INT || s2.kind == TV_BOOL) step = s2.kind == TV_INT ? s2.u.i : s2.u.b;
    else if (s2.kind != TV_NONE && s2.kind != TV_UNDEF)
        tmpl_throw(ev, at, "TypeError", "slice indices must be integers or None");
    if (step == 0) tmpl_throw(ev, at, "ValueError", "slice step cannot be zero");
    struct tval items = obj.kind == TV_STR ? tmpl_ev_list_of(ev, obj, at) : obj;
    if (items.kind != TV_LIST) tmpl_throw(ev, at, "TypeError", "'%s' object is not subscriptable", tmpl_type_name(obj));
    int64_t n = (int64_t)items.u.l->n;
    int64_t lo, hi;
    struct tval bounds[2] = {s0, s1};
    int64_t out[2];
    for (int k = 0; k < 2; k++) {
        struct tval b = bounds[k];
        if (b.kind == TV_NONE || b.kind == TV_UNDEF) out[k] = step > 0 ? (k ? n : 0) : (k ? -1 : n - 1);
        else if (b.kind == TV_INT || b.kind == TV_BOOL)
            out[k] = norm_index(b.kind == TV_INT ? b.u.i : b.u.b, n, step < 0);
        else tmpl_throw(ev, at, "TypeError", "slice indices must be integers or None");
    }
    lo = out[0];
    hi = out[1];
    /* norm_index clamps: a positive step walks [0, n], a negative one [-1, n - 1] */
    TERN_ASSERT(step > 0 ? (lo >= 0 && lo <= n && hi >= 0 && hi <= n) : (lo >= -1 && lo < n && hi >= -1 && hi < n));
    struct tval r = mk_list(ev, (size_t)n, items.flags & TVF_TUPLE);
    size_t k = 0;
    /* 0 <= i <= n here, so i + step cannot overflow going down; going up, stop before it would */
    if (step > 0)
        for (int64_t i = lo; i < hi; i = step > hi - i ? hi : i + step) r.u.l->v[k++] = items.u.l->v[i];
    else
        for (int64_t i = lo; i > hi && i >= 0; i += step) r.u.l->v[k++] = items.u.l->v[i];
    TERN_ASSERT(k <= (size_t)n, "a slice holds at most the sequence");
    tmpl_ev_tick(ev, k, at);
    r.u.l->n = k;
    if (obj.kind != TV_STR) return r;
    struct tmpl_buf b;
    tmpl_buf_init(&b, ev->a);
    for (size_t i = 0; i < k; i++) tmpl_buf_add(&b, r.u.l->v[i].u.s.p, r.u.l->v[i].u.s.n);
    check_buf(ev, &b, at);
    return tv_str(b.p ? b.p : "", b.n);
}

/* ------------------------------------------------------------------ operators */

static bool is_num(struct tval v) { return v.kind == TV_INT || v.kind == TV_FLOAT || v.kind == TV_BOOL; }
static double fnum(struct tval v) { return v.kind == TV_FLOAT ? v.u.f : v.kind == TV_INT ? (double)v.u.i : v.u.b; }
static int64_t inum(struct tval v) { return v.kind == TV_INT ? v.u.i : v.kind == TV_BOOL ? v.u.b : 0; }

static const char *op_sym(int op)
{
    static const char *const s[] = {"+", "-", "*", "/", "//", "%", "**", "~",
                                    "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    return s[op];
}

_Noreturn static void bad_operands(struct tmpl_ev *ev, const struct tmpl_node *at, int op,
                                   struct tval a, struct tval b)
{
    if (op == OP_ADD && (a.kind == TV_STR || a.kind == TV_LIST))
        tmpl_throw(ev, at, "TypeError", "can only concatenate %s (not \"%s\") to %s",
                   tmpl_type_name(a), tmpl_type_name(b), tmpl_type_name(a));
    tmpl_throw(ev, at, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'",
               op_sym(op), tmpl_type_name(a), tmpl_type_name(b));
}

/* seq * times; the result's size is bounded before anything is allocated or looped over
 * (an empty sequence times 10**18 is empty at once, not 10**18 empty copies). */
static struct tval repeat(struct tmpl_ev *ev, struct tval seq, int64_t times, const struct tmpl_node *at)
{
    TERN_ASSERT(seq.kind == TV_STR || seq.kind == TV_LIST, "only strings and lists repeat");
    size_t unit = seq.kind == TV_STR ? seq.u.s.n : seq.u.l->n;
    if (times <= 0 || unit == 0) {
        if (seq.kind == TV_STR) return tv_str("", 0);
        return mk_list(ev, 0, seq.flags & TVF_TUPLE);
    }
    if ((uint64_t)times > (64u << 20) / unit)
        tmpl_throw(ev, at, "MemoryError", "repetition result is too large (%zu x %lld)", unit, (long long)times);
    tmpl_ev_tick(ev, (uint64_t)times, at);
    if (seq.kind == TV_STR) {
        char *p = tmpl_ev_alloc(ev, unit * (size_t)times + 1);
        for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * unit, seq.u.s.p, unit);
        return tv_str(p, unit * (size_t)times);
    }
    struct tval r = mk_list(ev, unit * (size_t)times, seq.flags & TVF_TUPLE);
    TERN_ASSERT(r.u.l->cap >= unit * (size_t)times, "the result was sized before the copies");
    for (int64_t i = 0; i < times; i++)
        memcpy(r.u.l->v + (size_t)i * unit, seq.u.l->v, unit * sizeof(struct tval));
    r.u.l->n = unit * (size_t)times;
    return r;
}

_Noreturn static void int_overflow(struct tmpl_ev *ev, const struct tmpl_node *at, int op,
                                   int64_t x, int64_t y)
{
    tmpl_throw(ev, at, "OverflowError",
               "integer result of %lld %s %lld does not fit in 64 bits (Python ints are unbounded, "
               "tern's are not)", (long long)x, op_sym(op), (long long)y);
}

/* x ** y for y >= 0, exact or refused. */
static int64_t int_pow(struct tmpl_ev *ev, int64_t x, int64_t y, const struct tmpl_node *at)
{
    if (x == 0) return y == 0;
    if (x == 1) return 1;
    if (x == -1) return (y & 1) ? -1 : 1;
    int64_t r = 1, base = x;
    for (int64_t e = y; e; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(r, base, &r)) int_overflow(ev, at, OP_POW, x, y);
        /* |x| >= 2: squaring past int64 while exponent bits remain means the result is too */
        if ((e >> 1) && __builtin_mul_overflow(base, base, &base)) int_overflow(ev, at, OP_POW, x, y);
    }
    return r;
}

/* Python's float ** float (CPython float_pow): errors where Python raises. */
static double float_pow(struct tmpl_ev *ev, double x, double y, const struct tmpl_node *at)
{
    if (x == 0 && y < 0)
        tmpl_throw(ev, at, "ZeroDivisionError", "0.0 cannot be raised to a negative power");
    if (x < 0 && isfinite(x) && isfinite(y) && y != floor(y))
        tmpl_throw(ev, at, "ValueError", "a negative number raised to a fractional power is complex "
                   "in Python; templates cannot hold complex numbers");
    double r = pow(x, y);
    if (isinf(r) && isfinite(x) && isfinite(y))
        tmpl_throw(ev, at, "OverflowError", "(34, 'Numerical result out of range')");
    return r;
}

/* Python's float // and % (CPython float_divmod): the remainder takes the divisor's sign. */
static double float_floormod(double x, double y, bool want_div)
{
    double mod = fmod(x, y), div = (x - mod) / y;
    if (mod) {
        if ((y < 0) != (mod < 0)) {
            mod += y;
            div -= 1.0;
        }
    } else mod = copysign(0.0, y);
    if (!want_div) return mod;
    if (div) {
        double f = floor(div);
        if (div - f > 0.5) f += 1.0;
        return f;
    }
    return copysign(0.0, x / y);
}

struct tval tmpl_ev_arith(struct tmpl_ev *ev, int op, struct tval a, struct tval b,
                          const struct tmpl_node *at)
{
    if (op == OP_CONCAT) return concat(ev, tmpl_ev_str(ev, a), tmpl_ev_str(ev, b));
    tmpl_ev_check_defined(ev, a, at);
    tmpl_ev_check_defined(ev, b, at);
    if (is_num(a) && is_num(b)) {
        bool flt = a.kind == TV_FLOAT || b.kind == TV_FLOAT;
        int64_t x = inum(a), y = inum(b), r;
        double fx = fnum(a), fy = fnum(b);
        switch (op) {
        case OP_ADD:
            if (flt) return tv_float(fx + fy);
            if (__builtin_add_overflow(x, y, &r)) int_overflow(ev, at, op, x, y);
            return tv_int(r);
        case OP_SUB:
            if (flt) return tv_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &r)) int_overflow(ev, at, op, x, y);
            return tv_int(r);
        case OP_MUL:
            if (flt) return tv_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &r)) int_overflow(ev, at, op, x, y);
            return tv_int(r);
        case OP_DIV:
            if (fy == 0) tmpl_throw(ev, at, "ZeroDivisionError", flt ? "float division by zero" : "division by zero");
            /* int / int: long double holds any int64 exactly, so only the quotient rounds */
            if (!flt) return tv_float((double)((long double)x / (long double)y));
            return tv_float(fx / fy);
        case OP_FLOORDIV:
        case OP_MOD:
            if (flt) {
                if (fy == 0)
                    tmpl_throw(ev, at, "ZeroDivisionError", op == OP_MOD ? "float modulo" : "float floor division by zero");
                return tv_float(float_floormod(fx, fy, op == OP_FLOORDIV));
            }
            if (y == 0)
                tmpl_throw(ev, at, "ZeroDivisionError", op == OP_MOD ? "integer modulo by zero"
                                                                   : "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) { /* the one quotient int64 cannot hold; C traps on it */
                if (op == OP_MOD) return tv_int(0);
                int_overflow(ev, at, op, x, y);
            }
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                /* Python's floor division: the remainder takes the divisor's sign */
                TERN_ASSERT(m == 0 || (m < 0) == (y < 0), "a floored remainder has the divisor's sign");
                return op == OP_FLOORDIV ? tv_int(q) : tv_int(m);
            }
        case OP_POW:
            if (!flt && y >= 0) return tv_int(int_pow(ev, x, y, at));
            return tv_float(float_pow(ev, fx, fy, at));
        }
    }
    if (op == OP_ADD && a.kind == TV_STR && b.kind == TV_STR) {
        if ((a.flags | b.flags) & TVF_SAFE) { /* Markup.__add__/__radd__ escape the plain side */
            struct tmpl_buf buf;
            tmpl_buf_init(&buf, ev->a);
            tmpl_buf_add(&buf, "", 0);
            if (a.flags & TVF_SAFE) tmpl_buf_add(&buf, a.u.s.p, a.u.s.n);
            else tmpl_html_escape(&buf, a.u.s.p, a.u.s.n);
            if (b.flags & TVF_SAFE) tmpl_buf_add(&buf, b.u.s.p, b.u.s.n);
            else tmpl_html_escape(&buf, b.u.s.p, b.u.s.n);
            check_buf(ev, &buf, at);
            struct tval r = tv_str(buf.p, buf.n);
            r.flags = TVF_SAFE;
            return r;
        }
        return concat(ev, a, b);
    }
    if (op == OP_ADD && a.kind == TV_LIST && b.kind == TV_LIST && !(a.flags & TVF_GEN) &&
        !(b.flags & TVF_GEN) && (a.flags & TVF_TUPLE) == (b.flags & TVF_TUPLE)) {
        struct tval r = mk_list(ev, a.u.l->n + b.u.l->n, a.flags & TVF_TUPLE);
        TERN_ASSERT(r.u.l->cap >= a.u.l->n + b.u.l->n);
        memcpy(r.u.l->v, a.u.l->v, a.u.l->n * sizeof(struct tval));
        memcpy(r.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(struct tval));
        r.u.l->n = a.u.l->n + b.u.l->n;
        return r;
    }
    if (op == OP_MUL) {
        if ((a.kind == TV_STR || (a.kind == TV_LIST && !(a.flags & TVF_GEN))) &&
            (b.kind == TV_INT || b.kind == TV_BOOL))
            return repeat(ev, a, inum(b), at);
        if ((b.kind == TV_STR || (b.kind == TV_LIST && !(b.flags & TVF_GEN))) &&
            (a.kind == TV_INT || a.kind == TV_BOOL))
            return repeat(ev, b, inum(a), at);
    }
    bad_operands(ev, at, op, a, b);
}

static int order(struct tmpl_ev *ev, struct tval a, struct tval b, int op, int depth,
                 const struct tmpl_node *at)
{
    tmpl_ev_check_defined(ev, a, at);
    tmpl_ev_check_defined(ev, b, at);
    if (is_num(a) && is_num(b)) {
        if (a.kind != TV_FLOAT && b.kind != TV_FLOAT) return inum(a) < inum(b) ? -1 : inum(a) > inum(b);
        if (a.kind != TV_FLOAT) return tmpl_cmp_int_float(inum(a), b.u.f);
        if (b.kind != TV_FLOAT) {
            int c = tmpl_cmp_int_float(inum(b), a.u.f);
            return c == 2 ? 2 : -c;
        }
        double x = a.u.f, y = b.u.f;
        return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
    }
    if (a.kind == TV_STR && b.kind == TV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        tmpl_meter.work += n / TMPL_WORK_BYTES;
        int c = memcmp(a.u.s.p, b.u.s.p, n);
        if (c) return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.kind == TV_LIST && b.kind == TV_LIST && !((a.flags | b.flags) & TVF_GEN) &&
        (a.flags & TVF_TUPLE) == (b.flags & TVF_TUPLE)) {
        if (depth >= TMPL_MAX_DATA_DEPTH)
            tmpl_throw(ev, at, "RecursionError", "values nested deeper than %d levels", TMPL_MAX_DATA_DEPTH);
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            tmpl_ev_tick(ev, 1, at);
            if (tmpl_equal(a.u.l->v[i], b.u.l->v[i])) continue;
            return order(ev, a.u.l->v[i], b.u.l->v[i], op, depth + 1, at);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    tmpl_throw(ev, at, "TypeError", "'%s' not supported between instances of '%s' and '%s'",
               op_sym(op), tmpl_type_name(a), tmpl_type_name(b));
}

static bool contains(struct tmpl_ev *ev, struct tval item, struct tval seq, const struct tmpl_node *at)
{
    switch (seq.kind) {
    case TV_UNDEF: return false;
    case TV_STR:
        if (item.kind != TV_STR)
            tmpl_throw(ev, at, "TypeError", "'in <string>' requires string as left operand, not %s", tmpl_type_name(item));
        tmpl_ev_tick(ev, seq.u.s.n / TMPL_WORK_BYTES, at);
        if (item.u.s.n == 0) return true;
        return memmem(seq.u.s.p, seq.u.s.n, item.u.s.p, item.u.s.n) != NULL; /* linear time */
    case TV_LIST:
        for (size_t i = 0; i < seq.u.l->n; i++) {
            tmpl_ev_tick(ev, 1, at);
            if (tmpl_equal(seq.u.l->v[i], item)) return true;
        }
        return false;
    case TV_DICT:
    case TV_NS: return tmpl_dict_get(seq.u.d, item) != NULL;
    default:
        tmpl_throw(ev, at, "TypeError", "argument of type '%s' is not iterable", tmpl_type_name(seq));
    }
}

/* NaN compares unordered (order() returns 2): every ordering is false, as in Python. */
bool tmpl_ev_compare(struct tmpl_ev *ev, int op, struct tval a, struct tval b, const struct tmpl_node *at)
{
    int c;
    switch (op) {
    case OP_EQ: return tmpl_equal(a, b);
    case OP_NE: return !tmpl_equal(a, b);
    case OP_LT: return (c = order(ev, a, b, op, 0, at)) == -1;
    case OP_LE: return (c = order(ev, a, b, op, 0, at)) == -1 || c == 0;
    case OP_GT: return (c = order(ev, a, b, op, 0, at)) == 1;
    case OP_GE: return (c = order(ev, a, b, op, 0, at)) == 1 || c == 0;
    case OP_IN: return contains(ev, a, b, at);
    case OP_NOTIN: return !contains(ev, a, b, at);
    }
    return false;
}

/* ------------------------------------------------------------------ expressions */

static struct tval eval(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f);
static enum flow exec_body(struct tmpl_ev *ev, struct tmpl_node *const *body, int n,
                           struct frame *f, struct tmpl_buf *out);

struct tval tmpl_arg(const struct tmpl_args *a, int i, const char *name, bool *present)
{
    if (present) *present = true;
    if (i >= 0 && i < a->n) return a->pos[i];
    for (int k = 0; name && k < a->nk; k++)
        if (!strcmp(a->kwn[k], name)) return a->kwv[k];
    if (present) *present = false;
    return tv_undef();
}

static void eval_args(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f, struct tmpl_args *a)
{
    a->n = n->n_args;
    a->nk = n->n_kwargs;
    a->pos = tmpl_ev_alloc(ev, (size_t)(a->n + 1) * sizeof *a->pos);
    a->kwv = tmpl_ev_alloc(ev, (size_t)(a->nk + 1) * sizeof *a->kwv);
    a->kwn = (const char **)n->names;
    for (int i = 0; i < a->n; i++) a->pos[i] = eval(ev, n->args[i], f);
    for (int i = 0; i < a->nk; i++) a->kwv[i] = eval(ev, n->kwargs[i], f);
}

static struct tval call_macro(struct tmpl_ev *ev, const struct tmpl_node *m, const struct tmpl_args *a,
                              const struct tmpl_node *at)
{
    if (ev->depth >= TMPL_MAX_CALL_DEPTH)
        tmpl_throw(ev, at, "RecursionError", "macro calls nested deeper than %d", TMPL_MAX_CALL_DEPTH);
    if (a->n > m->n_names)
        tmpl_throw(ev, at, "TypeError", "macro '%s' takes not more than %d argument(s)", m->str, m->n_names);
    struct frame *f = frame_new(ev, ev->root);
    for (int k = 0; k < a->nk; k++) {
        bool ok = false;
        for (int i = 0; i < m->n_names; i++) ok |= !strcmp(m->names[i], a->kwn[k]);
        if (!ok) tmpl_throw(ev, at, "TypeError", "macro '%s' has no argument named '%s'", m->str, a->kwn[k]);
    }
    for (int i = 0; i < m->n_names; i++) {
        bool present;
        struct tval v = tmpl_arg(a, i, m->names[i], &present);
        if (!present) {
            if (m->args[i]) v = eval(ev, m->args[i], f);
            else v = undef_why(ev, "parameter '%s' was not provided", m->names[i]);
        }
        frame_set(ev, f, m->names[i], strlen(m->names[i]), v);
    }
    struct tmpl_buf b;
    tmpl_buf_init(&b, ev->a);
    b.marks = marks_new(ev);
    TERN_ASSERT(m->kind == N_MACRO && ev->depth >= 0 && ev->depth < TMPL_MAX_CALL_DEPTH);
    const int depth0 = ev->depth, rdepth0 = ev->rdepth;
    ev->depth++;
    exec_body(ev, m->body, m->n_body, f, &b);
    ev->depth--;
    /* errors leave by longjmp: a normal return comes back to the depths it started at */
    TERN_ASSERT(ev->depth == depth0 && ev->rdepth == rdepth0, "macro call and evaluation depths balance");
    check_buf(ev, &b, at);
    return marked_str(ev, b.p ? b.p : "", b.n, b.marks);
}

struct tval tmpl_ev_call(struct tmpl_ev *ev, struct tval fn, struct tval *args, int n,
                         const char **kwnames, struct tval *kwvals, int nk,
                         const struct tmpl_node *at)
{
    struct tmpl_args a = {args, n, kwnames, kwvals, nk};
    switch (fn.kind) {
    case TV_MACRO: return call_macro(ev, fn.u.node, &a, at);
    case TV_FUNC: return tmpl_call_global(ev, (int)fn.u.i, &a, at);
    case TV_METHOD: return tmpl_call_method(ev, fn.u.method->self, fn.u.method->name, &a, at);
    case TV_UNDEF: tmpl_ev_check_defined(ev, fn, at); break;
    default: break;
    }
    tmpl_throw(ev, at, "TypeError", "'%s' object is not callable", tmpl_type_name(fn));
}

static struct tval apply_filter_node(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f)
{
    struct tval v = eval(ev, n->a, f);
    struct tmpl_args a;
    eval_args(ev, n, f, &a);
    return tmpl_apply_filter(ev, n->str, v, &a, n);
}

/* filter chain of {% filter %} / {% set x | f %}: innermost node has a == NULL */
static struct tval apply_chain(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f,
                               struct tval input)
{
    struct tval v = n->a ? apply_chain(ev, n->a, f, input) : input;
    struct tmpl_args a;
    eval_args(ev, n, f, &a);
    return tmpl_apply_filter(ev, n->str, v, &a, n);
}

static struct tval eval_node(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f);

/* Throws before the evaluation recursion takes more than TMPL_MAX_EVAL_DEPTH frames or
 * TMPL_MAX_STACK bytes. The frame address (not a local's: sanitizers may move those to the
 * heap) measures the stack; either growth direction works. */
static void enter(struct tmpl_ev *ev, const struct tmpl_node *n)
{
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t used = here < ev->stack_base ? ev->stack_base - here : here - ev->stack_base;
    TERN_ASSERT(ev->rdepth >= 0 && ev->rdepth <= TMPL_MAX_EVAL_DEPTH, "enter() keeps the depth within its limit");
    if (++ev->rdepth > TMPL_MAX_EVAL_DEPTH || used > TMPL_MAX_STACK)
        tmpl_throw(ev, n, "RecursionError", "evaluation nested deeper than %d levels (or %u KiB of stack)",
                   TMPL_MAX_EVAL_DEPTH, TMPL_MAX_STACK >> 10);
}

static struct tval eval(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f)
{
    enter(ev, n);
    tmpl_ev_tick(ev, 1, n);
    struct tval v = eval_node(ev, n, f);
    TERN_ASSERT(ev->rdepth >= 1);
    ev->rdepth--;
    /* an expression's value is a value: the statement kinds never come out of eval */
    TERN_ASSERT(v.kind <= TV_LOOP, "eval yields a value of a known kind");
    return v;
}

static struct tval eval_node(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f)
{
    switch (n->kind) {
    case N_LIT: return n->lit;
    case N_NAME: return lookup(ev, f, n->str, n->len);
    case N_ATTR: return tmpl_ev_getattr(ev, eval(ev, n->a, f), n->str, n->len, n);
    case N_ITEM: {
        struct tval o = eval(ev, n->a, f);
        return tmpl_ev_getitem(ev, o, eval(ev, n->b, f), n);
    }
    case N_SLICE: {
        struct tval o = eval(ev, n->a, f);
        struct tval s0 = n->b ? eval(ev, n->b, f) : tv_none();
        struct tval s1 = n->c ? eval(ev, n->c, f) : tv_none();
        struct tval s2 = n->args[0] ? eval(ev, n->args[0], f) : tv_none();
        return slice(ev, o, s0, s1, s2, n);
    }
    case N_CALL: {
        struct tmpl_args a;
        if (n->a->kind == N_ATTR) { /* obj.method(...) without building a bound method */
            struct tval self = eval(ev, n->a->a, f);
            if (self.kind != TV_NS && self.kind != TV_UNDEF && self.kind != TV_LOOP &&
                tmpl_has_method(self, n->a->str, n->a->len)) {
                eval_args(ev, n, f, &a);
                return tmpl_call_method(ev, self, n->a->str, &a, n);
            }
            struct tval fn = tmpl_ev_getattr(ev, self, n->a->str, n->a->len, n->a);
            eval_args(ev, n, f, &a);
            return tmpl_ev_call(ev, fn, a.pos, a.n, a.kwn, a.kwv, a.nk, n);
        }
        struct tval fn = eval(ev, n->a, f);
        eval_args(ev, n, f, &a);
        return tmpl_ev_call(ev, fn, a.pos, a.n, a.kwn, a.kwv, a.nk, n);
    }
    case N_FILTER: return apply_filter_node(ev, n, f);
    case N_TEST: {
        struct tval v = eval(ev, n->a, f);
        struct tmpl_args a;
        eval_args(ev, n, f, &a);
        bool r = tmpl_apply_test(ev, n->str, v, &a, n);
        return tv_bool(n->op ? !r : r);
    }
    case N_BINOP: {
        struct tval a = eval(ev, n->a, f);
        return tmpl_ev_arith(ev, n->op, a, eval(ev, n->b, f), n);
    }
    case N_NEG:
    case N_POS: {
        struct tval v = eval(ev, n->a, f);
        tmpl_ev_check_defined(ev, v, n);
        if (!is_num(v))
            tmpl_throw(ev, n, "TypeError", "bad operand type for unary %s: '%s'",
                       n->kind == N_NEG ? "-" : "+", tmpl_type_name(v));
        if (n->kind == N_POS) return v.kind == TV_BOOL ? tv_int(v.u.b) : v;
        if (v.kind == TV_FLOAT) return tv_float(-v.u.f);
        if (inum(v) == INT64_MIN)
            tmpl_throw(ev, n, "OverflowError", "integer result of -(%lld) does not fit in 64 bits "
                       "(Python ints are unbounded, tern's are not)", (long long)INT64_MIN);
        return tv_int(-inum(v));
    }
    case N_NOT: return tv_bool(!tmpl_truthy(eval(ev, n->a, f)));
    case N_AND: {
        struct tval a = eval(ev, n->a, f);
        return tmpl_truthy(a) ? eval(ev, n->b, f) : a;
    }
    case N_OR: {
        struct tval a = eval(ev, n->a, f);
        return tmpl_truthy(a) ? a : eval(ev, n->b, f);
    }
    case N_COND:
        if (tmpl_truthy(eval(ev, n->a, f))) return eval(ev, n->b, f);
        return n->c ? eval(ev, n->c, f) : undef_why(ev, "the inline if-expression evaluated to false and no else section was defined");
    case N_COMPARE: {
        TERN_ASSERT(n->n_args >= 1 && n->ops, "the parser gives a comparison its operators");
        struct tval left = eval(ev, n->a, f);
        for (int i = 0; i < n->n_args; i++) {
            struct tval right = eval(ev, n->args[i], f);
            if (!tmpl_ev_compare(ev, n->ops[i], left, right, n)) return tv_bool(false);
            left = right;
        }
        return tv_bool(true);
    }
    case N_LIST:
    case N_TUPLE: {
        struct tval l = mk_list(ev, (size_t)n->n_args, n->kind == N_TUPLE ? TVF_TUPLE : 0);
        for (int i = 0; i < n->n_args; i++) l.u.l->v[i] = eval(ev, n->args[i], f);
        l.u.l->n = (size_t)n->n_args;
        return l;
    }
    case N_DICT: {
        TERN_ASSERT(n->n_args == 0 || (n->args && n->kwargs), "a dict literal's keys and values pair up");
        struct tdict *d = tmpl_ev_alloc(ev, sizeof *d);
        for (int i = 0; i < n->n_args; i++) {
            struct tval k = eval(ev, n->args[i], f);
            dict_set(ev, d, k, eval(ev, n->kwargs[i], f));
        }
        struct tval v = {0};
        v.kind = TV_DICT;
        v.u.d = d;
        return v;
    }
    default: tmpl_throw(ev, n, "TemplateError", "statement used as an expression");
    }
}

/* ------------------------------------------------------------------ statements */

static void assign(struct tmpl_ev *ev, const struct tmpl_node *target, struct frame *f, struct tval v)
{
    if (target->kind == N_ATTR) {
        struct tval obj = eval(ev, target->a, f);
        if (obj.kind != TV_NS)
            tmpl_throw(ev, target, "TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        dict_set(ev, obj.u.d, tv_str(target->str, target->len), v);
        return;
    }
    if (target->n_names <= 1) {
        frame_set(ev, f, target->str, target->len, v);
        return;
    }
    struct tval items = tmpl_ev_list_of(ev, v, target);
    TERN_ASSERT(items.kind == TV_LIST && items.u.l);
    if ((int)items.u.l->n != target->n_names)
        tmpl_throw(ev, target, "ValueError", "%s values to unpack (expected %d, got %zu)",
                   (int)items.u.l->n > target->n_names ? "too many" : "not enough",
                   target->n_names, items.u.l->n);
    for (int i = 0; i < target->n_names; i++)
        frame_set(ev, f, target->names[i], strlen(target->names[i]), items.u.l->v[i]);
}

static void bind_targets(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f, struct tval item)
{
    if (n->n_names == 1) {
        frame_set(ev, f, n->names[0], strlen(n->names[0]), item);
        return;
    }
    struct tval items = tmpl_ev_list_of(ev, item, n);
    TERN_ASSERT(items.kind == TV_LIST && items.u.l && n->n_names >= 2);
    if ((int)items.u.l->n != n->n_names)
        tmpl_throw(ev, n, "ValueError", "%s values to unpack (expected %d, got %zu)",
                   (int)items.u.l->n > n->n_names ? "too many" : "not enough", n->n_names, items.u.l->n);
    for (int i = 0; i < n->n_names; i++) frame_set(ev, f, n->names[i], strlen(n->names[i]), items.u.l->v[i]);
}

static int loop_depth(struct frame *f)
{
    int d = 0;
    for (; f; f = f->parent)
        for (int i = 0; i < f->n; i++)
            if (f->lens[i] == 4 && !memcmp(f->names[i], "loop", 4) && f->vals[i].kind == TV_LOOP) {
                d = (int)f->vals[i].u.loop->depth0 + 1;
                return d;
            }
    return d;
}

static enum flow exec_stmt(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f,
                           struct tmpl_buf *out);

static enum flow exec_for(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f, struct tmpl_buf *out)
{
    struct tval src = eval(ev, n->a, f);
    struct tval items = tmpl_ev_list_of(ev, src, n->a);
    TERN_ASSERT(items.kind == TV_LIST && items.u.l && n->n_names >= 1, "a loop iterates a list of items");
    struct frame *lf = frame_new(ev, f);
    if (n->b) { /* {% for x in xs if cond %}: filter first, so loop.length/last see the result */
        struct tval kept = mk_list(ev, items.u.l->n, 0);
        size_t k = 0;
        for (size_t i = 0; i < items.u.l->n; i++) {
            tmpl_ev_tick(ev, 1, n);
            bind_targets(ev, n, lf, items.u.l->v[i]);
            if (tmpl_truthy(eval(ev, n->b, lf))) kept.u.l->v[k++] = items.u.l->v[i];
        }
        TERN_ASSERT(k <= items.u.l->n);
        kept.u.l->n = k;
        items = kept;
        lf = frame_new(ev, f);
    }
    if (items.u.l->n == 0) {
        if (n->n_body2) return exec_body(ev, n->body2, n->n_body2, f, out);
        return FLOW_NORMAL;
    }
    struct tloop *L = tmpl_ev_alloc(ev, sizeof *L);
    L->length = (int64_t)items.u.l->n;
    L->items = items.u.l;
    L->depth0 = loop_depth(f);
    TERN_ASSERT(L->depth0 >= 0 && L->length > 0);
    struct tval lv = {0};
    lv.kind = TV_LOOP;
    lv.u.loop = L;
    for (size_t i = 0; i < items.u.l->n; i++) {
        tmpl_ev_tick(ev, 1, n); /* an empty body still costs its iterations */
        L->index0 = (int64_t)i;
        bind_targets(ev, n, lf, items.u.l->v[i]);
        frame_set(ev, lf, "loop", 4, lv);
        enum flow fl = exec_body(ev, n->body, n->n_body, lf, out);
        if (fl == FLOW_BREAK) break;
    }
    return FLOW_NORMAL;
}

static enum flow exec_node(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f, struct tmpl_buf *out)
{
    enter(ev, n);
    tmpl_ev_tick(ev, 1, n);
    enum flow fl = exec_stmt(ev, n, f, out);
    TERN_ASSERT(ev->rdepth >= 1);
    ev->rdepth--;
    return fl;
}

static enum flow exec_stmt(struct tmpl_ev *ev, const struct tmpl_node *n, struct frame *f, struct tmpl_buf *out)
{
    switch (n->kind) {
    case N_TEXT:
        if (out->marks) marks_add(ev, out->marks, out->n, n->len);
        tmpl_buf_add(out, n->str, n->len);
        break;
    case N_OUTPUT: emit(ev, out, eval(ev, n->a, f)); break;
    case N_IF:
        if (tmpl_truthy(eval(ev, n->a, f))) return exec_body(ev, n->body, n->n_body, f, out);
        return exec_body(ev, n->body2, n->n_body2, f, out);
    case N_FOR: return exec_for(ev, n, f, out);
    case N_SET: assign(ev, n->a, f, eval(ev, n->b, f)); break;
    case N_SET_BLOCK:
    case N_FILTER_BLOCK: {
        struct tmpl_buf b;
        tmpl_buf_init(&b, ev->a);
        b.marks = marks_new(ev);
        exec_body(ev, n->body, n->n_body, f, &b);
        check_buf(ev, &b, n);
        struct tval v = marked_str(ev, b.p ? b.p : "", b.n, b.marks);
        if (n->c) v = apply_chain(ev, n->c, f, v);
        if (n->kind == N_SET_BLOCK) assign(ev, n->a, f, v);
        else emit(ev, out, v);
        break;
    }
    case N_MACRO: {
        struct tval v = {0};
        v.kind = TV_MACRO;
        v.u.node = n;
        frame_set(ev, f, n->str, strlen(n->str), v);
        break;
    }
    case N_BREAK: return FLOW_BREAK;
    case N_CONTINUE: return FLOW_CONTINUE;
    default: tmpl_throw(ev, n, "TemplateError", "expression used as a statement");
    }
    check_buf(ev, out, n);
    return FLOW_NORMAL;
}

static enum flow exec_body(struct tmpl_ev *ev, struct tmpl_node *const *body, int n,
                           struct frame *f, struct tmpl_buf *out)
{
    for (int i = 0; i < n; i++) {
        enum flow fl = exec_node(ev, body[i], f, out);
        if (fl != FLOW_NORMAL) return fl;
    }
    return FLOW_NORMAL;
}

tern_status tmpl_render(const struct tmpl_program *prog, struct tmpl_arena *arena,
                        const struct tmpl_var *vars, int n_vars,
                        const struct tmpl_render_opts *opts, const char **out, size_t *out_len)
{
    struct tmpl_ev *ev = calloc(1, sizeof *ev);
    if (!ev) return tern_fail(TERN_ERR_NOMEM, "out of memory rendering a template");
    ev->a = arena;
    ev->now = opts ? opts->now_unix : TERN_CHAT_NOW_CLOCK;
    ev->max_work = opts && opts->max_work ? opts->max_work : TMPL_MAX_WORK;
    ev->stack_base = (uintptr_t)__builtin_frame_address(0);
    tmpl_meter = (struct tmpl_meter){0};
    tern_status st = TERN_OK;
    if (setjmp(ev->jb) == 0) {
        ev->root = frame_new(ev, NULL);
        for (int i = 0; i < n_vars; i++)
            frame_set(ev, ev->root, vars[i].name, strlen(vars[i].name), vars[i].value);
        struct tmpl_buf b;
        tmpl_buf_init(&b, arena);
        b.marks = opts ? opts->marks : NULL;
        tmpl_buf_add(&b, "", 0);
        exec_body(ev, prog->body, prog->n_body, ev->root, &b);
        /* a render that completes unwound every macro call and evaluation frame it entered */
        TERN_ASSERT(ev->depth == 0 && ev->rdepth == 0, "scopes and evaluation depth balance");
        check_buf(ev, &b, NULL);
        *out = b.p;
        *out_len = b.n;
    } else st = ev->st;
    free(ev);
    return st;
}
