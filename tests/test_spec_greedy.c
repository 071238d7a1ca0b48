/* test_spec_greedy.c — speculative decoding at temperature 0 is the target's greedy output,
 * token for token, for every draft source.
 *
 * For each fixture model (both architectures, F16 / Q8_0 / Q6_K / Q4_K_M / Q4_0) and each
 * source (ngram prompt lookup, self:q4_0 and self:q8_0 copies, a drafter file of the same
 * family), several prompts — random ids, text that repeats itself (lookup drafts a lot, the
 * model copies or not), a drafter that disagrees with the target (every draft rejected) — are
 * generated plainly and speculatively, with the adaptive draft length and with a fixed one, and
 * the token streams, stop reasons, KV records and positions must be equal. The F16 and K-quant
 * models are not batch-invariant on the SIMD paths, so this also proves the verify pass runs
 * with exact batches. Also on the scalar path, and for every stop rule (end of generation,
 * callback, max_tokens, full context), follow-up turns and the prompt cache. */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

enum { NGEN = 32, MAXP = 96 };

struct out {
    int32_t tok[512];
    int n;
    int stop_at;        /* on_token returns 1 at this index (-1: never) */
};

static int on_tok(int32_t id, void *user)
{
    struct out *o = user;
    if (o->n < 512) o->tok[o->n] = id;
    return o->n++ == o->stop_at;
}

struct setup {
    struct tern_model *m;
    struct tern_tokenizer *tk;
    struct tern_context *ctx;
    struct tern_generator *g;
    struct tern_sampler *s;
};

static void setup_open(struct setup *su, const char *path, int n_ctx)
{
    assert_tern_ok(tern_model_load(path, NULL, &su->m));
    assert_tern_ok(tern_tokenizer_from_gguf(tern_model_gguf(su->m), &su->tk));
    struct tern_context_params cp = {.n_ctx = n_ctx, .n_threads = 2};
    assert_tern_ok(tern_context_create(su->m, &cp, &su->ctx));
    assert_tern_ok(tern_generator_create(su->ctx, su->tk, &su->g));
    struct tern_sampler_params sp = tern_sampler_default_params();
    assert_tern_ok(tern_sampler_create(&sp, tern_model_n_vocab(su->m), &su->s));
}

static void setup_close(struct setup *su)
{
    tern_generator_free(su->g);
    tern_sampler_free(su->s);
    tern_context_free(su->ctx);
    tern_tokenizer_free(su->tk);
    tern_model_free(su->m);
}

static struct tern_draft *draft_for(struct setup *su, const char *src, int n_min, int n_max)
{
    struct tern_draft_params dp = tern_draft_default_params();
    dp.source = src;
    dp.n_min = n_min;
    dp.n_max = n_max;
    dp.n_ctx = tern_context_n_ctx(su->ctx);
    dp.n_threads = 2;
    struct tern_draft *d;
    assert_tern_ok(tern_draft_create(su->m, &dp, &d));
    return d;
}

static void gen(struct setup *su, struct tern_draft *d, const int32_t *p, int n, int max_tokens,
                bool ignore_eog, struct out *o, struct tern_gen_stats *st)
{
    assert_tern_ok(tern_generator_set_draft(su->g, d));
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = max_tokens;
    gp.ignore_eog = ignore_eog;
    gp.on_token = on_tok;
    o->n = 0;
    assert_tern_ok(tern_generate(su->g, su->s, p, n, &gp, NULL, o, st));
    assert_tern_ok(tern_generator_set_draft(su->g, NULL));
}

static void expect_same(const struct out *a, const struct out *b, const char *what)
{
    int diff = -1;
    for (int i = 0; i < a->n && i < b->n && diff < 0; i++)
        if (a->tok[i] != b->tok[i]) diff = i;
    if (a->n != b->n || diff >= 0)
        fail_msg("%s: plain %d tokens, speculative %d, first difference at %d", what, a->n, b->n, diff);
}

/* Prompts: kind 0 random ids, 1 a repeated 5-token phrase (the lookup drafts from it), 2 the
 * ids counting up (a repeated structure the model does not continue). */
static int make_prompt(int kind, int seed, int nv, int32_t *p)
{
    uint64_t x = 1000 + (uint64_t)seed * 7919;
    const int n = 24 + seed % 17;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int32_t r = (int32_t)((x >> 33) % (uint64_t)(nv - 300) + 259);
        p[i] = kind == 0 ? r : kind == 1 ? (i < 5 ? r : p[i - 5]) : (int32_t)(300 + seed * 13 + i);
    }
    return n;
}

/* After a generation: the logits of one more token decoded after everything the generator
 * kept, into out (n_vocab floats); the cache is left as it was. */
