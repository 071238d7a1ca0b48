/* test_arch_parity.c — the architectures beyond llama / qwen2 (qwen3, smollm3, phi3, gemma3, gemma4)
 * against ik_llama.cpp: tiny random-weight models written by tern synth, reference logits and
 * greedy continuations dumped by ik_llama.cpp from those very files (tests/data/arch, README.md
 * there says how). The model files are not stored: synth writes them again here and the test
 * first checks that the bytes are the ones the references were made from (SHA-256), so a change
 * to synth cannot silently compare against stale references.
 *
 * Checks and tolerances are the fixture tests' (test_parity.c, shared/fixtures/README.md
 * "Observed tolerances"): the reference's top-20 at every prompt position and teacher-forced
 * greedy step, the full vectors of the .logits.bin, and free-running greedy tokens wherever the
 * reference's margin is decisive. The measured figures are in tests/data/arch/README.md.
 *
 * Also here: the refusals of variants tern does not run, which must name the variant. */
#include "test_support.h"
#include "tern_bench.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct arch_case {
    const char *shape;  /* tern synth shape */
    const char *type;   /* tern synth type */
    const char *ref;    /* tests/data/arch/<ref>.jsonl (+ .logits.bin) */
    const char *sha256; /* of the file synth writes with seed 7 (the one the reference used) */
    double tol;         /* max |logit diff| over top-20 entries and full vectors */
    double mean_tol;    /* mean |diff| over the full vectors */
    const char *convert;/* rewrite the synth file in this type first (tern quantize), or NULL */
};

static const struct arch_case cases[] = {
#include "data/arch/cases.inc"
};

static void sha256_file(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct sha256_ctx h;
    sha256_init(&h);
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&h, n, buf);
    fclose(f);
    uint8_t d[32];
    sha256_digest(&h, 32, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static void check_case(const struct arch_case *c, int threads)
{
    char path[4200], ref[4096], hex[65];
    snprintf(path, sizeof path, "%.3000s/arch-%s-%s.gguf", test_tmpdir(), c->shape, c->type);
    int fb = -1;
    assert_tern_ok(tern_synth_model_write(c->shape, c->type, 7, path, &fb));
    if (c->convert) {
        char conv[4200];
        snprintf(conv, sizeof conv, "%.4000s.%s.gguf", path, c->convert);
        assert_tern_ok(tern_quantize_model(path, conv, c->convert, &fb));
        remove(path);
        snprintf(path, sizeof path, "%s", conv);
    }
    sha256_file(path, hex);
    if (strcmp(hex, c->sha256)) {
        print_error("%s:%s%s%s: tern synth now writes a different file (sha256 %s, the reference was "
                    "made from %s): regenerate tests/data/arch (see its README.md)\n",
                    c->shape, c->type, c->convert ? " -> " : "", c->convert ? c->convert : "", hex,
                    c->sha256);
        fail();
    }
    snprintf(ref, sizeof ref, "%s/tests/data/arch/%s.jsonl", test_source_dir(), c->ref);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    struct tern_ref_report rep;
    assert_tern_ok(tern_ref_check(m, ref, threads, c->tol, NULL, &rep));
    print_message("%-21s t=%d: top-20 %d/%d within %.3g, max |d| %.3g (mean %.3g); full "
                  "vectors max %.3g mean %.3g; greedy %d/%d decisive steps\n",
                  c->ref, threads, rep.top_agree, rep.top_total, c->tol, rep.max_abs_top,
                  rep.mean_abs_top, rep.max_abs_full, rep.mean_abs_full, rep.greedy_match,
                  rep.greedy_checked);
    assert_int_equal(rep.n_seqs, 3);
    assert_int_equal(rep.n_vectors, 3 * 31 + 8 + 64 + 200);
    assert_true(rep.has_full);
    assert_int_equal(rep.top_agree, rep.top_total);
    assert_true(rep.max_abs_top <= c->tol);
    assert_true(rep.max_abs_full <= c->tol);
    assert_true(rep.mean_abs_full <= c->mean_tol);
    assert_int_equal(rep.greedy_match, rep.greedy_checked);
    assert_true(rep.greedy_checked > 0);
    assert_true(rep.pass);
    tern_model_free(m);
    remove(path);
}

static void test_all_1_thread(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 1);
}

