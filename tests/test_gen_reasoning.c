/* test_gen_reasoning.c — the reasoning control of tern_generate (tern_gen_params.reasoning) on
 * the random-weight fixture model, greedy: with a budget of N tokens the output is N sampled
 * tokens (the same as an uncontrolled run's first N), then exactly the close tokens, then the
 * answer; stats.reasoning_tokens = N + the close; a grammar waits for the end of the reasoning
 * (its document starts right after the close; without the control it starts at the first
 * token); a budget of 0 closes at once; an end text the model writes ends the reasoning without
 * forcing; bad controls are refused. The tern serve side is tests/server/reasoning.mjs. */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#define MAXT 64

struct run {
    int32_t ids[MAXT];
    int n;
    char text[4096];
    size_t len;
};

static int on_token(int32_t id, void *user)
{
    struct run *r = user;
    if (r->n < MAXT) r->ids[r->n++] = id;
    return 0;
}

static int on_piece(const char *t, size_t n, void *user)
{
    struct run *r = user;
    if (r->len + n < sizeof r->text) {
        memcpy(r->text + r->len, t, n);
        r->len += n;
        r->text[r->len] = 0;
    }
    return 0;
}

struct fx {
    struct tern_model *m;
    struct tern_tokenizer *tok;
    struct tern_context *ctx;
    struct tern_generator *gen;
    struct tern_sampler *smp;
    int32_t prompt[64], close[16];
    int n_prompt, n_close;
};

static bool fx_open(struct fx *f)
{
    const char *path = test_shared_path("fixtures/models/qwen2-tiny-q8_0.gguf");
    if (!path) return false;
    memset(f, 0, sizeof *f);
    assert_tern_ok(tern_model_load(path, NULL, &f->m));
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(f->m), &f->tok));
    struct tern_context_params cp = {.n_ctx = 256, .n_threads = 2};
    assert_tern_ok(tern_context_create(f->m, &cp, &f->ctx));
    assert_tern_ok(tern_generator_create(f->ctx, f->tok, &f->gen));
    struct tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(f->m), &f->smp));
    const char *p = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n";
    size_t n = 0;
    assert_tern_ok(tern_tokenize(f->tok, p, strlen(p), TERN_TOK_ADD_SPECIAL, f->prompt, 64, &n));
    f->n_prompt = (int)n;
    assert_tern_ok(tern_tokenize(f->tok, "\n</think>\n\n", 11, 0, f->close, 16, &n));
    f->n_close = (int)n;
    return true;
}

static void fx_close(struct fx *f)
{
    tern_sampler_free(f->smp);
    tern_generator_free(f->gen);
    tern_context_free(f->ctx);
    tern_tokenizer_free(f->tok);
    tern_model_free(f->m);
}

static struct tern_gen_stats gen(struct fx *f, const struct tern_reasoning_ctl *rc, const struct tern_grammar *g,
                                 int max, struct run *out)
{
    memset(out, 0, sizeof *out);
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = max;
    gp.on_token = on_token;
    gp.grammar = g;
    if (rc) gp.reasoning = *rc;
    struct tern_gen_stats st;
    tern_generator_reset(f->gen);
    assert_tern_ok(tern_generate(f->gen, f->smp, f->prompt, f->n_prompt, &gp, on_piece, out, &st));
    return st;
}

static void test_budget(void **state)
{
    (void)state;
    struct fx f;
    if (!fx_open(&f)) TEST_SKIP("fixture model not found (../shared)");
    struct run free_run, r;
    gen(&f, NULL, NULL, 30, &free_run);
    assert_null(strstr(free_run.text, "</think>")); /* the random model never closes it itself */
    for (int budget = 0; budget <= 9; budget += 3) {
        struct tern_reasoning_ctl rc = {.open = true, .end = "</think>", .budget = budget, .close = f.close, .n_close = f.n_close};
        struct tern_gen_stats st = gen(&f, &rc, NULL, 30, &r);
        assert_int_equal(r.n, 30);
        /* the reasoning is what the model says unforced; then the close, token for token */
        assert_memory_equal(r.ids, free_run.ids, sizeof(int32_t) * (size_t)budget);
        assert_memory_equal(r.ids + budget, f.close, sizeof(int32_t) * (size_t)f.n_close);
        assert_int_equal(st.reasoning_tokens, budget + f.n_close);
        assert_non_null(strstr(r.text, "\n</think>\n\n"));
    }
    /* no budget: nothing forced, the same output as without any control */
    struct tern_reasoning_ctl rc = {.open = true, .end = "</think>", .budget = -1};
    struct tern_gen_stats st = gen(&f, &rc, NULL, 30, &r);
    assert_memory_equal(r.ids, free_run.ids, sizeof(int32_t) * 30);
    assert_int_equal(st.reasoning_tokens, 30);
    fx_close(&f);
}

