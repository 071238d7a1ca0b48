/* gram_internal.h — what the grammar room shares between its files. Read this first.
 *
 * Pipeline (docs in include/tern.h, section "grammar"):
 *
 *   JSON Schema (gram_schema.c, numbers gram_num.c, `pattern` gram_regex.c)  \
 *   GBNF text (gram_gbnf.c)                                                     >-> IR (gram_ir.c)
 *   tools array (gram_tools.c: Hermes tool-call grammar)                       /
 *   IR -> automata (gram_compile.c): one automaton per rule, determinized where it stays small,
 *         rules call each other through "ref" edges (a pushdown automaton over bytes)
 *   vocabulary (gram_vocab.c): every token's bytes, sorted into a trie, once per tokenizer
 *   matching (gram_engine.c): a parse state is a set of stacks; one byte advances all of them
 *   masks (gram_mask.c): per automaton node, tokens are classified once (lazily, shared by every
 *         matcher of the grammar) as accepted / rejected / uncertain; at decode time only the
 *         uncertain ones are run against the real stack, and the result is cached per state
 *   matcher API, lazy (triggered) mode, rollback, forced bytes (gram_matcher.c)
 *
 * The IR is a set of named rules whose bodies are expressions over byte sets (code point
 * classes are expanded to UTF-8 byte sequences when built, so everything downstream sees bytes
 * only and a negated class can never produce invalid UTF-8).
 *
 * A parse stack is (top node, parent frame). A frame is an interned (return node, parent frame)
 * pair, so equal stacks are equal integers and a parse state can be hashed and cached. Frame 0
 * is the bottom: popping it ends the document (matcher) or means "the node's rule ended, the
 * caller is unknown" (token classification, where frames 0..GRAM_VLEVELS-1 are virtual callers,
 * see gram_mask.c). */
#ifndef TERN_GRAM_INTERNAL_H
#define TERN_GRAM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern.h"

/* ---------------------------------------------------------------- limits (bad input) */
#define GRAM_MAX_EXPRS (1u << 22)       /* IR expressions per grammar */
#define GRAM_MAX_RULES (1u << 20)
#define GRAM_MAX_NFA_STATES (1u << 21)  /* Thompson states per grammar (repetition expands) */
#define GRAM_MAX_DFA_PER_RULE (1u << 19) /* subset construction gives up beyond (NFA kept) */
#define GRAM_SUBSET_WORK 24000000ull    /* ... or beyond this much work (closure walks, members, transitions) */
#define GRAM_MAX_NFA_RANGES (1u << 20)  /* byte edges of a rule kept as an NFA (each step may try all) */
#define GRAM_MAX_NODES (1u << 21)       /* automaton nodes per grammar */
#define GRAM_MAX_REPEAT 10000           /* {m,n} bounds unrolled into automaton states (patterns, GBNF) */
/* Counted repetitions (gir_count): a bound above GRAM_UNROLL_MAX is kept as a counter in the
 * parse stack instead of copies of the repeated automaton (see "counters" below); bounds up to
 * GRAM_MAX_COUNT (2^31 - 1) */
#define GRAM_UNROLL_MAX 256
#define GRAM_MAX_COUNT 2147483647u
#define GRAM_MAX_STACKS 4096            /* parse stacks alive at once (ambiguity) */
/* tern_grammar_generate's budget in parse stacks stepped (about 10 ns each: 80 ms): a grammar
 * that keeps thousands of stacks alive over thousands of bytes is refused instead of taking
 * minutes (a grammar test that generates from a real schema would fail if it ever hit it) */
#define GRAM_GENERATE_WORK (8ull << 20)
#define GRAM_MAX_FRAMES (1u << 22)      /* interned frames per matcher (nesting) */
#define GRAM_VLEVELS 4                  /* virtual caller levels in token classification */
#define GRAM_ALIKE_SLOTS 256            /* classified positions kept by shape as bases (gram_mask.c) */
#define GRAM_VFOLLOW_MAX 24             /* follow sets larger than this are not expanded */
#define GRAM_FORCED_MAX 256             /* forced bytes looked at by forced_tokens at once */

/* ---------------------------------------------------------------- byte sets */
struct gram_bset {
    uint64_t w[4];
};
static inline bool gram_bset_has(const struct gram_bset *s, unsigned b)
{
    return (s->w[b >> 6] >> (b & 63)) & 1;
}
static inline void gram_bset_add(struct gram_bset *s, unsigned b)
{
    s->w[b >> 6] |= 1ull << (b & 63);
}
static inline void gram_bset_add_range(struct gram_bset *s, unsigned lo, unsigned hi)
{
    for (unsigned b = lo; b <= hi; b++) gram_bset_add(s, b);
}
static inline bool gram_bset_empty(const struct gram_bset *s)
{
    return !(s->w[0] | s->w[1] | s->w[2] | s->w[3]);
}

