/* test_grammar_gbnf.c — GBNF: the example grammars (tests/data/grammar/gbnf, written for the
 * project to do what llama.cpp's examples json, json_arr, arithmetic, c, chess, english,
 * japanese and list are documented to do) and the parser's error reporting.
 *
 * Each example gets texts it must accept and texts it must refuse (byte level, and token by
 * token on the Qwen2 vocabulary with the mask checked against the matcher at every step), and
 * 25 random documents of its own (tern_grammar_generate) that must walk cleanly token by
 * token. Errors: every malformed grammar is refused with TERN_ERR_FORMAT (or UNSUPPORTED for
 * left recursion) and a message naming line:col. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct example {
    const char *file;
    const char *accept[8];
    const char *refuse[8];
};

static const struct example examples[] = {
    {"json.gbnf",
     {"{\"a\": [1, 2.5e-3, true, null], \"b\": {\"c\": \"d\\n\\u00e9\"}}", "[]", " \"x\" ", "-0.5", "{\n  \"k\": false\n}", NULL},
     {"{\"a\": }", "[1, 2,]", "{'a': 1}", "01", "\"\\x\"", "tru", NULL}},
    {"json_arr.gbnf",
     {"[\n{\"id\": 1, \"tags\": [\"a\"]},\n{\"id\": 2}\n]", "[\n]", "[\n  {}\n]", NULL},
     {"[{\"id\": 1}]", "[\n1,\n2\n]", "{\"id\": 1}", NULL}},
    {"arithmetic.gbnf",
     {"1 + 2 = 3\n", "3 * (x + 2) = 21\n", "a/b-c*d = -0.5\n10 = 10\n", NULL},
     {"1 + = 3\n", "1 + 2 = 3", "(1 + 2 = 3\n", "X + 1 = 2\n", NULL}},
    {"list.gbnf",
     {"- milk\n- eggs\n", "- one item with spaces, and punctuation!\n", "- été\n", NULL},
     {"milk\n", "- \n", "- a\n\n", "* a\n", "- a\r\n", NULL}},
    {"chess.gbnf",
     {"1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n", "1. d4 d5\n2. c4 dxc4\n3. e3 b5\n4. a4 c6\n5. axb5 cxb5\n6. Qf3 Qd7\n", "1. e4\n",
      "12. O-O-O Qxf7#\n13. e8=Q+\n", "1. Nbd2 R1e1\n", NULL},
     {"1. e9 e5\n", "1 e4 e5\n", "1. Zf3\n", "1. e4  e5\n", "1. O-O-O-O\n", NULL}},
    {"english.gbnf",
     {"The quick brown fox jumps over the lazy dog.", "Is it 42? Yes (mostly)!\n", NULL},
     {"the lowercase start.", "No end", "Caf\xc3\xa9 time.", "Tab\there.", NULL}},
    {"japanese.gbnf",
     {"\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf\xe3\x80\x82\n",              /* こんにちは。 */
      "\xe6\x9d\xb1\xe4\xba\xac\xe3\x82\xbf\xe3\x83\xaf\xe3\x83\xbc\xef\xbc\x91\xef\xbc\x92\n", /* 東京タワー１２ */
      NULL},
     {"hello\n", "\xe3\x81\x93\xe3\x82\x93 abc\n", "\xe3\x81\x93\xe3\x82\x93", NULL}},
    {"c.gbnf",
     {"int main() {return 0;}", "int add(int a, int b) { int s = a + b; return s;}\nvoid f() {}",
      "long fib(long n) {\n  if (n < 2) {return n;} else {return fib(n - 1) + fib(n - 2);}\n}",
      "void loop() { int i = 0; while (i < 10) { i += 1; } // done\n}", NULL},
     {"int main() {return 0}", "main() {}", "int f() { x == 1; }", "int f() {", NULL}},
};

static char *load_example(const char *file, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/gbnf/%s", test_source_dir(), file);
    char *s = test_read_file(path, len);
    if (!s) fail_msg("cannot read %s", path);
    return s;
}

static bool byte_accepts(const struct tern_grammar *g, const char *s)
{
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    bool ok = tern_grammar_matcher_accept_bytes(m, s, strlen(s), NULL) == TERN_OK && tern_grammar_matcher_is_complete(m);
    tern_grammar_matcher_free(m);
    return ok;
}

