/* test_chat_noalloc.c — tern_generate's per-token loop performs no heap allocation. Linked with
 * -Wl,--wrap=malloc,calloc,realloc (CMakeLists.txt, like test_noalloc), so every allocation
 * libtern makes goes through the counters of tests/support/alloc_count.c. The count runs from the first streamed piece
 * (the prompt is decoded by then) to the return of tern_generate, across 40 sampled tokens. */
#include "test_support.h"
#include "alloc_count.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct watch {
    long at_first; /* counter at the first piece, -1 before it */
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

static void test_generate_loop_does_not_allocate(void **state)
{
    (void)state;
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
    sp.temperature = 0.8f;
    sp.top_k = 40;
    sp.top_p = 0.9f;
    sp.repeat_penalty = 1.1f;
    struct tern_sampler *s;
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(m), &s));
    struct tern_generator *g;
    assert_tern_ok(tern_generator_create(ctx, tok, &g));
    const char *text = "<|im_start|>user\nCount to ten.<|im_end|>\n<|im_start|>assistant\n";
    int32_t ids[128];
    size_t n;
    assert_tern_ok(tern_tokenize(tok, text, strlen(text), TERN_TOK_PARSE_SPECIAL, ids, 128, &n));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 40;
    gp.ignore_eog = true; /* random weights: run the full 40 tokens */
    struct tern_gen_stats st;
    struct watch w = {.at_first = -1};
    assert_tern_ok(tern_generate(g, s, ids, (int)n, &gp, on_piece, &w, &st));
    long during = test_allocations() - w.at_first;
    print_message("%d tokens, %d pieces: %ld allocations after the first piece\n", st.n_generated,
                  w.pieces, during);
    assert_int_equal(st.n_generated, 40);
    assert_true(w.pieces >= 10);
    assert_int_equal(during, 0);
    /* the counter works: creating a generator allocates */
    long before = test_allocations();
    struct tern_generator *g2;
    assert_tern_ok(tern_generator_create(ctx, tok, &g2));
    assert_true(test_allocations() > before);
    tern_generator_free(g2);
    tern_generator_free(g);
    tern_sampler_free(s);
    tern_context_free(ctx);
    tern_tokenizer_free(tok);
    tern_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_loop_does_not_allocate),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
