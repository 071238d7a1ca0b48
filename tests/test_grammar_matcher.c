/* test_grammar_matcher.c — the matcher API on the Qwen2 vocabulary: masks against brute force,
 * end-of-generation and control tokens, rollback, forced bytes and tokens, logits, the lazy
 * tool-call grammar (auto / none / required / a named tool), matchers of one grammar on several
 * threads, random documents, refusal messages. */
#include "test_support.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct tern_tokenizer *tok;
static struct tern_grammar_vocab *voc;
static int n_vocab;
static int32_t eog = -1;

static int setup(void **state)
{
    (void)state;
    const char *p = test_shared_path("fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    if (!p) return 0;
    if (tern_tokenizer_load(p, &tok) || tern_grammar_vocab_create(tok, &voc)) return -1;
    n_vocab = tern_tokenizer_n_vocab(tok);
    for (int32_t i = 0; i < n_vocab && eog < 0; i++)
        if (tern_token_is_eog(tok, i)) eog = i;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tern_grammar_vocab_free(voc);
    tern_tokenizer_free(tok);
    return 0;
}

#define NEED_VOCAB()                                                                           \
    do {                                                                                       \
        if (!voc) TEST_SKIP("../shared (fixtures) not found; set TERN_SHARED to run\n");      \
    } while (0)

static bool bit(const uint32_t *m, int32_t id) { return (m[id >> 5] >> (id & 31)) & 1; }

static size_t encode(const char *s, int32_t *ids, size_t cap)
{
    size_t n;
    assert_tern_ok(tern_tokenize(tok, s, strlen(s), 0, ids, cap, &n));
    return n;
}

static struct tern_grammar *schema(const char *s)
{
    struct tern_grammar *g;
    if (tern_grammar_from_json_schema(voc, s, strlen(s), NULL, &g)) fail_msg("%s: %s", s, tern_last_error());
    return g;
}

/* every token: mask bit == accept (then rolled back); returns the allowed count */
static int brute_check(struct tern_grammar_matcher *m, const char *where)
{
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    int cnt = tern_grammar_matcher_fill_mask(m, mask), pc = 0;
    int steps = tern_grammar_matcher_n_steps(m);
    for (int32_t t = 0; t < n_vocab; t++) {
        tern_status st = tern_grammar_matcher_accept(m, t, NULL);
        if (st == TERN_OK) assert_tern_ok(tern_grammar_matcher_rollback(m, 1));
        if ((st == TERN_OK) != bit(mask, t)) {
            char piece[256];
            size_t pl = 0;
            tern_status_ignore(tern_token_to_piece(tok, t, TERN_PIECE_SPECIAL, piece, sizeof piece, &pl));
            fail_msg("%s: token %d '%.*s': mask %d, accept %d", where, t, (int)pl, piece, bit(mask, t), st == TERN_OK);
        }
        pc += st == TERN_OK;
    }
    assert_int_equal(tern_grammar_matcher_n_steps(m), steps);
    if (pc != cnt) fail_msg("%s: fill_mask counted %d, %d allowed", where, cnt, pc);
    free(mask);
    return cnt;
}

static const char *SCHEMA =
    "{\"type\": \"object\", \"properties\": {"
    "\"name\": {\"type\": \"string\", \"maxLength\": 12},"
    "\"kind\": {\"enum\": [\"a\", \"ab\", \"abc\"]},"
    "\"n\": {\"type\": \"number\", \"minimum\": -2.5, \"maximum\": 100},"
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
    "\"when\": {\"type\": \"string\", \"format\": \"date\"}},"
    "\"required\": [\"name\"]}";

/* masks equal brute force at every step of a document (extra properties allowed: broad keys) */
static void test_mask_brute_force(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = schema(SCHEMA);
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    const char *doc = "{\"name\": \"Zo\\u00eb \\\"x\\\"\", \"kind\": \"ab\", \"n\": -2.25, \"tags\": [\"t\", \"\"], \"when\": \"2024-02-29\", \"x-extra\": {\"k\": [1]}}";
    int32_t ids[256];
    size_t n = encode(doc, ids, 256);
    for (size_t i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "step %zu", i);
        int cnt = brute_check(m, where);
        assert_true(cnt > 0);
        assert_tern_ok(tern_grammar_matcher_accept(m, ids[i], NULL));
    }
    assert_true(tern_grammar_matcher_is_complete(m));
    brute_check(m, "end");
    assert_tern_ok(tern_grammar_matcher_accept(m, eog, NULL));
    assert_true(tern_grammar_matcher_is_done(m));
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    assert_int_equal(tern_grammar_matcher_fill_mask(m, mask), 0); /* nothing after end of generation */
    free(mask);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

static int walk(struct tern_grammar_matcher *m, const char *text);

/* brute_check at every step of doc; returns the grammar's info after */
static struct tern_grammar_info brute_walk(struct tern_grammar *g, const char *doc)
{
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    int32_t ids[512];
    size_t n = encode(doc, ids, 512);
    for (size_t i = 0; i < n; i++) {
        char where[96];
        snprintf(where, sizeof where, "step %zu of %.40s", i, doc);
        assert_true(brute_check(m, where) > 0);
        assert_tern_ok(tern_grammar_matcher_accept(m, ids[i], NULL));
    }
    assert_true(tern_grammar_matcher_is_complete(m));
    brute_check(m, "end");
    tern_grammar_matcher_free(m);
    struct tern_grammar_info info;
    tern_grammar_get_info(g, &info);
    return info;
}

/* The shapes whose positions are counted (length bounds, {m,n}, formats' labels, item counts):
 * a position alike to an earlier one up to h bytes copies its short tokens and walks only the
 * longer ones, the end of a string item whose callers are too many to follow still refuses
 * what no caller takes next, and an unanchored search (`ne+dle`) that takes any character in
 * every state accepts every plain-text token without walking it. Masks must stay exact, near
 * the bounds too (a 63-character hostname label, a 40-character user name, a note of exactly
 * maxLength), and where a chain of text positions comes back on itself (`^(..)*$`: an even
 * number of characters, not a capacity). */
static const char *COUNTED =
    "{\"type\": \"object\", \"properties\": {"
    "\"host\": {\"type\": \"string\", \"format\": \"hostname\"},"
    "\"email\": {\"type\": \"string\", \"format\": \"email\"},"
    "\"user\": {\"type\": \"string\", \"pattern\": \"^[a-z0-9_-]{3,40}$\"},"
    "\"phone\": {\"type\": \"string\", \"pattern\": \"^\\\\+[1-9][0-9]{6,14}$\"},"
    "\"title\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 200},"
    "\"tag\": {\"type\": \"string\", \"pattern\": \"ne+dle\"},"
    "\"words\": {\"type\": \"string\", \"pattern\": \"^[^ ]+( [^ ]+)*$\"},"
    "\"pairs\": {\"type\": \"string\", \"pattern\": \"^(..)*$\"},"
    "\"notes\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 30}, \"maxItems\": 40},"
    "\"fields\": {\"type\": \"array\", \"items\": {\"enum\": [\"name\", \"email\", \"phone\"]}, \"uniqueItems\": true}},"
    "\"additionalProperties\": false}";

static void test_mask_brute_force_counted(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = schema(COUNTED);
    /* the first mask inside a note: the string's end is followed from 40 places (one per item
     * count), too many to walk, yet only tokens whose bytes after the closing quote start like
     * ", " or "]" stay uncertain (about 50 on Qwen2, not the ~1150 with any byte after it) */
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_int_equal(walk(m, "{\"notes\": [\"a"), -1);
    struct tern_grammar_stats s0, s1;
    tern_grammar_matcher_get_stats(m, &s0);
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    tern_grammar_matcher_fill_mask(m, mask);
    tern_grammar_matcher_get_stats(m, &s1);
    uint64_t checked = s1.checked_tokens - s0.checked_tokens;
    if (checked == 0 || checked > 300) fail_msg("uncertain tokens checked in a note: %llu", (unsigned long long)checked);
    brute_check(m, "inside a note");
    free(mask);
    tern_grammar_matcher_free(m);
    struct tern_grammar_info info = brute_walk(
        g, "{\"host\": \"a-very-long-label-with-many-characters-to-walk-near-its-bound-x.example.org\", "
           "\"email\": \"first.last+tag@mail.example-host.com\", \"user\": \"some_user-name_0123456789_abcdefghijklm\", "
           "\"phone\": \"+441234567890\", \"title\": \"A title: with words, \\\"quotes\\\" and \\u00e9 \u00fc\", \"tag\": \"hay, neat needles \\\"here\\\" \u00e9\", "
           "\"words\": \"two w\u00f6rds, no double spaces\", \"pairs\": \"ab\u00e9d, twelve!!\", "
           "\"notes\": [\"short\", \"a string of exactly thirty chr\", \"\", \"x\\\"y\"], \"fields\": [\"phone\", \"name\"]}");
    if (info.n_derived == 0) fail_msg("no position started from an alike one (%u classified)", info.n_classified);
    tern_grammar_free(g);
    /* a rule that calls a rule matching nothing: a call there consumes no byte */
    const char *gbnf = "root ::= \"[\" val (\",\" sp val){0,30} \"]\"\n"
                       "val ::= \"[\" sp \"]\" | [0-9]{1,3} | \"[\" val sp \"]\"\n"
                       "sp ::= \" \"?\n";
    assert_tern_ok(tern_grammar_from_gbnf(voc, gbnf, strlen(gbnf), NULL, &g));
    brute_walk(g, "[1, [], [[7 ] ],23,456, [ ], 8,9,10,11,12,13,14,15,16,17]");
    tern_grammar_free(g);
}

/* Positions the walk settles without stepping every token, each against brute force at every
 * step of a document:
 *  - strings under a counter (maxLength above the unrolled limit), entered again after an escape
 *    or a multi-byte character, where the plain-ASCII subtrees are accepted in one piece
 *    (gram_mask.c try_skip_counted), far from the bound and near it (the short string's last
 *    characters, escapes among them);
 *  - class chains whose tokens run longer than the chain (chain_closed): refused at once where
 *    the chain's end takes no byte of the class (an exact count before the closing quote),
 *    walked on where it does (a run of the class goes on after the count) or where the string
 *    may end there. */
static void test_mask_brute_force_skipped_walks(void **state)
{
    (void)state;
    NEED_VOCAB();
    char near[400], counted_doc[1024];
    /* 290 plain characters, then escapes and a two-byte character at the bound (300 in all) */
    memset(near, 'a', 290);
    strcpy(near + 290, "\\n\\\"xy\\tz\u00e9ab");
    snprintf(counted_doc, sizeof counted_doc,
             "{\"code\": \"print(\\\"hi\\\")\\nfor i in range(3):\\n\\tprint(i) # \u00e9t\u00e9\", \"near\": \"%s\"}", near);
    const struct { const char *schema, *doc; } cases[] = {
        {"{\"type\": \"object\", \"properties\": {"
         "\"code\": {\"type\": \"string\", \"maxLength\": 10000},"
         "\"near\": {\"type\": \"string\", \"maxLength\": 300}},"
         "\"additionalProperties\": false}",
         counted_doc},
        {"{\"type\": \"object\", \"properties\": {"
         "\"id\": {\"type\": \"string\", \"pattern\": \"^r_[a-z0-9]{8}$\"},"
         "\"code\": {\"type\": \"string\", \"pattern\": \"^[a-z]{3}[a-z0-9]+$\"},"
         "\"tag\": {\"type\": \"string\", \"pattern\": \"^[a-z]{2,4}$\"},"
         "\"zip\": {\"type\": \"string\", \"pattern\": \"^[0-9]{5}$\"}},"
         "\"additionalProperties\": false}",
         "{\"id\": \"r_ab12cd34\", \"code\": \"abcdefgh123\", \"tag\": \"abc\", \"zip\": \"12345\"}"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct tern_grammar *g = schema(cases[k].schema);
        brute_walk(g, cases[k].doc);
        tern_grammar_free(g);
    }
}

/* end of generation exactly when complete; control tokens never; messages name what failed */
static void test_eog_control_messages(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = schema("{\"type\": \"integer\", \"minimum\": 10}");
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_false(tern_grammar_matcher_is_complete(m));
    assert_int_equal(tern_grammar_matcher_accept(m, eog, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "not complete"));
    int32_t im_start = tern_token_lookup(tok, "<|im_start|>", 12);
    assert_true(im_start >= 0 && tern_token_is_control(tok, im_start) && !tern_token_is_eog(tok, im_start));
    assert_int_equal(tern_grammar_matcher_accept(m, im_start, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "control token"));
    int32_t ids[8];
    size_t at = 99;
    encode("1", ids, 8);
    assert_tern_ok(tern_grammar_matcher_accept(m, ids[0], NULL));
    assert_false(tern_grammar_matcher_is_complete(m)); /* 1 < 10: more digits needed */
    encode("x", ids, 8);
    assert_int_equal(tern_grammar_matcher_accept(m, ids[0], &at), TERN_ERR_ARG);
    assert_int_equal(at, 0);
    assert_non_null(strstr(tern_last_error(), "offset 1"));
    assert_non_null(strstr(tern_last_error(), "'0'..'9'"));
    encode("5", ids, 8);
    assert_tern_ok(tern_grammar_matcher_accept(m, ids[0], NULL));
    assert_true(tern_grammar_matcher_is_complete(m));
    assert_false(tern_grammar_matcher_is_done(m)); /* 150 ... may follow */
    assert_int_equal(tern_grammar_matcher_accept(m, -1, NULL), TERN_ERR_ARG);
    assert_int_equal(tern_grammar_matcher_accept(m, n_vocab, NULL), TERN_ERR_ARG);
    char exp[128];
    tern_grammar_matcher_expected(m, exp, sizeof exp);
    assert_non_null(strstr(exp, "the end of the document"));
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

static uint64_t mask_hash(struct tern_grammar_matcher *m)
{
    size_t w = tern_grammar_mask_words(voc);
    uint32_t *mask = malloc(w * 4);
    tern_grammar_matcher_fill_mask(m, mask);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < w; i++) h = (h ^ mask[i]) * 1099511628211ull;
    free(mask);
    return h;
}

static void test_rollback(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = schema(SCHEMA);
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    const char *doc = "{\"name\": \"abc\", \"kind\": \"a\", \"n\": 99.5, \"tags\": [\"q\"]}";
    int32_t ids[128];
    size_t n = encode(doc, ids, 128);
    uint64_t h[128];
    for (size_t i = 0; i < n; i++) {
        h[i] = mask_hash(m);
        assert_tern_ok(tern_grammar_matcher_accept(m, ids[i], NULL));
    }
    h[n] = mask_hash(m);
    assert_int_equal(tern_grammar_matcher_n_steps(m), (int)n);
    /* speculative decoding: roll back k, compare, re-accept */
    for (size_t k = 1; k <= n; k += 3) {
        assert_tern_ok(tern_grammar_matcher_rollback(m, (int)k));
        assert_int_equal(mask_hash(m), h[n - k]);
        for (size_t i = n - k; i < n; i++) assert_tern_ok(tern_grammar_matcher_accept(m, ids[i], NULL));
        assert_int_equal(mask_hash(m), h[n]);
    }
    assert_int_equal(tern_grammar_matcher_rollback(m, (int)n + 1), TERN_ERR_ARG);
    assert_int_equal(tern_grammar_matcher_rollback(m, -1), TERN_ERR_ARG);
    /* a refused token leaves the state as it was */
    assert_tern_ok(tern_grammar_matcher_rollback(m, 3));
    uint64_t before = mask_hash(m);
    assert_int_equal(tern_grammar_matcher_accept(m, ids[0], NULL), TERN_ERR_ARG);
    assert_int_equal(mask_hash(m), before);
    tern_grammar_matcher_reset(m);
    assert_int_equal(tern_grammar_matcher_n_steps(m), 0);
    assert_int_equal(mask_hash(m), h[0]);
    /* accept_bytes is all or nothing */
    size_t ok = 99;
    assert_int_equal(tern_grammar_matcher_accept_bytes(m, "{\"name\": 5", 10, &ok), TERN_ERR_ARG);
    assert_int_equal(ok, 9);
    assert_int_equal(tern_grammar_matcher_n_steps(m), 0);
    assert_tern_ok(tern_grammar_matcher_accept_bytes(m, "{\"na", 4, &ok));
    assert_int_equal(tern_grammar_matcher_n_steps(m), 1);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

static void test_forced(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = schema("{\"type\": \"object\", \"properties\": {\"op\": {\"const\": \"sum\"}, \"args\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}}}, \"required\": [\"op\", \"args\"], \"additionalProperties\": false}");
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    char buf[128];
    size_t n = tern_grammar_matcher_forced_bytes(m, buf, sizeof buf);
    assert_int_equal(n, strlen("{\"op\": \"sum\", \"args\": ["));
    assert_memory_equal(buf, "{\"op\": \"sum\", \"args\": [", n);
    assert_int_equal(tern_grammar_matcher_n_steps(m), 0); /* asking does not advance */
    assert_tern_ok(tern_grammar_matcher_accept_bytes(m, buf, n, NULL));
    assert_int_equal(tern_grammar_matcher_forced_bytes(m, buf, sizeof buf), 0); /* ] or a digit */
    assert_int_equal(tern_grammar_matcher_forced_token(m), -1);
    assert_tern_ok(tern_grammar_matcher_accept_bytes(m, "1]", 2, NULL));
    n = tern_grammar_matcher_forced_bytes(m, buf, sizeof buf);
    assert_int_equal(n, 1);
    assert_int_equal(buf[0], '}');
    int32_t only = tern_grammar_matcher_forced_token(m); /* "}" is the only token */
    int32_t ids[4];
    encode("}", ids, 4);
    assert_int_equal(only, ids[0]);
    assert_tern_ok(tern_grammar_matcher_accept(m, only, NULL));
    assert_int_equal(tern_grammar_matcher_forced_token(m), eog >= 0 ? -1 : -1); /* several eog ids in Qwen2 */
    assert_true(tern_grammar_matcher_is_done(m));
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

static void test_apply_logits(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = schema("{\"enum\": [\"yes\", \"no\"]}");
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    for (int i = 0; i < n_vocab; i++) logits[i] = (float)(i % 7);
    int cnt = tern_grammar_matcher_apply(m, logits);
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    assert_int_equal(tern_grammar_matcher_fill_mask(m, mask), cnt);
    int finite = 0;
    for (int i = 0; i < n_vocab; i++) {
        assert_int_equal(isinf(logits[i]) && logits[i] < 0, !bit(mask, i));
        finite += !isinf(logits[i]);
    }
    assert_int_equal(finite, cnt);
    assert_int_equal(cnt, 1); /* only '"': Qwen2 has no '"y' or '"no' token */
    assert_tern_ok(tern_grammar_matcher_accept_bytes(m, "\"", 1, NULL));
    for (int i = 0; i < n_vocab; i++) logits[i] = 1.0f;
    cnt = tern_grammar_matcher_apply(m, logits);
    int32_t yes = tern_token_lookup(tok, "yes", 3), no = tern_token_lookup(tok, "no", 2), y = tern_token_lookup(tok, "y", 1);
    assert_true(yes >= 0 && no >= 0 && y >= 0);
    assert_true(logits[yes] == 1.0f && logits[no] == 1.0f && logits[y] == 1.0f);
    assert_true(isinf(logits[tern_token_lookup(tok, "maybe", 5)]));
    assert_true(cnt >= 3 && cnt < 40);
    free(mask);
    free(logits);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather now\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}},"
    "  \"required\": [\"city\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\","
    "  \"properties\": {\"tz\": {\"type\": \"string\"}}, \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"ping\"}}]";

static struct tern_grammar *tools(const char *choice)
{
    struct tern_tool_grammar_params p = tern_tool_grammar_default_params();
    assert_tern_ok(tern_tool_choice_parse(choice, &p));
    struct tern_grammar *g;
    if (tern_grammar_from_tools(voc, TOOLS, strlen(TOOLS), &p, &g)) fail_msg("%s: %s", choice, tern_last_error());
    return g;
}

/* walk text token by token with the mask; returns the index of the refused token or -1 */
static int walk(struct tern_grammar_matcher *m, const char *text)
{
    int32_t ids[512];
    size_t n = encode(text, ids, 512);
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    int refused = -1;
    for (size_t i = 0; i < n && refused < 0; i++) {
        tern_grammar_matcher_fill_mask(m, mask);
        tern_status st = tern_grammar_matcher_accept(m, ids[i], NULL);
        if ((st == TERN_OK) != bit(mask, ids[i])) fail_msg("%s: token %zu: mask %d accept %d", text, i, bit(mask, ids[i]), st == TERN_OK);
        if (st) refused = (int)i;
    }
    free(mask);
    return refused;
}

static void test_tools_auto(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = tools("auto");
    struct tern_grammar_info info;
    tern_grammar_get_info(g, &info);
    assert_true(info.lazy);
    assert_string_equal(info.trigger, "<tool_call>");
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    /* free text: every token, end of generation too */
    assert_false(tern_grammar_matcher_is_constrained(m));
    assert_int_equal(brute_check(m, "free start"), n_vocab);
    assert_int_equal(walk(m, "Let me check the weather. "), -1);
    assert_true(tern_grammar_matcher_is_complete(m));
    /* the opener in pieces (no special-token parsing), then a call, then free text, then another call */
    assert_int_equal(walk(m, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>"), -1);
    assert_false(tern_grammar_matcher_is_constrained(m));
    assert_true(tern_grammar_matcher_is_complete(m));
    assert_int_equal(walk(m, "\nAnd <b>time</b>: "), -1);
    /* the single <tool_call> token opens a call too */
    int32_t open = tern_token_lookup(tok, "<tool_call>", 11);
    assert_true(open >= 0);
    assert_tern_ok(tern_grammar_matcher_accept(m, open, NULL));
    assert_true(tern_grammar_matcher_is_constrained(m));
    assert_false(tern_grammar_matcher_is_complete(m));
    assert_int_equal(tern_grammar_matcher_accept(m, eog, NULL), TERN_ERR_ARG); /* not inside a call */
    brute_check(m, "after the opener token");
    assert_int_equal(walk(m, "\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"), -1);
    assert_tern_ok(tern_grammar_matcher_accept(m, eog, NULL));
    /* a call that does not fit the tools is refused where it goes wrong */
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "x<tool_call>\n{\"name\": \"get_stock\", \"arguments\": {}}") > 0);
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"x\"}}") > 0);
    /* free text ending in "<tool_call": a token that completes the opener must continue with
     * "\n"; ">" then "\n" is fine, ">{" is not */
    tern_grammar_matcher_reset(m);
    assert_tern_ok(tern_grammar_matcher_accept_bytes(m, "see <tool_call", 14, NULL));
    int32_t gt_nl = tern_token_lookup(tok, ">\xc4\x8a", 3); /* GPT-2 text of ">\n" */
    int32_t gt_brace = tern_token_lookup(tok, ">{", 2);
    assert_true(gt_nl >= 0 && gt_brace >= 0);
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    tern_grammar_matcher_fill_mask(m, mask);
    assert_true(bit(mask, gt_nl));
    assert_false(bit(mask, gt_brace));
    brute_check(m, "mid-opener");
    assert_int_equal(tern_grammar_matcher_accept(m, gt_brace, NULL), TERN_ERR_ARG);
    assert_tern_ok(tern_grammar_matcher_accept(m, gt_nl, NULL));
    assert_true(tern_grammar_matcher_is_constrained(m));
    free(mask);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

static void gemma4_tools(void);

static void test_tools_none_required_named(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = tools("none");
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    int32_t open = tern_token_lookup(tok, "<tool_call>", 11);
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    assert_int_equal(tern_grammar_matcher_fill_mask(m, mask), n_vocab - 1);
    assert_false(bit(mask, open));
    assert_int_equal(tern_grammar_matcher_accept(m, open, NULL), TERN_ERR_ARG);
    assert_int_equal(walk(m, "<tool_call") , -1);
    brute_check(m, "none, after <tool_call");
    assert_true(walk(m, ">") == 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);

    g = tools("required");
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_true(tern_grammar_matcher_is_constrained(m));
    tern_grammar_matcher_fill_mask(m, mask);
    assert_false(bit(mask, eog));
    assert_true(bit(mask, open));
    char buf[64];
    size_t n = tern_grammar_matcher_forced_bytes(m, buf, sizeof buf);
    assert_int_equal(n, strlen("<tool_call>\n{\"name\": \""));
    assert_int_equal(walk(m, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>"), -1);
    assert_true(tern_grammar_matcher_is_complete(m));
    assert_int_equal(walk(m, "\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"), -1); /* parallel */
    assert_tern_ok(tern_grammar_matcher_accept(m, eog, NULL));
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "Sure! <tool_call>") == 0); /* no free text first */
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);

    g = tools("get_weather");
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    n = tern_grammar_matcher_forced_bytes(m, buf, sizeof buf);
    /* the envelope is forced; inside the arguments a separator's space is the model's choice
     * (one-line whitespace, the tools' default): tojson's form and the minified one both pass */
    const char *want = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(buf, want, n);
    assert_true(walk(m, "<tool_call>\n{\"name\": \"get_time\"") > 0);
    static const char *const spacing[] = {"{\"city\": \"Oslo\", \"unit\": \"c\"}", "{\"city\":\"Oslo\",\"unit\":\"c\"}",
                                          "{\"city\":\"Oslo\", \"unit\": \"c\"}"};
    char call[256];
    for (size_t i = 0; i < sizeof spacing / sizeof spacing[0]; i++) {
        tern_grammar_matcher_reset(m);
        snprintf(call, sizeof call, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": %s}\n</tool_call>", spacing[i]);
        if (walk(m, call) != -1) fail_msg("one-line whitespace refused %s", call);
    }
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":  ") > 0); /* two spaces */
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
    free(mask);

    /* bad tools input */
    struct tern_tool_grammar_params p = tern_tool_grammar_default_params();
    static const struct { const char *tools, *choice, *msg; } bad[] = {
        {"[{\"type\": \"function\", \"function\": {\"name\": \"a\"}},]", "auto", "line 1:"},
        {"{}", "auto", "non-empty array"},
        {"[{\"function\": {\"parameters\": {}}}]", "auto", "$[0].function: a tool needs"},
        {"[{\"function\": {\"name\": \"a\"}}, {\"function\": {\"name\": \"a\"}}]", "auto", "appears twice"},
        {"[{\"function\": {\"name\": \"a\"}}]", "b", "not among the tools"},
        {"[{\"function\": {\"name\": \"a\", \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"not\": {}}}}}}]", "auto",
         "$[0].function.parameters.properties.x.not: unsupported keyword"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_tern_ok(tern_tool_choice_parse(bad[i].choice, &p));
        struct tern_grammar *bg = NULL;
        assert_int_not_equal(tern_grammar_from_tools(voc, bad[i].tools, strlen(bad[i].tools), &p, &bg), TERN_OK);
        if (!strstr(tern_last_error(), bad[i].msg)) fail_msg("%s: '%s' lacks '%s'", bad[i].tools, tern_last_error(), bad[i].msg);
        assert_null(bg);
    }
    /* Llama 3: a whole-reply JSON call with "parameters", for required / NAME only */
    p = tern_tool_grammar_default_params();
    p.format = TERN_TOOLCALL_LLAMA3;
    struct tern_grammar *bg = NULL;
    assert_int_equal(tern_grammar_from_tools(voc, TOOLS, strlen(TOOLS), &p, &bg), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "llama3"));
    assert_null(bg);
    assert_tern_ok(tern_tool_choice_parse("required", &p));
    assert_tern_ok(tern_grammar_from_tools(voc, TOOLS, strlen(TOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_int_equal(walk(m, "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}"), -1);
    assert_true(tern_grammar_matcher_is_done(m));
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "{\"name\": \"get_time\", \"arguments\": {}}") > 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    /* Mistral: [TOOL_CALLS] and a list of calls (parallel), lazy with auto */
    p = tern_tool_grammar_default_params();
    p.format = TERN_TOOLCALL_MISTRAL;
    assert_tern_ok(tern_tool_choice_parse("required", &p));
    assert_tern_ok(tern_grammar_from_tools(voc, TOOLS, strlen(TOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_int_equal(walk(m, "[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": {}}]"), -1);
    assert_true(tern_grammar_matcher_is_done(m));
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "Sure [TOOL_CALLS]") == 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    assert_tern_ok(tern_tool_choice_parse("auto", &p));
    assert_tern_ok(tern_grammar_from_tools(voc, TOOLS, strlen(TOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_int_equal(walk(m, "Let me check. [TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}] done"), -1);
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "Let me check. [TOOL_CALLS][{\"name\": \"pong\"") > 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    /* Granite: Mistral's list after <|tool_call|> */
    p = tern_tool_grammar_default_params();
    p.format = TERN_TOOLCALL_GRANITE;
    assert_tern_ok(tern_grammar_from_tools(voc, TOOLS, strlen(TOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_int_equal(walk(m, "Sure. <|tool_call|>[{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": {}}] ok"), -1);
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "<|tool_call|>{\"name\"") > 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    /* Qwen XML: text values up to \n</parameter>, typed values as JSON, required parameters
     * present, parameters in the schema's order, unknown ones refused */
    static const char XTOOLS[] =
        "[{\"type\": \"function\", \"function\": {\"name\": \"search\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"query\": {\"type\": \"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}, \"n\": {\"type\": "
        "\"integer\", \"minimum\": 1, \"maximum\": 9}, \"exact\": {\"type\": \"boolean\"}}, \"required\": [\"query\"]}}}, "
        "{\"type\": \"function\", \"function\": {\"name\": \"ping\"}}]";
    p = tern_tool_grammar_default_params();
    p.format = TERN_TOOLCALL_QWEN_XML;
    assert_tern_ok(tern_grammar_from_tools(voc, XTOOLS, strlen(XTOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_int_equal(walk(m, "Let me look.\n\n<tool_call>\n<function=search>\n<parameter=query>\nfjord <tides> </param\n"
                             "two lines\n</parameter>\n<parameter=n>\n3\n</parameter>\n<parameter=exact>\nfalse\n</parameter>\n"
                             "</function>\n</tool_call>\n<tool_call>\n<function=ping>\n</function>\n</tool_call>"), -1);
    assert_false(tern_grammar_matcher_is_constrained(m));
    static const char *const refused[] = {
        "<tool_call>\n<function=search>\n</function>",                                       /* query required */
        "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n<parameter=n>\n12", /* maximum */
        "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n<parameter=unit>\nk", /* enum */
        "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n<parameter=other>",   /* unknown */
        "<tool_call>\n<function=nosuch>",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        tern_grammar_matcher_reset(m);
        if (walk(m, refused[i]) <= 0) fail_msg("qwen-xml grammar accepted %s", refused[i]);
    }
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    gemma4_tools();
}

/* Gemma 4: <|tool_call>call:NAME{key:value,...}<tool_call|>, arguments in Gemma's value syntax
 * (strings between <|"|> marks, raw; bare keys in dictsort order; no whitespace). The tools'
 * properties are declared out of order: the grammar sorts them as the template does. */
static const char GTOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"search\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"query\": {\"type\": \"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}, "
    "\"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}, \"Exact\": {\"type\": \"boolean\"}, "
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 5}, \"maxItems\": 3}, "
    "\"where\": {\"type\": \"object\", \"properties\": {\"zip\": {\"type\": \"string\", \"pattern\": \"^[0-9]{4}$\"}, "
    "\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"], \"additionalProperties\": false}}, "
    "\"required\": [\"query\"], \"additionalProperties\": false}}}, "
    "{\"type\": \"function\", \"function\": {\"name\": \"ping\"}}, "
    "{\"type\": \"function\", \"function\": {\"name\": \"note\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"meta\": {\"type\": \"object\"}}}}}]";

/* The same parameters in JSON Schema with keys in dictsort order, to check parsed arguments. */
static const char GSEARCH[] =
    "{\"type\": \"object\", \"properties\": {\"Exact\": {\"type\": \"boolean\"}, "
    "\"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}, \"query\": {\"type\": \"string\"}, "
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 5}, \"maxItems\": 3}, "
    "\"unit\": {\"enum\": [\"c\", \"f\"]}, \"where\": {\"type\": \"object\", \"properties\": "
    "{\"city\": {\"type\": \"string\"}, \"zip\": {\"type\": \"string\", \"pattern\": \"^[0-9]{4}$\"}}, "
    "\"required\": [\"city\"], \"additionalProperties\": false}}, \"required\": [\"query\"], "
    "\"additionalProperties\": false}";

#define GQ "<|\"|>"
static void gemma4_tools(void)
{
    struct tern_tool_grammar_params p = tern_tool_grammar_default_params();
    p.format = TERN_TOOLCALL_GEMMA4;
    struct tern_grammar *bg;
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_tool_choice_parse("required", &p));
    assert_tern_ok(tern_grammar_from_tools(voc, GTOOLS, strlen(GTOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    static const char *const accepted[] = {
        "<|tool_call>call:search{Exact:false,n:3,query:" GQ "fjord \"tides\" {x:1}, <b>\n" GQ ",tags:[" GQ "a" GQ
        "," GQ "bb" GQ "],unit:" GQ "c" GQ ",where:{city:" GQ "Oslo" GQ ",zip:" GQ "0150" GQ "}}<tool_call|>"
        "<|tool_call>call:ping{}<tool_call|>",
        "<|tool_call>call:search{query:" GQ GQ "}<tool_call|>",
        "<|tool_call>call:note{meta:{a:[1,-2.5e3,null,true],b:" GQ "x" GQ ",c:{}}}<tool_call|>",
        "<|tool_call>call:note{}<tool_call|>",
    };
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        tern_grammar_matcher_reset(m);
        if (walk(m, accepted[i]) != -1 || !tern_grammar_matcher_is_complete(m))
            fail_msg("gemma4 grammar refused %s", accepted[i]);
    }
    static const char *const refused[] = {
        "<|tool_call>call:search{n:3}",                                  /* query required */
        "<|tool_call>call:search{query:" GQ "x" GQ ",n:3",               /* n sorts before query */
        "<|tool_call>call:search{\"query\"",                            /* JSON keys */
        "<|tool_call>call:search{query:\"x\"",                           /* JSON strings */
        "<|tool_call>call:search{n:12",                                  /* maximum */
        "<|tool_call>call:search{query:" GQ "x" GQ ",unit:" GQ "k",       /* enum */
        "<|tool_call>call:search{query:" GQ "x" GQ ",tags:[" GQ "abcdef", /* maxLength */
        "<|tool_call>call:search{query:" GQ "x" GQ ",where:{city:" GQ "a" GQ ",zip:" GQ "12a", /* pattern */
        "<|tool_call>call:search{query:" GQ "x" GQ ",zzz:",              /* additionalProperties false */
        "<|tool_call>call:search{ query",                                /* whitespace */
        "<|tool_call>call:nosuch",
        "<|tool_call>call:note{meta:{a b:",                              /* a space in a bare key */
        "<|tool_call>call:note{meta:{},zzz:",      /* undeclared: tool calls are strict by default */
        "<|tool_call>call:ping{}<tool_call|> ",                          /* text after the calls */
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        tern_grammar_matcher_reset(m);
        if (walk(m, refused[i]) <= 0) fail_msg("gemma4 grammar accepted %s", refused[i]);
    }
    /* Round trip: calls the grammar generates read back through the Gemma 4 parser, and their
     * arguments (JSON now) satisfy the tool's JSON Schema. */
    struct tern_grammar_params jp = tern_grammar_default_params();
    jp.ws = TERN_GRAMMAR_WS_MINIFIED; /* the parser's arguments are compact JSON */
    struct tern_grammar *js;
    assert_tern_ok(tern_grammar_from_json_schema(voc, GSEARCH, strlen(GSEARCH), &jp, &js));
    struct tern_grammar_matcher *jm;
    assert_tern_ok(tern_grammar_matcher_create(js, &jm));
    int n_search = 0, n_calls = 0;
    char doc[4096];
    for (uint64_t seed = 1; seed <= 60; seed++) {
        size_t n;
        assert_tern_ok(tern_grammar_generate(bg, seed, 200, doc, sizeof doc - 1, &n));
        doc[n] = 0;
        tern_grammar_matcher_reset(m);
        if (walk(m, doc) != -1) fail_msg("generated call not accepted: %.*s", (int)n, doc);
        struct tern_toolcall_parser *tp;
        assert_tern_ok(tern_toolcall_parser_create(TERN_TOOLCALL_GEMMA4, &tp));
        int done = 0;
        assert_tern_ok(tern_toolcall_feed(tp, doc, n, &done));
        assert_tern_ok(tern_toolcall_finish(tp, &done));
        if (tern_toolcall_n_errors(tp) || tern_toolcall_count(tp) < 1)
            fail_msg("parser: %s in %.*s", tern_toolcall_n_errors(tp) ? tern_toolcall_error(tp, 0) : "no call",
                     (int)n, doc);
        size_t tl;
        tern_toolcall_text(tp, &tl);
        assert_int_equal(tl, 0);
        for (int i = 0; i < tern_toolcall_count(tp); i++) {
            const struct tern_toolcall *c = tern_toolcall_get(tp, i);
            n_calls++;
            if (strcmp(c->name, "search")) continue;
            n_search++;
            tern_grammar_matcher_reset(jm);
            if (tern_grammar_matcher_accept_bytes(jm, c->arguments, strlen(c->arguments), NULL) ||
                !tern_grammar_matcher_is_complete(jm))
                fail_msg("arguments %s (from %.*s) do not satisfy the schema", c->arguments, (int)n, doc);
        }
        tern_toolcall_parser_free(tp);
    }
    print_message("gemma4 round trip: %d generated calls parsed back, %d search calls' arguments "
                  "checked against the JSON Schema\n", n_calls, n_search);
    assert_true(n_search >= 10);
    tern_grammar_matcher_free(jm);
    tern_grammar_free(js);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    /* auto: free text, then the call after <|tool_call>, then free text again */
    assert_tern_ok(tern_tool_choice_parse("auto", &p));
    assert_tern_ok(tern_grammar_from_tools(voc, GTOOLS, strlen(GTOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_int_equal(walk(m, "Let me check. <|tool_call>call:ping{}<tool_call|> done"), -1);
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "Let me check. <|tool_call>call:pong") > 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    /* none: the opener can never be completed */
    assert_tern_ok(tern_tool_choice_parse("none", &p));
    assert_tern_ok(tern_grammar_from_tools(voc, GTOOLS, strlen(GTOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_true(walk(m, "fine <|tool_call>") > 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    /* a tool name: that tool only */
    assert_tern_ok(tern_tool_choice_parse("ping", &p));
    assert_tern_ok(tern_grammar_from_tools(voc, GTOOLS, strlen(GTOOLS), &p, &bg));
    assert_tern_ok(tern_grammar_matcher_create(bg, &m));
    assert_int_equal(walk(m, "<|tool_call>call:ping{}<tool_call|>"), -1);
    tern_grammar_matcher_reset(m);
    assert_true(walk(m, "<|tool_call>call:search") > 0);
    tern_grammar_matcher_free(m);
    tern_grammar_free(bg);
    /* what the syntax cannot write is refused by name */
    static const char BADKEY[] = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": "
                                 "{\"a:b\": {\"type\": \"string\"}}}}]";
    assert_int_equal(tern_grammar_from_tools(voc, BADKEY, strlen(BADKEY), &p, &bg), TERN_ERR_ARG);
    assert_tern_ok(tern_tool_choice_parse("required", &p));
    assert_int_equal(tern_grammar_from_tools(voc, BADKEY, strlen(BADKEY), &p, &bg), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "a:b"));
    static const char BADCONST[] = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": "
                                   "{\"a\": {\"const\": \"x<|\\\"|>y\"}}}}]";
    assert_int_equal(tern_grammar_from_tools(voc, BADCONST, strlen(BADCONST), &p, &bg), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "Gemma"));
}

/* several matchers of one grammar on several threads: same masks as one thread */
struct job {
    const struct tern_grammar *g;
    uint64_t out;
    int seed;
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    struct tern_grammar_matcher *m;
    if (tern_grammar_matcher_create(j->g, &m)) return NULL;
    size_t w = tern_grammar_mask_words(voc);
    uint32_t *mask = malloc(w * 4);
    char *doc = malloc(1 << 14);
    int32_t *ids = malloc(8192 * sizeof *ids);
    uint64_t h = 1469598103934665603ull;
    for (int d = 0; d < 12; d++) {
        size_t n, nt;
        if (tern_grammar_generate(j->g, (uint64_t)(d * 7 + 1), 60, doc, 1 << 14, &n)) break;
        /* tokenizers are not thread-safe: ids come from a private copy of the text through the
         * shared vocabulary's pieces, so tokenize under a lock */
        static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&mu);
        tern_status_ignore(tern_tokenize(tok, doc, n, 0, ids, 8192, &nt));
        pthread_mutex_unlock(&mu);
        tern_grammar_matcher_reset(m);
        for (size_t i = 0; i <= nt; i++) {
            tern_grammar_matcher_fill_mask(m, mask);
            for (size_t k = 0; k < w; k++) h = (h ^ mask[k]) * 1099511628211ull;
            if (i < nt && tern_grammar_matcher_accept(m, ids[i], NULL)) { h ^= 0xdead; break; }
        }
    }
    j->out = h;
    free(mask);
    free(doc);
    free(ids);
    tern_grammar_matcher_free(m);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    NEED_VOCAB();
    /* a fresh grammar for the threads (so they race to classify), one for the reference */
    struct tern_grammar *g1 = schema(SCHEMA), *g2 = schema(SCHEMA);
    struct job ref = {g1, 0, 0};
    run_job(&ref);
    pthread_t th[4];
    struct job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct job){g2, 0, i};
        assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) assert_int_equal(jobs[i].out, ref.out);
    tern_grammar_free(g1);
    tern_grammar_free(g2);
}

static void test_stats_and_info(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = schema(SCHEMA);
    struct tern_grammar_info info;
    tern_grammar_get_info(g, &info);
    assert_int_equal(info.n_classified, 0);
    assert_true(info.compile_ms >= 0 && info.table_bytes > 0 && !info.lazy);
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    assert_int_equal(walk(m, "{\"name\": \"x\", \"tags\": [\"a b c d e f g h\"]}"), -1); /* free string: cache hits */
    struct tern_grammar_stats st;
    tern_grammar_matcher_get_stats(m, &st);
    if (!(st.masks > 5 && st.mask_cache_hits > 0 && st.classified_nodes > 0 && st.accepted_tokens > 5)) fail_msg("masks %llu hits %llu cls %llu acc %llu", (unsigned long long)st.masks, (unsigned long long)st.mask_cache_hits, (unsigned long long)st.classified_nodes, (unsigned long long)st.accepted_tokens);
    tern_grammar_get_info(g, &info);
    assert_true(info.n_classified > 0 && info.cls_bytes > 0);
    assert_tern_ok(tern_grammar_precompute(g));
    tern_grammar_get_info(g, &info);
    assert_true(info.n_classified >= st.classified_nodes);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mask_brute_force),
        cmocka_unit_test(test_mask_brute_force_counted),
        cmocka_unit_test(test_mask_brute_force_skipped_walks),
        cmocka_unit_test(test_eog_control_messages),
        cmocka_unit_test(test_rollback),
        cmocka_unit_test(test_forced),
        cmocka_unit_test(test_apply_logits),
        cmocka_unit_test(test_tools_auto),
        cmocka_unit_test(test_tools_none_required_named),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stats_and_info),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
