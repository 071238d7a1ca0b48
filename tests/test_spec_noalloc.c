/* test_spec_noalloc.c — speculative generation allocates nothing per token. Linked with
 * -Wl,--wrap=malloc,calloc,realloc (CMakeLists.txt TERN_ALLOC_COUNTING_TESTS), so every
 * allocation libtern makes is counted (tests/support/alloc_count.c). For prompt lookup and a
 * drafter model (the self:q4_0 copy), greedy and sampling, and both under a grammar, the count runs from the first
 * streamed piece (prompt decoded, draft set up) to the return of tern_generate over 60 tokens,
 * and speculation must really have run (rounds > 0). */
#include "test_support.h"
#include "alloc_count.h"

#include <stdio.h>
#include <string.h>

struct watch {
    long at_first;
    int pieces;
};

static int on_piece(const char *text, size_t len, void *user)
{
    (void)text;
    (void)len;
    struct watch *w = user;
    if (w->pieces++ == 0) w->at_first = test_allocations();
    return 0;
}

/* constrained: under a JSON grammar (the lookup then drafts through forced tokens and matches
 * text, tokenizing continuations: gen_grammar_draft). The grammar's matcher grows its tables
 * as the parse first goes deeper, so the first call may allocate; the generator keeps the
 * matcher for the same grammar, and from the second call on nothing is allocated. */
static void run_with(const char *source, float temp, bool constrained)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/synth.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 11, path, NULL));
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_tokenizer *tok;
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(m), &tok));
    struct tern_context_params cp = {.n_ctx = 256, .n_batch = 64, .n_threads = 2};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = temp;
    sp.top_k = 40;
    sp.repeat_penalty = 1.1f;
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(ctx, tok, &g));
    struct tern_draft_params dp = tern_draft_default_params();
    dp.source = source;
    dp.n_min = dp.n_max = 4; /* speculate every round */
    dp.n_ctx = 256;
    dp.n_threads = 2;
    struct tern_draft *d;
    assert_tern_ok(tern_draft_create(m, &dp, &d));
    assert_tern_ok(tern_generator_set_draft(g, d));
    /* a repetitive prompt, so the lookup finds continuations */
    const char *text = "one two three one two three one two three one two three one two";
    int32_t ids[128];
    size_t n;
    assert_tern_ok(tern_tokenize(tok, text, strlen(text), 0, ids, 128, &n));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 60;
    gp.ignore_eog = true;
    struct tern_grammar_vocab *v = NULL;
    struct tern_grammar *gram = NULL;
    if (constrained) {
        const char *schema = "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":40}";
        assert_tern_ok(tern_grammar_vocab_create(tok, &v));
        assert_tern_ok(tern_grammar_from_json_schema(v, schema, strlen(schema), NULL, &gram));
        gp.grammar = gram;
    }
    struct tern_gen_stats st;
    for (int turn = 0; turn < 3; turn++) { /* the second call: sampler params already set up */
        struct watch w = {.at_first = -1};
        assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, on_piece, &w, &st));
        const long during = test_allocations() - w.at_first;
        print_message("%s%s, temperature %.1f: %d tokens, %d rounds (%d/%d accepted): %ld allocations "
                      "after the first piece\n", source, constrained ? " (grammar)" : "", (double)temp, st.n_generated, st.spec_rounds,
                      st.spec_accepted, st.spec_drafted, during);
        assert_true(w.at_first >= 0);
        assert_true(st.spec_rounds > 0);
        if (!constrained || turn > 0) assert_int_equal(during, 0);
    }
    tern_generator_free(g);
    tern_grammar_free(gram);
    tern_grammar_vocab_free(v);
    tern_draft_free(d);
    tern_sampler_free(s);
    tern_context_free(ctx);
    tern_tokenizer_free(tok);
    tern_model_free(m);
}

static void run(const char *source, float temp) { run_with(source, temp, false); }

static void test_ngram_greedy(void **state) { (void)state; run("ngram", 0.0f); }
static void test_ngram_grammar_greedy(void **state) { (void)state; run_with("ngram", 0.0f, true); }
static void test_model_grammar_greedy(void **state) { (void)state; run_with("self:q4_0", 0.0f, true); }
static void test_ngram_sampling(void **state) { (void)state; run("ngram", 0.9f); }
static void test_model_greedy(void **state) { (void)state; run("self:q4_0", 0.0f); }
static void test_model_sampling(void **state) { (void)state; run("self:q4_0", 0.9f); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_greedy),
        cmocka_unit_test(test_ngram_sampling),
        cmocka_unit_test(test_ngram_grammar_greedy),
        cmocka_unit_test(test_model_grammar_greedy),
        cmocka_unit_test(test_model_greedy),
        cmocka_unit_test(test_model_sampling),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