static void probe(struct setup *su, float *out)
{
    const int n = tern_kv_n_pos(su->ctx);
    const int32_t t = 300;
    assert_tern_ok(tern_decode(su->ctx, &t, 1, n, TERN_LOGITS_LAST));
    memcpy(out, tern_context_logits(su->ctx, 0), sizeof(float) * (size_t)tern_model_n_vocab(su->m));
    assert_tern_ok(tern_kv_truncate(su->ctx, n));
}

/* Every source x prompt x {adaptive, fixed 4} for one model; returns drafted tokens seen. */
static long check_model(const char *model, const char *drafter, int n_prompts, int ngen)
{
    char rel[160];
    snprintf(rel, sizeof rel, "fixtures/models/%s.gguf", model);
    struct setup su;
    setup_open(&su, test_shared_path(rel), 256);
    const int nv = tern_model_n_vocab(su.m);
    char dpath[4096];
    snprintf(dpath, sizeof dpath, "%s", test_shared_path(drafter));
    const char *sources[] = {"ngram", "self:q4_0", "self:q8_0", dpath};
    float *probe_a = malloc(sizeof(float) * (size_t)nv), *probe_b = malloc(sizeof(float) * (size_t)nv);
    long drafted = 0, accepted = 0;
    for (size_t si = 0; si < sizeof sources / sizeof sources[0]; si++) {
        /* the adaptive length (timing-driven) on even prompts, a fixed k = 4 on odd ones */
        struct tern_draft *dd[2] = {draft_for(&su, sources[si], 0, 0), draft_for(&su, sources[si], 4, 4)};
        {
            for (int pi = 0; pi < n_prompts; pi++) {
                const int fixed = pi % 2;
                struct tern_draft *d = dd[fixed];
                int32_t p[MAXP];
                const int n = make_prompt(pi % 3, pi, nv, p);
                struct out a = {.stop_at = -1}, b = {.stop_at = -1};
                struct tern_gen_stats sa, sb;
                tern_generator_reset(su.g);
                gen(&su, NULL, p, n, ngen, true, &a, &sa);
                probe(&su, probe_a);
                tern_generator_reset(su.g);
                gen(&su, d, p, n, ngen, true, &b, &sb);
                probe(&su, probe_b);
                char what[256];
                snprintf(what, sizeof what, "%s, draft %s%s, prompt %d", model, sources[si],
                         fixed ? " (k = 4)" : "", pi);
                expect_same(&a, &b, what);
                assert_int_equal(sb.n_generated, sa.n_generated);
                assert_int_equal(sb.stop, sa.stop);
                assert_true(sb.spec_exact);
                /* the KV cache holds the same bits: a token decoded after it gets the same
                 * logits (rows verified in a batch without exact batches would differ) */
                if (memcmp(probe_a, probe_b, sizeof(float) * (size_t)nv))
                    fail_msg("%s: the KV cache after speculation differs from plain decoding's", what);
                drafted += sb.spec_drafted;
                accepted += sb.spec_accepted;
            }
        }
        tern_draft_free(dd[0]);
        tern_draft_free(dd[1]);
    }
    free(probe_a);
    free(probe_b);
    print_message("%s (%s): identical; %ld drafted, %ld accepted\n", model, kern_isa_name(), drafted, accepted);
    setup_close(&su);
    return drafted;
}

static void test_identity_native(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/models");
    (void)dir;
    static const char *pairs[][2] = {
        {"llama-spm-tiny-f16", "fixtures/models/llama-spm-tiny-q4_0.gguf"},
        {"llama-spm-tiny-q8_0", "fixtures/models/llama-spm-tiny-q4_0.gguf"},
        {"llama-spm-tiny-q6_k", "fixtures/models/llama-spm-tiny-q8_0.gguf"},
        {"llama-spm-tiny-q4_k_m", "fixtures/models/llama-spm-tiny-q8_0.gguf"},
        {"llama-spm-tiny-q4_0", "fixtures/models/llama-spm-tiny-f16.gguf"},
        {"qwen2-tiny-f16", "fixtures/models/qwen2-tiny-q4_0.gguf"},
        {"qwen2-tiny-q8_0", "fixtures/models/qwen2-tiny-q4_0.gguf"},
        {"qwen2-tiny-q4_0", "fixtures/models/qwen2-tiny-q8_0.gguf"},
    };
    long drafted = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        drafted += check_model(pairs[i][0], pairs[i][1], 6, NGEN);
    assert_true(drafted > 1000); /* speculation really ran */
}

static void test_identity_scalar(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/models");
    (void)dir;
    char keep[16];
    snprintf(keep, sizeof keep, "%s", kern_isa_name());
    assert_true(kern_force_isa("scalar"));
    check_model("llama-spm-tiny-q4_k_m", "fixtures/models/llama-spm-tiny-q8_0.gguf", 2, 16);
    check_model("qwen2-tiny-f16", "fixtures/models/qwen2-tiny-q8_0.gguf", 2, 16);
    kern_force_isa(keep);
}