/* token-level walk: the mask must agree with the matcher at every step */
static bool token_accepts(struct tern_tokenizer *tok, const struct tern_grammar_vocab *v, const struct tern_grammar *g,
                          const char *s, size_t len, const char *what)
{
    int32_t *ids = malloc((len + 8) * sizeof *ids);
    size_t n;
    assert_tern_ok(tern_tokenize(tok, s, len, 0, ids, len + 8, &n));
    uint32_t *mask = malloc(tern_grammar_mask_words(v) * 4);
    struct tern_grammar_matcher *m;
    assert_tern_ok(tern_grammar_matcher_create(g, &m));
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        tern_grammar_matcher_fill_mask(m, mask);
        bool bit = (mask[ids[i] >> 5] >> (ids[i] & 31)) & 1;
        tern_status st = tern_grammar_matcher_accept(m, ids[i], NULL);
        if ((st == TERN_OK) != bit) fail_msg("%s: token %zu of %.60s: mask %d, matcher %d", what, i, s, bit, st == TERN_OK);
        ok = st == TERN_OK;
    }
    ok = ok && tern_grammar_matcher_is_complete(m);
    tern_grammar_matcher_free(m);
    free(mask);
    free(ids);
    return ok;
}

static void test_examples(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(vpath, "fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf");
    struct tern_tokenizer *tok;
    assert_tern_ok(tern_tokenizer_load(vpath, &tok));
    struct tern_grammar_vocab *v;
    assert_tern_ok(tern_grammar_vocab_create(tok, &v));
    for (size_t e = 0; e < sizeof examples / sizeof examples[0]; e++) {
        const struct example *x = &examples[e];
        size_t len;
        char *src = load_example(x->file, &len);
        struct tern_grammar *gb, *gt;
        if (tern_grammar_from_gbnf(NULL, src, len, NULL, &gb)) fail_msg("%s: %s", x->file, tern_last_error());
        if (tern_grammar_from_gbnf(v, src, len, NULL, &gt)) fail_msg("%s: %s", x->file, tern_last_error());
        for (int i = 0; x->accept[i]; i++) {
            if (!byte_accepts(gb, x->accept[i])) fail_msg("%s refuses %s: %s", x->file, x->accept[i], tern_last_error());
            if (!token_accepts(tok, v, gt, x->accept[i], strlen(x->accept[i]), x->file))
                fail_msg("%s refuses %s at token level", x->file, x->accept[i]);
        }
        for (int i = 0; x->refuse[i]; i++) {
            if (byte_accepts(gb, x->refuse[i])) fail_msg("%s accepts %s", x->file, x->refuse[i]);
            if (token_accepts(tok, v, gt, x->refuse[i], strlen(x->refuse[i]), x->file))
                fail_msg("%s accepts %s at token level", x->file, x->refuse[i]);
        }
        /* random documents of the grammar walk cleanly token by token */
        char *doc = malloc(1 << 16);
        for (uint64_t seed = 1; seed <= 25; seed++) {
            size_t n;
            assert_tern_ok(tern_grammar_generate(gt, seed, 20 + seed * 7, doc, 1 << 16, &n));
            if (!token_accepts(tok, v, gt, doc, n, x->file)) fail_msg("%s: its own random document %.*s refused", x->file, (int)n, doc);
        }
        free(doc);
        tern_grammar_free(gb);
        tern_grammar_free(gt);
        free(src);
    }
    tern_grammar_vocab_free(v);
    tern_tokenizer_free(tok);
}

struct bad {
    const char *gbnf;
    tern_status st;
    const char *msg;   /* substring of the message */
};

