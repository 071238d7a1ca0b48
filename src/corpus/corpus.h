/* corpus.h — the synthetic tool-calling corpus (tern corpus toolcalls): shared pieces. Read first.
 *
 * Everything is built from tables written for tern, never from existing datasets. The word lists,
 * value kinds and templates are data files in data/corpus/ that the build turns into C
 * arrays (corpus_tables.h says how and why):
 *   word lists (words.txt,        the words values are drawn from (cities, names, subjects ...)
 *     corpus_words.c)
 *   value kinds (kinds.txt,       what a parameter or a result field holds: JSON type, the names a
 *     corpus_kinds.c,             parameter may take, descriptions, and a generator that draws a
 *     corpus_values.c)            value together with the words a user says for it ("tomorrow at
 *                                 5pm" -> "2025-03-15T17:00:00", "twelve" -> 12, "2.5 km" -> 2500)
 *   templates (templates.txt,     one record per operation of a domain: action class, verbs and
 *     corpus_domains.c)           objects that make tool names, noun phrases, parameters (kind
 *                                 keys, '!' = required), result fields
 *   tool pool (corpus_tools.c)    each template gives several tools (verb/object/parameter-name
 *                                 variants, optional parameters left out), split by template into
 *                                 a train/val pool and a test pool with disjoint names and
 *                                 signatures
 *   conversations (corpus_convo.c) one seeded RNG per conversation index: a kind (single call,
 *                                 parallel calls, follow-up, tool error, chit-chat, answerable
 *                                 without tools, unavailable tool, secrets), a system prompt with
 *                                 the current date, a request phrased from frames, the calls, the
 *                                 tool results and a final answer that uses them
 *   files (corpus_write.c)        train/val/test .jsonl + manifest.json, the public entry point
 * Same seed and size give the same bytes on every platform: the RNG is splitmix64, no floating
 * point value is printed that was not rounded to two decimals first, and nothing reads the clock. */
#ifndef TERN_CORPUS_CORPUS_H
#define TERN_CORPUS_CORPUS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tern_train.h"

/* ------------------------------------------------------------------ random numbers */

struct corpus_rng {
    uint64_t s;
};
static inline uint64_t corpus_rand(struct corpus_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [0, n); n > 0. */
static inline uint32_t corpus_below(struct corpus_rng *r, uint32_t n)
{
    return (uint32_t)(((corpus_rand(r) >> 32) * (uint64_t)n) >> 32);
}
static inline int corpus_range(struct corpus_rng *r, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)corpus_below(r, (uint32_t)(hi - lo + 1));
}
static inline bool corpus_chance(struct corpus_rng *r, uint32_t pct)
{
    return corpus_below(r, 100) < pct;
}
/* 64-bit FNV-1a over bytes, continuing from h (start with CORPUS_HASH0). */
#define CORPUS_HASH0 0xcbf29ce484222325ull
uint64_t corpus_hash(uint64_t h, const void *p, size_t n);
static inline struct corpus_rng corpus_rng_for(uint64_t seed, uint64_t stream, uint64_t index)
{
    struct corpus_rng r = {seed ^ (stream * 0xD1B54A32D192ED03ull)};
    r.s ^= corpus_rand(&r) + index * 0x9E3779B97F4A7C15ull;
    (void)corpus_rand(&r);
    return r;
}

/* ------------------------------------------------------------------ "a|b|c" alternatives */

int corpus_alt_count(const char *alts);
/* Alternative k (0-based) of alts into out (always NUL-terminated); returns out. */
const char *corpus_alt(const char *alts, int k, char *out, size_t cap);
const char *corpus_pick(struct corpus_rng *r, const char *alts, char *out, size_t cap);
/* Index of the alternative equal to s, or -1. */
int corpus_alt_find(const char *alts, const char *s);

/* ------------------------------------------------------------------ growable text */

