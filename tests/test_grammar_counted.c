/* test_grammar_counted.c — large repetition bounds kept as counters (gram_internal.h,
 * "counters"), and `pattern` searches: documents at and around each bound accepted or refused
 * exactly (maxLength 40000, maxItems 100000, minItems, min/maxProperties), the masks at the
 * bounds against brute force on the Qwen2 vocabulary (a token of 3 characters when 2 remain is
 * refused), the grammar of maxLength 2^31 - 1 as small as the one of maxLength 300, the mask
 * cache (keyed by saturated counts) against fresh matchers and brute force along long
 * documents, unanchored patterns found anywhere, and the independent validator agreeing. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar_validator.h"

static double test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct tern_tokenizer *tok;
static struct tern_grammar_vocab *voc;
static int n_vocab;

static int setup(void **state)
{
    (void)state;
    const char *p = test_shared_path("fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    if (!p) return 0;
    if (tern_tokenizer_load(p, &tok) || tern_grammar_vocab_create(tok, &voc)) return -1;
    n_vocab = tern_tokenizer_n_vocab(tok);
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

static struct tern_grammar *compile(const struct tern_grammar_vocab *v, const char *s)
{
    struct tern_grammar *g;
    if (tern_grammar_from_json_schema(v, s, strlen(s), NULL, &g)) fail_msg("%s: %s", s, tern_last_error());
    return g;
}

/* the whole document, byte by byte (no vocabulary), and complete at its end */
static bool accepts(const struct tern_grammar *g, const char *doc, size_t n)
{
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    size_t ok = 0;
    bool r = tern_grammar_matcher_accept_bytes(m, doc, n, &ok) == TERN_OK && tern_grammar_matcher_is_complete(m);
    tern_grammar_matcher_free(m);
    return r;
}

/* the independent validator's verdict */
static bool valid(const char *schema, const char *doc)
{
    cJSON *s = cJSON_Parse(schema), *x = cJSON_Parse(doc);
    assert_non_null(s);
    bool r = x && gv_valid(s, s, x, 0);
    cJSON_Delete(s);
    cJSON_Delete(x);
    return r;
}

/* both agree, and say `want` */
static void judge(const struct tern_grammar *g, const char *schema, const char *doc, size_t n, bool want, const char *what)
{
    bool t = accepts(g, doc, n), v = valid(schema, doc);
    if (t != want || v != want) fail_msg("%s: tern %d, validator %d, expected %d", what, t, v, want);
}

/* "x" repeated k times as a JSON string */
static char *str_of(size_t k, char ch)
{
    char *s = malloc(k + 3);
    s[0] = '"';
    memset(s + 1, ch, k);
    s[k + 1] = '"';
    s[k + 2] = 0;
    return s;
}

