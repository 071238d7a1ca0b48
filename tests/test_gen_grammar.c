/* test_gen_grammar.c — grammar-constrained generation (tern_gen_params.grammar) on the fixture
 * models: sampled outputs at temperature 1 over many seeds parse (cJSON) and validate against
 * their schema (grammar_validator.h, written from the JSON Schema spec without tern's grammar
 * code); forced tokens are counted and a fully forced document costs no sampling; running out
 * of tokens inside a document says so; a draft (ngram lookup, self:q4_0) changes nothing at
 * temperature 0 and drafts the grammar refuses are cut; wrong grammars are refused. */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gen/spec.h"
#include "grammar_validator.h"

/* Schemas in the shapes tool calls use; strings and arrays bounded so a random model finishes
 * most documents within the token budget. */
static const char *const SCHEMAS[] = {
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12},"
    "\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]},\"days\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":14}},\"required\":[\"city\",\"unit\"],\"additionalProperties\":false}",

    "{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":10},"
    "\"filters\":{\"type\":\"object\",\"properties\":{\"lang\":{\"enum\":[\"en\",\"de\",\"fr\"]},"
    "\"safe\":{\"type\":\"boolean\"}},\"required\":[\"lang\"],\"additionalProperties\":false},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50}},\"required\":[\"query\",\"filters\"],"
    "\"additionalProperties\":false}",

    "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-100,\"maximum\":100},"
    "\"minItems\":1,\"maxItems\":4}",

    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":[\"integer\",\"null\"],\"minimum\":0,\"maximum\":999},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"uniqueItems\":true,"
    "\"maxItems\":3},\"when\":{\"type\":\"string\",\"format\":\"date\"}},\"required\":[\"id\",\"tags\"],"
    "\"additionalProperties\":false}",

    "{\"type\":\"object\",\"properties\":{\"op\":{\"const\":\"move\"},\"to\":{\"anyOf\":["
    "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
    "\"y\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}},\"required\":[\"x\",\"y\"],\"additionalProperties\":false},"
    "{\"enum\":[\"home\",\"away\"]}]}},\"required\":[\"op\",\"to\"],\"additionalProperties\":false}",
};
#define N_SCHEMAS (int)(sizeof SCHEMAS / sizeof *SCHEMAS)

static const char *const MODELS[] = {"fixtures/models/qwen2-tiny-q8_0.gguf",
                                     "fixtures/models/llama-spm-tiny-q8_0.gguf"};

struct fx {
    struct tern_model *m;
    struct tern_tokenizer *tok;
    struct tern_context *ctx;
    struct tern_generator *gen;
    struct tern_grammar_vocab *v;
    int32_t prompt[64];
    int n_prompt;
};

static void fx_open(struct fx *f, const char *path, const char *prompt)
{
    memset(f, 0, sizeof *f);
    assert_tern_ok(tern_model_load(path, NULL, &f->m));
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(f->m), &f->tok));
    struct tern_context_params cp = {.n_ctx = 512, .n_threads = 2};
    assert_tern_ok(tern_context_create(f->m, &cp, &f->ctx));
    assert_tern_ok(tern_generator_create(f->ctx, f->tok, &f->gen));
    assert_tern_ok(tern_grammar_vocab_create(f->tok, &f->v));
    size_t n = 0;
    assert_tern_ok(tern_tokenize(f->tok, prompt, strlen(prompt), TERN_TOK_ADD_SPECIAL, f->prompt, 64, &n));
    f->n_prompt = (int)n;
}

static void fx_close(struct fx *f)
{
    tern_grammar_vocab_free(f->v);
    tern_generator_free(f->gen);
    tern_context_free(f->ctx);
    tern_tokenizer_free(f->tok);
    tern_model_free(f->m);
}

struct out {
    char text[8192];
    size_t n;
    int32_t toks[512];
    int n_toks;
};
static int on_piece(const char *t, size_t len, void *user)
{
    struct out *o = user;
    if (o->n + len < sizeof o->text) {
        memcpy(o->text + o->n, t, len);
        o->n += len;
        o->text[o->n] = 0;
    }
    return 0;
}
static int on_token(int32_t id, void *user)
{
    struct out *o = user;
    if (o->n_toks < 512) o->toks[o->n_toks++] = id;
    return 0;
}