/* ---------------------------------------------------------------- IR (gram_ir.c) */
enum gram_ex_kind {
    GX_NOTHING = 0, /* matches nothing */
    GX_EMPTY,       /* matches the empty string */
    GX_BYTES,       /* one byte of set a */
    GX_SEQ,         /* kids[a .. a+b) in order */
    GX_ALT,         /* one of kids[a .. a+b) */
    GX_REP,         /* child a, b..c times (c == GRAM_INF: unbounded) */
    GX_REF,         /* rule a */
    GX_DFA,         /* embedded automaton a (numbers, object bodies, excluded keys) */
    GX_COUNT,       /* rule a, b..c times, counted at match time (only as a counter rule's whole
                       body: gir_count builds it) */
};
#define GRAM_INF UINT32_MAX

struct gram_ex {
    uint32_t kind;
    uint32_t a, b, c;
};

/* A small deterministic automaton built directly (number ranges, multipleOf, uniqueItems). */
struct gram_dfa_edge {
    uint32_t from, to;
    uint8_t lo, hi;
};
/* An edge labelled by a whole expression (objects: "key": value between property states). */
struct gram_dfa_xedge {
    uint32_t from, to, ex;
};
struct gram_dfa {
    uint32_t n_states, start;
    uint8_t *final;               /* [n_states] */
    struct gram_dfa_edge *edges;
    uint32_t n_edges, cap_edges;
    struct gram_dfa_xedge *xedges;
    uint32_t n_xedges, cap_xedges;
};

struct gram_irule {
    char *name;
    uint32_t ex;      /* body, or GRAM_NONE while only referenced */
    uint32_t line, col; /* where it was first referenced or defined (GBNF errors) */
    bool shared;      /* keep as a rule of its own even if small (gram_compile.c inlines) */
};
#define GRAM_NONE UINT32_MAX

struct gram_ir {
    struct gram_ex *ex;
    uint32_t n_ex, cap_ex;
    uint32_t *kids;
    uint32_t n_kids, cap_kids;
    struct gram_bset *sets;
    uint32_t n_sets, cap_sets;
    struct gram_irule *rules;
    uint32_t n_rules, cap_rules;
    struct gram_dfa *dfas;
    uint32_t n_dfas, cap_dfas;
    bool no_counters; /* gir_count unrolls (an IR whose automaton is combined by product) */
    bool oom;       /* an allocation failed: every builder call returns GRAM_NONE after */
    bool too_big;   /* a limit was hit */
};

void gir_init(struct gram_ir *ir);
void gir_free(struct gram_ir *ir);
/* Builders return an expression id, or GRAM_NONE after an allocation failure or a limit (then
 * ir->oom / ir->too_big is set and gir_status() reports it). */
uint32_t gir_nothing(struct gram_ir *ir);
uint32_t gir_empty(struct gram_ir *ir);
uint32_t gir_bytes(struct gram_ir *ir, const struct gram_bset *s);
uint32_t gir_byte(struct gram_ir *ir, uint8_t b);
uint32_t gir_byte_range(struct gram_ir *ir, uint8_t lo, uint8_t hi);
uint32_t gir_lit(struct gram_ir *ir, const char *s, size_t n);
uint32_t gir_str(struct gram_ir *ir, const char *s); /* NUL-terminated literal */
uint32_t gir_token(struct gram_ir *ir, int32_t id);   /* control token id (GRAM_CTL_LEAD literal) */
uint32_t gir_seq(struct gram_ir *ir, const uint32_t *xs, uint32_t n);
uint32_t gir_seq2(struct gram_ir *ir, uint32_t a, uint32_t b);
uint32_t gir_seq3(struct gram_ir *ir, uint32_t a, uint32_t b, uint32_t c);
uint32_t gir_alt(struct gram_ir *ir, const uint32_t *xs, uint32_t n);
uint32_t gir_alt2(struct gram_ir *ir, uint32_t a, uint32_t b);
uint32_t gir_rep(struct gram_ir *ir, uint32_t x, uint32_t min, uint32_t max);
uint32_t gir_opt(struct gram_ir *ir, uint32_t x);
/* x, min..max times (max GRAM_INF: unbounded), without copies of x: x becomes a rule of its own
 * (the body) and the repetition a counter rule whose only node counts the body's completions in
 * the parse stack (gram_engine.c). x must not match the empty string (the compiler refuses it).
 * Small bounds (both at most GRAM_UNROLL_MAX) are plain gir_rep. */
uint32_t gir_count(struct gram_ir *ir, uint32_t x, uint32_t min, uint32_t max);
/* The same whatever the bounds (a pattern's count of something large); both unroll in an IR
 * marked no_counters. */
uint32_t gir_counter(struct gram_ir *ir, uint32_t x, uint32_t min, uint32_t max);
/* Can x match the empty string? (rules followed through their bodies; a rule met again on the
 * way, or one without a body yet, counts as not nullable) */