static void test_string_bounds(void **state)
{
    (void)state;
    const char *schema = "{\"type\": \"string\", \"maxLength\": 40000}";
    struct tern_grammar *g = compile(NULL, schema);
    static const size_t lens[] = {0, 1, 39999, 40000, 40001, 80000};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char *s = str_of(lens[i], 'a');
        char what[64];
        snprintf(what, sizeof what, "maxLength 40000, length %zu", lens[i]);
        judge(g, schema, s, strlen(s), lens[i] <= 40000, what);
        free(s);
    }
    /* characters are code points: 40000 of two bytes each, escapes count once */
    {
        size_t k = 40000;
        char *s = malloc(2 * k + 8), *p = s;
        *p++ = '"';
        for (size_t i = 0; i < k; i++) { *p++ = (char)0xC3; *p++ = (char)0xA9; }
        *p++ = '"';
        *p = 0;
        judge(g, schema, s, (size_t)(p - s), true, "40000 two-byte characters");
        memcpy(s + 1, "\\n", 2); /* one escape for the first two bytes: still 40000 characters */
        judge(g, schema, s, (size_t)(p - s), true, "an escape counts once");
        p[-1] = 'x';
        p[0] = '"';
        p[1] = 0;
        judge(g, schema, s, (size_t)(p + 1 - s), false, "40001 characters");
        free(s);
    }
    tern_grammar_free(g);

    const char *both = "{\"type\": \"string\", \"minLength\": 40000, \"maxLength\": 40000}";
    g = compile(NULL, both);
    for (size_t k = 39998; k <= 40002; k++) {
        char *s = str_of(k, 'b');
        char what[64];
        snprintf(what, sizeof what, "exactly 40000, length %zu", k);
        judge(g, both, s, strlen(s), k == 40000, what);
        free(s);
    }
    tern_grammar_free(g);

    const char *min = "{\"type\": \"string\", \"minLength\": 1000}";
    g = compile(NULL, min);
    for (size_t k = 998; k <= 1001; k++) {
        char *s = str_of(k, 'c');
        char what[64];
        snprintf(what, sizeof what, "minLength 1000, length %zu", k);
        judge(g, min, s, strlen(s), k >= 1000, what);
        free(s);
    }
    char *s = str_of(100000, 'c');
    judge(g, min, s, strlen(s), true, "minLength 1000, length 100000");
    free(s);
    tern_grammar_free(g);
}

/* maxLength 2^31 - 1 compiles to the same few nodes as maxLength 300 (no copy per character),
 * and bounds past 2^31 - 1 are: a maximum no bound, a minimum an error */
static void test_huge_bounds_small(void **state)
{
    (void)state;
    const char *schemas[] = {"{\"type\": \"string\", \"maxLength\": 300}",
                             "{\"type\": \"string\", \"maxLength\": 2147483647}",
                             "{\"type\": \"string\", \"minLength\": 2147483647, \"maxLength\": 2147483647}",
                             "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 100000}",
                             "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 2147483647}, \"minItems\": 2147483647}",
                             "{\"type\": \"object\", \"maxProperties\": 2147483647, \"minProperties\": 1000000}"};
    struct tern_grammar_info info[6];
    for (int i = 0; i < 6; i++) {
        struct tern_grammar *g = compile(voc, schemas[i]);
        tern_grammar_get_info(g, &info[i]);
        print_message("%s: %u nodes, %zu table bytes, %.3f ms\n", schemas[i], info[i].n_nodes, info[i].table_bytes,
                      info[i].compile_ms);
        assert_true(info[i].n_nodes < 400);
        assert_true(info[i].table_bytes < 64 * 1024);
        tern_grammar_free(g);
    }
    assert_true(info[1].n_nodes <= info[0].n_nodes);
    /* a maximum past 2^31 - 1 bounds nothing a model writes; a minimum there admits nothing */
    struct tern_grammar *g = compile(NULL, "{\"type\": \"string\", \"maxLength\": 1e15}");
    assert_true(accepts(g, "\"abc\"", 5));
    tern_grammar_free(g);
    const char *bad = "{\"type\": \"string\", \"minLength\": 5e9}";
    assert_int_equal(tern_grammar_from_json_schema(NULL, bad, strlen(bad), NULL, &g), TERN_ERR_RANGE);
    assert_non_null(strstr(tern_last_error(), "minLength 5000000000 is above tern's limit of 2147483647"));
}

/* "[1, 1, ...]" with k items */
static char *array_of(size_t k, char **end)
{
    char *s = malloc(3 * k + 4), *p = s;
    *p++ = '[';
    for (size_t i = 0; i < k; i++) {
        if (i) { *p++ = ','; *p++ = ' '; }
        *p++ = '1';
    }
    *p++ = ']';
    *p = 0;
    *end = p;
    return s;
}

