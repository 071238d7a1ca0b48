/* test_grammar_errors.c — JSON Schema input tern cannot or will not enforce: every case is
 * refused with the right status and a message naming where (line:col for JSON, the JSON path
 * for keywords), or with --schema-lenient compiled with a warning; pathological schemas and
 * regexes compile to bounded tables or hit a named limit; nothing crashes. Also the schema
 * semantics that are easy to get subtly wrong (numbers, regex anchors, escapes, allOf, oneOf,
 * $ref recursion, deep nesting) at the byte level. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bad {
    const char *schema;
    tern_status st;
    const char *msg;
    bool lenient_ok;   /* compiles with lenient (and warns) */
};

static const struct bad bads[] = {
    {"{\"type\": \"object\",\n \"properties\": {\"a\": }}", TERN_ERR_FORMAT, "line 2:22: malformed JSON", false},
    {"{\"type\": \"string\"} x", TERN_ERR_FORMAT, "line 1:20: text after the schema", false},
    {"", TERN_ERR_FORMAT, "line 1:1", false},
    {"{\"properties\": {\"when\": {\"type\": \"string\", \"format\": \"duration\"}}}", TERN_ERR_UNSUPPORTED,
     "$.properties.when.format: unsupported format \"duration\"", true},
    {"{\"properties\": {\"x\": {\"not\": {\"type\": \"null\"}}}}", TERN_ERR_UNSUPPORTED, "$.properties.x.not: unsupported keyword \"not\"", true},
    {"{\"type\": \"object\", \"patternProperties\": {\"^a\": {}}}", TERN_ERR_UNSUPPORTED, "$.patternProperties: unsupported keyword", true},
    {"{\"items\": [{\"type\": \"string\"}], \"contains\": {}}", TERN_ERR_UNSUPPORTED, "$.contains: unsupported keyword", true},
    {"{\"if\": {}, \"then\": {}}", TERN_ERR_UNSUPPORTED, "$.if: unsupported keyword", true},
    {"{\"nullable\": true, \"type\": \"string\"}", TERN_ERR_UNSUPPORTED, "$.nullable: unsupported keyword", true},
    {"{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"string\", \"maxLength\": 3}]}", TERN_ERR_UNSUPPORTED,
     "$: oneOf: branches 0 and 1 may both match", true},
    {"{\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"uniqueItems\": true}", TERN_ERR_UNSUPPORTED,
     "uniqueItems is enforced only for items", true},
    {"{\"type\": \"string\", \"pattern\": \"(a)\\\\1\"}", TERN_ERR_UNSUPPORTED, "$.pattern: pattern: pattern offset 3: backreferences are not supported", true},
    {"{\"type\": \"string\", \"pattern\": \"(?=a)b\"}", TERN_ERR_UNSUPPORTED, "lookaround is not supported", true},
    {"{\"type\": \"string\", \"pattern\": \"a^b\"}", TERN_ERR_UNSUPPORTED, "'^' is supported only at the start", true},
    {"{\"type\": \"string\", \"pattern\": \"\\\\bword\"}", TERN_ERR_UNSUPPORTED, "word boundary", true},
    {"{\"type\": \"string\", \"pattern\": \"[a-\"}", TERN_ERR_UNSUPPORTED, "unterminated character class", true},
    {"{\"type\": \"string\", \"pattern\": \"a**\"}", TERN_ERR_UNSUPPORTED, "nothing to repeat", true},
    {"{\"type\": \"string\", \"pattern\": \"(ab\"}", TERN_ERR_UNSUPPORTED, "unclosed group", true},
    {"{\"$ref\": \"other.json#/a\"}", TERN_ERR_UNSUPPORTED, "only local references", false},
    {"{\"$ref\": \"#/$defs/missing\"}", TERN_ERR_FORMAT, "$ref \"#/$defs/missing\" does not resolve", false},
    {"{\"type\": \"strin\"}", TERN_ERR_FORMAT, "$: unknown type \"strin\"", false},
    {"{\"type\": \"object\", \"properties\": {\"a\": 5}}", TERN_ERR_FORMAT, "$.properties.a: a schema must be an object or a boolean", false},
    {"{\"minLength\": -1}", TERN_ERR_FORMAT, "minLength must be a non-negative integer", false},
    /* counts are counters up to 2^31 - 1 (test_grammar_counted): a minimum past it admits nothing */
    {"{\"type\": \"string\", \"minLength\": 3000000000}", TERN_ERR_RANGE, "minLength 3000000000 is above tern's limit of 2147483647", false},
    {"{\"type\": \"array\", \"minItems\": 1e10}", TERN_ERR_RANGE, "minItems 10000000000 is above tern's limit", false},
    {"{\"type\": \"string\", \"pattern\": \"id-[0-9]{20000}\"}", TERN_ERR_UNSUPPORTED,
     "$.pattern: pattern: pattern offset 8: repetition counts above 10000 need a pattern anchored at the start", true},
    {"{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"], \"additionalProperties\": false}", TERN_ERR_FORMAT,
     "required property \"b\" is not allowed", false},
    {"{\"type\": \"string\", \"minLength\": 5, \"maxLength\": 2}", TERN_ERR_FORMAT, "admits no document", false},
    {"{\"enum\": []}", TERN_ERR_FORMAT, "admits no document", false},
    {"false", TERN_ERR_FORMAT, "admits no document", false},
    {"{\"anyOf\": [{\"$ref\": \"#\"}]}", TERN_ERR_UNSUPPORTED, "left recursion", false},
    {"{\"type\": \"number\", \"multipleOf\": 0}", TERN_ERR_FORMAT, "multipleOf must be greater than 0", false},
    {"{\"type\": \"integer\", \"multipleOf\": 1234567}", TERN_ERR_RANGE, "multipleOf 1234567", false},
    {"{\"allOf\": [{\"pattern\": \"^a\"}, {\"pattern\": \"b$\"}]}", TERN_ERR_UNSUPPORTED, "allOf: two different \"pattern\" values", true},
    {"{\"type\": \"string\", \"const\": \"\\u00e9\", \"minLength\": 2}", TERN_ERR_FORMAT, "admits no document", false},
};

