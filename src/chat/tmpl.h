/* tmpl.h — internals of tern's Jinja-subset interpreter (chat templates).
 *
 * Read this first, then tmpl_lex.c (source -> tokens, where all whitespace control happens),
 * tmpl_parse.c (tokens -> AST), tmpl_eval.c (AST -> text), tmpl_builtins.c (filters, tests,
 * methods, globals) and tmpl_value.c (values, Python-style printing, tojson). chat.c is the public
 * face (include/tern.h, section "chat templates").
 *
 * Semantics follow Python Jinja2 3.1 configured as Hugging Face transformers does:
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols), default
 * Undefined, keep_trailing_newline=False, a json.dumps-based tojson.
 *
 * Memory: every value, AST node and output buffer lives in an arena (struct tmpl_arena) that is
 * freed as a whole: the parse arena belongs to the compiled template, the render arena to one
 * render call. Values are therefore plain 24-byte structs copied freely, never freed one by one.
 *
 * Errors: the lexer, parser and evaluator report failures by recording a message (tern_fail,
 * "line L:C: Kind: message") and longjmp-ing back to the entry point (tmpl_compile /
 * tmpl_render), which returns the status. That keeps the many small eval helpers free of error
 * plumbing; it is safe because nothing they allocate lives outside the arena. */
#ifndef TERN_CHAT_TMPL_H
#define TERN_CHAT_TMPL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern.h"

/* ------------------------------------------------------------------ arena */

struct tmpl_chunk;
struct tmpl_arena {
    struct tmpl_chunk *head;
    size_t total;   /* bytes obtained from malloc so far */
    size_t limit;   /* refuse to grow beyond this (bounds runaway templates) */
};
void tmpl_arena_init(struct tmpl_arena *a, size_t limit);
void tmpl_arena_free(struct tmpl_arena *a);
/* 16-byte aligned, zeroed memory; NULL when the limit is reached or malloc fails. */
void *tmpl_arena_alloc(struct tmpl_arena *a, size_t n);

/* ------------------------------------------------------------------ values */

enum tv_kind {
    TV_UNDEF,  /* Jinja Undefined; u.s.p optionally holds the reason ("'x' is undefined") */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,    /* UTF-8 bytes u.s.p[0..n), not NUL-terminated, immutable */
    TV_LIST,   /* also tuples and generators (see flags) */
    TV_DICT,   /* insertion-ordered like a Python dict */
    TV_NS,     /* namespace(): a dict whose attributes can be assigned */
    TV_MACRO,  /* u.node = the macro statement */
    TV_FUNC,   /* built-in global function, u.i = tmpl_global_index() */
    TV_METHOD, /* bound method, u.method */
    TV_LOOP,   /* the `loop` variable of a for loop, u.loop */
};

enum {
    TVF_TUPLE = 1,
    TVF_GEN = 2,  /* map/select result: iterable once, not JSON-able */
    TVF_SAFE = 4, /* a markupsafe.Markup string (from |safe): `+` HTML-escapes the other side */
    /* Markup, as opposed to content: which bytes of a string the template wrote itself. Only
     * markup may become control tokens when the prompt is tokenized (chat.c, "markup spans").
     * Strings start as content; literals of the template's source (and bos_token / eos_token)
     * are markup; concatenation and captured output (macros, {% set %} blocks) keep the ranges
     * of their parts; every other operation gives content (fail closed: a control token the
     * template computes with a filter becomes text). Values are copied whole, never edited, so
     * the flags always describe u.s.p[0..n). */
    TVF_MARKUP = 8, /* TV_STR: all of it is markup */
    TVF_MARKS = 16, /* TV_STR: the markup ranges are a struct tmpl_marks, its pointer stored in
                       the sizeof(void *) bytes just before u.s.p (tmpl_str_marks) */
};

/* Byte ranges [off, off + len) of a string or an output that are markup: sorted, disjoint,
 * none empty, none touching the next. */
struct tmpl_mark {
    size_t off, len;
};
struct tmpl_marks {
    size_t n, cap;
    struct tmpl_mark *m;
};

struct tlist;
struct tdict;
struct tmethod;
struct tloop;
struct tmpl_node;

struct tval {
    uint8_t kind;
    uint8_t flags;
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s;
        struct tlist *l;
        struct tdict *d;
        const struct tmpl_node *node;
        struct tmethod *method;
        struct tloop *loop;
    } u;
};

struct tlist {
    size_t n, cap;
    struct tval *v;
};
struct tdict {
    size_t n, cap;
    struct tval *k, *v;
};
struct tmethod {
    struct tval self;
    const char *name;
};
struct tloop {
    int64_t index0, length, depth0;
    struct tlist *items; /* for previtem / nextitem */
};