static void test_array_bounds(void **state)
{
    (void)state;
    const char *schema = "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 100000}";
    struct tern_grammar *g = compile(NULL, schema);
    static const size_t ks[] = {0, 1, 99999, 100000, 100001};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char *end, *s = array_of(ks[i], &end);
        char what[64];
        snprintf(what, sizeof what, "maxItems 100000, %zu items", ks[i]);
        judge(g, schema, s, (size_t)(end - s), ks[i] <= 100000, what);
        free(s);
    }
    tern_grammar_free(g);
    const char *mins = "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 1000, \"maxItems\": 1002}";
    g = compile(NULL, mins);
    for (size_t k = 998; k <= 1004; k++) {
        char *end, *s = array_of(k, &end);
        char what[64];
        snprintf(what, sizeof what, "minItems 1000 maxItems 1002, %zu items", k);
        judge(g, mins, s, (size_t)(end - s), k >= 1000 && k <= 1002, what);
        free(s);
    }
    tern_grammar_free(g);
    /* prefix items count too: 2 fixed + the rest up to 500 */
    const char *pre = "{\"type\": \"array\", \"prefixItems\": [{\"const\": 1}, {\"const\": 1}], \"items\": {\"type\": \"integer\"}, "
                      "\"minItems\": 300, \"maxItems\": 500}";
    g = compile(NULL, pre);
    for (size_t k = 298; k <= 502; k += (k == 301 ? 198 : 1)) {
        char *end, *s = array_of(k, &end);
        char what[64];
        snprintf(what, sizeof what, "prefixItems, 300..500 items: %zu", k);
        judge(g, pre, s, (size_t)(end - s), k >= 300 && k <= 500, what);
        free(s);
    }
    tern_grammar_free(g);
}

/* {"p0": 0, ...} with k properties, the first `declared` of them named a, b */
static char *object_of(size_t k, char **end)
{
    char *s = malloc(16 * k + 8), *p = s;
    *p++ = '{';
    for (size_t i = 0; i < k; i++) p += sprintf(p, "%s\"p%zu\": %zu", i ? ", " : "", i, i);
    *p++ = '}';
    *p = 0;
    *end = p;
    return s;
}

static void test_object_bounds(void **state)
{
    (void)state;
    const char *schema = "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}, \"maxProperties\": 300}";
    struct tern_grammar *g = compile(NULL, schema);
    for (size_t k = 298; k <= 302; k++) {
        char *end, *s = object_of(k, &end);
        char what[64];
        snprintf(what, sizeof what, "maxProperties 300, %zu properties", k);
        judge(g, schema, s, (size_t)(end - s), k <= 300, what);
        free(s);
    }
    tern_grammar_free(g);
    /* declared properties count with the extra ones */
    const char *mixed = "{\"type\": \"object\", \"properties\": {\"p0\": {\"type\": \"integer\"}, \"p1\": {\"type\": \"integer\"}}, "
                        "\"required\": [\"p0\"], \"additionalProperties\": {\"type\": \"integer\"}, \"minProperties\": 500, \"maxProperties\": 501}";
    g = compile(NULL, mixed);
    for (size_t k = 498; k <= 503; k++) {
        char *end, *s = object_of(k, &end);
        char what[64];
        snprintf(what, sizeof what, "500..501 properties, %zu", k);
        judge(g, mixed, s, (size_t)(end - s), k >= 500 && k <= 501, what);
        free(s);
    }
    /* without p1 (optional) the extras start after p0 */
    judge(g, mixed, "{\"p0\": 1}", 9, false, "one property");
    tern_grammar_free(g);
}

/* ---------------------------------------------------------------- masks */

static bool bit(const uint32_t *m, int32_t id) { return (m[id >> 5] >> (id & 31)) & 1; }

/* every token: mask bit == accept (then rolled back); returns the allowed count */
static int brute_check(struct tern_grammar_matcher *m, const char *where)
{
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    int cnt = tern_grammar_matcher_fill_mask(m, mask), pc = 0;
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
    if (pc != cnt) fail_msg("%s: fill_mask counted %d, %d allowed", where, cnt, pc);
    free(mask);
    return cnt;
}