static void gen(struct fx *f, const struct tern_grammar *g, float temp, uint64_t seed, int max_tokens,
                struct tern_draft *d, struct out *o, struct tern_gen_stats *st)
{
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = temp;
    sp.seed = seed;
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(f->m), &s));
    assert_tern_ok(tern_generator_set_draft(f->gen, d));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = max_tokens;
    gp.grammar = g;
    gp.on_token = on_token;
    memset(o, 0, sizeof *o);
    tern_generator_reset(f->gen);
    assert_tern_ok(tern_generate(f->gen, s, f->prompt, f->n_prompt, &gp, on_piece, o, st));
    assert_tern_ok(tern_generator_set_draft(f->gen, NULL));
    tern_sampler_free(s);
}

/* Every completed output parses and validates; incomplete ones say so and are prefixes. */
static void test_sampled_outputs_validate(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(root, "fixtures/models");
    (void)root;
    for (int mi = 0; mi < 2; mi++) {
        struct fx f;
        fx_open(&f, test_shared_path(MODELS[mi]), "Reply with JSON: ");
        for (int si = 0; si < N_SCHEMAS; si++) {
            struct tern_grammar *g;
            assert_tern_ok(tern_grammar_from_json_schema(f.v, SCHEMAS[si], strlen(SCHEMAS[si]), NULL, &g));
            cJSON *schema = cJSON_Parse(SCHEMAS[si]);
            assert_non_null(schema);
            int complete = 0, forced = 0;
            const int seeds = 40;
            for (int seed = 1; seed <= seeds; seed++) {
                struct out o;
                struct tern_gen_stats st;
                gen(&f, g, 1.0f, (uint64_t)seed, 96, NULL, &o, &st);
                assert_int_equal(st.n_generated, o.n_toks);
                assert_true(st.grammar_masks > 0 || st.grammar_forced == st.n_generated);
                assert_true(st.grammar_forced <= st.n_generated);
                assert_true(st.grammar_mask_ms >= 0 && st.grammar_ms >= st.grammar_mask_ms);
                forced += st.grammar_forced;
                if (st.incomplete) {
                    /* only running out of tokens leaves a document open here */
                    assert_int_equal(st.stop, TERN_GEN_STOP_MAX_TOKENS);
                    assert_int_equal(st.n_generated, 96);
                    continue;
                }
                assert_true(st.stop == TERN_GEN_STOP_DONE || st.stop == TERN_GEN_STOP_EOG);
                const char *end = NULL;
                cJSON *x = cJSON_ParseWithOpts(o.text, &end, true);
                if (!x || !gv_valid(schema, schema, x, 0))
                    fail_msg("model %s schema %d seed %d: %s output does not validate: %s", MODELS[mi], si,
                             seed, x ? "parsed" : "unparsable", o.text);
                cJSON_Delete(x);
                complete++;
            }
            /* a constraint that never lets a document finish would pass the loop above vacuously */
            if (complete < seeds / 2) fail_msg("model %s schema %d: only %d of %d documents completed", MODELS[mi], si, complete, seeds);
            assert_true(forced > 0);
            print_message("model %s schema %d: %d/%d complete, %d forced tokens\n", MODELS[mi], si, complete, seeds, forced);
            cJSON_Delete(schema);
            tern_grammar_free(g);
        }
        fx_close(&f);
    }
}

/* A document the grammar fixes entirely costs no sampling: every token is forced, any seed and
 * temperature gives the same text, and generation stops by itself. */