/* A failed allocation sets oom and later appends do nothing; the owner checks oom once. */
struct corpus_buf {
    char *p; /* NUL-terminated when n > 0 */
    size_t n, cap;
    bool oom;
};
void corpus_buf_add(struct corpus_buf *b, const char *s, size_t n);
void corpus_buf_puts(struct corpus_buf *b, const char *s);
void corpus_buf_printf(struct corpus_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void corpus_buf_free(struct corpus_buf *b);

/* snprintf into a fixed buffer, truncating silently (texts here are short by construction). */
void corpus_fmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Upper-case the first byte if it is an ASCII letter. */
void corpus_capitalize(char *s);

/* JSON as Python's json.dumps(ensure_ascii=False) prints it (", " and ": " separators): what the
 * chat templates' tojson produces, so lengths and training text match the rendered prompt. */
void corpus_json_py(const cJSON *v, struct corpus_buf *b);

/* The text of one corpus conversation (an object with "messages" and "tools") as the pieces a
 * chat template would put into the prompt, without rendering it: when there are tools, the
 * template's constant text around them (CORPUS_QWEN_TOOLS_HEAD/TAIL), each tool definition as
 * JSON, each message content, each tool call as {"name": .., "arguments": ..}. piece() gets them
 * in order; pieces are separate documents (a word never spans two). Malformed input gives TERN_ERR_FORMAT naming the
 * JSON path. Returns the sum of piece lengths in *total (may be NULL). */
typedef void (*corpus_piece_fn)(void *ctx, const char *text, size_t len);
/* The constant text Qwen2.5's template puts around the tools block (bpe_train_template.c holds the
 * template): corpus_conv_text emits it for conversations with tools, corpus_render_estimate
 * counts it. */
#define CORPUS_QWEN_DEFAULT_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
#define CORPUS_QWEN_TOOLS_HEAD                                                                     \
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are " \
    "provided with function signatures within <tools></tools> XML tags:\n<tools>"
#define CORPUS_QWEN_TOOLS_TAIL                                                                     \
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments " \
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "          \
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
TERN_NODISCARD tern_status corpus_conv_text(const cJSON *conv, corpus_piece_fn piece, void *ctx, size_t *total);

/* ------------------------------------------------------------------ calendar */

struct corpus_date {
    int y, m, d; /* Gregorian; m 1..12, d 1..31 */
};
int64_t corpus_days_from_civil(struct corpus_date dt);
struct corpus_date corpus_civil_from_days(int64_t z);
int corpus_weekday(struct corpus_date dt); /* 0 = Monday .. 6 = Sunday */
struct corpus_date corpus_date_add(struct corpus_date dt, int days);
extern const char *const corpus_month_names[12];
extern const char *const corpus_weekday_names[7];

/* "twenty-three", "one thousand two hundred"; n in [0, 999999]. */
void corpus_number_words(int n, char *out, size_t cap);
/* Money/number display: "1,250.50" (two decimals unless whole and !force_cents). */
void corpus_money_text(double v, bool force_cents, char *out, size_t cap);
/* Round to two decimals (the only non-integers the corpus prints). */
double corpus_round2(double v);

/* ------------------------------------------------------------------ value kinds */

enum corpus_type { CT_STRING, CT_INTEGER, CT_NUMBER, CT_BOOLEAN, CT_ARRAY, CT_OBJECT };

#define CORPUS_SAY 384

/* One drawn value: its normalized JSON, the words a user says for it alone ("tomorrow at
 * 5pm", "maria@example.com") and in a sentence ("for tomorrow at 5pm", "to maria@..."), and how
 * the assistant states it back. */
struct corpus_val {
    cJSON *json; /* owned by whoever holds the value */
    char bare[CORPUS_SAY];
    char say[CORPUS_SAY];
    char show[CORPUS_SAY];
    double num;  /* a number results are computed from (expression value, phrase index ...) */
    char unit[8]; /* money: its ISO 4217 currency */
};

struct corpus_ctx; /* a conversation's state: RNG, today's date and time, linked values */
struct corpus_kind;

enum {
    KF_LAST = 1u << 0,   /* mentioned at the end of a request (code, long text) */
    KF_LINKED = 1u << 1, /* implied by another value (currency of an amount): never said alone,
                            present exactly when its source was drawn */
    KF_BOUNDS = 1u << 2, /* integer with minimum/maximum from arg "lo:hi" in the schema */
    KF_NOLABEL = 1u << 3, /* cannot be stated as "<label> is <value>" (booleans) */
    KF_FIRST = 1u << 4    /* mentioned right after the noun phrase, in template order
                             ("place an order to buy 10 shares of ACME") */
};

struct corpus_kind {
    const char *key;    /* referenced by templates */
    uint8_t type;       /* enum corpus_type */
    const char *gen;    /* generator name (corpus_values.c, corpus_gens) */
    const char *arg;    /* generator argument: word list, range, enum table, sub-kinds, item kind */
    const char *names;  /* parameter names ("city|location|city_name"); the first is the result key */
    const char *descs;  /* parameter descriptions */
    const char *label;  /* "the city": for "<label> is <value>" and result listings */
    const char *frames; /* "in %s|for %s" turning bare into say; NULL: the generator sets say */
    const char *format; /* JSON Schema "format", or NULL */
    uint8_t flags;
};

const struct corpus_kind *corpus_kind_find(const char *key);
int corpus_n_kinds(void);
const struct corpus_kind *corpus_kind_at(int i);
/* Draw a value of kind k (v->json owned by the caller). */
void corpus_gen(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v);
/* The JSON Schema of a kind: {"type": ..., "description": desc, enum/items/properties ...}. */
cJSON *corpus_kind_schema(const struct corpus_kind *k, const char *desc);
/* Draw from a named word list ("city", "first_name", ...) into out; returns out ("" if the list
 * does not exist). corpus_word_list: the list's "a|b|c" text, or NULL. */
const char *corpus_word(struct corpus_ctx *c, const char *list, char *out, size_t cap);
const char *corpus_word_list(const char *list);

/* ------------------------------------------------------------------ conversation context */

struct corpus_ctx {
    struct corpus_rng rng;
    struct corpus_date today;
    int hour, minute;    /* current time, if has_time */
    bool has_time;
    bool oom;            /* an allocation failed while drawing */
    /* Linked values, reset for every call (corpus_ctx_new_call): later draws follow earlier ones */
    char currency[4];    /* the last money amount's currency (linked currency kinds) */
    char temp_unit[12];  /* the last temperature's unit */
    char last_person[96];/* the last person drawn: an e-mail address may follow the name */
    int64_t last_day;    /* days since 1970 of the last date drawn (end dates follow it), 0 none */
    int64_t last_minute; /* minutes since 1970 of the last date-time drawn, 0 none */
    double last_num;     /* the last number drawn (derived result fields read it) */
    int src_lang;        /* language of the source text drawn (-1 none) */
    int unit_dim, unit_from;
    double stat_median, stat_min, stat_max;
    /* The call being answered: results computed from its arguments read them */
    const struct corpus_val *call_vals;
    const struct corpus_kind *const *call_kinds;
    int call_n;
};
/* Forget the linked values of the previous call. */
void corpus_ctx_new_call(struct corpus_ctx *c);

/* ------------------------------------------------------------------ templates and tools */

enum corpus_act {
    ACT_GET,     /* read one thing: answer lists the result fields */
    ACT_LIST,    /* list/search: result {"results": [...]}; answer enumerates */
    ACT_CREATE,  /* create/book/schedule: result has an id and a status */
    ACT_UPDATE,  /* change something that exists */
    ACT_DELETE,  /* cancel/delete */
    ACT_SEND,    /* send/post a message */
    ACT_CONTROL, /* devices, playback, services: turn on, restart ... */
    ACT_COMPUTE, /* a computed result (convert, calculate, translate) */
};

struct corpus_tmpl {
    const char *domain;
    uint8_t act;
    const char *verbs;   /* tool-name verbs "get|fetch" */
    const char *objs;    /* tool-name objects "forecast|weather_forecast" */
    const char *vp;      /* request verb phrases "base/gerund/participle|..."; NULL = the act's */
    const char *np;      /* noun phrases "the forecast|..."; '@' marks where arguments go */
    const char *params;  /* "city! date units": kind keys, '!' = required */
    const char *results; /* result field kinds (per item for ACT_LIST); NULL = the act's default */
    const char *descs;   /* tool descriptions, each starting with a verb */
};

int corpus_n_tmpls(void);
const struct corpus_tmpl *corpus_tmpl_at(int i);
/* Domain names in table order into out[0..cap); returns the count. */
int corpus_domains(const char **out, int cap);

#define CORPUS_MAX_PARAMS 8

struct corpus_param {
    const struct corpus_kind *kind;
    char name[40];
    char desc[160];
    bool required;
};

struct corpus_tool {
    int tmpl;             /* index into the template table */
    char name[64];
    char desc[200];
    int n_params;
    struct corpus_param p[CORPUS_MAX_PARAMS];
    cJSON *json;          /* {"type": "function", "function": {...}} */
    size_t json_py_len;   /* bytes of its json.dumps text */
    uint64_t sig;         /* hash of the sorted (name, type, required) parameter list */
    bool test;            /* in the test pool */
};

struct corpus_pool {
    struct corpus_tool *tools;
    int n;
    int n_test;
    int *tmpl_first, *tmpl_count; /* per template: tools[first .. first+count) (sorted by tmpl) */
    bool *tmpl_test;              /* per template: in the test pool */
};

/* Build the tool pool for seed. Caller frees with corpus_pool_free. */
TERN_NODISCARD tern_status corpus_pool_build(uint64_t seed, struct corpus_pool *pool);
void corpus_pool_free(struct corpus_pool *pool);

/* ------------------------------------------------------------------ conversations */

enum corpus_split { CORPUS_TRAIN = 0, CORPUS_VAL = 1, CORPUS_TEST = 2 };

enum corpus_kind_id {
    CK_SINGLE, CK_PARALLEL, CK_FOLLOWUP, CK_TOOL_ERROR, CK_CHAT, CK_ANSWERABLE, CK_UNAVAILABLE,
    CK_SECRET, CK_COUNT
};
extern const char *const corpus_kind_names[CK_COUNT];

/* The conversation at index of split (a JSON object owned by the caller), drawn from its own
 * RNG stream so any index can be made alone. Rendered prompt length stays under
 * CORPUS_MAX_RENDER_BYTES (so under 4096 tokens in any byte-level vocabulary). */
#define CORPUS_MAX_RENDER_BYTES 4000
TERN_NODISCARD tern_status corpus_conversation(const struct corpus_pool *pool, uint64_t seed, int split,
                                uint64_t index, cJSON **out);
/* Bytes a Qwen2.5/Hermes ChatML template renders for conv (system, tools block, messages). */
size_t corpus_render_estimate(const cJSON *conv);

#endif