static int32_t token_of(const char *s)
{
    int32_t ids[8];
    size_t n;
    assert_tern_ok(tern_tokenize(tok, s, strlen(s), 0, ids, 8, &n));
    if (n != 1) fail_msg("'%s' is %zu tokens", s, n);
    return ids[0];
}

static bool allows(struct tern_grammar_matcher *m, int32_t id)
{
    uint32_t *mask = malloc(tern_grammar_mask_words(voc) * 4);
    tern_grammar_matcher_fill_mask(m, mask);
    bool r = bit(mask, id);
    free(mask);
    return r;
}

/* The masks where the count is reached: with r characters left, a token of r + 1 plain
 * characters is refused and one of r allowed, the closing quote only from minLength on; brute
 * force at each of the last positions and far from the bounds. */
static void test_masks_at_bounds(void **state)
{
    (void)state;
    NEED_VOCAB();
    struct tern_grammar *g = compile(voc, "{\"type\": \"string\", \"minLength\": 39990, \"maxLength\": 40000}");
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    const int32_t t1 = token_of("a"), t2 = token_of("aa"), t3 = token_of("aaa"), tq = token_of("\"");
    char *body = malloc(40010);
    memset(body, 'a', 40010);
    body[0] = '"';
    assert_tern_ok(tern_grammar_matcher_accept_bytes(m, body, 1, NULL));
    brute_check(m, "first character");
    assert_tern_ok(tern_grammar_matcher_accept_bytes(m, body + 1, 39985, NULL)); /* 39985 characters */
    brute_check(m, "39985 characters");
    for (int done = 39985; done <= 40000; done++) {
        int left = 40000 - done;
        char where[64];
        snprintf(where, sizeof where, "%d characters, %d left", done, left);
        if (left <= 4 || done == 39989 || done == 39990) brute_check(m, where);
        if (allows(m, t1) != (left >= 1) || allows(m, t2) != (left >= 2) || allows(m, t3) != (left >= 3))
            fail_msg("%s: a %d, aa %d, aaa %d", where, allows(m, t1), allows(m, t2), allows(m, t3));
        if (allows(m, tq) != (done >= 39990)) fail_msg("%s: the closing quote %d", where, allows(m, tq));
        if (left) assert_tern_ok(tern_grammar_matcher_accept(m, t1, NULL));
    }
    assert_tern_ok(tern_grammar_matcher_accept(m, tq, NULL));
    assert_true(tern_grammar_matcher_is_complete(m));
    free(body);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
}

/* the mask cache (saturated counts) against fresh matchers at every position and brute force
 * at some, along long documents: a long string, an array of 1200 strings under maxItems 1000
 * (refused at item 1001), an object with many extra properties */
