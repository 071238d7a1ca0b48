/* tmpl_lex.c — template source -> tokens, with all of Jinja's whitespace control.
 *
 * Read tmpl.h first. This mirrors jinja2/lexer.py as Hugging Face configures it:
 * - newlines are normalized to "\n" and one trailing newline is dropped (keep_trailing_newline
 *   is False);
 * - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}", "-#}" all after;
 * - trim_blocks: a single "\n" right after "%}" or "#}" is dropped (not after "}}");
 * - lstrip_blocks: spaces/tabs between the start of a line and "{%" / "{#" are dropped; "{%+"
 *   and "+%}" switch these two off for one tag;
 * - inside a tag, "}}" / "%}" only end it when brackets are balanced (dict literals).
 * Positions are reported as line:col, 1-based, counted in bytes on the normalized source. */
#include "chat/tmpl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/error.h"
#include "util/utf8.h"

struct lexer {
    struct tmpl_arena *a;
    const char *s;
    size_t n;
    struct tmpl_token *toks;
    int n_toks, cap;
    /* incremental offset -> line:col */
    size_t lc_pos;
    int line, col;
};

static void pos_at(struct lexer *lx, size_t off, int *line, int *col)
{
    if (off < lx->lc_pos) { /* rare: restart from the top */
        lx->lc_pos = 0;
        lx->line = lx->col = 1;
    }
    while (lx->lc_pos < off) {
        if (lx->s[lx->lc_pos] == '\n') {
            lx->line++;
            lx->col = 1;
        } else lx->col++;
        lx->lc_pos++;
    }
    *line = lx->line;
    *col = lx->col;
}

static tern_status lex_err(struct lexer *lx, size_t off, const char *msg)
{
    int line, col;
    pos_at(lx, off, &line, &col);
    return tern_fail(TERN_ERR_FORMAT, "line %d:%d: TemplateSyntaxError: %s", line, col, msg);
}