static void test_bad_schemas(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        struct tern_grammar *g = NULL;
        struct tern_grammar_params p = tern_grammar_default_params();
        tern_status st = tern_grammar_from_json_schema(NULL, bads[i].schema, strlen(bads[i].schema), &p, &g);
        if (st == TERN_OK) fail_msg("accepted: %s", bads[i].schema);
        if (st != bads[i].st || !strstr(tern_last_error(), bads[i].msg))
            fail_msg("%s: got %s '%s', wanted %s with '%s'", bads[i].schema, tern_status_name(st), tern_last_error(),
                     tern_status_name(bads[i].st), bads[i].msg);
        assert_null(g);
        p.lenient = true;
        st = tern_grammar_from_json_schema(NULL, bads[i].schema, strlen(bads[i].schema), &p, &g);
        if (bads[i].lenient_ok) {
            if (st) fail_msg("lenient refused %s: %s", bads[i].schema, tern_last_error());
            const char *w = tern_grammar_warnings(g);
            if (!w || (!strstr(w, "ignored") && !strstr(w, "not enforced"))) fail_msg("lenient without a warning: %s", bads[i].schema);
            tern_grammar_free(g);
        } else if (st == TERN_OK) {
            fail_msg("lenient accepted %s", bads[i].schema);
        }
    }
}