static void test_forced_document(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    struct fx f;
    fx_open(&f, path, "Reply with JSON: ");
    const char *schema = "{\"const\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":[1,2]}}}";
    const char *want = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}";
    struct tern_grammar *g;
    assert_tern_ok(tern_grammar_from_json_schema(f.v, schema, strlen(schema), NULL, &g));
    for (int seed = 0; seed < 4; seed++) {
        struct out o;
        struct tern_gen_stats st;
        gen(&f, g, seed ? 1.5f : 0.0f, (uint64_t)seed, 64, NULL, &o, &st);
        assert_string_equal(o.text, want);
        assert_int_equal(st.stop, TERN_GEN_STOP_DONE);
        assert_false(st.incomplete);
        assert_int_equal(st.grammar_forced, st.n_generated);
        /* the tokens are the vocabulary's longest matches: fewer than the bytes */
        assert_true(st.n_generated > 4 && st.n_generated < (int)strlen(want));
    }
    /* a forced prefix, then a choice: the prefix is forced, the rest sampled */
    const char *s2 = "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},"
                     "\"n\":{\"type\":\"integer\",\"minimum\":10,\"maximum\":99}},\"required\":[\"name\",\"n\"],"
                     "\"additionalProperties\":false}";
    struct tern_grammar *g2;
    assert_tern_ok(tern_grammar_from_json_schema(f.v, s2, strlen(s2), NULL, &g2));
    struct out o;
    struct tern_gen_stats st;
    gen(&f, g2, 1.0f, 3, 64, NULL, &o, &st);
    assert_int_equal(strncmp(o.text, "{\"name\": \"get_weather\", \"n\": ", 29), 0);
    assert_true(st.grammar_forced > 3);
    assert_true(st.grammar_forced < st.n_generated);
    assert_int_equal(st.stop, TERN_GEN_STOP_DONE);
    tern_grammar_free(g2);
    tern_grammar_free(g);
    fx_close(&f);
}

/* Out of tokens inside a document: stop max_tokens, marked incomplete; the same document with
 * room finishes; max_tokens 0 with a grammar is an open (empty) document. */
static void test_max_tokens_inside(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    struct fx f;
    fx_open(&f, path, "Reply with JSON: ");
    const char *schema = "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\",\"maxLength\":40}},"
                         "\"required\":[\"text\"],\"additionalProperties\":false}";
    struct tern_grammar *g;
    assert_tern_ok(tern_grammar_from_json_schema(f.v, schema, strlen(schema), NULL, &g));
    struct out o;
    struct tern_gen_stats st;
    gen(&f, g, 1.0f, 5, 6, NULL, &o, &st);
    assert_int_equal(st.stop, TERN_GEN_STOP_MAX_TOKENS);
    assert_true(st.incomplete);
    assert_int_equal(st.n_generated, 6);
    assert_int_equal(strncmp(o.text, "{\"text\": \"", 10), 0);
    assert_null(cJSON_Parse(o.text));
    gen(&f, g, 1.0f, 5, 0, NULL, &o, &st);
    assert_int_equal(st.n_generated, 0);
    assert_true(st.incomplete);
    gen(&f, g, 0.0f, 5, 200, NULL, &o, &st);
    assert_false(st.incomplete);
    assert_int_equal(st.stop, TERN_GEN_STOP_DONE);
    cJSON *x = cJSON_Parse(o.text);
    assert_non_null(x);
    cJSON_Delete(x);
    /* without a grammar nothing is ever marked incomplete */
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(f.m), &s));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 4;
    assert_tern_ok(tern_generate(f.gen, s, f.prompt, f.n_prompt, &gp, NULL, NULL, &st));
    assert_false(st.incomplete);
    assert_int_equal(st.grammar_masks, 0);
    tern_sampler_free(s);
    tern_grammar_free(g);
    fx_close(&f);
}

static tern_status make_draft(const struct tern_model *m, const char *src, struct tern_draft **d)
{
    struct tern_draft_params dp = tern_draft_default_params();
    dp.source = src;
    /* fixed length (never switches off, so drafts keep being checked), short: the grammar often
     * cuts a draft after a token or two, and a cut draft shorter than n_min is not verified */
    dp.n_min = dp.n_max = 2;
    dp.n_ctx = 512;
    dp.n_threads = 1;
    return tern_draft_create(m, &dp, d);
}

/* Temperature 0: a draft changes nothing (tokens, stop, forced count); the ngram lookup, fed a
 * prompt full of JSON, proposes tokens the grammar refuses and they are cut before the pass. */