/* A drafter with other random weights (same byte-level tokenizer): almost every draft is
 * rejected, and the output is still the target's. */
static void test_all_rejected(void **state)
{
    (void)state;
    char tp[4096], dp[4096];
    snprintf(tp, sizeof tp, "%s/tiny-a.gguf", test_tmpdir());
    snprintf(dp, sizeof dp, "%s/tiny-b.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("tiny", "f16", 5, tp, NULL));
    assert_tern_ok(tern_synth_model_write("tiny", "q8_0", 6, dp, NULL));
    struct setup su;
    setup_open(&su, tp, 256);
    struct tern_draft *d = draft_for(&su, dp, 4, 4);
    long drafted = 0, accepted = 0;
    for (int pi = 0; pi < 6; pi++) {
        int32_t p[MAXP];
        const int n = make_prompt(pi % 3, pi, tern_model_n_vocab(su.m), p);
        struct out a = {.stop_at = -1}, b = {.stop_at = -1};
        struct tern_gen_stats sa, sb;
        tern_generator_reset(su.g);
        gen(&su, NULL, p, n, NGEN, true, &a, &sa);
        tern_generator_reset(su.g);
        gen(&su, d, p, n, NGEN, true, &b, &sb);
        expect_same(&a, &b, "tiny, other-seed drafter");
        drafted += sb.spec_drafted;
        accepted += sb.spec_accepted;
        assert_true(sb.spec_rollback_p50 >= 0.75);
    }
    print_message("other-seed drafter: %ld drafted, %ld accepted\n", drafted, accepted);
    assert_true(drafted > 100 && accepted * 10 < drafted);
    tern_draft_free(d);
    setup_close(&su);
}

/* qwen2-tiny repeats one token under greedy decoding: the lookup drafts it every round and the
 * target accepts everything. */
static void test_repeating_target(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    struct setup su;
    setup_open(&su, path, 512);
    struct tern_draft *d = draft_for(&su, "ngram", 8, 8);
    int32_t p[MAXP];
    const int n = make_prompt(0, 3, tern_model_n_vocab(su.m), p);
    struct out a = {.stop_at = -1}, b = {.stop_at = -1};
    struct tern_gen_stats sa, sb;
    gen(&su, NULL, p, n, 200, true, &a, &sa);
    tern_generator_reset(su.g);
    gen(&su, d, p, n, 200, true, &b, &sb);
    expect_same(&a, &b, "qwen2-tiny repeating");
    print_message("repeating target: %d rounds, %d plain steps, %d/%d accepted, %.2f per round\n",
                  sb.spec_rounds, sb.spec_plain_steps, sb.spec_accepted, sb.spec_drafted,
                  sb.spec_mean_accepted);
    assert_true(sb.spec_accept_rate > 0.95);
    assert_true(sb.spec_mean_accepted > 7.0);
    assert_true(sb.spec_rounds + sb.spec_plain_steps < 40); /* 199 tokens after the first */
    tern_draft_free(d);
    setup_close(&su);
}

/* Every way generation can end gives the same tokens, the same reason and the same KV record. */
static void test_stop_rules(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-f16.gguf");
    struct setup su;
    setup_open(&su, path, 64);
    struct tern_draft *d = draft_for(&su, "ngram", 6, 6);
    int32_t p[MAXP];
    const int n = make_prompt(0, 1, tern_model_n_vocab(su.m), p);
    /* callback stop at token 0..9, max_tokens 1..12, a context that fills (64 positions) */
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 12; v++) {
            struct out a = {.stop_at = c == 0 ? v : -1}, b = {.stop_at = c == 0 ? v : -1};
            const int maxt = c == 1 ? v + 1 : c == 2 ? 100 : 50;
            struct tern_gen_stats sa, sb;
            tern_generator_reset(su.g);
            gen(&su, NULL, p, n, maxt, true, &a, &sa);
            int na;
            const int32_t *ha = tern_generator_tokens(su.g, &na);
            int32_t rec[64];
            memcpy(rec, ha, sizeof(int32_t) * (size_t)na);
            const int kva = tern_kv_n_pos(su.ctx);
            tern_generator_reset(su.g);
            gen(&su, d, p, n, maxt, true, &b, &sb);
            expect_same(&a, &b, "stop rules");
            assert_int_equal(sa.stop, sb.stop);
            int nb;
            const int32_t *hb = tern_generator_tokens(su.g, &nb);
            assert_int_equal(na, nb);
            assert_memory_equal(rec, hb, sizeof(int32_t) * (size_t)na);
            assert_int_equal(kva, tern_kv_n_pos(su.ctx));
            if (c == 2) assert_int_equal(sb.stop, TERN_GEN_STOP_CONTEXT_FULL);
            if (c == 1) assert_int_equal(sb.n_generated, maxt);
        }
    tern_draft_free(d);
    setup_close(&su);

    /* end of generation: a copy of the model whose metadata makes the repeated token an
     * end-of-generation token (eot_token_id) stops both runs at its first occurrence, also
     * when it arrives as an accepted draft */
    struct out a = {.stop_at = -1}, b = {.stop_at = -1};
    struct tern_gen_stats sa, sb;
    setup_open(&su, path, 64);
    gen(&su, NULL, p, n, 30, true, &a, &sa);
    const int32_t rep = a.tok[6]; /* qwen2-tiny repeats one token */
    setup_close(&su);
    char eot_path[4096];
    snprintf(eot_path, sizeof eot_path, "%s/qwen2-tiny-eot.gguf", test_tmpdir());
    struct tern_gguf *src;
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_open(path, &src));
    assert_tern_ok(tern_gguf_writer_create(0, &w));
    for (int64_t i = 0; i < tern_gguf_n_kv(src); i++) assert_tern_ok(tern_gguf_writer_copy_kv(w, src, i));
    assert_tern_ok(tern_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)rep));
    for (int64_t i = 0; i < tern_gguf_n_tensors(src); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(src, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        assert_tern_ok(tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
    }
    assert_tern_ok(tern_gguf_writer_write(w, eot_path));
    tern_gguf_writer_free(w);
    tern_gguf_close(src);
    setup_open(&su, eot_path, 64);
    d = draft_for(&su, "ngram", 6, 6);
    gen(&su, NULL, p, n, 30, false, &a, &sa);
    tern_generator_reset(su.g);
    gen(&su, d, p, n, 30, false, &b, &sb);
    expect_same(&a, &b, "eog");
    assert_int_equal(sa.stop, TERN_GEN_STOP_EOG);
    assert_int_equal(sb.stop, TERN_GEN_STOP_EOG);
    assert_int_equal(b.tok[b.n - 1], rep);
    tern_draft_free(d);
    setup_close(&su);
}

/* A second turn extends the first (only the new part is decoded), and a prefix cache restores the
 * prompt: both with speculation give the plain result. */
static void test_turns_and_prefix_cache(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-q8_0.gguf");
    struct setup su;
    setup_open(&su, path, 512);
    struct tern_draft *d = draft_for(&su, "self:q4_0", 3, 3); /* fixed: speculate every round */
    const int nv = tern_model_n_vocab(su.m);
    int32_t p[300];
    for (int i = 0; i < 300; i++) p[i] = (int32_t)((i * 37 + 11) % (nv - 300) + 259);
    struct out a = {.stop_at = -1}, b = {.stop_at = -1};
    struct tern_gen_stats sa, sb;
    /* turn 1 then turn 2 = turn 1's prompt + its answer + more */
    gen(&su, NULL, p, 100, 30, true, &a, &sa);
    int32_t p2[300];
    memcpy(p2, p, sizeof(int32_t) * 100);
    memcpy(p2 + 100, a.tok, sizeof(int32_t) * 30);
    memcpy(p2 + 130, p + 200, sizeof(int32_t) * 20);
    gen(&su, NULL, p2, 150, 30, true, &a, &sa);
    tern_generator_reset(su.g);
    gen(&su, d, p, 100, 30, true, &b, &sb);
    gen(&su, d, p2, 150, 30, true, &b, &sb);
    expect_same(&a, &b, "second turn");
    assert_int_equal(sa.n_reused, sb.n_reused);
    assert_true(sb.n_reused >= 129);

    /* prefix cache: a fresh context restores the first 128 tokens */
    struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
    struct tern_prefix_cache *pc;
    assert_tern_ok(tern_prefix_cache_create(su.m, &pp, &pc));
    tern_generator_set_prefix_cache(su.g, pc);
    tern_generator_reset(su.g);
    gen(&su, NULL, p, 200, 30, true, &a, &sa); /* stores the blocks */
    tern_generator_reset(su.g);
    gen(&su, d, p, 200, 30, true, &b, &sb);
    expect_same(&a, &b, "prefix cache");
    assert_true(sb.n_reused >= 160);
    assert_true(sb.spec_rounds > 0);
    tern_generator_set_prefix_cache(su.g, NULL);
    tern_prefix_cache_free(pc);
    tern_draft_free(d);
    setup_close(&su);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_native),
        cmocka_unit_test(test_identity_scalar),
        cmocka_unit_test(test_all_rejected),
        cmocka_unit_test(test_repeating_target),
        cmocka_unit_test(test_stop_rules),
        cmocka_unit_test(test_turns_and_prefix_cache),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