/* Threads split rows, tokens and heads differently; the bounds hold all the same. */
static void test_all_2_threads(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 2);
}

/* Sliding-window layers, NoPE layers and q/k norms keep tern's determinism promise: with exact
 * batches, a prompt decoded in one batch, in uneven chunks (blocks then start at other
 * positions) and one token at a time gives the same bits at every position. The windowed
 * attention starts its scores at a block-dependent key, so this is what shows that a query's
 * result does not depend on its block. */
static float *run_chunks(struct tern_model *m, const int32_t *tok, int n, int chunk)
{
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    tern_context_set_exact_batches(ctx, true);
    const int nv = tern_model_n_vocab(m);
    float *out = malloc((size_t)n * (size_t)nv * sizeof *out);
    assert_non_null(out);
    for (int p = 0; p < n; p += chunk) {
        const int c = p + chunk <= n ? chunk : n - p;
        assert_tern_ok(tern_decode(ctx, tok + p, c, p, TERN_LOGITS_ALL));
        for (int i = 0; i < c; i++)
            memcpy(out + (size_t)(p + i) * nv, tern_context_logits(ctx, i), (size_t)nv * sizeof *out);
    }
    tern_context_free(ctx);
    return out;
}

static void test_windowed_layers_exact_in_any_batch(void **state)
{
    (void)state;
    static const char *shapes[] = {"gemma3-tiny", "gemma4-tiny", "phi4-tiny", "smollm3-tiny",
                                   "qwen3-tiny", "qwen35-tiny"};
    enum { N = 150 };
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 7919 + 13) % 500);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/arch-exact-%s.gguf", test_tmpdir(), shapes[k]);
        assert_tern_ok(tern_synth_model_write(shapes[k], "f16", 3, path, NULL));
        struct tern_model *m;
        assert_tern_ok(tern_model_load(path, NULL, &m));
        const size_t nv = (size_t)tern_model_n_vocab(m);
        float *one = run_chunks(m, tok, N, 1);
        static const int chunks[] = {N, 37, 5};
        for (int c = 0; c < 3; c++) {
            float *b = run_chunks(m, tok, N, chunks[c]);
            int diff = 0;
            for (size_t i = 0; i < (size_t)N * nv; i++) diff += memcmp(&b[i], &one[i], sizeof *b) != 0;
            print_message("%-13s chunks of %3d: %d of %zu logits differ from one-token decoding\n",
                          shapes[k], chunks[c], diff, (size_t)N * nv);
            assert_int_equal(diff, 0);
            free(b);
        }
        free(one);
        tern_model_free(m);
        remove(path);
    }
}

/* Gemma 4's KV is laid out per layer (two head sizes, KV heads per kind, shared layers that
 * store nothing): a snapshot of a prefix restored into a fresh context continues exactly as the
 * cold run (exact batches: both give one-token decoding's bits), and its size is the per-layer
 * one, not layers x heads x head_dim. */