static void test_spec_equal(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(root, "fixtures/models");
    (void)root;
    const char *srcs[] = {"ngram", "self:q4_0"};
    for (int mi = 0; mi < 2; mi++) {
        struct fx f;
        fx_open(&f, test_shared_path(MODELS[mi]),
                "{\"city\": \"Paris\", \"unit\": \"celsius\"} {\"query\": \"a\", \"filters\": {\"lang\": \"en\"}} [1, 2, 3]");
        int refused = 0, drafted = 0;
        for (int si = 0; si < N_SCHEMAS; si++) {
            struct tern_grammar *g;
            assert_tern_ok(tern_grammar_from_json_schema(f.v, SCHEMAS[si], strlen(SCHEMAS[si]), NULL, &g));
            struct out plain, sp;
            struct tern_gen_stats a, b;
            gen(&f, g, 0.0f, 1, 80, NULL, &plain, &a);
            for (int k = 0; k < 2; k++) {
                struct tern_draft *d;
                assert_tern_ok(make_draft(f.m, srcs[k], &d));
                gen(&f, g, 0.0f, 1, 80, d, &sp, &b);
                if (plain.n_toks != sp.n_toks || memcmp(plain.toks, sp.toks, sizeof(int32_t) * (size_t)plain.n_toks))
                    fail_msg("model %s schema %d draft %s: %s\nvs plain: %s", MODELS[mi], si, srcs[k], sp.text, plain.text);
                assert_int_equal(a.stop, b.stop);
                assert_int_equal(a.incomplete, b.incomplete);
                assert_int_equal(a.grammar_forced, b.grammar_forced);
                assert_true(b.spec_exact);
                refused += b.grammar_draft_refused;
                drafted += b.spec_drafted;
                tern_draft_free(d);
            }
            tern_grammar_free(g);
        }
        print_message("model %s: %d drafts verified, %d refused by the grammar before the pass\n", MODELS[mi], drafted, refused);
        assert_true(drafted > 0);
        assert_true(refused > 0);
        fx_close(&f);
    }
}

/* ids of text (no special tokens) appended to h[*n..] */
static void push_text(struct tern_tokenizer *tok, const char *text, int32_t *h, int *n, int cap)
{
    size_t got = 0;
    assert_tern_ok(tern_tokenize(tok, text, strlen(text), 0, h + *n, (size_t)(cap - *n), &got));
    *n += (int)got;
}

/* The lookup under a grammar (gen_grammar_draft): a value the answer copies from the request in
 * another tokenization is drafted from the request's text, the draft runs on through what the
 * grammar forces, every drafted token is one the grammar takes in order, and the matcher is left
 * as it was. The ground truth is the text: the drafted tokens must spell the request's words. */
static void test_lookup_under_grammar(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    struct fx f;
    fx_open(&f, path, "x");
    const char *schema = "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"city\":"
                         "{\"type\":\"string\"}},\"required\":[\"city\"],\"additionalProperties\":false}}";
    struct tern_grammar *g;
    assert_tern_ok(tern_grammar_from_json_schema(f.v, schema, strlen(schema), NULL, &g));
    struct tern_tokenizer *own;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(f.m), &own));
    struct spec_source *src;
    assert_tern_ok(spec_ngram_create(1, 4, tern_model_n_vocab(f.m), own, true, &src));
    assert_tern_ok(src->ops->prepare(src, 256));
    static const struct {
        const char *answer; /* the output so far, after the request */
        const char *want;   /* the draft must spell at least this */
    } cases[] = {
        /* " Marrakech" in the request, "Mar" in the answer: no earlier token sequence matches */
        {"[{\"city\": \"Mar", "rakech"},
        /* the next city, from the request */
        {"[{\"city\": \"Marrakech\"}, {\"city\": \"Ber", "gen"},
        /* through the forced key `ty": "` (the grammar's), then the value the first call had */
        {"[{\"city\": \"Marrakech\"}, {\"ci", "ty\": \"Marrakech"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        int32_t hist[256];
        int n = 0;
        push_text(f.tok, "Weather in Marrakech and Bergen please.\n", hist, &n, 200);
        const int n_req = n;
        push_text(f.tok, cases[ci].answer, hist, &n, 200);
        struct gen_grammar gr = {0};
        assert_tern_ok(gen_grammar_begin(&gr, g));
        for (int i = n_req; i < n; i++) assert_tern_ok(tern_grammar_matcher_accept(gr.m, hist[i], NULL));
        const int steps = tern_grammar_matcher_n_steps(gr.m);
        int32_t d[16];
        int k = 0, cls = -1;
        assert_tern_ok(gen_grammar_draft(&gr, src, hist, n, 16, d, &k, &cls));
        assert_int_equal(tern_grammar_matcher_n_steps(gr.m), steps);
        assert_true(cls >= 0 && cls < SPEC_N_CLASS);
        char text[512];
        size_t len = 0;
        assert_tern_ok(tern_detokenize(f.tok, d, (size_t)k, 0, text, sizeof text - 1, &len));
        text[len] = 0;
        print_message("answer %s -> draft of %d tokens: %s\n", cases[ci].answer, k, text);
        assert_true(strncmp(text, cases[ci].want, strlen(cases[ci].want)) == 0);
        for (int i = 0; i < k; i++) assert_tern_ok(tern_grammar_matcher_accept(gr.m, d[i], NULL));
        gen_grammar_free(&gr);
    }
    /* the first case must not be a token copy: the request spells "Mar" another way */
    int32_t a[64], b[64];
    int na = 0, nb = 0;
    push_text(f.tok, "Weather in Marrakech", a, &na, 64);
    push_text(f.tok, "[{\"city\": \"Mar", b, &nb, 64);
    for (int i = 0; i < na; i++) assert_int_not_equal(a[i], b[nb - 1]);
    src->ops->free(src);
    tern_grammar_free(g);
    fx_close(&f);
}