bool gir_nullable(const struct gram_ir *ir, uint32_t x);
uint32_t gir_ref(struct gram_ir *ir, uint32_t rule);
/* Takes ownership of d's arrays (freed with the IR, also on failure). */
uint32_t gir_dfa(struct gram_ir *ir, struct gram_dfa *d);
/* Code point class: sorted or unsorted inclusive ranges (lo, hi pairs); negate = complement
 * within U+0000..U+10FFFF. Surrogates (U+D800..U+DFFF) are never matched. The result matches
 * exactly the UTF-8 encodings of the class's code points. */
uint32_t gir_cpclass(struct gram_ir *ir, const uint32_t *ranges, size_t n_ranges, bool negate);
/* Rules: gir_rule finds or creates a rule by name (len bytes); new rules have no body. */
uint32_t gir_rule(struct gram_ir *ir, const char *name, size_t len);
uint32_t gir_rule_new(struct gram_ir *ir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gir_rule_set(struct gram_ir *ir, uint32_t rule, uint32_t ex);
TERN_NODISCARD tern_status gir_status(const struct gram_ir *ir, const char *what);

/* DFA helpers for builders */
void gdfa_init(struct gram_dfa *d);
void gdfa_free(struct gram_dfa *d);
uint32_t gdfa_state(struct gram_dfa *d, bool final); /* GRAM_NONE on OOM */
bool gdfa_edge(struct gram_dfa *d, uint32_t from, uint8_t lo, uint8_t hi, uint32_t to);
bool gdfa_xedge(struct gram_dfa *d, uint32_t from, uint32_t ex, uint32_t to);

/* UTF-8 */
int gram_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp); /* 0 if invalid */

/* ---------------------------------------------------------------- front ends */
struct gram_schema_opts {
    bool lenient;
    int ws;                 /* enum tern_grammar_ws */
    bool strict_props;      /* absent additionalProperties means false */
    bool gemma;             /* Gemma 4's value syntax instead of JSON (gram_schema.c): strings
                               between <|"|> marks, raw, no escapes; object keys bare, in
                               dictsort order; no whitespace */
};
/* Any bytes up to and including the first occurrence of `end` (incl), or any bytes in which
 * `end` never occurs (!incl: every state final); NUL and GRAM_CTL_LEAD never (gram_tools.c). */
uint32_t gram_until(struct gram_ir *ir, const char *end, bool incl);
/* JSON Schema text -> IR with its root rule in *root. Warnings (lenient) appended to *warn
 * (malloc'ed, newline-separated; caller frees). */
TERN_NODISCARD tern_status gram_schema_to_ir(const char *text, size_t len, const struct gram_schema_opts *o,
                              struct gram_ir *ir, uint32_t *root, char **warn);
/* Same from a parsed schema (cJSON *), with `path` naming it in messages ("$" or
 * "$.tools[0].function.parameters"); several schemas may go into one IR (tool calls). */
struct cJSON;
TERN_NODISCARD tern_status gram_schema_json_to_ir(const struct cJSON *schema, const char *path,
                                   const struct gram_schema_opts *o, struct gram_ir *ir,
                                   uint32_t *root, char **warn);
/* GBNF text -> IR; root rule named root_name. Errors carry line:col. */
TERN_NODISCARD tern_status gram_gbnf_to_ir(const char *text, size_t len, const char *root_name,
                            struct gram_ir *ir, uint32_t *root);
/* Regex (the JSON Schema `pattern` subset) -> expression over the *decoded* characters of a
 * JSON string: json_escape makes every character come out as it must appear inside a JSON
 * string literal (quote, backslash and controls escaped). Unanchored ends match anything, as
 * JSON Schema's `pattern` does (a search; counts above 10000 only where anchored with ^).
 * Errors name the pattern offset. *risky (may be NULL): a counted repetition sits inside
 * another, or a long one in a search, so the compiler may refuse the automaton as too
 * ambiguous (the schema compiler then tries the pattern alone, to name it). */
TERN_NODISCARD tern_status gram_regex_to_ir(const char *re, size_t len, bool json_escape, struct gram_ir *ir,
                             uint32_t *ex, bool *risky);
/* Numbers: a JSON number (integer only if is_int) within bounds given as decimal strings (NULL
 * = unbounded), optionally a multiple of `step` (decimal string). */
struct gram_num_spec {
    bool is_int;
    const char *min, *max;   /* decimal text, or NULL */
    bool min_excl, max_excl;
    const char *step;        /* multipleOf, or NULL */
};
TERN_NODISCARD tern_status gram_num_to_ir(const struct gram_num_spec *s, struct gram_ir *ir, uint32_t *ex);
/* The grammar of a string format ("date", "uuid", ...) as a regex for gram_regex_to_ir, or
 * NULL if the format is unknown. */
