/* test_repack.c — weights repacked at load (src/model/model_repack.c, kern_packed.h) change
 * nothing but speed and memory.
 *
 * For the fixture models whose matrices have a packed layout (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K;
 * Q4_1 made here from the F16 fixtures),
 * loaded twice — repacked (the default) and mmap-only (no_repack) — on every kernel path this
 * CPU runs:
 * - what is reported: on avx512 and avx2 (both variants of its tile: with AVX-VNNI and without)
 *   some bytes repacked, no more than the file holds, and for files whose matrices are all
 *   packed and released the file rows handed back; elsewhere nothing.
 * - on avx2 the repacked model gives the avx512 repacked model's logits: bit for bit where every
 *   matrix is packed (the 256-bit tile's float operations are the AVX-512 tile's, lane for lane).
 * - on avx512 a 29-token prompt in one batch (the panels) gives the same logits bit for bit, and
 *   so do four tokens decoded one at a time wherever the mmap-only kernels are batch-invariant
 *   (Q8_0, Q4_0: the decode kernel sums as the panels do); Q4_K and Q6_K matrices' one-token
 *   decode runs the 256-bit tiles mmap-only, so there the two agree within float summation
 *   order. On
 *   avx2 mmap-only runs the row x token tiles: prompt and decode agree within that order, whose
 *   effect the next layer's 8-bit activations amplify (tolerance below).
 * - repacked, a token decoded alone gets the bits it gets inside a batch for Q4_K, Q4_1, Q5_0 and Q6_K
 *   too (tern_model_batch_invariant becomes true for a model whose matrices are all packed).
 * - a model repacked on avx512 or avx2 and then run on the scalar path (kern_force_isa) reads
 *   its released file rows again and gives the mmap-only model's bits there.
 * - TERN_REPACK=0 in the environment turns it off like no_repack. */
#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

#define N_PROMPT 29
#define N_GEN 4

/* Logits of a 29-token prompt (all rows) and of 4 single-token steps after it. */
static float *run(struct tern_model *m, int *n_vocab)
{
    const int nv = tern_model_n_vocab(m);
    *n_vocab = nv;
    struct tern_context_params cp = {.n_ctx = 64, .n_batch = 32, .n_threads = 2, .no_warmup = true};
    struct tern_context *ctx;
    assert_tern_ok(tern_context_create(m, &cp, &ctx));
    float *out = malloc((size_t)(N_PROMPT + N_GEN) * (size_t)nv * sizeof *out);
    assert_non_null(out);
    int32_t toks[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) toks[i] = 1 + (i * 37) % (nv - 1);
    assert_tern_ok(tern_decode(ctx, toks, N_PROMPT, 0, TERN_LOGITS_ALL));
    for (int i = 0; i < N_PROMPT; i++)
        memcpy(out + (size_t)i * nv, tern_context_logits(ctx, i), (size_t)nv * sizeof *out);
    for (int i = 0; i < N_GEN; i++) {
        const int32_t t = 3 + i * 11;
        assert_tern_ok(tern_decode(ctx, &t, 1, N_PROMPT + i, TERN_LOGITS_LAST));
        memcpy(out + (size_t)(N_PROMPT + i) * nv, tern_context_logits(ctx, 0), (size_t)nv * sizeof *out);
    }
    tern_context_free(ctx);
    return out;
}