/* Sampling with a draft: outputs still validate (the verifier masks every drafted position). */
static void test_spec_sampled_validate(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    struct fx f;
    fx_open(&f, path, "{\"city\": \"Rome\", \"unit\": \"celsius\", \"days\": 3} {\"city\": \"Oslo\", \"unit\": \"celsius\"}");
    struct tern_grammar *g;
    assert_tern_ok(tern_grammar_from_json_schema(f.v, SCHEMAS[0], strlen(SCHEMAS[0]), NULL, &g));
    cJSON *schema = cJSON_Parse(SCHEMAS[0]);
    struct tern_draft *d;
    assert_tern_ok(make_draft(f.m, "ngram", &d));
    int complete = 0;
    for (int seed = 1; seed <= 20; seed++) {
        struct out o;
        struct tern_gen_stats st;
        gen(&f, g, 1.0f, (uint64_t)seed, 96, d, &o, &st);
        if (st.incomplete) continue;
        cJSON *x = cJSON_ParseWithOpts(o.text, NULL, true);
        if (!x || !gv_valid(schema, schema, x, 0)) fail_msg("seed %d: does not validate: %s", seed, o.text);
        cJSON_Delete(x);
        complete++;
    }
    assert_true(complete >= 10);
    tern_draft_free(d);
    cJSON_Delete(schema);
    tern_grammar_free(g);
    fx_close(&f);
}

/* A grammar compiled for another vocabulary, or for none, is refused naming both sizes. */
static void test_wrong_grammar(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(other, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    char other_path[4096]; /* test_shared_path's buffer is reused below */
    snprintf(other_path, sizeof other_path, "%s", other);
    struct fx f;
    fx_open(&f, test_shared_path("fixtures/models/qwen2-tiny-q8_0.gguf"), "x");
    struct tern_tokenizer *t2;
    assert_tern_ok(tern_tokenizer_load(other_path, &t2));
    struct tern_grammar_vocab *v2;
    assert_tern_ok(tern_grammar_vocab_create(t2, &v2));
    struct tern_grammar *g2, *g0;
    assert_tern_ok(tern_grammar_from_json_schema(v2, "{\"type\":\"integer\"}", 18, NULL, &g2));
    assert_tern_ok(tern_grammar_from_json_schema(NULL, "{\"type\":\"integer\"}", 18, NULL, &g0));
    struct tern_sampler_params sp = tern_sampler_default_params();
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(f.m), &s));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.grammar = g2;
    assert_int_equal(tern_generate(f.gen, s, f.prompt, f.n_prompt, &gp, NULL, NULL, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "32000"));
    assert_non_null(strstr(tern_last_error(), "50257"));
    gp.grammar = g0;
    assert_int_equal(tern_generate(f.gen, s, f.prompt, f.n_prompt, &gp, NULL, NULL, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "without a vocabulary"));
    tern_sampler_free(s);
    tern_grammar_free(g0);
    tern_grammar_free(g2);
    tern_grammar_vocab_free(v2);
    tern_tokenizer_free(t2);
    fx_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampled_outputs_validate),
        cmocka_unit_test(test_forced_document),
        cmocka_unit_test(test_max_tokens_inside),
        cmocka_unit_test(test_spec_equal),
        cmocka_unit_test(test_spec_sampled_validate),
        cmocka_unit_test(test_lookup_under_grammar),
        cmocka_unit_test(test_wrong_grammar),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