const char *gram_format_regex(const char *format);
/* Append "text\n" to a malloc'ed warning buffer (best effort). */
void gram_warn(char **warn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- vocabulary (gram_vocab.c) */
/* 32 bytes, everything a walk reads at a node in one cache line: a walk over a wide position
 * visits thousands of nodes a subtree apart, so each separate array it read cost a miss. */
struct gram_trie_node {
    uint32_t end;        /* index one past this node's subtree */
    int32_t token;       /* first token whose bytes end here, or -1 (more via tern_grammar_vocab.same) */
    uint32_t tok_first;  /* its subtree's tokens: dfs_tok[tok_first .. node[end].tok_first) */
    /* the bytes 0x20..0x7F of every longer token's remaining bytes (bit b - 0x20 of
     * below[(b - 0x20) >> 5]); any other byte sets GRAM_TRIE_OTHER (walks accept whole subtrees
     * at once with these, gram_mask.c) */
    uint32_t below[3];
    uint8_t byte;
    uint8_t flags;       /* GRAM_TRIE_* */
    uint16_t depth;      /* 1-based: bytes from the root */
    uint32_t below_more : 8;  /* the deepest token below is this many bytes deeper (255: at least) */
    uint32_t cslot : 24;      /* GRAM_TRIE_WIDE: its child index, cidx[cslot] */
};
#define GRAM_TRIE_MORE_SAT 255
/* The deepest token's depth in node tn's subtree (a saturated count: more than any bound). */
static inline uint32_t gram_trie_below_depth(const struct gram_trie_node *tn)
{
    return tn->below_more == GRAM_TRIE_MORE_SAT ? UINT32_MAX / 2 : (uint32_t)tn->depth + tn->below_more;
}
/* more tokens have this node's bytes (the walk follows `same` only then: a random read of a
 * vocabulary-sized array per token would cost a cache miss each) */
#define GRAM_TRIE_DUP 1
#define GRAM_TRIE_WIDE 2 /* at least GRAM_CIDX_MIN children: indexed (struct gram_trie cidx) */
#define GRAM_TRIE_OTHER 4 /* some longer token below has a byte outside 0x20..0x7F */

struct gram_trie {
    struct gram_trie_node *node; /* [n + 1]: node[n] ends the last subtree (its tok_first) */
    uint32_t n;
    /* children of the nodes with many (GRAM_TRIE_WIDE, and the root): a walk whose state takes
     * few bytes there jumps from one live child to the next instead of reading every sibling
     * (each one a subtree apart in the array, so a cache miss each) */
    struct gram_cidx *cidx;  /* [n_cidx] ascending by node; the root's is root_cidx */
    uint32_t n_cidx;
    struct gram_cidx *root_cidx;
    uint32_t *cpos;          /* children's indices, by node then byte */
    uint32_t n_cpos;
    /* every token in depth-first order (those with the same bytes together): node i's subtree
     * holds dfs_tok[node[i].tok_first .. node[end].tok_first), so a walk accepts a subtree with
     * one copy */
    int32_t *dfs_tok;
};
/* The tokens trie t holds (its depth-first positions run from 0 to this). */
static inline uint32_t gram_trie_n_tok(const struct gram_trie *t) { return t->node[t->n].tok_first; }
struct gram_cidx {
    uint64_t bits[4];        /* the children's bytes */
    uint32_t node;           /* the node (UINT32_MAX: the root) */
    uint32_t first;          /* its children in cpos[first ..], ascending by byte */
};
#define GRAM_CIDX_MIN 8      /* children for an index */
/* The index of trie node i (flagged GRAM_TRIE_WIDE). */
static inline const struct gram_cidx *gram_trie_cidx(const struct gram_trie *t, uint32_t i)
{
    return &t->cidx[t->node[i].cslot];
}
/* Trie index of the child of x with byte b (b must be one of x's children's bytes). */
static inline uint32_t gram_cidx_child(const struct gram_trie *t, const struct gram_cidx *x, unsigned b)
{
    uint32_t r = 0;
    for (unsigned w = 0; w < (b >> 6); w++) r += (uint32_t)__builtin_popcountll(x->bits[w]);
    r += (uint32_t)__builtin_popcountll(x->bits[b >> 6] & ((1ull << (b & 63)) - 1));
    return t->cpos[x->first + r];
}

/* The "text slice": tokens made only of whole UTF-8 characters that any JSON-like string body
 * admits unescaped (code points >= 0x20 except '"', '\\' and DEL). A grammar position that
 * loops over exactly those characters (gram_mask.c, text nodes) accepts every slice token of at
 * most its remaining character capacity without walking them; only the other tokens (the
 * `rest` trie) are walked. */
#define GRAM_SLICE_MAX_CHARS 255

/* Token horizons (bytes): two positions of a rule that no string of up to h bytes tells apart
 * classify every token of up to h bytes alike, so the second classification copies those from
 * the first and walks only the longer tokens (gram_mask.c). Ascending. */
#define GRAM_NH 8
static const uint16_t gram_horizon[GRAM_NH] = {6, 8, 12, 16, 24, 32, 48, 64};
#define GRAM_SLICE_SMALL 16

struct tern_grammar_vocab {
    int32_t n_vocab;
    uint32_t *off;          /* [n_vocab + 1] token bytes in bytes[off[i] .. off[i+1]) */
    uint8_t *bytes;
    uint8_t *kind;          /* [n_vocab] GRAM_TOK_* */
    int32_t *same;          /* [n_vocab] next token with the same bytes, or -1 */
    struct gram_trie all;   /* every text token */
    struct gram_trie rest;  /* text tokens outside the slice */
    uint8_t *slice_chars;   /* [n_vocab] characters of a slice token, 0 = not in the slice */
    uint32_t *slice_bits;   /* [n_words] the whole slice */
    int32_t *slice_sorted;  /* slice tokens by character count */
    uint32_t slice_off[GRAM_SLICE_MAX_CHARS + 2]; /* tokens of c chars: [slice_off[c], slice_off[c+1]) */
    uint32_t n_slice, slice_max;
    uint32_t *slice_upto;   /* [GRAM_SLICE_SMALL][n_words]: slice tokens of at most c characters */
    uint32_t *short_bits;   /* [GRAM_NH][n_words]: text tokens of at most gram_horizon[k] bytes */
    uint32_t *text_bits;    /* [n_words] every text token (those of the trie `all`) */
    uint32_t max_len;
    int32_t *eog;           /* end-of-generation ids */
    int n_eog;
    struct gram_bset avail; /* bytes that occur in some token */
    uint32_t n_words;       /* mask words: (n_vocab + 31) / 32 */
    /* control tokens with a text (not end of generation): their texts, NUL-terminated, in
     * ctl_text[ctl_off[k] ..], for finding a tool-call format's markup by text */
    int32_t *ctl;           /* [n_ctl] ids, ascending */
    uint32_t n_ctl;
    uint32_t *ctl_off;      /* [n_ctl] */
    char *ctl_text;
    size_t mem_bytes;
};
enum {
    GRAM_TOK_TEXT = 0,
    GRAM_TOK_EOG = 1,
    GRAM_TOK_NEVER = 2,   /* empty, or text holding the byte GRAM_CTL_LEAD */
    GRAM_TOK_CONTROL = 3, /* a control token: its bytes are its literal (below), allowed only
                             where a grammar names the token (gir_token) */
};

/* Control tokens as grammar literals. A grammar that must produce a control token itself
 * (a tool-call opener that is one, such as Mistral's [TOOL_CALLS] in tekken vocabularies) names
 * it with gir_token: the GRAM_CTL_LEN bytes GRAM_CTL_LEAD and the id in four 6-bit digits
 * (0x80 | bits, most significant first), which are also the token's bytes in the vocabulary.
 * 0xFF never occurs in UTF-8 and no other grammar construct produces it (code point classes are
 * valid UTF-8, gram_tools' "any text" excludes it), and text tokens holding it are
 * GRAM_TOK_NEVER, so only that token can follow the literal: it is a token, not its text. */
#define GRAM_CTL_LEAD 0xFF
#define GRAM_CTL_LEN 5
void gram_ctl_encode(int32_t id, uint8_t out[GRAM_CTL_LEN]);
/* The id a literal at b[0..n) encodes, or -1 (not a whole literal). */
int32_t gram_ctl_decode(const uint8_t *b, size_t n);
/* The control token whose text is exactly text[0..len) (v may be NULL), or -1. */
int32_t gram_vocab_control(const struct tern_grammar_vocab *v, const char *text, size_t len);
/* Its text (NUL-terminated), or NULL if id is not a control token of v. */
const char *gram_vocab_control_text(const struct tern_grammar_vocab *v, int32_t id);

/* ---------------------------------------------------------------- compiled grammar */
struct gram_range {
    uint8_t lo, hi;
    uint16_t pad;
    uint32_t to;
};
struct gram_call {
    uint32_t rule;
    uint32_t ret;   /* node to continue at when the rule ends; poponly nodes are tail calls */
};
enum {
    GN_FINAL = 1,    /* the node's rule may end here */
    GN_POPONLY = 2,  /* final, no ranges, no calls: calling with this return is a tail call */
    GN_NONDET = 4,   /* ranges may overlap */
    GN_PLAIN = 8,    /* ranges only: no calls, not final (the fast path of a step) */
    GN_COUNT = 16,   /* a counter rule's node (below): no ranges, one call (body, itself) */
};
struct gram_node {
    uint32_t rule;
    uint32_t r_off;    /* ranges[r_off .. r_off + r_n) sorted by lo */
    uint32_t c_off;    /* calls[c_off .. c_off + c_n) */
    uint16_t r_n, c_n;
    uint32_t flags;
};
struct gram_rule {
    char *name;
    uint32_t start;
    uint32_t fol_off, fol_n;  /* follow[...]: return nodes that can come after the rule ends */
    bool doc_end;             /* the rule's end can be the document's end */
    bool nullable;            /* the rule can match the empty string (a call may consume nothing) */
    bool counter;             /* a counter rule (GX_COUNT body): cmin..cmax completions of its body */
    uint32_t cmin, cmax;      /* cmax GRAM_INF: unbounded */
};

/* Counters. A counter rule has one node L (GN_COUNT) with one call (body rule X, return L). The
 * count lives in the frame pushed under X: (L, parent, cnt) with cnt = the completions of X
 * once this one ends (>= 1; 0 marks a frame that is not a counter's). Reaching L with k
 * completions done (k = 0 on entry, cnt when X ends) pushes X again if k < cmax and ends the
 * counter rule if k >= cmin. A state's behaviour over the next s bytes depends on a count only
 * through min(cmax - cnt, s + 1) and min(max(cmin - cnt, 0), s + 1) (X consumes at least a byte
 * per completion), so masks are cached under counts saturated that way (gram_count_canon):
 * every position farther than the longest token from both bounds shares one mask. */
static inline uint32_t gram_count_canon(uint32_t cnt, uint32_t cmin, uint32_t cmax, uint32_t sat)
{
    bool far_max = cmax == GRAM_INF || cmax - cnt >= sat; /* cnt <= cmax while counting */
    if (!far_max) return cnt;
    if (cnt < cmin && cmin - cnt < sat) return cnt;
    if (cnt >= cmin) return cmin > 0 ? cmin : 1;          /* any count past the minimum */
    return cmin >= sat + 1 ? 1 : cnt;                     /* cmin - 1 >= sat: as far as cnt */
}

/* Lazily computed classification of the tokens at one node (gram_mask.c). */
#define GRAM_CAP_INF UINT32_MAX
struct gram_cls {
    bool almost;             /* acc_bits also holds slice tokens (a key that may still become a
                                declared name, gram_mask.c) */
    bool text;               /* a text node: the text slice up to text_cap characters is also
                                accepted (not listed; the walk skipped it) */
    uint32_t text_cap;       /* characters (GRAM_CAP_INF: unbounded) */
    uint32_t n_acc;          /* accepted tokens */
    uint32_t *acc_bits;      /* [n_words] bitset, or NULL when acc_ids holds them */
    int32_t *acc_ids;        /* ids, unordered (when few) */
    uint32_t n_unc;
    int32_t *unc;            /* uncertain: checked against the real stack at decode time */
    size_t bytes;
};

/* The only part of a grammar that changes after compile: each slot is written once (atomic
 * compare-and-swap), so concurrent matchers never see a half-built classification. */
struct gram_cache {
    _Atomic(struct gram_cls *) *slot;    /* [n_nodes] (equivalent nodes share one) */
    atomic_uint *recent;                 /* [n_rules][GRAM_RECENT] last classified nodes + 1 */
    atomic_uint *recent_n;               /* [n_rules] classifications recorded */
    atomic_uint alike[GRAM_ALIKE_SLOTS]; /* by the shape of a node's own bytes (gram_mask.c): the
                                            last classified node of that shape + 1 */
    atomic_uint n_shared;                /* positions given another's classification (alike) */
    atomic_uint n_derived;               /* classifications that walked only the long tokens */
    _Atomic(struct gram_bset *) *folb;   /* [n_rules] per rule: [GRAM_FOLLOW_BYTES] the bytes that
                                            can come k bytes after its end (gram_engine.c) */
    atomic_int *tcap;                    /* [n_nodes] text capacity memo (gram_mask.c) */
    atomic_uint *sstep;                  /* [n_nodes] where slice characters lead (gram_mask.c) */
    /* [n_nodes] loop class memo (gram_mask.c, class_info): the ASCII bytes a node loops on, and
     * how many of them it can still take; kcls is written before kcap is published */
    _Atomic uint64_t (*kcls)[2];
    atomic_int *kcap;
    atomic_uchar *kend;                  /* [n_nodes] KEND_*: whether the node's class chain ends
                                            where no class byte goes on (gram_mask.c) */
    /* classifications of positions directly under a counter frame, keyed by (node, saturated
     * count): a small hash map under a lock (gram_mask.c, gram_node_cls_count) */
    void *ccls;
    atomic_size_t bytes;
    atomic_uint count;
};

struct tern_grammar {
    const struct tern_grammar_vocab *vocab;  /* may be NULL: byte-level use only */
    struct gram_node *nodes;
    uint32_t n_nodes;
    struct gram_range *ranges;
    uint32_t n_ranges;
    struct gram_call *calls;
    uint32_t n_calls;
    struct gram_rule *rules;
    uint32_t n_rules;
    uint32_t *follow;
    uint32_t n_follow;
    uint32_t root;                       /* root rule */
    uint32_t n_counters;                 /* counter rules (gram_internal.h "counters") */
    struct gram_cache *cache;            /* token classifications, filled on first use */
    /* control tokens the grammar names (gir_token), ascending; the matcher feeds their literal
     * bytes and checks them at every mask (they are not in the tries) */
    int32_t *ctl;
    uint32_t n_ctl;
    int32_t trigger_token;                /* the trigger is that control token's literal, or -1 */
    /* lazy (triggered) mode: free text until `trigger`, then the grammar, then free again */
    char *trigger;
    uint32_t trigger_len;
    bool lazy, forbid_trigger, rearm;
    uint32_t *kmp;                        /* [trigger_len + 1] failure function */
    int32_t **trig_tokens;                /* [trigger_len] tokens that complete the trigger from
                                             partial match k (checked at decode time) */
    uint32_t *n_trig_tokens;
    char *warnings;
    size_t table_bytes;
    double compile_ms;
    uint64_t serial;                      /* unique in the process (gram_finish; 0: internal) */
};

/* IR -> a finished grammar (compile, classification cache, trigger) with compile_ms measured
 * from t0; takes ownership of warn (gram_api.c). ctl[0..n_ctl): the control tokens the IR
 * names (gir_token); a trigger may be one's literal. */
TERN_NODISCARD tern_status gram_finish(const struct tern_grammar_vocab *v, struct gram_ir *ir, uint32_t root,
                        const char *trigger, bool forbid, const int32_t *ctl, uint32_t n_ctl,
                        char *warn, double t0, struct tern_grammar **out);
/* IR -> automata into g (vocab may be NULL). */
TERN_NODISCARD tern_status gram_compile(const struct gram_ir *ir, uint32_t root_rule,
                         const struct tern_grammar_vocab *vocab, struct tern_grammar *g);
void gram_free_tables(struct tern_grammar *g);
/* Set up the lazy trigger tables (gram_matcher.c). */
TERN_NODISCARD tern_status gram_setup_trigger(struct tern_grammar *g, const char *trigger, bool forbid,
                               bool rearm);

/* ---------------------------------------------------------------- engine (gram_engine.c) */
#define GRAM_ACCEPT 0xFFFFFFF0u   /* stack marker: the document is complete (matcher) */
#define GRAM_POPPED 0xFFFFFFF1u   /* classification: the node's rule ended here */
#define GRAM_VPOPPED 0xFFFFFFF2u  /* classification: a virtual caller ended here */
#define GRAM_OVERFLOW 0xFFFFFFF3u /* classification: ran out of virtual levels */
#define GRAM_FOLBYTES 0xFFFFFFF4u /* classification: past a rule's end whose callers are not
                                     followed; frame = rule * GRAM_FOLLOW_BYTES + bytes taken since:
                                     the next byte must be one some caller can take there */
#define GRAM_FOLLOW_BYTES 4
static inline bool gram_is_marker(uint32_t node) { return node >= GRAM_ACCEPT; }

struct gram_stack {
    uint32_t node, frame;
};

struct gram_frames {
    uint32_t *node, *parent;
    uint32_t *cnt;           /* counter frames: completions of the body when it ends; 0 = none */
    uint8_t *level;          /* classification: virtual level of the frame's bottom */
    uint32_t n, cap;
    uint32_t *slot;          /* open addressing on (node, parent) -> frame */
    uint32_t mask;
    uint32_t n_fixed;        /* frames 0 .. n_fixed-1 are bottoms */
};

/* Scratch of one stepping engine (a matcher owns one; classification uses another). */
struct gram_engine {
    const struct tern_grammar *g;
    struct gram_frames fr;
    bool sim;                /* classification mode (virtual bottoms) */
    struct gram_stack *work; /* worklist */
    uint32_t n_work, cap_work;
    uint64_t *visit;         /* visited (node, frame) keys of the current step */
    uint32_t visit_mask, n_visit;
    uint32_t *visit_used;
    bool overflow;           /* GRAM_MAX_STACKS / frames exceeded in this step */
};

TERN_NODISCARD tern_status gram_engine_init(struct gram_engine *e, const struct tern_grammar *g, bool sim);
void gram_engine_free(struct gram_engine *e);
void gram_engine_reset(struct gram_engine *e);
/* out[] must hold GRAM_MAX_STACKS + 4 entries. Returns the number of stacks written (sorted,
 * unique). The initial state of the grammar (root start expanded). */
uint32_t gram_engine_start(struct gram_engine *e, uint32_t node, uint32_t frame,
                           struct gram_stack *out);
/* Advance in[0..n) by one byte. Returns the count in out (0 = byte refused). */
uint32_t gram_engine_step(struct gram_engine *e, const struct gram_stack *in, uint32_t n,
                          uint8_t byte, struct gram_stack *out);
/* Frame (node, parent, cnt), interned; GRAM_NONE when out of memory or past GRAM_MAX_FRAMES. */
uint32_t gram_frame_intern(struct gram_frames *f, uint32_t node, uint32_t parent, uint32_t cnt);
/* The set of bytes any stack of in[] can take next. */
void gram_engine_next_bytes(const struct tern_grammar *g, const struct gram_stack *in, uint32_t n,
                            struct gram_bset *out);
bool gram_state_accepting(const struct gram_stack *s, uint32_t n);
/* The bytes that can come 0 .. GRAM_FOLLOW_BYTES-1 bytes after rule's end, in any context
 * (computed on first use and kept in the grammar's cache); NULL on OOM. */
const struct gram_bset *gram_follow_bytes(const struct tern_grammar *g, uint32_t rule);
uint64_t gram_state_hash(const struct gram_stack *s, uint32_t n);

/* ---------------------------------------------------------------- masks (gram_mask.c) */
/* The walk's state after a prefix of length d: one stack kept inline (simple), or
 * buf[off .. off_next). */
struct gram_depth {
    uint32_t node, frame;            /* simple: the stack */
    const uint32_t *tab;             /* simple: dense table of node (GRAM_TAB_LAZY: not looked up
                                        yet, NULL: none) */
    uint32_t off_next;               /* where depth d+1's state starts in buf */
    uint8_t simple, virt, ovf;
    /* the trie node's child index when the walk descends with a dense table (NULL: the
     * children are read one by one): only the children of bytes in live lead anywhere */
    const struct gram_cidx *cx;
    uint64_t live[4];
    uint32_t pend;                   /* the trie node's end (past its children) */
};

#define GRAM_DENSE_TABLES 1024      /* dense tables per walk (the nodes it visits) */
#define GRAM_DENSE_CHUNK 64
struct gram_dense_chunk {
    uint32_t tab[GRAM_DENSE_CHUNK][256];  /* byte -> next node (gram_mask.c, dense) */
    uint64_t live[GRAM_DENSE_CHUNK][4];   /* the bytes each table takes */
};

/* Scratch of token classification (one per matcher, created on first need). */
struct gram_cls_scratch {
    struct gram_engine eng;          /* sim mode */
    struct gram_stack *buf;          /* per-depth states along the trie path */
    size_t cap_buf;
    struct gram_depth *at;           /* [max_len + 2] the state after each prefix length */
    int32_t *acc, *unc;
    uint32_t cap_acc, cap_unc;
    uint32_t n_acc, n_unc;
    /* dense byte -> next node tables of the nodes a walk visits (a walk stays on few nodes) */
    uint32_t *dslot;                 /* [n_nodes] table index + 1, 0 = none yet */
    struct gram_dense_chunk *dchunk[GRAM_DENSE_TABLES / GRAM_DENSE_CHUNK]; /* allocated as needed:
                                        a counted string walks a node per count */
    uint32_t *dnode;                 /* [GRAM_DENSE_TABLES] nodes owning the tables */
    uint32_t n_dtab;
    uint32_t min_depth;              /* the walk records only tokens longer than this */
    /* a walk of the trie `all` from scratch (gram_mask.c classify) records its accepted tokens
     * by their depth-first position instead of as ids: whole subtrees are ranges of bits */
    bool acc_dfs;
    uint64_t *accd;                  /* [all tokens / 64 + 1], zero outside a walk */
    uint32_t accd_lo, accd_hi;       /* the words a walk set: [lo, hi) */
    /* pairs of nodes compared for agreement (gram_mask.c, agree_depth; allocated on first use) */
    struct gram_stack *pcur, *pnext; /* [GRAM_MAX_PAIRS] this level's and the next's (x, y) */
    uint32_t n_pcur, n_pnext;
    uint64_t *pset;                  /* [GRAM_PAIR_MASK + 1] pairs met, UINT64_MAX = empty */
    uint32_t *pused;                 /* [GRAM_MAX_PAIRS] its used slots */
    uint32_t n_pused;
};
#define GRAM_RECENT 4                /* classified positions per rule kept as bases */

#define GRAM_MAX_PAIRS 4096
#define GRAM_PAIR_MASK 8191
#define GRAM_CLASS_INF 32767
TERN_NODISCARD tern_status gram_cls_scratch_init(struct gram_cls_scratch *s, const struct tern_grammar *g);
void gram_cls_scratch_free(struct gram_cls_scratch *s);
/* The classification of node (computed and published on first use; *fresh says whether this
 * call computed it). NULL on OOM. */
const struct gram_cls *gram_node_cls(const struct tern_grammar *g, uint32_t node,
                                     struct gram_cls_scratch *s, bool *fresh);
/* The classification of node on top of a counter frame whose count, saturated by
 * gram_count_canon, is cnt (L: the counter's node). */
const struct gram_cls *gram_node_cls_count(const struct tern_grammar *g, uint32_t node, uint32_t L, uint32_t cnt,
                                           struct gram_cls_scratch *s, bool *fresh);
/* The saturation of gram_count_canon for masks over g's vocabulary: longest token + 1. */
static inline uint32_t gram_count_sat(const struct tern_grammar *g)
{
    return (g->vocab ? g->vocab->max_len : GRAM_CTL_LEN) + 1;
}
void gram_cls_free(struct gram_cls *c);
TERN_NODISCARD tern_status gram_cache_create(struct tern_grammar *g);
void gram_cache_free(struct tern_grammar *g);

#endif