static void test_gemma4_snapshot_restores_cold_run(void **state)
{
    (void)state;
    enum { N = 100, P = 60 };
    char path[4096];
    snprintf(path, sizeof path, "%s/arch-snap-gemma4.gguf", test_tmpdir());
    assert_tern_ok(tern_synth_model_write("gemma4-tiny", "f16", 5, path, NULL));
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 31 + 7) % 500);
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    struct tern_context *cold, *warm;
    assert_tern_ok(tern_context_create(m, &cp, &cold));
    assert_tern_ok(tern_context_create(m, &cp, &warm));
    tern_context_set_exact_batches(cold, true);
    tern_context_set_exact_batches(warm, true);
    assert_tern_ok(tern_decode(cold, tok, N, 0, TERN_LOGITS_LAST));
    const int nv = tern_model_n_vocab(m);
    float *want = malloc((size_t)nv * sizeof *want);
    assert_non_null(want);
    memcpy(want, tern_context_logits(cold, N - 1), (size_t)nv * sizeof *want);
    /* layers 0-2: 2 heads x 32, layer 3: 1 x 64, layers 4-5 share: 256 halves per position */
    assert_int_equal(tern_model_kv_bytes(m, 1), 2 * 256 * 2);
    struct tern_kv_snapshot *snap;
    assert_tern_ok(tern_kv_snapshot_create(cold, P, &snap));
    assert_int_equal(tern_kv_snapshot_bytes(snap), (uint64_t)P * 2 * 256 * 2);
    assert_tern_ok(tern_kv_snapshot_restore(warm, snap));
    assert_tern_ok(tern_decode(warm, tok + P, N - P, P, TERN_LOGITS_LAST));
    assert_memory_equal(tern_context_logits(warm, N - P - 1), want, (size_t)nv * sizeof *want);
    tern_kv_snapshot_free(snap);
    free(want);
    tern_context_free(cold);
    tern_context_free(warm);
    tern_model_free(m);
    remove(path);
}

/* A metadata-only GGUF with general.architecture = arch (and expert_count when > 0). */
static void write_header(const char *path, const char *arch, uint32_t n_expert)
{
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    char key[96];
    assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", arch));
    static const char *keys[] = {"embedding_length", "block_count", "attention.head_count",
                                 "feed_forward_length"};
    static const uint32_t vals[] = {64, 1, 4, 128};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, keys[i]);
        assert_tern_ok(tern_gguf_writer_set_u32(w, key, vals[i]));
    }
    if (n_expert) {
        snprintf(key, sizeof key, "%s.expert_count", arch);
        assert_tern_ok(tern_gguf_writer_set_u32(w, key, n_expert));
    }
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
}

static void expect_refusal(const char *arch, uint32_t n_expert, const char *words)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/arch-refuse-%s.gguf", test_tmpdir(), arch);
    write_header(path, arch, n_expert);
    struct tern_model *m = NULL;
    tern_status st = tern_model_load(path, NULL, &m);
    assert_int_equal(st, TERN_ERR_UNSUPPORTED);
    assert_null(m);
    const char *msg = tern_last_error();
    print_message("%s: %s\n", arch, msg);
    assert_non_null(strstr(msg, words));
    remove(path);
}

static void test_refusals_name_the_variant(void **state)
{
    (void)state;
    expect_refusal("qwen3moe", 0, "mixture-of-experts");
    expect_refusal("qwen35moe", 0, "Qwen3.5 mixture-of-experts");
    expect_refusal("gemma4_mtp", 0, "Gemma 4 multi-token-prediction");
    expect_refusal("gemma4-assistant", 0, "Gemma 4 assistant");
    expect_refusal("gemma3n", 0, "Gemma 3n");
    expect_refusal("clip", 0, "vision projector");
    expect_refusal("qwen3vl", 0, "vision-language");
    expect_refusal("mamba", 0, "supported: llama, qwen2, qwen3, smollm3, phi3, gemma3, gemma4, qwen35");
    /* a dense architecture name with experts in its keys is still a MoE file */
    expect_refusal("qwen3", 8, "expert_count is 8: mixture-of-experts");
    expect_refusal("gemma4", 128, "expert_count is 128: mixture-of-experts");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_1_thread),
        cmocka_unit_test(test_all_2_threads),
        cmocka_unit_test(test_windowed_layers_exact_in_any_batch),
        cmocka_unit_test(test_gemma4_snapshot_restores_cold_run),
        cmocka_unit_test(test_refusals_name_the_variant),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