static void walk_compare(struct tern_grammar *g, const char *doc, size_t brute_every, size_t refuse_at)
{
    int32_t *ids = malloc(strlen(doc) * sizeof *ids + 64);
    size_t n;
    assert_tern_ok(tern_tokenize(tok, doc, strlen(doc), 0, ids, strlen(doc) + 16, &n));
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    const uint32_t words = tern_grammar_mask_words(voc);
    uint32_t *a = malloc(words * 4), *b = malloc(words * 4);
    size_t bytes = 0;
    struct tern_grammar_stats st;
    for (size_t i = 0; i < n; i++) {
        tern_grammar_matcher_fill_mask(m, a);
        /* uncached: a new matcher fed the same bytes (its mask cache is empty) */
        struct tern_grammar_matcher *f;
        assert_tern_ok(tern_grammar_matcher_create(g, &f));
        assert_tern_ok(tern_grammar_matcher_accept_bytes(f, doc, bytes, NULL));
        tern_grammar_matcher_fill_mask(f, b);
        tern_grammar_matcher_free(f);
        if (memcmp(a, b, words * 4)) fail_msg("token %zu (byte %zu): cached mask differs from a fresh matcher's", i, bytes);
        if (brute_every && i % brute_every == 0) {
            char where[64];
            snprintf(where, sizeof where, "token %zu", i);
            brute_check(m, where);
        }
        size_t len;
        char piece[256];
        tern_status_ignore(tern_token_to_piece(tok, ids[i], 0, piece, sizeof piece, &len));
        if (bytes + len > refuse_at) {
            assert_false(bit(a, ids[i]));
            break;
        }
        if (!bit(a, ids[i])) fail_msg("token %zu (byte %zu) not in the mask", i, bytes);
        assert_tern_ok(tern_grammar_matcher_accept(m, ids[i], NULL));
        bytes += len;
    }
    tern_grammar_matcher_get_stats(m, &st);
    print_message("%zu tokens: %llu masks, %llu cache hits, %llu tokens checked\n", n, (unsigned long long)st.masks,
                  (unsigned long long)st.mask_cache_hits, (unsigned long long)st.checked_tokens);
    if (refuse_at == SIZE_MAX) assert_true(tern_grammar_matcher_is_complete(m));
    free(a);
    free(b);
    free(ids);
    tern_grammar_matcher_free(m);
}

static void test_mask_cache_long_documents(void **state)
{
    (void)state;
    NEED_VOCAB();
    /* a long text under maxLength 5000 (with escapes and non-ASCII), ending 2 characters short */
    struct tern_grammar *g = compile(voc, "{\"type\": \"object\", \"properties\": {\"text\": {\"type\": \"string\", \"maxLength\": 5000}}, "
                                          "\"required\": [\"text\"], \"additionalProperties\": false}");
    char *doc = malloc(6000), *p = doc;
    p += sprintf(p, "{\"text\": \"");
    size_t chars = 0;
    static const char *const words[] = {"The ", "quick ", "br\xc3\xb8wn ", "fox, \\\"jumps\\\" ", "over\\n", "t\xc3\xa9 ", "lazy ", "dogs. "};
    static const size_t wchars[] = {4, 6, 6, 14, 5, 3, 5, 6};
    for (int i = 0; chars + 14 <= 4998 - 14; i++) {
        p += sprintf(p, "%s", words[i % 8]);
        chars += wchars[i % 8];
    }
    while (chars < 4998) { *p++ = 'x'; chars++; }
    p += sprintf(p, "\"}");
    walk_compare(g, doc, 97, SIZE_MAX);
    free(doc);
    tern_grammar_free(g);

    /* 1200 short strings where at most 1000 may be: the 1001st item is refused */
    g = compile(voc, "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 400}, \"maxItems\": 1000}");
    doc = malloc(1200 * 12 + 8);
    p = doc;
    *p++ = '[';
    size_t at1001 = 0;
    for (int i = 0; i < 1200; i++) {
        if (i == 1000) at1001 = (size_t)(p - doc);
        p += sprintf(p, "%s\"w%d\"", i ? ", " : "", i % 7);
    }
    p += sprintf(p, "]");
    walk_compare(g, doc, 0, at1001);
    free(doc);
    tern_grammar_free(g);

    /* many extra properties under maxProperties 400 */
    g = compile(voc, "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}}, \"additionalProperties\": {\"type\": \"string\"}, "
                     "\"maxProperties\": 400}");
    doc = malloc(300 * 24 + 16);
    p = doc;
    p += sprintf(p, "{\"id\": 7");
    for (int i = 0; i < 300; i++) p += sprintf(p, ", \"k%d\": \"v%d\"", i, i);
    p += sprintf(p, "}");
    walk_compare(g, doc, 301, SIZE_MAX);
    free(doc);
    tern_grammar_free(g);
}

/* ---------------------------------------------------------------- patterns */

