/* tmpl_parse.c — tokens -> AST (struct tmpl_node), following jinja2/parser.py.
 *
 * Read tmpl.h first (node kinds and their fields). Operator precedence, loosest first, is
 * Jinja's: `x if c else y`, or, and, not, comparisons (== != < <= > >= in, not in), + -, ~,
 * * / // %, **, unary - +, then primaries with postfix .attr [key] [a:b] (call), and filters
 * `|f(args)` / tests `is [not] t(arg)` binding tighter than any binary operator (so
 * `x|trim + 'a'` is `(x|trim) + 'a'`).
 *
 * Statements: if/elif/else, for (targets, `if` filter, else), set (expression, namespace
 * attribute, block form with optional filter), macro (defaults), filter blocks, break,
 * continue. Anything else ({% include %}, {% call %}, ...) is refused with line:col.
 * Recursion is bounded (TMPL_MAX_NEST) so hostile templates cannot overflow the stack. */
#include "chat/tmpl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/error.h"

#define TMPL_MAX_NEST 200

struct parser {
    struct tmpl_arena *a;
    struct tmpl_token *t;
    int n, i;
    int depth;
    jmp_buf jb;
    tern_status st;
};

__attribute__((format(printf, 3, 4))) _Noreturn static void perr(struct parser *p,
                                                                  const struct tmpl_token *at,
                                                                  const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->st = tern_fail(TERN_ERR_FORMAT, "line %d:%d: TemplateSyntaxError: %s", at->line, at->col,
                      msg);
    longjmp(p->jb, 1);
}

_Noreturn static void poom(struct parser *p)
{
    p->st = tern_fail(TERN_ERR_NOMEM, "out of memory while parsing the template");
    longjmp(p->jb, 1);
}

static void *palloc(struct parser *p, size_t n)
{
    void *r = tmpl_arena_alloc(p->a, n);
    if (!r) poom(p);
    return r;
}

/* The token stream ends with TK_EOF and next() never moves past it. */
static struct tmpl_token *cur(struct parser *p)
{
    TERN_ASSERT(p->i >= 0 && p->i < p->n && p->t[p->n - 1].kind == TK_EOF, "the cursor stays on the tokens");
    return &p->t[p->i];
}
static struct tmpl_token *peek(struct parser *p, int k)
{
    TERN_ASSERT(k >= 0 && p->n >= 1);
    int j = p->i + k;
    return &p->t[j < p->n ? j : p->n - 1];
}
static void next(struct parser *p)
{
    if (p->i < p->n - 1) p->i++;
}

static bool tok_is_op(const struct tmpl_token *t, const char *op)
{
    return t->kind == TK_OP && t->n == strlen(op) && !memcmp(t->p, op, t->n);
}
static bool tok_is_name(const struct tmpl_token *t, const char *name)
{
    return t->kind == TK_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}

static const char *tok_desc(const struct tmpl_token *t, char *buf, size_t n)
{
    switch (t->kind) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "template text";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_STRING: return "string literal";
    case TK_INT:
    case TK_FLOAT: return "number";
    default: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p); return buf;
    }
}

static void expect_op(struct parser *p, const char *op)
{
    char b[64];
    if (!tok_is_op(cur(p), op)) perr(p, cur(p), "expected '%s', got %s", op, tok_desc(cur(p), b, sizeof b));
    next(p);
}

static void expect_kind(struct parser *p, int kind, const char *what)
{
    char b[64];
    if (cur(p)->kind != kind) perr(p, cur(p), "expected %s, got %s", what, tok_desc(cur(p), b, sizeof b));
    next(p);
}

static const char *name_dup(struct parser *p, const struct tmpl_token *t)
{
    char *s = palloc(p, t->n + 1);
    memcpy(s, t->p, t->n);
    return s;
}

static const char *expect_name(struct parser *p)
{
    char b[64];
    if (cur(p)->kind != TK_NAME) perr(p, cur(p), "expected a name, got %s", tok_desc(cur(p), b, sizeof b));
    const char *s = name_dup(p, cur(p));
    next(p);
    return s;
}