static inline struct tval tv_undef(void) { struct tval v = {0}; v.kind = TV_UNDEF; return v; }
static inline struct tval tv_none(void) { struct tval v = {0}; v.kind = TV_NONE; return v; }
static inline struct tval tv_bool(bool b) { struct tval v = {0}; v.kind = TV_BOOL; v.u.b = b; return v; }
static inline struct tval tv_int(int64_t i) { struct tval v = {0}; v.kind = TV_INT; v.u.i = i; return v; }
static inline struct tval tv_float(double f) { struct tval v = {0}; v.kind = TV_FLOAT; v.u.f = f; return v; }
static inline struct tval tv_str(const char *p, size_t n)
{
    struct tval v = {0};
    v.kind = TV_STR;
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

/* Growable byte buffer in an arena (output of a render, a macro call, str() of a value). */
struct tmpl_buf {
    char *p;
    size_t n, cap;
    struct tmpl_arena *a;
    bool oom;
    struct tmpl_marks *marks; /* the markup written into it, or NULL: not tracked (helpers'
                                 scratch buffers) */
};
void tmpl_buf_init(struct tmpl_buf *b, struct tmpl_arena *a);
void tmpl_buf_add(struct tmpl_buf *b, const char *p, size_t n);
void tmpl_buf_adds(struct tmpl_buf *b, const char *s);
void tmpl_buf_addc(struct tmpl_buf *b, char c);

/* Python-compatible text forms. Errors (unserializable values) return false and set *why. */
void tmpl_py_str(struct tmpl_buf *b, struct tval v);  /* str(v) */
void tmpl_py_repr(struct tmpl_buf *b, struct tval v); /* repr(v) */
void tmpl_py_float(struct tmpl_buf *b, double f);     /* repr(float) */
/* json.dumps options (Hugging Face's tojson passes these through). */
struct tmpl_json_opts {
    bool pretty;           /* indent is not None: one element per line */
    const char *indent;    /* the unit repeated per level (" " * n, or the string given) */
    size_t indent_n;
    const char *item_sep;  /* ", " by default, "," when pretty */
    size_t item_sep_n;
    const char *key_sep;   /* ": " */
    size_t key_sep_n;
    bool ensure_ascii;     /* non-ASCII as \uXXXX */
    bool sort_keys;
};
struct tmpl_json_error {
    const char *kind; /* Python exception name: TypeError, RecursionError */
    char msg[160];
};
/* json.dumps(v, **opts) appended to b. False with *err filled for what Python refuses (a
 * generator, a tuple key, keys sort_keys cannot order, nesting beyond TMPL_MAX_DATA_DEPTH). */
bool tmpl_to_json(struct tmpl_buf *b, struct tval v, const struct tmpl_json_opts *o, int depth,
                  struct tmpl_json_error *err);
const char *tmpl_type_name(struct tval v); /* Python type name: "str", "dict", "NoneType" ... */

/* ------------------------------------------------------------------ resource meter
 *
 * Templates come from downloaded files, so a render must end in bounded memory, stack and time
 * whatever the template does. Memory: the arena limit. Stack: the parser's nesting limit, the
 * evaluator's recursion limit, and TMPL_MAX_DATA_DEPTH for the helpers that walk nested values
 * (str/repr, ==, tojson; Python raises RecursionError there too). Time: every unit of work (an
 * AST node evaluated, a loop iteration, an element compared, 256 bytes scanned) is counted
 * against the render's budget. The helpers in this header are pure functions called from dozens
 * of places, so they report through this per-thread meter rather than an extra parameter: a
 * render runs on one thread from start to end, and tmpl_render resets the meter first. */
#define TMPL_MAX_DATA_DEPTH 1100
#define TMPL_WORK_BYTES 256 /* bytes scanned per unit of work */
struct tmpl_meter {
    uint64_t work; /* units spent by the current render */
    bool too_deep; /* a helper met values nested deeper than TMPL_MAX_DATA_DEPTH */
};
extern _Thread_local struct tmpl_meter tmpl_meter;

bool tmpl_truthy(struct tval v);
/* Exact int-vs-float comparison as Python does it (the int is not rounded to a double first):
 * -1, 0, 1, or 2 when f is NaN (unordered). */
int tmpl_cmp_int_float(int64_t i, double f);
bool tmpl_equal(struct tval a, struct tval b);
struct tval *tmpl_dict_get(const struct tdict *d, struct tval key); /* NULL if absent */
bool tmpl_is_str(struct tval v, const char *s);
/* markupsafe.escape: & < > " ' -> entities */
void tmpl_html_escape(struct tmpl_buf *b, const char *p, size_t n);

/* ------------------------------------------------------------------ tokens */

enum tmpl_tok_kind {
    TK_EOF,
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING, /* value already unescaped */
    TK_INT,
    TK_FLOAT,
    TK_OP,     /* operator / punctuation, text in p[0..n) */
};

struct tmpl_token {
    int kind;
    int line, col;
    const char *p; /* TEXT, NAME, STRING (unescaped, arena), OP */
    size_t n;
    int64_t i;
    double f;
};

/* Tokenize a whole template (newlines normalized to \n, one trailing newline dropped, whitespace
 * control applied to TEXT tokens). Tokens and strings live in `a`. The last token is TK_EOF.
 * TERN_ERR_FORMAT with "line L:C: ..." on a lexical error. */
TERN_NODISCARD tern_status tmpl_lex(struct tmpl_arena *a, const char *src, size_t len, struct tmpl_token **toks,
                     int *n_toks);

/* ------------------------------------------------------------------ AST */

enum tmpl_node_kind {
    /* statements */
    N_TEXT,       /* str */
    N_OUTPUT,     /* {{ a }} */
    N_IF,         /* a = cond, body = then, body2 = else (an elif is an N_IF inside body2) */
    N_FOR,        /* names = targets, a = iterable, b = filter (or NULL), body, body2 = else */
    N_SET,        /* a = target expr (N_NAME, N_ATTR, N_TUPLE of names), b = value */
    N_SET_BLOCK,  /* a = target, body; c = filter chain applied to the captured text (or NULL) */
    N_MACRO,      /* str = name, names = params, args = defaults (NULL where none), body */
    N_FILTER_BLOCK, /* c = filter chain (N_FILTER with a == NULL at the bottom), body */
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    N_LIT,        /* lit */
    N_NAME,       /* str */
    N_ATTR,       /* a.str */
    N_ITEM,       /* a[b] */
    N_SLICE,      /* a[b:c:d] (b, c, d may be NULL): b = start, c = stop, args[0] = step */
    N_CALL,       /* a(args..., names[i]=kwargs[i]) */
    N_FILTER,     /* a | str(args, kwargs) */
    N_TEST,       /* a is [not] str(args); op = 1 when negated */
    N_BINOP,      /* a op b; op = enum tmpl_binop */
    N_NEG,        /* -a */
    N_POS,        /* +a */
    N_NOT,
    N_AND,
    N_OR,
    N_COND,       /* b if a else c */
    N_COMPARE,    /* a then ops[i] args[i] ... */
    N_LIST,       /* args */
    N_TUPLE,      /* args */
    N_DICT,       /* args = keys, kwargs = values */
};

enum tmpl_binop {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};

struct tmpl_node {
    int kind;
    int op;
    int line, col;
    struct tmpl_node *a, *b, *c;
    struct tmpl_node **args;   /* n_args */
    struct tmpl_node **kwargs; /* n_kwargs (values of keyword arguments / dict values) */
    const char **names;        /* n_names: kwarg names / for targets / macro params */
    int *ops;                  /* N_COMPARE: one op per args[i] */
    int n_args, n_kwargs, n_names;
    struct tmpl_node **body, **body2;
    int n_body, n_body2;
    const char *str;
    size_t len;
    struct tval lit;
};

/* ------------------------------------------------------------------ compile + render */

struct tmpl_program {
    struct tmpl_arena arena;
    struct tmpl_node **body;
    int n_body;
};

/* Compile source (len bytes, need not be NUL-terminated). On failure returns TERN_ERR_FORMAT
 * with "line L:C: ..." recorded; *out untouched. Free with tmpl_program_free. */
TERN_NODISCARD tern_status tmpl_compile(const char *src, size_t len, struct tmpl_program **out);
void tmpl_program_free(struct tmpl_program *p);

/* One named variable handed to a render. */
struct tmpl_var {
    const char *name;
    struct tval value;
};

struct tmpl_render_opts {
    int64_t now_unix;  /* strftime_now(): TERN_CHAT_NOW_CLOCK = the clock, local time; else this
                          instant in UTC */
    uint64_t max_work; /* work budget (see "resource meter"); 0 = TMPL_MAX_WORK */
    struct tmpl_marks *marks; /* if not NULL: receives the output's markup ranges (in the arena) */
};
/* The default budget: about a second of evaluation, some hundred times what the largest real
 * template needs for a long conversation with many tools. */
#define TMPL_MAX_WORK (1ull << 26)
/* Longest template source accepted (real ones are under 100 KB); keeps every count an int. */
#define TMPL_MAX_SOURCE (8u << 20)

/* Render prog with the given variables (values may live in `arena`, which also receives the
 * output). On success *out points into the arena (NUL-terminated, *out_len bytes). On failure
 * the message names line:col and the Python exception kind (TemplateError, UndefinedError,
 * TypeError). */
TERN_NODISCARD tern_status tmpl_render(const struct tmpl_program *prog, struct tmpl_arena *arena,
                        const struct tmpl_var *vars, int n_vars,
                        const struct tmpl_render_opts *opts, const char **out, size_t *out_len);

/* Does the template refer to the variable `name` anywhere (read or set)? */
bool tmpl_program_uses_name(const struct tmpl_program *p, const char *name);

/* The markup ranges of a string value: *n of them in the returned array (one may be written to
 * *one); NULL with *n = 0 for content. */
const struct tmpl_mark *tmpl_str_marks(const struct tval *v, struct tmpl_mark *one, size_t *n);
/* s[b, e) as a string keeping its share of s's markup (strip / trim: their result is part of
 * their argument). */
struct tmpl_ev;
struct tval tmpl_ev_substr(struct tmpl_ev *ev, struct tval s, size_t b, size_t e);

/* ------------------------------------------------------------------ evaluator internals shared
 * with tmpl_builtins.c */

struct tmpl_ev;
_Noreturn void tmpl_throw(struct tmpl_ev *ev, const struct tmpl_node *at, const char *kind,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void *tmpl_ev_alloc(struct tmpl_ev *ev, size_t n);
struct tmpl_arena *tmpl_ev_arena(struct tmpl_ev *ev);
int64_t tmpl_ev_now(struct tmpl_ev *ev);
struct tval tmpl_ev_str(struct tmpl_ev *ev, struct tval v);       /* str(v) as a TV_STR */
struct tval tmpl_ev_list_of(struct tmpl_ev *ev, struct tval v, const struct tmpl_node *at);
struct tval tmpl_ev_call(struct tmpl_ev *ev, struct tval fn, struct tval *args, int n,
                         const char **kwnames, struct tval *kwvals, int nk,
                         const struct tmpl_node *at);
struct tval tmpl_ev_getattr(struct tmpl_ev *ev, struct tval obj, const char *name, size_t len,
                            const struct tmpl_node *at);
struct tval tmpl_ev_getitem(struct tmpl_ev *ev, struct tval obj, struct tval key,
                            const struct tmpl_node *at);
void tmpl_ev_check_defined(struct tmpl_ev *ev, struct tval v, const struct tmpl_node *at);
/* Charge `units` of work; throws when the render's budget is spent or a helper met too deep
 * data. Every loop whose length the template controls calls it. */
void tmpl_ev_tick(struct tmpl_ev *ev, uint64_t units, const struct tmpl_node *at);
/* Python's binary operators (op = enum tmpl_binop, arithmetic ones) and comparisons, shared
 * by the `divisibleby`/`odd`/`even` and `gt`/`lt`/... tests. */
struct tval tmpl_ev_arith(struct tmpl_ev *ev, int op, struct tval a, struct tval b,
                          const struct tmpl_node *at);
bool tmpl_ev_compare(struct tmpl_ev *ev, int op, struct tval a, struct tval b,
                     const struct tmpl_node *at);

/* Global functions (raise_exception, range, namespace, ...): index for a TV_FUNC value's u.i,
 * or -1 when name is not one. */
int tmpl_global_index(const char *name, size_t len);

/* Arguments of a filter / test / method / global call, already evaluated. */
struct tmpl_args {
    struct tval *pos;
    int n;
    const char **kwn;
    struct tval *kwv;
    int nk;
};
/* Positional-or-keyword argument i named `name`; undefined when absent. */
struct tval tmpl_arg(const struct tmpl_args *a, int i, const char *name, bool *present);

struct tval tmpl_apply_filter(struct tmpl_ev *ev, const char *name, struct tval v,
                              const struct tmpl_args *a, const struct tmpl_node *at);
bool tmpl_apply_test(struct tmpl_ev *ev, const char *name, struct tval v,
                     const struct tmpl_args *a, const struct tmpl_node *at);
struct tval tmpl_call_method(struct tmpl_ev *ev, struct tval self, const char *name,
                             const struct tmpl_args *a, const struct tmpl_node *at);
struct tval tmpl_call_global(struct tmpl_ev *ev, int fn, const struct tmpl_args *a,
                             const struct tmpl_node *at);
bool tmpl_has_method(struct tval self, const char *name, size_t len);

/* UTF-8 helpers (Python str semantics count code points). */
size_t tmpl_utf8_count(const char *p, size_t n);
/* Byte offset of code point index ci (clamped to n). */
size_t tmpl_utf8_offset(const char *p, size_t n, int64_t ci);
bool tmpl_is_space_cp(int32_t cp);

#endif