static const struct bad bads[] = {
    {"root ::= \"a\"\nroot ::= \"b\"\n", TERN_ERR_FORMAT, "line 2:1: rule 'root' is defined twice"},
    {"root ::= foo\n", TERN_ERR_FORMAT, "line 1:10: undefined rule 'foo'"},
    {"main ::= \"a\"\n", TERN_ERR_FORMAT, "no rule named 'root'"},
    {"root ::= \"abc\n", TERN_ERR_FORMAT, "line 1:10: unterminated string literal"},
    {"root ::= [a-z\n", TERN_ERR_FORMAT, "line 1:10: unterminated character class"},
    {"root ::= (\"a\" | \"b\"\n", TERN_ERR_FORMAT, "line 2:1: expected ')'"},
    {"root ::= \"a\" )\n", TERN_ERR_FORMAT, "line 1:14: unmatched ')'"},
    {"root := \"a\"\n", TERN_ERR_FORMAT, "line 1:6: expected '::=' after the rule name"},
    {"root ::= \"\\q\"\n", TERN_ERR_FORMAT, "line 1:11: unknown escape '\\q'"},
    {"root ::= [z-a]\n", TERN_ERR_FORMAT, "line 1:12: character range is reversed"},
    {"root ::= \"a\"{3,1}\n", TERN_ERR_FORMAT, "line 1:13: repetition {m,n} with n < m"},
    {"root ::= \"a\"{99999}\n", TERN_ERR_FORMAT, "repetition count above the limit"},
    {"root ::= \"\\xZZ\"\n", TERN_ERR_FORMAT, "line 1:13: expected 2 hex digits"},
    {"root ::= \"\\uD800\"\n", TERN_ERR_FORMAT, "not a Unicode scalar value"},
    {"root ::= @\n", TERN_ERR_FORMAT, "line 1:10: unexpected '@'"},
    {"\n\n   root ::= \"a\" \"b\" # ok\n  x y\n", TERN_ERR_FORMAT, "line 4:5: expected '::='"},
    {"root ::= \"\xff\"\n", TERN_ERR_FORMAT, "line 1:11: invalid UTF-8"},
    {"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n", TERN_ERR_UNSUPPORTED, "left recursion: expr -> expr"},
    {"root ::= a\na ::= b \"x\"\nb ::= c?\nc ::= a \"y\"\n", TERN_ERR_UNSUPPORTED, "left recursion"},
    {"root ::= [^\\x00-\\U0010FFFF]\n", TERN_ERR_FORMAT, "admits no document"},
    {"root ::= a\na ::= \"x\" a\n", TERN_ERR_FORMAT, "admits no document"},
};

static void test_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        struct tern_grammar *g = NULL;
        tern_status st = tern_grammar_from_gbnf(NULL, bads[i].gbnf, strlen(bads[i].gbnf), NULL, &g);
        if (st == TERN_OK) fail_msg("accepted: %s", bads[i].gbnf);
        if (st != bads[i].st || !strstr(tern_last_error(), bads[i].msg))
            fail_msg("grammar %s: got %s '%s', wanted %s containing '%s'", bads[i].gbnf, tern_status_name(st), tern_last_error(),
                     tern_status_name(bads[i].st), bads[i].msg);
        assert_null(g);
    }
}

/* GBNF features: repetition counts, classes, escapes, the `root` option, nesting, comments */
static void test_features(void **state)
{
    (void)state;
    static const struct {
        const char *gbnf, *root, *yes[4], *no[4];
    } t[] = {
        {"root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,} \"d\"{,1}\n", NULL, {"aabcc", "aabbbcccd", NULL}, {"abcc", "aabbbbcc", "aabc", "aabccdd"}},
        {"root ::= [^abc] [a-c] [\\]\\[\\-] .\n", NULL, {"xb]\xe2\x82\xac", "\xc3\xa9" "a-\n", NULL}, {"ab]x", "xd]x", "xb)x", NULL}},
        {"start ::= \"\\x41\\u00e9\\U0001F600\\t\\\"\\\\\"\n", "start", {"A\xc3\xa9\xf0\x9f\x98\x80\t\"\\", NULL}, {"A", NULL}},
        {"root ::= ( ( \"a\" | \"b\" )+ ( \"c\" )* )?\n# comment\nother ::= \"z\" # unused\n", NULL, {"", "abba", "bcc", NULL}, {"c", "abz", NULL}},
        {"root ::= x\n  | y\nx ::= \"x\"\ny ::= \"y\"\n", NULL, {NULL}, {NULL}}, /* a newline ends the rule: error */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct tern_grammar_params p = tern_grammar_default_params();
        p.root = t[i].root;
        struct tern_grammar *g;
        tern_status st = tern_grammar_from_gbnf(NULL, t[i].gbnf, strlen(t[i].gbnf), &p, &g);
        if (i == 4) { /* llama.cpp's rule: alternatives continue on a new line only inside ( ) */
            assert_int_equal(st, TERN_ERR_FORMAT);
            assert_non_null(strstr(tern_last_error(), "line 2:3"));
            continue;
        }
        if (st) fail_msg("%s: %s", t[i].gbnf, tern_last_error());
        for (int k = 0; k < 4 && t[i].yes[k]; k++)
            if (!byte_accepts(g, t[i].yes[k])) fail_msg("%s refuses '%s': %s", t[i].gbnf, t[i].yes[k], tern_last_error());
        for (int k = 0; k < 4 && t[i].no[k]; k++)
            if (byte_accepts(g, t[i].no[k])) fail_msg("%s accepts '%s'", t[i].gbnf, t[i].no[k]);
        tern_grammar_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_features),
        cmocka_unit_test(test_examples),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