static struct tmpl_node *mk(struct parser *p, int kind, const struct tmpl_token *at)
{
    struct tmpl_node *n = palloc(p, sizeof *n);
    n->kind = kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* growable node vector (arena) */
struct nvec {
    struct tmpl_node **v;
    int n, cap;
};
static void nv_push(struct parser *p, struct nvec *nv, struct tmpl_node *x)
{
    if (nv->n == nv->cap) {
        int cap = nv->cap ? nv->cap * 2 : 4;
        struct tmpl_node **v = palloc(p, (size_t)cap * sizeof *v);
        if (nv->n) memcpy(v, nv->v, (size_t)nv->n * sizeof *v);
        nv->v = v;
        nv->cap = cap;
    }
    TERN_ASSERT(nv->n < nv->cap, "room for the node (absent optional parts are NULL)");
    nv->v[nv->n++] = x;
}
struct svec {
    const char **v;
    int n, cap;
};
static void sv_push(struct parser *p, struct svec *sv, const char *x)
{
    if (sv->n == sv->cap) {
        int cap = sv->cap ? sv->cap * 2 : 4;
        const char **v = palloc(p, (size_t)cap * sizeof *v);
        if (sv->n) memcpy(v, sv->v, (size_t)sv->n * sizeof *v);
        sv->v = v;
        sv->cap = cap;
    }
    TERN_ASSERT(sv->n < sv->cap);
    sv->v[sv->n++] = x;
}

static void enter(struct parser *p)
{
    if (++p->depth > TMPL_MAX_NEST)
        perr(p, cur(p), "template nesting deeper than %d levels", TMPL_MAX_NEST);
}
static void leave(struct parser *p)
{
    TERN_ASSERT(p->depth > 0, "leave() pairs with enter()");
    p->depth--;
}

static struct tmpl_node *parse_expr(struct parser *p, bool condexpr);
static struct tmpl_node *parse_unary(struct parser *p, bool with_filter);
static struct tmpl_node *parse_primary(struct parser *p);
static struct tmpl_node *parse_postfix(struct parser *p, struct tmpl_node *n);

/* Call arguments after '(' up to and including ')': positional into n->args, keywords into
 * n->names / n->kwargs. */
static void parse_call_args(struct parser *p, struct tmpl_node *n)
{
    struct nvec pos = {0}, kw = {0};
    struct svec kwn = {0};
    while (!tok_is_op(cur(p), ")")) {
        if (pos.n + kw.n) expect_op(p, ",");
        if (tok_is_op(cur(p), ")")) break; /* trailing comma */
        if (tok_is_op(cur(p), "*") || tok_is_op(cur(p), "**"))
            perr(p, cur(p), "*args / **kwargs in calls are not supported");
        if (cur(p)->kind == TK_NAME && tok_is_op(peek(p, 1), "=")) {
            sv_push(p, &kwn, name_dup(p, cur(p)));
            next(p);
            next(p);
            nv_push(p, &kw, parse_expr(p, true));
        } else {
            if (kw.n) perr(p, cur(p), "positional argument after keyword argument");
            nv_push(p, &pos, parse_expr(p, true));
        }
    }
    next(p);
    n->args = pos.v;
    n->n_args = pos.n;
    n->kwargs = kw.v;
    n->n_kwargs = kw.n;
    n->names = kwn.v;
    n->n_names = kwn.n;
}

/* "name(.name)*" of a filter or test */
static const char *parse_dotted(struct parser *p)
{
    const char *s = expect_name(p);
    while (tok_is_op(cur(p), ".") && peek(p, 1)->kind == TK_NAME) {
        next(p);
        const char *t = expect_name(p);
        size_t a = strlen(s), b = strlen(t);
        char *u = palloc(p, a + b + 2);
        memcpy(u, s, a);
        u[a] = '.';
        memcpy(u + a + 1, t, b);
        s = u;
    }
    return s;
}

static struct tmpl_node *parse_filter(struct parser *p, struct tmpl_node *on, const struct tmpl_token *at)
{
    struct tmpl_node *f = mk(p, N_FILTER, at);
    f->a = on;
    f->str = parse_dotted(p);
    if (tok_is_op(cur(p), "(")) {
        next(p);
        parse_call_args(p, f);
    }
    return f;
}

static struct tmpl_node *parse_filter_expr(struct parser *p, struct tmpl_node *n)
{
    for (;;) {
        struct tmpl_token *t = cur(p);
        if (tok_is_op(t, "|")) {
            next(p);
            n = parse_filter(p, n, t);
        } else if (tok_is_name(t, "is")) {
            next(p);
            struct tmpl_node *x = mk(p, N_TEST, t);
            x->a = n;
            if (tok_is_name(cur(p), "not")) {
                x->op = 1;
                next(p);
            }
            x->str = parse_dotted(p);
            struct tmpl_token *c = cur(p);
            if (tok_is_op(c, "(")) {
                next(p);
                parse_call_args(p, x);
            } else if ((c->kind == TK_NAME || c->kind == TK_STRING || c->kind == TK_INT ||
                        c->kind == TK_FLOAT || tok_is_op(c, "[") || tok_is_op(c, "{")) &&
                       !tok_is_name(c, "else") && !tok_is_name(c, "or") &&
                       !tok_is_name(c, "and") && !tok_is_name(c, "if")) {
                struct tmpl_node *arg = parse_postfix(p, parse_primary(p));
                x->args = palloc(p, sizeof *x->args);
                x->args[0] = arg;
                x->n_args = 1;
            }
            n = x;
        } else if (tok_is_op(t, "(")) {
            next(p);
            struct tmpl_node *c = mk(p, N_CALL, t);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else return n;
    }
}

static struct tmpl_node *parse_postfix(struct parser *p, struct tmpl_node *n)
{
    for (;;) {
        struct tmpl_token *t = cur(p);
        if (tok_is_op(t, ".")) {
            next(p);
            struct tmpl_node *x = mk(p, N_ATTR, t);
            x->a = n;
            if (cur(p)->kind == TK_INT) { /* foo.0 is foo[0] */
                x->kind = N_ITEM;
                x->b = mk(p, N_LIT, cur(p));
                x->b->lit = tv_int(cur(p)->i);
                next(p);
            } else {
                x->str = expect_name(p);
                x->len = strlen(x->str);
            }
            n = x;
        } else if (tok_is_op(t, "[")) {
            next(p);
            struct tmpl_node *parts[3] = {NULL, NULL, NULL};
            int k = 0;
            bool slice = false;
            for (;;) {
                if (tok_is_op(cur(p), "]")) break;
                if (tok_is_op(cur(p), ":")) {
                    slice = true;
                    if (++k > 2) perr(p, cur(p), "too many ':' in a slice");
                    next(p);
                    continue;
                }
                if (parts[k]) perr(p, cur(p), "expected ':' or ']' in subscript");
                parts[k] = parse_expr(p, true);
            }
            next(p);
            struct tmpl_node *x = mk(p, slice ? N_SLICE : N_ITEM, t);
            x->a = n;
            if (!slice && !parts[0]) perr(p, t, "empty subscript");
            x->b = parts[0];
            x->c = parts[1];
            if (slice) {
                x->args = palloc(p, sizeof *x->args);
                x->args[0] = parts[2];
                x->n_args = 1;
            }
            n = x;
        } else if (tok_is_op(t, "(")) {
            next(p);
            struct tmpl_node *c = mk(p, N_CALL, t);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else return n;
    }
}

static struct tmpl_node *parse_primary(struct parser *p)
{
    struct tmpl_token *t = cur(p);
    char b[64];
    enter(p);
    struct tmpl_node *n;
    if (t->kind == TK_NAME) {
        n = mk(p, N_LIT, t);
        if (tok_is_name(t, "true") || tok_is_name(t, "True")) n->lit = tv_bool(true);
        else if (tok_is_name(t, "false") || tok_is_name(t, "False")) n->lit = tv_bool(false);
        else if (tok_is_name(t, "none") || tok_is_name(t, "None")) n->lit = tv_none();
        else {
            n->kind = N_NAME;
            n->str = name_dup(p, t);
            n->len = t->n;
        }
        next(p);
    } else if (t->kind == TK_STRING) {
        /* adjacent literals concatenate: "a" "b" */
        size_t total = 0;
        int j = p->i;
        while (p->t[j].kind == TK_STRING) total += p->t[j++].n;
        char *s = palloc(p, total + 1);
        size_t k = 0;
        while (cur(p)->kind == TK_STRING) {
            memcpy(s + k, cur(p)->p, cur(p)->n);
            k += cur(p)->n;
            next(p);
        }
        n = mk(p, N_LIT, t);
        n->lit = tv_str(s, total);
        n->lit.flags = TVF_MARKUP; /* the template's own text (tmpl.h, "markup") */
    } else if (t->kind == TK_INT) {
        n = mk(p, N_LIT, t);
        n->lit = tv_int(t->i);
        next(p);
    } else if (t->kind == TK_FLOAT) {
        n = mk(p, N_LIT, t);
        n->lit = tv_float(t->f);
        next(p);
    } else if (tok_is_op(t, "(")) {
        next(p);
        if (tok_is_op(cur(p), ")")) { /* empty tuple */
            next(p);
            n = mk(p, N_TUPLE, t);
        } else {
            struct tmpl_node *first = parse_expr(p, true);
            if (tok_is_op(cur(p), ",")) {
                struct nvec items = {0};
                nv_push(p, &items, first);
                while (tok_is_op(cur(p), ",")) {
                    next(p);
                    if (tok_is_op(cur(p), ")")) break;
                    nv_push(p, &items, parse_expr(p, true));
                }
                n = mk(p, N_TUPLE, t);
                n->args = items.v;
                n->n_args = items.n;
            } else n = first;
            expect_op(p, ")");
        }
    } else if (tok_is_op(t, "[")) {
        next(p);
        struct nvec items = {0};
        while (!tok_is_op(cur(p), "]")) {
            if (items.n) expect_op(p, ",");
            if (tok_is_op(cur(p), "]")) break;
            nv_push(p, &items, parse_expr(p, true));
        }
        next(p);
        n = mk(p, N_LIST, t);
        n->args = items.v;
        n->n_args = items.n;
    } else if (tok_is_op(t, "{")) {
        next(p);
        struct nvec keys = {0}, vals = {0};
        while (!tok_is_op(cur(p), "}")) {
            if (keys.n) expect_op(p, ",");
            if (tok_is_op(cur(p), "}")) break;
            nv_push(p, &keys, parse_expr(p, true));
            expect_op(p, ":");
            nv_push(p, &vals, parse_expr(p, true));
        }
        next(p);
        n = mk(p, N_DICT, t);
        n->args = keys.v;
        n->n_args = keys.n;
        n->kwargs = vals.v;
        n->n_kwargs = vals.n;
    } else {
        perr(p, t, "unexpected %s in expression", tok_desc(t, b, sizeof b));
    }
    leave(p);
    return n;
}

static struct tmpl_node *parse_unary(struct parser *p, bool with_filter)
{
    struct tmpl_token *t = cur(p);
    enter(p);
    struct tmpl_node *n;
    if (tok_is_op(t, "-") || tok_is_op(t, "+")) {
        next(p);
        n = mk(p, tok_is_op(t, "-") ? N_NEG : N_POS, t);
        n->a = parse_unary(p, false);
    } else {
        n = parse_postfix(p, parse_primary(p));
    }
    if (with_filter) n = parse_filter_expr(p, n);
    leave(p);
    return n;
}

static struct tmpl_node *binop(struct parser *p, const struct tmpl_token *at, int op,
                               struct tmpl_node *a, struct tmpl_node *b)
{
    TERN_ASSERT(a && b, "both operands were parsed (errors longjmp out)");
    struct tmpl_node *n = mk(p, N_BINOP, at);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct tmpl_node *parse_pow(struct parser *p)
{
    struct tmpl_node *n = parse_unary(p, true);
    while (tok_is_op(cur(p), "**")) {
        struct tmpl_token *t = cur(p);
        next(p);
        n = binop(p, t, OP_POW, n, parse_unary(p, true));
    }
    return n;
}

static struct tmpl_node *parse_math2(struct parser *p)
{
    struct tmpl_node *n = parse_pow(p);
    for (;;) {
        struct tmpl_token *t = cur(p);
        int op = tok_is_op(t, "*") ? OP_MUL : tok_is_op(t, "/") ? OP_DIV
               : tok_is_op(t, "//") ? OP_FLOORDIV : tok_is_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        next(p);
        n = binop(p, t, op, n, parse_pow(p));
    }
}

static struct tmpl_node *parse_concat(struct parser *p)
{
    struct tmpl_node *n = parse_math2(p);
    while (tok_is_op(cur(p), "~")) {
        struct tmpl_token *t = cur(p);
        next(p);
        n = binop(p, t, OP_CONCAT, n, parse_math2(p));
    }
    return n;
}

static struct tmpl_node *parse_math1(struct parser *p)
{
    struct tmpl_node *n = parse_concat(p);
    for (;;) {
        struct tmpl_token *t = cur(p);
        int op = tok_is_op(t, "+") ? OP_ADD : tok_is_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        next(p);
        n = binop(p, t, op, n, parse_concat(p));
    }
}

static struct tmpl_node *parse_compare(struct parser *p)
{
    struct tmpl_token *start = cur(p);
    struct tmpl_node *n = parse_math1(p);
    struct nvec rhs = {0};
    int *ops = NULL, nops = 0, cap = 0;
    for (;;) {
        struct tmpl_token *t = cur(p);
        int op = tok_is_op(t, "==") ? OP_EQ : tok_is_op(t, "!=") ? OP_NE
               : tok_is_op(t, "<") ? OP_LT : tok_is_op(t, "<=") ? OP_LE
               : tok_is_op(t, ">") ? OP_GT : tok_is_op(t, ">=") ? OP_GE
               : tok_is_name(t, "in") ? OP_IN : -1;
        if (op < 0 && tok_is_name(t, "not") && tok_is_name(peek(p, 1), "in")) {
            op = OP_NOTIN;
            next(p);
        }
        if (op < 0) break;
        next(p);
        if (nops == cap) {
            cap = cap ? cap * 2 : 4;
            int *o = palloc(p, (size_t)cap * sizeof *o);
            if (nops) memcpy(o, ops, (size_t)nops * sizeof *o);
            ops = o;
        }
        ops[nops++] = op;
        nv_push(p, &rhs, parse_math1(p));
    }
    if (!nops) return n;
    struct tmpl_node *c = mk(p, N_COMPARE, start);
    c->a = n;
    c->args = rhs.v;
    c->n_args = rhs.n;
    c->ops = ops;
    return c;
}

static struct tmpl_node *parse_not(struct parser *p)
{
    struct tmpl_token *t = cur(p);
    if (tok_is_name(t, "not")) {
        next(p);
        enter(p);
        struct tmpl_node *n = mk(p, N_NOT, t);
        n->a = parse_not(p);
        leave(p);
        return n;
    }
    return parse_compare(p);
}

static struct tmpl_node *parse_and(struct parser *p)
{
    struct tmpl_node *n = parse_not(p);
    while (tok_is_name(cur(p), "and")) {
        struct tmpl_token *t = cur(p);
        next(p);
        struct tmpl_node *x = mk(p, N_AND, t);
        x->a = n;
        x->b = parse_not(p);
        n = x;
    }
    return n;
}

static struct tmpl_node *parse_or(struct parser *p)
{
    struct tmpl_node *n = parse_and(p);
    while (tok_is_name(cur(p), "or")) {
        struct tmpl_token *t = cur(p);
        next(p);
        struct tmpl_node *x = mk(p, N_OR, t);
        x->a = n;
        x->b = parse_and(p);
        n = x;
    }
    return n;
}

static struct tmpl_node *parse_expr(struct parser *p, bool condexpr)
{
    enter(p);
    struct tmpl_node *n = parse_or(p);
    while (condexpr && tok_is_name(cur(p), "if")) {
        struct tmpl_token *t = cur(p);
        next(p);
        struct tmpl_node *c = mk(p, N_COND, t);
        c->b = n;
        c->a = parse_or(p);
        if (tok_is_name(cur(p), "else")) {
            next(p);
            c->c = parse_expr(p, true);
        }
        n = c;
    }
    leave(p);
    return n;
}

/* expr or an implicit tuple "a, b" (set values, for iterables, {{ }} bodies) */
static struct tmpl_node *parse_tuple(struct parser *p, bool condexpr)
{
    struct tmpl_token *t = cur(p);
    struct tmpl_node *first = parse_expr(p, condexpr);
    if (!tok_is_op(cur(p), ",")) return first;
    struct nvec items = {0};
    nv_push(p, &items, first);
    while (tok_is_op(cur(p), ",")) {
        next(p);
        nv_push(p, &items, parse_expr(p, condexpr));
    }
    struct tmpl_node *n = mk(p, N_TUPLE, t);
    n->args = items.v;
    n->n_args = items.n;
    return n;
}

/* ------------------------------------------------------------------ statements */

static struct tmpl_node **parse_body(struct parser *p, const char *const *ends, int *n_out,
                                     const struct tmpl_token *opener, const char *what);

static bool at_end_name(struct parser *p, const char *name)
{
    return tok_is_name(cur(p), name);
}

static void end_tag(struct parser *p)
{
    expect_kind(p, TK_BLOCK_END, "'%}'");
}

static struct tmpl_node *parse_if(struct parser *p, const struct tmpl_token *at)
{
    struct tmpl_node *n = mk(p, N_IF, at);
    n->a = parse_tuple(p, false);
    end_tag(p);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    n->body = parse_body(p, ends, &n->n_body, at, "if");
    struct tmpl_token *t = cur(p);
    if (at_end_name(p, "elif")) {
        next(p);
        n->body2 = palloc(p, sizeof *n->body2);
        n->body2[0] = parse_if(p, t); /* consumes through the shared endif */
        n->n_body2 = 1;
        return n;
    }
    if (at_end_name(p, "else")) {
        next(p);
        end_tag(p);
        static const char *const ends2[] = {"endif", NULL};
        n->body2 = parse_body(p, ends2, &n->n_body2, at, "if");
    }
    next(p); /* endif */
    end_tag(p);
    return n;
}

static struct tmpl_node *parse_target(struct parser *p, bool allow_attr)
{
    struct tmpl_token *t = cur(p);
    struct svec names = {0};
    sv_push(p, &names, expect_name(p));
    if (allow_attr && tok_is_op(cur(p), ".")) {
        next(p);
        struct tmpl_node *n = mk(p, N_ATTR, t);
        n->a = mk(p, N_NAME, t);
        n->a->str = names.v[0];
        n->a->len = strlen(names.v[0]);
        n->str = expect_name(p);
        n->len = strlen(n->str);
        return n;
    }
    while (tok_is_op(cur(p), ",")) {
        next(p);
        sv_push(p, &names, expect_name(p));
    }
    struct tmpl_node *n = mk(p, names.n == 1 ? N_NAME : N_TUPLE, t);
    n->names = names.v;
    n->n_names = names.n;
    n->str = names.v[0];
    n->len = strlen(names.v[0]);
    return n;
}

static struct tmpl_node *parse_for(struct parser *p, const struct tmpl_token *at)
{
    struct tmpl_node *n = mk(p, N_FOR, at);
    bool paren = tok_is_op(cur(p), "(");
    if (paren) next(p);
    struct tmpl_node *target = parse_target(p, false);
    if (paren) expect_op(p, ")");
    n->names = target->names;
    n->n_names = target->n_names;
    if (!tok_is_name(cur(p), "in")) perr(p, cur(p), "expected 'in' in for loop");
    next(p);
    n->a = parse_tuple(p, false);
    if (tok_is_name(cur(p), "if")) {
        next(p);
        n->b = parse_expr(p, true);
    }
    if (tok_is_name(cur(p), "recursive")) perr(p, cur(p), "recursive for loops are not supported");
    end_tag(p);
    static const char *const ends[] = {"else", "endfor", NULL};
    n->body = parse_body(p, ends, &n->n_body, at, "for");
    if (at_end_name(p, "else")) {
        next(p);
        end_tag(p);
        static const char *const ends2[] = {"endfor", NULL};
        n->body2 = parse_body(p, ends2, &n->n_body2, at, "for");
    }
    next(p);
    end_tag(p);
    return n;
}

/* "| f(args) | g" chain after {% filter %} or {% set x | f %}; returns the outermost filter
 * node whose innermost ->a is NULL (the captured text goes there). */
static struct tmpl_node *parse_filter_chain(struct parser *p)
{
    struct tmpl_node *n = parse_filter(p, NULL, cur(p));
    while (tok_is_op(cur(p), "|")) {
        struct tmpl_token *t = cur(p);
        next(p);
        n = parse_filter(p, n, t);
    }
    return n;
}

static struct tmpl_node *parse_set(struct parser *p, const struct tmpl_token *at)
{
    struct tmpl_node *target = parse_target(p, true);
    if (tok_is_op(cur(p), "=")) {
        next(p);
        struct tmpl_node *n = mk(p, N_SET, at);
        n->a = target;
        n->b = parse_tuple(p, true);
        end_tag(p);
        return n;
    }
    struct tmpl_node *n = mk(p, N_SET_BLOCK, at);
    n->a = target;
    if (tok_is_op(cur(p), "|")) {
        next(p);
        n->c = parse_filter_chain(p);
    }
    end_tag(p);
    static const char *const ends[] = {"endset", NULL};
    n->body = parse_body(p, ends, &n->n_body, at, "set");
    next(p);
    end_tag(p);
    return n;
}

static struct tmpl_node *parse_macro(struct parser *p, const struct tmpl_token *at)
{
    struct tmpl_node *n = mk(p, N_MACRO, at);
    n->str = expect_name(p);
    expect_op(p, "(");
    struct svec params = {0};
    struct nvec defs = {0};
    while (!tok_is_op(cur(p), ")")) {
        if (params.n) expect_op(p, ",");
        if (tok_is_op(cur(p), ")")) break;
        sv_push(p, &params, expect_name(p));
        if (tok_is_op(cur(p), "=")) {
            next(p);
            nv_push(p, &defs, parse_expr(p, true));
        } else {
            if (defs.n && defs.v[defs.n - 1]) perr(p, cur(p), "non-default argument follows default argument");
            nv_push(p, &defs, NULL);
        }
    }
    next(p);
    end_tag(p);
    n->names = params.v;
    n->n_names = params.n;
    n->args = defs.v;
    n->n_args = defs.n;
    static const char *const ends[] = {"endmacro", NULL};
    n->body = parse_body(p, ends, &n->n_body, at, "macro");
    next(p);
    end_tag(p);
    return n;
}

static struct tmpl_node *parse_statement(struct parser *p)
{
    struct tmpl_token *at = cur(p);
    char b[64];
    if (at->kind != TK_NAME) perr(p, at, "expected a statement name after '{%%', got %s", tok_desc(at, b, sizeof b));
    enter(p);
    next(p);
    struct tmpl_node *n;
    if (tok_is_name(at, "if")) n = parse_if(p, at);
    else if (tok_is_name(at, "for")) n = parse_for(p, at);
    else if (tok_is_name(at, "set")) n = parse_set(p, at);
    else if (tok_is_name(at, "macro")) n = parse_macro(p, at);
    else if (tok_is_name(at, "filter")) {
        n = mk(p, N_FILTER_BLOCK, at);
        n->c = parse_filter_chain(p);
        end_tag(p);
        static const char *const ends[] = {"endfilter", NULL};
        n->body = parse_body(p, ends, &n->n_body, at, "filter");
        next(p);
        end_tag(p);
    } else if (tok_is_name(at, "break") || tok_is_name(at, "continue")) {
        n = mk(p, tok_is_name(at, "break") ? N_BREAK : N_CONTINUE, at);
        end_tag(p);
    } else if (tok_is_name(at, "include") || tok_is_name(at, "import") || tok_is_name(at, "from") ||
               tok_is_name(at, "extends") || tok_is_name(at, "block") || tok_is_name(at, "call") ||
               tok_is_name(at, "with") || tok_is_name(at, "do") || tok_is_name(at, "autoescape") ||
               tok_is_name(at, "generation") || tok_is_name(at, "trans")) {
        perr(p, at, "the '%.*s' statement is not supported by tern's template engine", (int)at->n, at->p);
    } else {
        perr(p, at, "unknown or misplaced statement '%.*s'", (int)(at->n > 40 ? 40 : at->n), at->p);
    }
    leave(p);
    return n;
}

/* Nodes until a {% <one of ends> %} (left at the end name) or end of input. */
static struct tmpl_node **parse_body(struct parser *p, const char *const *ends, int *n_out,
                                     const struct tmpl_token *opener, const char *what)
{
    struct nvec body = {0};
    enter(p);
    for (;;) {
        struct tmpl_token *t = cur(p);
        if (t->kind == TK_EOF) {
            if (ends) {
                char expect[128] = "";
                for (int i = 0; ends[i]; i++) {
                    size_t l = strlen(expect);
                    snprintf(expect + l, sizeof expect - l, "%s'%s'", i ? " or " : "", ends[i]);
                }
                perr(p, opener, "'%s' block opened here is never closed (expected %s before the end of the template)",
                     what, expect);
            }
            break;
        }
        if (t->kind == TK_TEXT) {
            struct tmpl_node *n = mk(p, N_TEXT, t);
            n->str = t->p;
            n->len = t->n;
            nv_push(p, &body, n);
            next(p);
        } else if (t->kind == TK_VAR_BEGIN) {
            next(p);
            struct tmpl_node *n = mk(p, N_OUTPUT, t);
            n->a = parse_tuple(p, true);
            expect_kind(p, TK_VAR_END, "'}}'");
            nv_push(p, &body, n);
        } else if (t->kind == TK_BLOCK_BEGIN) {
            struct tmpl_token *name = peek(p, 1);
            bool is_end = false;
            for (int i = 0; ends && ends[i]; i++)
                if (tok_is_name(name, ends[i])) is_end = true;
            next(p);
            if (is_end) break;
            if (name->kind == TK_NAME && name->n >= 3 && !memcmp(name->p, "end", 3))
                perr(p, name, "unexpected '%.*s'%s%s%s", (int)name->n, name->p,
                     what ? " inside '" : "", what ? what : "", what ? "' block" : "");
            if (tok_is_name(name, "elif") || tok_is_name(name, "else"))
                perr(p, name, "unexpected '%.*s' outside of an 'if' or 'for' block", (int)name->n, name->p);
            nv_push(p, &body, parse_statement(p));
        } else {
            char b[64];
            perr(p, t, "unexpected %s", tok_desc(t, b, sizeof b));
        }
    }
    leave(p);
    *n_out = body.n;
    return body.v;
}

tern_status tmpl_compile(const char *src, size_t len, struct tmpl_program **out)
{
    if (len > TMPL_MAX_SOURCE)
        return tern_fail(TERN_ERR_FORMAT, "line 1:1: TemplateSyntaxError: the template is %zu bytes; "
                         "tern accepts at most %u", len, TMPL_MAX_SOURCE);
    struct tmpl_program *prog = calloc(1, sizeof *prog);
    if (!prog) return tern_fail(TERN_ERR_NOMEM, "out of memory compiling a template");
    /* generous: the largest real templates need well under 1 MB */
    tmpl_arena_init(&prog->arena, 64 * len + (64u << 20));
    struct parser *p = calloc(1, sizeof *p);
    if (!p) {
        free(prog);
        return tern_fail(TERN_ERR_NOMEM, "out of memory compiling a template");
    }
    p->a = &prog->arena;
    tern_status st = tmpl_lex(p->a, src, len, &p->t, &p->n);
    if (st == TERN_OK) {
        if (setjmp(p->jb) == 0) {
            prog->body = parse_body(p, NULL, &prog->n_body, NULL, NULL);
            /* a parse that completes consumed every token and closed every level it opened */
            TERN_ASSERT(p->depth == 0 && cur(p)->kind == TK_EOF && prog->n_body >= 0, "the parse ends balanced at EOF");
        } else st = p->st;
    }
    free(p);
    if (st != TERN_OK) {
        tmpl_program_free(prog);
        return st;
    }
    *out = prog;
    return TERN_OK;
}

static bool node_uses(const struct tmpl_node *n, const char *name, int depth)
{
    if (!n || depth > 10000) return false; /* the parser bounds nesting far below this */
    if (n->kind == N_NAME && n->str && !strcmp(n->str, name)) return true;
    if (node_uses(n->a, name, depth + 1) || node_uses(n->b, name, depth + 1) || node_uses(n->c, name, depth + 1))
        return true;
    for (int i = 0; i < n->n_args; i++)
        if (node_uses(n->args[i], name, depth + 1)) return true;
    for (int i = 0; i < n->n_kwargs; i++)
        if (node_uses(n->kwargs[i], name, depth + 1)) return true;
    for (int i = 0; i < n->n_body; i++)
        if (node_uses(n->body[i], name, depth + 1)) return true;
    for (int i = 0; i < n->n_body2; i++)
        if (node_uses(n->body2[i], name, depth + 1)) return true;
    /* for-loop and set targets are names too */
    if ((n->kind == N_FOR || n->kind == N_SET || n->kind == N_TUPLE) && n->names)
        for (int i = 0; i < n->n_names; i++)
            if (n->names[i] && !strcmp(n->names[i], name)) return true;
    return false;
}

bool tmpl_program_uses_name(const struct tmpl_program *p, const char *name)
{
    for (int i = 0; i < p->n_body; i++)
        if (node_uses(p->body[i], name, 0)) return true;
    return false;
}

void tmpl_program_free(struct tmpl_program *prog)
{
    if (!prog) return;
    tmpl_arena_free(&prog->arena);
    free(prog);
}