static bool accepts(const struct tern_grammar *g, const char *s)
{
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    bool ok = !tern_grammar_matcher_accept_bytes(m, s, strlen(s), NULL) && tern_grammar_matcher_is_complete(m);
    tern_grammar_matcher_free(m);
    return ok;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* pathological input: bounded, or a named limit */
static void test_pathological(void **state)
{
    (void)state;
    /* nesting: 200 levels compile; 300 hit the depth limit */
    for (int depth = 200; depth <= 300; depth += 100) {
        size_t cap = (size_t)depth * 64 + 64, n = 0;
        char *s = malloc(cap);
        for (int i = 0; i < depth; i++) n += (size_t)sprintf(s + n, "{\"type\": \"array\", \"items\": ");
        n += (size_t)sprintf(s + n, "{\"type\": \"integer\"}");
        for (int i = 0; i < depth; i++) s[n++] = '}';
        s[n] = 0;
        struct tern_grammar *g = NULL;
        tern_status st = tern_grammar_from_json_schema(NULL, s, n, NULL, &g);
        if (depth == 200) {
            if (st) fail_msg("depth 200: %s", tern_last_error());
            char *doc = malloc((size_t)depth * 2 + 4);
            memset(doc, '[', (size_t)depth);
            doc[depth] = '7';
            memset(doc + depth + 1, ']', (size_t)depth);
            doc[2 * depth + 1] = 0;
            assert_true(accepts(g, doc));
            doc[depth] = 'x';
            assert_false(accepts(g, doc));
            free(doc);
            tern_grammar_free(g);
        } else {
            assert_int_equal(st, TERN_ERR_RANGE);
            assert_non_null(strstr(tern_last_error(), "nested deeper than 256"));
        }
        free(s);
    }
    /* a huge enum: 20000 values is over the limit; 5000 compile */
    for (int nv = 5000; nv <= 20000; nv += 15000) {
        size_t cap = (size_t)nv * 16 + 32, n = 0;
        char *s = malloc(cap);
        n += (size_t)sprintf(s, "{\"enum\": [");
        for (int i = 0; i < nv; i++) n += (size_t)sprintf(s + n, "%s\"v%d\"", i ? ", " : "", i);
        n += (size_t)sprintf(s + n, "]}");
        struct tern_grammar *g = NULL;
        double t0 = now_ms();
        tern_status st = tern_grammar_from_json_schema(NULL, s, n, NULL, &g);
        double dt = now_ms() - t0;
        if (nv == 5000) {
            if (st) fail_msg("5000 values: %s", tern_last_error());
            assert_true(accepts(g, "\"v4999\""));
            assert_false(accepts(g, "\"v5000\""));
            tern_grammar_free(g);
        } else {
            assert_int_equal(st, TERN_ERR_RANGE);
            assert_non_null(strstr(tern_last_error(), "enum with more than 10000 values"));
        }
        print_message("enum of %d: %.0f ms\n", nv, dt);
        free(s);
    }
    /* regexes whose DFA would explode or that backtracking engines choke on */
#define X10 "xxxxxxxxxx"
#define X600 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 \
    X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 \
    X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10
    static const struct { const char *re, *yes, *no; } res[] = {
        {"^(a|b)*a(a|b){18}$", "\"abbbbbbbbbbbbbbbbbb\"", "\"bbbbbbbbbbbbbbbbbbb\""},
        {"^(a+)+$", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaab\""},
        {"^(x+x+)+y$", "\"xxxxy\"", "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\""},
        {"^.{0,5000}$", "\"short\"", "\"\\n\""},
        {"(ab|a)*c", "\"zzabac!\"", "\"zzabab\""},
        /* unanchored counted repetitions: the subset construction gives up on its work budget
         * (closures of hundreds of members) and the rule is kept as an NFA */
        {"a.{600}b", "\"xa" X600 "bx\"", "\"a" X600 "xb\""},
        {"(.|..){0,100}x", "\"x\"", "\"yy\""},
        /* searches whose open ends are trimmed (an item that may match nothing, x{m,n} -> x{m}):
         * refused as too ambiguous before */
        {"(.{0,30}){0,30}z", "\"--z--\"", "\"--y--\""},
        {"x.{0,4000}", "\"axb\"", "\"ab\""},
        {"(.|..){0,500}x", "\"x\"", "\"yy\""},
        /* nested counts: counters, not copies */
        {"^((a|b){100}){100}$", NULL, "\"ab\""},
    };
    for (size_t i = 0; i < sizeof res / sizeof res[0]; i++) {
        char s[256];
        snprintf(s, sizeof s, "{\"type\": \"string\", \"pattern\": \"%s\"}", res[i].re);
        struct tern_grammar *g;
        double t0 = now_ms();
        if (tern_grammar_from_json_schema(NULL, s, strlen(s), NULL, &g)) fail_msg("%s: %s", res[i].re, tern_last_error());
        double dt = now_ms() - t0;
        struct tern_grammar_info gi;
        tern_grammar_get_info(g, &gi);
        print_message("pattern %s: %.0f ms, %zu table bytes, %u nodes\n", res[i].re, dt, gi.table_bytes, gi.n_nodes);
        /* bounded in what the compiler built, not in the time it took (a busy machine stretches
         * that; no unit test asserts a timing): the largest here, a.{600}b, is 3.6 MB */
        if (gi.table_bytes > (size_t)16 << 20) fail_msg("%s: %zu bytes of tables", res[i].re, gi.table_bytes);
        if (res[i].yes && !accepts(g, res[i].yes)) fail_msg("%s refuses %s: %s", res[i].re, res[i].yes, tern_last_error());
        if (accepts(g, res[i].no)) fail_msg("%s accepts %s", res[i].re, res[i].no);
        tern_grammar_free(g);
    }
    /* ... and ones too ambiguous even for an NFA of bounded size: refused, quickly, naming the
     * schema path and the pattern (a counted repetition of one that may take anything inside
     * another, where the ends do not let the search trim it) */
    static const char *const refused[] = {"^(.{0,30}){0,30}z$", "a(.{0,30}){0,30}z"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char s[256];
        snprintf(s, sizeof s, "{\"type\": \"string\", \"pattern\": \"%s\"}", refused[i]);
        struct tern_grammar *g = NULL;
        double t0 = now_ms();
        tern_status st = tern_grammar_from_json_schema(NULL, s, strlen(s), NULL, &g);
        print_message("pattern %s: %.0f ms (refused)\n", refused[i], now_ms() - t0);
        if (st != TERN_ERR_RANGE) fail_msg("%s: status %d, expected a refusal", refused[i], (int)st);
        char named[128];
        snprintf(named, sizeof named, "(pattern \"%s\"", refused[i]);
        if (!strstr(tern_last_error(), "too ambiguous") || !strstr(tern_last_error(), "$.pattern: pattern:") ||
            !strstr(tern_last_error(), named))
            fail_msg("%s: %s", refused[i], tern_last_error());
    }
    /* a grammar that compiles but keeps thousands of parse stacks alive (sentences whose body
     * can hold the separator and the end mark, 652 of them): the matcher still judges text, and
     * tern_grammar_generate gives up within its budget instead of stepping for a minute
     * (fuzz_gbnf found it; tests/fuzz/regress/gbnf/ambiguous-sentences-generate) */
    static const char ambiguous[] = "root ::= sentence ( \" \" sentence ){651}\n"
                                    "sentence ::= [A-Z] body [.!?]\n"
                                    "body ::= [a-zA-Z0-9 ,;=!'\"()-]{1,300}\n";
    struct tern_grammar *g = NULL;
    assert_tern_ok(tern_grammar_from_gbnf(NULL, ambiguous, strlen(ambiguous), NULL, &g));
    assert_true(accepts(g, "A b. C d!") == false); /* 2 of 652 sentences: a prefix, not a document */
    char *doc = malloc(4096);
    size_t n = 0;
    for (int i = 0; i < 652; i++) n += (size_t)sprintf(doc + n, "%sA b%c", i ? " " : "", i % 2 ? '!' : '.');
    assert_true(accepts(g, doc));
    doc[n - 1] = ',';
    assert_false(accepts(g, doc));
    n = 0;
    double t0 = now_ms();
    tern_status st = tern_grammar_generate(g, 1, 24, doc, 4096, &n);
    print_message("generate from an ambiguous grammar: %.0f ms, %s\n", now_ms() - t0, st ? tern_last_error() : "ok");
    assert_int_equal(st, TERN_ERR_RANGE);
    assert_non_null(strstr(tern_last_error(), "too ambiguous"));
    free(doc);
    tern_grammar_free(g);
}

/* semantics that are easy to get wrong, at the byte level */
static void test_semantics(void **state)
{
    (void)state;
    static const struct { const char *schema, *yes[10], *no[10]; } t[] = {
        /* scientific notation under bounds: 1e-3 is 0.001, in range (refused before: the bounds'
         * comparison read positional digits only); 2.6e-1 is 0.26, above; -0 and -0.0 equal 0 */
        {"{\"type\": \"number\", \"exclusiveMinimum\": -1.5, \"maximum\": 0.25}",
         {"-1.49", "0.25", "0", "-1", "0.250", "-1.4999999999", "1e-3", "-1.49E+0", "-0", "-0.0"},
         {"-1.5", "0.26", "-1.51", "1", "0.2500001", "2.6e-1", "-1.5e0", "-1.5e-0", "0.1e1", "1e"}},
        {"{\"type\": \"number\", \"minimum\": 0}", {"0", "-0.0", "1e-12", NULL}, {"-1e-12", "-0.1", NULL}},
        {"{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 1000, \"multipleOf\": 25}",
         {"0", "25", "1000", "975", NULL}, {"10", "1025", "-25", "25.0", NULL}},
        {"{\"type\": \"number\", \"multipleOf\": 0.1, \"minimum\": 0, \"exclusiveMaximum\": 1}",
         {"0.1", "0.9", "0.50", "0", "0.3", NULL}, {"0.15", "1", "1.0", "0.95", NULL}},
        {"{\"type\": \"number\", \"minimum\": 1e-3, \"maximum\": 2e2}", {"0.001", "200", "0.0010", NULL}, {"0.0009", "200.01", NULL}},
        {"{\"type\": \"number\"}", {"-0", "1.5e+10", "2E-3", "0.0", NULL}, {"01", ".5", "1.", "+1", "1e", NULL}},
        {"{\"type\": \"string\", \"pattern\": \"^\\\\$[0-9]+(\\\\.[0-9]{2})?$\"}", {"\"$5\"", "\"$10.99\"", NULL}, {"\"5\"", "\"$1.5\"", NULL}},
        {"{\"type\": \"string\", \"pattern\": \"^[\\\\\\\\\\\"]+$\"}", {"\"\\\\\\\"\"", "\"\\\\\"", NULL}, {"\"a\"", "\"\"", NULL}},
        {"{\"type\": \"string\", \"maxLength\": 2}", {"\"\\u00e9\\n\"", "\"\\ud83d\\ude00x\"", "\"\xf0\x9f\x98\x80\xc3\xa9\"", NULL},
         {"\"abc\"", "\"\\ud83d\"", "\"\\u00e9\\n!\"", NULL}},
        {"{\"allOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"additionalProperties\": false},"
         " {\"properties\": {\"b\": {\"type\": \"string\"}}}]}",
         {"{\"a\": 1}", "{}", NULL}, {"{\"b\": \"x\"}", "{\"a\": 1, \"b\": \"x\"}", NULL}},
        {"{\"type\": \"object\", \"properties\": {\"n\": {\"$ref\": \"#\"}, \"v\": {\"type\": \"integer\"}}, \"required\": [\"v\"], \"additionalProperties\": false}",
         {"{\"v\": 1}", "{\"n\": {\"n\": {\"v\": 3}, \"v\": 2}, \"v\": 1}", NULL}, {"{\"n\": {}, \"v\": 1}", NULL}},
        {"{\"type\": [\"integer\", \"boolean\", \"null\"]}", {"7", "true", "null", NULL}, {"7.5", "\"7\"", NULL}},
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}}}", {"{\"a\": 1}", "\"any string\"", "[1, {}]", "3.5", "{\"a\": 2, \"b\": null}", NULL},
         {"{\"a\": \"x\"}", "{\"b\": 1, \"a\": 1}", NULL}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct tern_grammar *g;
        if (tern_grammar_from_json_schema(NULL, t[i].schema, strlen(t[i].schema), NULL, &g)) fail_msg("%s: %s", t[i].schema, tern_last_error());
        for (int k = 0; k < 10 && t[i].yes[k]; k++)
            if (!accepts(g, t[i].yes[k])) fail_msg("%s refuses %s: %s", t[i].schema, t[i].yes[k], tern_last_error());
        for (int k = 0; k < 10 && t[i].no[k]; k++)
            if (accepts(g, t[i].no[k])) fail_msg("%s accepts %s", t[i].schema, t[i].no[k]);
        tern_grammar_free(g);
    }
    /* whitespace policies */
    const char *s = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}}}, \"additionalProperties\": false}";
    static const struct { enum tern_grammar_ws ws; const char *yes, *no; } w[] = {
        {TERN_GRAMMAR_WS_COMPACT, "{\"a\": [1, 2]}", "{\"a\":[1,2]}"},
        {TERN_GRAMMAR_WS_MINIFIED, "{\"a\":[1,2]}", "{\"a\": [1, 2]}"},
        {TERN_GRAMMAR_WS_FLEXIBLE, "{\n  \"a\" : [ 1 ,\n 2 ]\n}", "{\"a\": [1, 2]                         }"},
    };
    for (size_t i = 0; i < 3; i++) {
        struct tern_grammar_params p = tern_grammar_default_params();
        p.ws = w[i].ws;
        struct tern_grammar *g;
        assert_tern_ok(tern_grammar_from_json_schema(NULL, s, strlen(s), &p, &g));
        if (!accepts(g, w[i].yes)) fail_msg("ws %d refuses %s", (int)w[i].ws, w[i].yes);
        if (accepts(g, w[i].no)) fail_msg("ws %d accepts %s", (int)w[i].ws, w[i].no);
        tern_grammar_free(g);
    }
    /* strict properties: absent additionalProperties means none */
    struct tern_grammar_params p = tern_grammar_default_params();
    p.strict_properties = true;
    const char *open = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}";
    struct tern_grammar *g;
    assert_tern_ok(tern_grammar_from_json_schema(NULL, open, strlen(open), &p, &g));
    assert_true(accepts(g, "{\"a\": 1}"));
    assert_false(accepts(g, "{\"a\": 1, \"b\": 2}"));
    tern_grammar_free(g);
    /* ... but an object that declares no properties stays free-form */
    const char *bare = "{\"type\": \"object\"}";
    assert_tern_ok(tern_grammar_from_json_schema(NULL, bare, strlen(bare), &p, &g));
    assert_true(accepts(g, "{\"b\": [2]}"));
    tern_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_schemas),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_pathological),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