static struct tmpl_token *push(struct lexer *lx, int kind, size_t off)
{
    if (lx->n_toks == lx->cap) {
        int cap = lx->cap ? lx->cap * 2 : 256;
        struct tmpl_token *t = tmpl_arena_alloc(lx->a, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        if (lx->n_toks) memcpy(t, lx->toks, (size_t)lx->n_toks * sizeof *t);
        lx->toks = t;
        lx->cap = cap;
    }
    TERN_ASSERT(lx->n_toks < lx->cap && off <= lx->n, "a token starts inside the source");
    struct tmpl_token *t = &lx->toks[lx->n_toks++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    pos_at(lx, off, &t->line, &t->col);
    return t;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static size_t skip_ws(const struct lexer *lx, size_t p)
{
    while (p < lx->n && is_ws(lx->s[p])) p++;
    return p;
}

static bool emit_text(struct lexer *lx, size_t from, size_t to)
{
    if (to <= from) return true;
    TERN_ASSERT(to <= lx->n);
    struct tmpl_token *t = push(lx, TK_TEXT, from);
    if (!t) return false;
    t->p = lx->s + from;
    t->n = to - from;
    return true;
}

/* Apply the strip rules to the text [from, to) that precedes a tag opener at `to`. */
static size_t text_end_before_tag(const struct lexer *lx, size_t from, size_t to, char kind,
                                  char marker)
{
    TERN_ASSERT(from <= to && to <= lx->n && (kind == '{' || kind == '%' || kind == '#'));
    if (marker == '-') {
        while (to > from && is_ws(lx->s[to - 1])) to--;
        return to;
    }
    if (kind == '{' || marker == '+') return to;
    /* lstrip_blocks: only spaces/tabs between the line start and the tag */
    size_t l = to;
    while (l > from && lx->s[l - 1] != '\n') l--;
    bool line_start = l > from || from == 0 || lx->s[from - 1] == '\n';
    if (!line_start) return to;
    for (size_t i = l; i < to; i++)
        if (lx->s[i] != ' ' && lx->s[i] != '\t') return to;
    return l;
}

/* After a closing "%}" / "#}" / "}}" at `p` (just past it), with its marker. */
static size_t after_tag_end(const struct lexer *lx, size_t p, char marker, bool is_var)
{
    TERN_ASSERT(p <= lx->n, "a tag ends inside the source");
    if (marker == '-') return skip_ws(lx, p);
    if (marker == '+' || is_var) return p;
    if (p < lx->n && lx->s[p] == '\n') p++; /* trim_blocks */
    return p;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* String literal at p (quote char at s[p]); Python unicode-escape rules. Returns the offset
 * after the closing quote, or 0 on error. */
static size_t lex_string(struct lexer *lx, size_t p, struct tmpl_token *t)
{
    char q = lx->s[p];
    size_t i = p + 1;
    while (i < lx->n && lx->s[i] != q) {
        if (lx->s[i] == '\\') i++;
        i++;
    }
    if (i >= lx->n) return 0;
    size_t end = i;
    char *o = tmpl_arena_alloc(lx->a, end - p + 1);
    if (!o) return 0;
    size_t k = 0;
    for (i = p + 1; i < end; i++) {
        char c = lx->s[i];
        if (c != '\\') { o[k++] = c; continue; }
        char e = lx->s[++i];
        switch (e) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '\n': break; /* line continuation */
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            bool ok = i + (size_t)nd < end + 1;
            for (int d = 0; ok && d < nd; d++) {
                int h = i + 1 + (size_t)d < end ? hexval(lx->s[i + 1 + d]) : -1;
                if (h < 0) ok = false;
                else cp = cp * 16 + (uint32_t)h;
            }
            if (!ok || cp > 0x10FFFF) return 0;
            /* a \u escape can produce at most 4 bytes from >= 6 source bytes: fits */
            k += (size_t)util_utf8_encode(cp, o + k);
            i += (size_t)nd;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = 0;
                int d = 0;
                while (d < 3 && i < end && lx->s[i] >= '0' && lx->s[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(lx->s[i] - '0');
                    i++;
                    d++;
                }
                i--;
                k += (size_t)util_utf8_encode(cp, o + k);
            } else { /* unknown escape: kept verbatim, as Python does */
                o[k++] = '\\';
                o[k++] = e;
            }
        }
    }
    o[k] = '\0';
    t->p = o;
    t->n = k;
    return end + 1;
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<=", NULL};
static const char ops1[] = "+-*/%~[](){}=.:|,;<>";

/* Tokens of one {{ }} or {% %} tag starting at p (just after the opener and its marker).
 * Returns the offset after the closer, or 0 with an error recorded. */
static size_t lex_tag(struct lexer *lx, size_t p, bool is_var, size_t tag_start, tern_status *st)
{
    int depth = 0;
    char stack[256]; /* expected closers; Jinja's lexer balances brackets the same way */
    for (;;) {
        p = skip_ws(lx, p);
        if (p >= lx->n) {
            *st = lex_err(lx, tag_start, is_var ? "unclosed '{{' (missing '}}')"
                                                : "unclosed '{%' (missing '%}')");
            return 0;
        }
        const char *s = lx->s + p;
        size_t rem = lx->n - p;
        if (depth == 0) {
            char closer = is_var ? '}' : '%';
            char marker = 0;
            size_t m = 0;
            if (rem >= 3 && (s[0] == '-' || s[0] == '+') && s[1] == closer && s[2] == '}') {
                marker = s[0];
                m = 3;
            } else if (rem >= 2 && s[0] == closer && s[1] == '}') m = 2;
            if (m) {
                if (!push(lx, is_var ? TK_VAR_END : TK_BLOCK_END, p)) goto oom;
                return after_tag_end(lx, p + m, marker, is_var);
            }
        }
        struct tmpl_token *t;
        if (is_alpha(*s)) {
            size_t k = 1;
            while (k < rem && (is_alpha(s[k]) || is_digit(s[k]))) k++;
            if (!(t = push(lx, TK_NAME, p))) goto oom;
            t->p = s;
            t->n = k;
            p += k;
        } else if (is_digit(*s)) {
            size_t k = 0;
            bool flt = false;
            while (k < rem && (is_digit(s[k]) || s[k] == '_')) k++;
            if (k + 1 < rem && s[k] == '.' && is_digit(s[k + 1])) {
                flt = true;
                k++;
                while (k < rem && (is_digit(s[k]) || s[k] == '_')) k++;
            }
            if (k < rem && (s[k] == 'e' || s[k] == 'E')) {
                size_t e = k + 1;
                if (e < rem && (s[e] == '+' || s[e] == '-')) e++;
                if (e < rem && is_digit(s[e])) {
                    flt = true;
                    while (e < rem && is_digit(s[e])) e++;
                    k = e;
                }
            }
            char num[64];
            size_t nn = 0;
            for (size_t j = 0; j < k && nn < sizeof num - 1; j++)
                if (s[j] != '_') num[nn++] = s[j];
            num[nn] = '\0';
            if (!(t = push(lx, flt ? TK_FLOAT : TK_INT, p))) goto oom;
            if (flt) t->f = strtod(num, NULL);
            else { /* a literal int64 cannot hold is refused, not clamped */
                errno = 0;
                t->i = strtoll(num, NULL, 10);
                if (errno == ERANGE || nn >= sizeof num - 1) {
                    *st = lex_err(lx, p, "integer literal too large (tern's ints are 64-bit)");
                    return 0;
                }
            }
            p += k;
        } else if (*s == '\'' || *s == '"') {
            if (!(t = push(lx, TK_STRING, p))) goto oom;
            size_t e = lex_string(lx, p, t);
            if (!e) {
                *st = lex_err(lx, p, "unterminated string or bad escape in string literal");
                return 0;
            }
            p = e;
        } else {
            size_t k = 0;
            for (int j = 0; ops2[j]; j++)
                if (rem >= 2 && s[0] == ops2[j][0] && s[1] == ops2[j][1]) k = 2;
            if (!k && strchr(ops1, *s) && *s) k = 1;
            if (!k) {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected character '%c' (0x%02x)",
                         (*s >= 32 && *s < 127) ? *s : '?', (unsigned char)*s);
                *st = lex_err(lx, p, msg);
                return 0;
            }
            if (*s == '(' || *s == '[' || *s == '{') {
                if (depth == (int)sizeof stack) {
                    *st = lex_err(lx, p, "bracket nesting deeper than 256 levels");
                    return 0;
                }
                stack[depth++] = *s == '(' ? ')' : *s == '[' ? ']' : '}';
            } else if (*s == ')' || *s == ']' || *s == '}') {
                char msg[64];
                if (depth == 0) {
                    snprintf(msg, sizeof msg, "unexpected '%c'", *s);
                    *st = lex_err(lx, p, msg);
                    return 0;
                }
                if (stack[depth - 1] != *s) {
                    snprintf(msg, sizeof msg, "unexpected '%c', expected '%c'", *s, stack[depth - 1]);
                    *st = lex_err(lx, p, msg);
                    return 0;
                }
                depth--;
            }
            if (!(t = push(lx, TK_OP, p))) goto oom;
            t->p = s;
            t->n = k;
            p += k;
        }
    }
oom:
    *st = tern_fail(TERN_ERR_NOMEM, "out of memory while tokenizing the template");
    return 0;
}

/* "{% raw %}" at tag_start? Returns the offset after "%}" of the opener (0 if not raw). */
static size_t match_word_tag(const struct lexer *lx, size_t p, const char *word, char *end_marker)
{
    p = skip_ws(lx, p);
    size_t wl = strlen(word);
    if (p + wl > lx->n || memcmp(lx->s + p, word, wl)) return 0;
    p = skip_ws(lx, p + wl);
    *end_marker = 0;
    if (p < lx->n && (lx->s[p] == '-' || lx->s[p] == '+')) *end_marker = lx->s[p++];
    if (p + 2 > lx->n || lx->s[p] != '%' || lx->s[p + 1] != '}') return 0;
    return p + 2;
}

tern_status tmpl_lex(struct tmpl_arena *a, const char *src, size_t len, struct tmpl_token **toks,
                     int *n_toks)
{
    struct lexer lx = {.a = a, .line = 1, .col = 1};
    /* normalize newlines into an arena copy */
    char *s = tmpl_arena_alloc(a, len + 1);
    if (!s) return tern_fail(TERN_ERR_NOMEM, "out of memory while tokenizing the template");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = '\0';
    lx.s = s;
    lx.n = n;

    tern_status st = TERN_OK;
    size_t pos = 0;
    while (pos < n) {
        size_t t = pos;
        while (t + 1 < n && !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')))
            t++;
        if (t + 1 >= n) {
            if (!emit_text(&lx, pos, n)) goto oom;
            break;
        }
        char kind = s[t + 1];
        char marker = (t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+')) ? s[t + 2] : 0;
        if (!emit_text(&lx, pos, text_end_before_tag(&lx, pos, t, kind, marker))) goto oom;
        size_t p = t + 2 + (marker ? 1 : 0);
        if (kind == '#') {
            const char *e = NULL;
            for (size_t i = p; i + 1 < n; i++)
                if (s[i] == '#' && s[i + 1] == '}') { e = s + i; break; }
            if (!e) return lex_err(&lx, t, "unclosed comment (missing '#}')");
            size_t ei = (size_t)(e - s);
            char em = (ei > p && (s[ei - 1] == '-' || s[ei - 1] == '+')) ? s[ei - 1] : 0;
            pos = after_tag_end(&lx, ei + 2, em, false);
            continue;
        }
        if (kind == '%') {
            char em;
            size_t after = match_word_tag(&lx, p, "raw", &em);
            if (after) {
                size_t body = after_tag_end(&lx, after, em, false);
                /* find {% endraw %} */
                size_t i = body;
                for (; i + 1 < n; i++) {
                    if (s[i] != '{' || s[i + 1] != '%') continue;
                    char m2 = (i + 2 < n && (s[i + 2] == '-' || s[i + 2] == '+')) ? s[i + 2] : 0;
                    char em2;
                    size_t a2 = match_word_tag(&lx, i + 2 + (m2 ? 1 : 0), "endraw", &em2);
                    if (!a2) continue;
                    if (!emit_text(&lx, body, text_end_before_tag(&lx, body, i, '%', m2))) goto oom;
                    pos = after_tag_end(&lx, a2, em2, false);
                    break;
                }
                if (i + 1 >= n) return lex_err(&lx, t, "unclosed 'raw' block (missing 'endraw')");
                continue;
            }
        }
        bool is_var = kind == '{';
        if (!push(&lx, is_var ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, t)) goto oom;
        pos = lex_tag(&lx, p, is_var, t, &st);
        if (!pos) return st;
        TERN_ASSERT(pos > t && pos <= n, "every tag consumes bytes: the lexer always moves on");
    }
    struct tmpl_token *e = push(&lx, TK_EOF, n);
    if (!e) goto oom;
    TERN_ASSERT(lx.n_toks >= 1 && lx.toks[lx.n_toks - 1].kind == TK_EOF, "the parser relies on a final EOF token");
    *toks = lx.toks;
    *n_toks = lx.n_toks;
    return TERN_OK;
oom:
    return tern_fail(TERN_ERR_NOMEM, "out of memory while tokenizing the template");
}