/* The checks above for the model at path (name: how the messages call it). */
static void check_file(const char *name, const char *path, bool invariant_unpacked, bool pure)
{
    const char *orig = kern_isa_name();
    float *a512 = NULL; /* the avx512 path's repacked logits, when it ran */
    static const char *const paths[] = {"avx512", "avx2+avxvnni", "avx2", "scalar"};
    for (int pi = 0; pi < 4; pi++) {
        const bool avx2 = !strncmp(paths[pi], "avx2", 4);
        if (!kern_force_isa(avx2 ? "avx2" : paths[pi])) continue;
        if (avx2 && !kern_force_avxvnni(pi == 1)) continue;
        struct tern_model *mr, *mm;
        assert_tern_ok(tern_model_load(path, NULL, &mr));
        assert_tern_ok(tern_model_load(path, &(struct tern_model_params){.no_repack = true}, &mm));
        const struct tern_model_info *ir = tern_model_get_info(mr), *im = tern_model_get_info(mm);
        assert_int_equal(im->repacked_bytes, 0);
        assert_int_equal(im->released_bytes, 0);
        const bool avx512 = !strcmp(paths[pi], "avx512"), packs = avx512 || avx2;
        if (!packs) {
            assert_int_equal(ir->repacked_bytes, 0);
        } else {
            assert_true(ir->repacked_bytes > 0);
            assert_true(ir->repacked_bytes <= ir->weight_bytes);
            assert_true(ir->released_bytes <= ir->repacked_bytes);
            if (pure && !test_hparam(mr, "tied_output")) assert_true(ir->released_bytes > 0);
        }
        int nv;
        float *a = run(mr, &nv), *b = run(mm, &nv);
        double maxp = 0, maxd = 0, maxv = 0;
        for (size_t i = 0; i < (size_t)(N_PROMPT + N_GEN) * nv; i++) {
            const double d = fabs((double)a[i] - b[i]);
            if (i < (size_t)N_PROMPT * nv) maxp = fmax(maxp, d);
            else maxd = fmax(maxd, d);
            maxv = fmax(maxv, fabs((double)b[i]));
        }
        print_message("%-22s %-12s repacked %llu bytes (released %llu); prompt max |d| %.3g, "
                      "decode max |d| %.3g of max |logit| %.3g\n", name, paths[pi],
                      (unsigned long long)ir->repacked_bytes, (unsigned long long)ir->released_bytes,
                      maxp, maxd, maxv);
        /* avx2: the mmap-only tiles sum in another order, and a last-bit difference in a matmul
         * output can move an activation across a rounding boundary when the next layer
         * quantizes it to 8 bits, which moves logits by ~1 % of their range (measured up to
         * 1.1 %); test_parity holds both against llama.cpp, and the avx512 check below is exact */
        const double tol = avx2 ? 2e-2 * maxv : 1e-4 * maxv;
        if (!avx2) assert_true(maxp == 0);
        else assert_true(maxp <= tol);
        if (!packs || (avx512 && invariant_unpacked))
            assert_true(maxd == 0);
        else
            assert_true(maxd <= tol);
        if (avx2 && a512) {
            /* the 256-bit tile's bits are the AVX-512 tile's: the whole model agrees exactly where
             * every matrix is packed; else the unpacked ones (Q6_K, Q5_0) run either path's tiles */
            double x = 0;
            for (size_t i = 0; i < (size_t)(N_PROMPT + N_GEN) * nv; i++) x = fmax(x, fabs((double)a[i] - a512[i]));
            print_message("%-22s %-12s vs avx512 repacked: max |d| %.3g\n", name, paths[pi], x);
            if (pure) assert_true(x == 0);
            else assert_true(x <= 1e-5 * maxv);
        }
        if (packs && pure) assert_true(tern_model_batch_invariant(mr));
        if (packs && kern_force_isa("scalar")) {
            /* another path forced after loading reads the released file rows again */
            float *c = run(mr, &nv), *d = run(mm, &nv);
            assert_memory_equal(c, d, (size_t)(N_PROMPT + N_GEN) * nv * sizeof *c);
            free(c);
            free(d);
            assert_true(kern_force_isa(avx512 ? "avx512" : "avx2"));
        }
        if (avx512) a512 = a;
        else free(a);
        free(b);
        tern_model_free(mr);
        tern_model_free(mm);
    }
    free(a512);
    kern_force_avxvnni(true);
    assert_true(kern_force_isa(orig));
}

/* check_file for fixtures/models/<name>.gguf of ../shared. */
static void check_model(const char *name, bool invariant_unpacked, bool pure)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/models/%s.gguf", name);
    TEST_SHARED_OR_SKIP(path, rel);
    check_file(name, path, invariant_unpacked, pure);
}

static void test_q8_0(void **state)
{
    (void)state;
    check_model("qwen2-tiny-q8_0", true, true);
    check_model("llama-spm-tiny-q8_0", true, true);
}

static void test_q4_0(void **state)
{
    (void)state;
    /* qwen2-tiny's tied output is Q8_0 (llama-quantize), and it keeps its unpacked F32 norms only;
     * llama-spm-tiny's separate output is Q6_K, packed too, whose mmap-only decode runs the
     * 256-bit tiles: not the panels' bits */
    check_model("qwen2-tiny-q4_0", true, false);
    check_model("llama-spm-tiny-q4_0", false, true);
}

static void test_q4_k_m(void **state)
{
    (void)state;
    check_model("llama-spm-tiny-q4_k_m", false, true); /* Q4_K and Q6_K: every matrix packed */
}

/* No Q4_1 fixture is shared: the F16 fixtures are quantized here as `tern quantize IN OUT q4_1`
 * writes them (every matrix Q4_1, the output and embedding too: all packed). The mmap-only
 * one-token decode runs the streaming Q5/Q4_1 kernel, which sums in another order than the
 * panels. */
static void test_q4_1(void **state)
{
    (void)state;
    static const char *const names[] = {"qwen2-tiny", "llama-spm-tiny"};
    for (int i = 0; i < 2; i++) {
        char rel[256], out[4096], label[64];
        snprintf(rel, sizeof rel, "fixtures/models/%s-f16.gguf", names[i]);
        TEST_SHARED_OR_SKIP(f16, rel);
        snprintf(out, sizeof out, "%s/%s-q4_1.gguf", test_tmpdir(), names[i]);
        int fallbacks = -1;
        assert_tern_ok(tern_quantize_model(f16, out, "q4_1", &fallbacks));
        assert_int_equal(fallbacks, 0);
        snprintf(label, sizeof label, "%s-q4_1", names[i]);
        check_file(label, out, false, true);
    }
}

static void test_env(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-q8_0.gguf");
    setenv("TERN_REPACK", "0", 1);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    assert_int_equal(tern_model_get_info(m)->repacked_bytes, 0);
    tern_model_free(m);
    unsetenv("TERN_REPACK");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q4_0),
        cmocka_unit_test(test_q4_k_m),
        cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_env),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