static void test_unanchored_patterns(void **state)
{
    (void)state;
    static const struct { const char *re, *yes, *no; } cases[] = {
        {"[0-9]{3}", "\"ab123cd\"", "\"ab12cd3\""},
        {"[0-9]{3}", "\"123\"", "\"\""},
        {"^[0-9]{3}", "\"123cd\"", "\"a123\""},
        {"[0-9]{3}$", "\"ab123\"", "\"123a\""},
        {"^[0-9]{3}$", "\"123\"", "\"1234\""},
        {"x.{0,4000}", "\"axb\"", "\"ab\""},
        {"(.{0,30}){0,30}z", "\"--z--\"", "\"--y--\""},
        {"(.|..){0,500}x", "\"x\"", "\"yy\""},
        {"ab{2,5000}c", "\"zabbc\"", "\"zabc\""},
        {"a{3,}b", "\"xaaab\"", "\"xaab\""},
        {"^a{20000}$", NULL, "\"aaa\""},
        {"^(ab){15000}$", NULL, "\"abab\""},
        {"^x(a{1000}){1000}y$", "\"xy\"", "\"xay\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[256];
        snprintf(s, sizeof s, "{\"type\": \"string\", \"pattern\": \"%s\"}", cases[i].re);
        struct tern_grammar *g;
        double t0 = test_now_ms();
        if (tern_grammar_from_json_schema(NULL, s, strlen(s), NULL, &g)) fail_msg("%s: %s", cases[i].re, tern_last_error());
        print_message("pattern %s: %.1f ms\n", cases[i].re, test_now_ms() - t0);
        if (i == 12) { /* nested counts: one million a's */
            size_t k = 1000000;
            char *d = malloc(k + 8);
            d[0] = '"';
            d[1] = 'x';
            memset(d + 2, 'a', k);
            memcpy(d + 2 + k, "y\"", 3);
            if (!accepts(g, d, k + 4)) fail_msg("%s refuses a million a's", cases[i].re);
            d[2 + k - 1] = 'y';
            d[2 + k] = '"';
            if (accepts(g, d, k + 3)) fail_msg("%s accepts 999999 a's", cases[i].re);
            free(d);
        } else if (cases[i].yes) {
            judge(g, s, cases[i].yes, strlen(cases[i].yes), true, cases[i].re);
        } else {
            size_t k = i == 10 ? 20000 : 30000;
            char *d = malloc(k + 3);
            d[0] = '"';
            for (size_t j = 0; j < k; j++) d[1 + j] = i == 10 ? 'a' : (j % 2 ? 'b' : 'a');
            d[k + 1] = '"';
            d[k + 2] = 0;
            judge(g, s, d, k + 2, true, cases[i].re);
            d[k] = '"';
            d[k + 1] = 0;
            judge(g, s, d, k + 1, false, cases[i].re);
            free(d);
        }
        judge(g, s, cases[i].no, strlen(cases[i].no), false, cases[i].re);
        tern_grammar_free(g);
    }
    /* still refused, by name: a count above 10000 where a search could start anywhere */
    const char *bad = "{\"type\": \"object\", \"properties\": {\"code\": {\"type\": \"string\", \"pattern\": \"id-[0-9]{20000}\"}}}";
    struct tern_grammar *g = NULL;
    assert_int_equal(tern_grammar_from_json_schema(NULL, bad, strlen(bad), NULL, &g), TERN_ERR_UNSUPPORTED);
    const char *e = tern_last_error();
    if (!strstr(e, "$.properties.code.pattern") || !strstr(e, "offset 8") || !strstr(e, "id-[0-9]{20000}")) fail_msg("%s", e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_bounds),
        cmocka_unit_test(test_huge_bounds_small),
        cmocka_unit_test(test_array_bounds),
        cmocka_unit_test(test_object_bounds),
        cmocka_unit_test(test_masks_at_bounds),
        cmocka_unit_test(test_mask_cache_long_documents),
        cmocka_unit_test(test_unanchored_patterns),
    };
    return test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