static void test_grammar_after_reasoning(void **state)
{
    (void)state;
    struct fx f;
    if (!fx_open(&f)) TEST_SKIP("fixture model not found (../shared)");
    struct tern_grammar_vocab *v;
    struct tern_grammar *g;
    assert_tern_ok(tern_grammar_vocab_create(f.tok, &v));
    struct tern_grammar_params p = tern_grammar_default_params();
    const char *gbnf = "root ::= \"{\\\"ok\\\": \" (\"true\" | \"false\") \"}\"";
    assert_tern_ok(tern_grammar_from_gbnf(v, gbnf, strlen(gbnf), &p, &g));
    struct run r, free_run;
    gen(&f, NULL, NULL, 30, &free_run);
    /* without the control the document starts at the first token */
    gen(&f, NULL, g, 30, &r);
    assert_true(!strcmp(r.text, "{\"ok\": true}") || !strcmp(r.text, "{\"ok\": false}"));
    /* with it: 5 free tokens of reasoning, the close, then the document, then the end */
    struct tern_reasoning_ctl rc = {.open = true, .end = "</think>", .budget = 5, .close = f.close, .n_close = f.n_close};
    struct tern_gen_stats st = gen(&f, &rc, g, 60, &r);
    assert_memory_equal(r.ids, free_run.ids, sizeof(int32_t) * 5);
    const char *after = strstr(r.text, "\n</think>\n\n");
    assert_non_null(after);
    after += strlen("\n</think>\n\n");
    assert_true(!strcmp(after, "{\"ok\": true}") || !strcmp(after, "{\"ok\": false}"));
    assert_int_equal(st.stop, TERN_GEN_STOP_DONE);
    tern_grammar_free(g);
    tern_grammar_vocab_free(v);
    fx_close(&f);
}

static void test_natural_end(void **state)
{
    (void)state;
    struct fx f;
    if (!fx_open(&f)) TEST_SKIP("fixture model not found (../shared)");
    struct run free_run, r;
    gen(&f, NULL, NULL, 30, &free_run);
    /* an end text the model writes anyway (the text of its 4th..5th tokens) ends the reasoning
     * there: nothing is forced later, however small the budget left */
    char end[32] = {0};
    size_t off = 0;
    for (int i = 3; i < 5; i++) {
        char buf[64];
        size_t n;
        assert_tern_ok(tern_token_to_piece(f.tok, free_run.ids[i], 0, buf, sizeof buf, &n));
        assert_true(off + n < sizeof end);
        memcpy(end + off, buf, n);
        off += n;
    }
    struct tern_reasoning_ctl rc = {.open = true, .end = end, .budget = 8, .close = f.close, .n_close = f.n_close};
    struct tern_gen_stats st = gen(&f, &rc, NULL, 30, &r);
    assert_memory_equal(r.ids, free_run.ids, sizeof(int32_t) * 30); /* never forced */
    assert_true(st.reasoning_tokens <= 5);
    fx_close(&f);
}

static void test_bad_controls(void **state)
{
    (void)state;
    struct fx f;
    if (!fx_open(&f)) TEST_SKIP("fixture model not found (../shared)");
    struct tern_gen_params gp = tern_gen_default_params();
    gp.reasoning = (struct tern_reasoning_ctl){.open = true, .end = "</think>", .budget = 4, .n_close = 0};
    assert_int_equal(tern_generate(f.gen, f.smp, f.prompt, f.n_prompt, &gp, NULL, NULL, NULL), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "close tokens"));
    gp.reasoning = (struct tern_reasoning_ctl){.open = true, .end = "", .budget = -1};
    assert_int_equal(tern_generate(f.gen, f.smp, f.prompt, f.n_prompt, &gp, NULL, NULL, NULL), TERN_ERR_ARG);
    gp.reasoning = (struct tern_reasoning_ctl){.open = true, .end = "</think>", .budget = -5};
    assert_int_equal(tern_generate(f.gen, f.smp, f.prompt, f.n_prompt, &gp, NULL, NULL, NULL), TERN_ERR_ARG);
    fx_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_grammar_after_reasoning),
        cmocka_unit_test(test_natural_end),
        cmocka_unit_test(test_bad_controls),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
