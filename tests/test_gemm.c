/* test_gemm.c — the BF16 GEMM paths (src/kernels/gemm_bf16.c) and the threaded split of every
 * path, at the operand layouts and depths the trainer uses. (The F32 paths' accuracy is checked
 * in test_train_ops.c.)
 *
 * Tolerance of a BF16 product. Each operand is rounded to nearest BF16 (8 significant bits), so
 * a = A(1 + d1), b = B(1 + d2) with |d| <= u = 2^-8, and the product of two BF16 is exact in
 * F32: |ab - AB| <= (2u + u^2) |AB| = (2^-7 + 2^-16) |AB|. The K products are then summed in
 * F32 (pairs, slices, then added to C): at most K + 1 roundings of 2^-24 relative each, the
 * classical bound gamma_{K+1} = (K+1) 2^-24 / (1 - (K+1) 2^-24) times sum |ab|. So with
 * S = sum_k |A(i,k) B(k,j)|, for every element
 *     |C - C_exact| <= (2^-7 + 2^-16) S + gamma_{K+2} (1 + 2^-7) S + 2^-24 |C0|,
 * C0 being C before an accumulating call (its own rounding), and the reference itself (double
 * sums, rounded once to F32) adds 2^-24 |R|. Two checks use it:
 *  - against kern_gemm_f32_ref on the F32 operands, with that whole bound (what a caller gets);
 *  - against kern_gemm_f32_ref on operands rounded to BF16 beforehand, with only the F32
 *    summation term: this one catches a wrong rounding (truncation is off by up to 2u per
 *    operand, far above gamma_K for these K) or a lost pair, which the wider bound might not.
 * The worst ratio error / bound is printed: the bound is a worst case, typical errors are
 * ~1/sqrt(K) of it. Both run on the plain-C path everywhere and on AVX512-BF16 where the CPU
 * has it (else that part is skipped, saying so). */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_f32.h"
#include "util/fp16.h"
#include "util/threadpool.h"

static uint64_t rng_state = 777;
static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / 16777216.0) * 2.0f - 1.0f;
}
/* n floats ending at an inaccessible page, so a kernel reading or writing past an operand faults
 * (test_guarded_alloc: the sanitized build leaves the SIMD files uninstrumented) */
static float *falloc(size_t n) { return test_guarded_alloc((n ? n : 1) * sizeof(float), 64); }
static void ffree(float *p) { test_guarded_free(p); }

/* the layouts of the trainer's products (gemm_f32.h): 0 forward X.W^T, 1 dX = dY.W,
 * 2 dW += dY^T.X, 3 A with no unit stride (packed element by element), 4 B with no unit stride */
static struct kern_gemm layout_gemm(int layout, int M, int N, int K, const float *A, const float *B,
                                    float *C)
{
    struct kern_gemm g = {M, N, K, A, K, 1, B, 1, K, C, N, false};
    if (layout == 1) g.brs = N, g.bcs = 1;
    if (layout == 2) g.ars = 1, g.acs = M, g.brs = N, g.bcs = 1, g.accumulate = true;
    if (layout == 3) g.ars = 2 * K, g.acs = 2;
    if (layout == 4) g.brs = 2 * N, g.bcs = 2, g.accumulate = true;
    return g;
}

static float round_bf16(float x) { return bf16_to_f32(bf16_from_f32(x)); }

/* worst error / bound of path p on one shape; rounded: compare with the rounded operands */
static double check_bf16(enum kern_gemm_path p, int M, int N, int K, int layout, bool rounded)
{
    const size_t na = (size_t)M * K * 2, nb = (size_t)K * N * 2;
    float *A = falloc(na), *B = falloc(nb), *Ar = falloc(na), *Br = falloc(nb);
    float *Aabs = falloc(na), *Babs = falloc(nb);
    float *C = falloc((size_t)M * N), *R = falloc((size_t)M * N), *S = falloc((size_t)M * N);
    float *C0 = falloc((size_t)M * N);
    for (size_t i = 0; i < na; i++) A[i] = urand();
    for (size_t i = 0; i < nb; i++) B[i] = urand() * 3.0f; /* not all of one magnitude */
    for (size_t i = 0; i < na; i++) Ar[i] = rounded ? round_bf16(A[i]) : A[i], Aabs[i] = fabsf(A[i]);
    for (size_t i = 0; i < nb; i++) Br[i] = rounded ? round_bf16(B[i]) : B[i], Babs[i] = fabsf(B[i]);
    for (int i = 0; i < M * N; i++) C0[i] = urand();
    memcpy(C, C0, (size_t)M * N * sizeof *C);
    memcpy(R, C0, (size_t)M * N * sizeof *R);
    struct kern_gemm g = layout_gemm(layout, M, N, K, A, B, C);
    struct kern_gemm r = layout_gemm(layout, M, N, K, Ar, Br, R);
    struct kern_gemm s = layout_gemm(layout, M, N, K, Aabs, Babs, S);
    s.accumulate = false;
    float *ws = falloc(kern_gemm_ws_floats());
    kern_gemm_f32(&g, p, ws);
    kern_gemm_f32_ref(&r);
    kern_gemm_f32_ref(&s);
    const double u = 1.0 / 16777216.0, ub = 1.0 / 256.0;
    const double gam = (K + 2) * u / (1 - (K + 2) * u);
    double worst = 0;
    for (int i = 0; i < M * N; i++) {
        const double c0 = g.accumulate ? fabs(C0[i]) : 0.0;
        /* S is a float sum of |a||b| (rounded once): 1 + 2^-23 covers it */
        const double sum = (double)S[i] * (1 + 2 * u);
        const double bound = rounded ? gam * sum + u * c0 + u * fabs(R[i])
                                     : (2 * ub + ub * ub) * sum + gam * (1 + 2 * ub) * sum + u * c0 +
                                           u * fabs(R[i]);
        const double e = fabs((double)C[i] - R[i]) / (bound + 1e-30);
        if (e > worst) worst = e;
    }
    if (worst > 1.0)
        fail_msg("%s M%d N%d K%d layout %d (%s operands): error %.3f x the bound", kern_gemm_path_name(p),
                 M, N, K, layout, rounded ? "rounded" : "F32", worst);
    ffree(A), ffree(B), ffree(Ar), ffree(Br), ffree(Aabs), ffree(Babs), ffree(C), ffree(R), ffree(S), ffree(C0);
    ffree(ws);
    return worst;
}

static void test_bf16_accuracy(void **state)
{
    (void)state;
    /* edges in M, N and K (odd K: a half pair), several K slices (K > 512), the trainer's
     * depths (64, 384, 1024) */
    const int shapes[][3] = {{1, 1, 1},      {12, 32, 2},    {13, 33, 301}, {100, 70, 257},
                             {5, 600, 64},   {200, 17, 513}, {97, 515, 40}, {48, 96, 384},
                             {30, 64, 1024}, {25, 40, 1537}};
    const enum kern_gemm_path paths[] = {KERN_GEMM_BF16_SCALAR, KERN_GEMM_BF16_AVX512};
    for (int p = 0; p < 2; p++) {
        if (!kern_gemm_path_ok(paths[p])) {
            print_message("bf16: path %s not available on this CPU, skipped\n", kern_gemm_path_name(paths[p]));
            continue;
        }
        double w_f32 = 0, w_round = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int layout = 0; layout < 5; layout++) {
                const double a = check_bf16(paths[p], shapes[s][0], shapes[s][1], shapes[s][2], layout, false);
                const double b = check_bf16(paths[p], shapes[s][0], shapes[s][1], shapes[s][2], layout, true);
                if (a > w_f32) w_f32 = a;
                if (b > w_round) w_round = b;
            }
        print_message("bf16 %s: worst error / bound %.3f against F32 operands, %.3f against rounded ones\n",
                      kern_gemm_path_name(paths[p]), w_f32, w_round);
    }
}

/* The plain-C and AVX512-BF16 paths round the same way and sum in the same order: report how
 * many elements differ (vdpbf16ps's internal rounding is the CPU's; the manual's order is what
 * the plain-C path follows), and require both within the bound (above). */
static void test_bf16_paths_agree(void **state)
{
    (void)state;
    if (!kern_gemm_path_ok(KERN_GEMM_BF16_AVX512)) {
        print_message("bf16: no AVX512-BF16 on this CPU, skipped\n");
        return;
    }
    const int M = 61, N = 77, K = 700;
    float *A = falloc((size_t)M * K * 2), *B = falloc((size_t)K * N * 2);
    float *C1 = falloc((size_t)M * N), *C2 = falloc((size_t)M * N), *ws = falloc(kern_gemm_ws_floats());
    for (int i = 0; i < M * K * 2; i++) A[i] = urand();
    for (int i = 0; i < K * N * 2; i++) B[i] = urand();
    int differ = 0;
    double worst = 0;
    for (int layout = 0; layout < 5; layout++) {
        memset(C1, 0, (size_t)M * N * sizeof *C1);
        memset(C2, 0, (size_t)M * N * sizeof *C2);
        struct kern_gemm g1 = layout_gemm(layout, M, N, K, A, B, C1);
        struct kern_gemm g2 = layout_gemm(layout, M, N, K, A, B, C2);
        kern_gemm_f32(&g1, KERN_GEMM_BF16_SCALAR, ws);
        kern_gemm_f32(&g2, KERN_GEMM_BF16_AVX512, ws);
        for (int i = 0; i < M * N; i++) {
            if (C1[i] != C2[i]) differ++;
            const double e = fabs((double)C1[i] - C2[i]) / (fabs((double)C1[i]) + 1e-6);
            if (e > worst) worst = e;
        }
    }
    print_message("bf16: plain-C vs AVX512-BF16: %d of %d elements differ, worst relative %.2g\n",
                  differ, 5 * M * N, worst);
    /* both are within 2^-7 S of the product; the sums' rounding alone differs */
    assert_true(worst < 1e-3);
    ffree(A), ffree(B), ffree(C1), ffree(C2), ffree(ws);
}

/* Threaded calls equal the single-threaded call bit for bit, for every path this CPU runs, at
 * the trainer's layouts (forward, dX, dW accumulating) with K deeper than one slice. */
static void test_threads_identical(void **state)
{
    (void)state;
    const enum kern_gemm_path paths[] = {KERN_GEMM_SCALAR, KERN_GEMM_AVX2, KERN_GEMM_AVX512,
                                         KERN_GEMM_BF16_SCALAR, KERN_GEMM_BF16_AVX512};
    const int shapes[][3] = {{300, 700, 333}, {1000, 130, 1100}, {130, 390, 1500}};
    struct tp *tp2, *tp3;
    assert_tern_ok(tp_create(2, &tp2));
    assert_tern_ok(tp_create(3, &tp3));
    float *ws = falloc(kern_gemm_ws_floats() * 3);
    int ran = 0;
    for (int p = 0; p < 5; p++) {
        if (!kern_gemm_path_ok(paths[p])) continue;
        for (int s = 0; s < 3; s++)
            for (int layout = 0; layout < 3; layout++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                float *A = falloc((size_t)M * K), *B = falloc((size_t)K * N);
                float *C1 = falloc((size_t)M * N), *C2 = falloc((size_t)M * N), *C3 = falloc((size_t)M * N);
                for (int i = 0; i < M * K; i++) A[i] = urand();
                for (int i = 0; i < K * N; i++) B[i] = urand();
                for (int i = 0; i < M * N; i++) C1[i] = C2[i] = C3[i] = urand();
                struct kern_gemm g = layout_gemm(layout, M, N, K, A, B, C1);
                kern_gemm_f32(&g, paths[p], ws);
                g.C = C2;
                kern_gemm_f32_mt(&g, paths[p], ws, tp2);
                g.C = C3;
                kern_gemm_f32_mt(&g, paths[p], ws, tp3);
                if (memcmp(C1, C2, (size_t)M * N * sizeof *C1) || memcmp(C1, C3, (size_t)M * N * sizeof *C1))
                    fail_msg("%s M%d N%d K%d layout %d: threaded result differs", kern_gemm_path_name(paths[p]),
                             M, N, K, layout);
                ffree(A), ffree(B), ffree(C1), ffree(C2), ffree(C3);
                ran++;
            }
    }
    print_message("threads: %d (path, shape, layout) cases identical on 1, 2 and 3 threads\n", ran);
    tp_free(tp2);
    tp_free(tp3);
    ffree(ws);
}

/* Two products side by side (kern_gemm_f32_mt2: the trainer's dX and dW of a layer) equal each
 * one run alone, bit for bit, on 1, 2 and 3 threads (3: one product over one thread, the other
 * over two), a product with fewer rows than its share of threads included. */
static void test_pair_identical(void **state)
{
    (void)state;
    const enum kern_gemm_path paths[] = {KERN_GEMM_SCALAR, KERN_GEMM_AVX2, KERN_GEMM_AVX512,
                                         KERN_GEMM_BF16_SCALAR, KERN_GEMM_BF16_AVX512};
    /* (M, N, K) of the first product and its layout; the second is its dW-shaped partner */
    const int shapes[][4] = {{300, 700, 333, 1}, {40, 130, 1100, 0}, {1024, 384, 1024, 1}};
    struct tp *tp[3] = {NULL, NULL, NULL};
    assert_tern_ok(tp_create(1, &tp[0]));
    assert_tern_ok(tp_create(2, &tp[1]));
    assert_tern_ok(tp_create(3, &tp[2]));
    float *ws = falloc(kern_gemm_ws_floats() * 3);
    int ran = 0;
    for (int p = 0; p < 5; p++) {
        if (!kern_gemm_path_ok(paths[p])) continue;
        for (int s = 0; s < 3; s++) {
            const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            float *A = falloc((size_t)M * K), *B = falloc((size_t)K * N), *A2 = falloc((size_t)K * N);
            float *B2 = falloc((size_t)K * N), *R1 = falloc((size_t)M * N), *R2 = falloc((size_t)N * N);
            float *C1 = falloc((size_t)M * N), *C2 = falloc((size_t)N * N);
            for (int i = 0; i < M * K; i++) A[i] = urand();
            for (int i = 0; i < K * N; i++) B[i] = urand(), A2[i] = urand(), B2[i] = urand();
            for (int i = 0; i < M * N; i++) R1[i] = urand();
            for (int i = 0; i < N * N; i++) R2[i] = urand();
            /* the reference: each product alone, on one thread (R1, R2 become the results) */
            struct kern_gemm g1 = layout_gemm(shapes[s][3], M, N, K, A, B, C1);
            struct kern_gemm g2 = layout_gemm(2, N, N, K, A2, B2, C2);
            memcpy(C1, R1, (size_t)M * N * sizeof *C1);
            memcpy(C2, R2, (size_t)N * N * sizeof *C2);
            kern_gemm_f32(&g1, paths[p], ws);
            kern_gemm_f32(&g2, paths[p], ws);
            for (int t = 0; t < 3; t++) {
                float *D1 = falloc((size_t)M * N), *D2 = falloc((size_t)N * N);
                memcpy(D1, R1, (size_t)M * N * sizeof *D1);
                memcpy(D2, R2, (size_t)N * N * sizeof *D2);
                struct kern_gemm a = g1, b = g2;
                a.C = D1, b.C = D2;
                kern_gemm_f32_mt2(&a, &b, paths[p], ws, tp[t]);
                if (memcmp(C1, D1, (size_t)M * N * sizeof *C1) || memcmp(C2, D2, (size_t)N * N * sizeof *C2))
                    fail_msg("%s M%d N%d K%d on %d threads: the pair differs from each product alone",
                             kern_gemm_path_name(paths[p]), M, N, K, t + 1);
                ffree(D1), ffree(D2);
                ran++;
            }
            ffree(A), ffree(B), ffree(A2), ffree(B2), ffree(R1), ffree(R2), ffree(C1), ffree(C2);
        }
    }
    print_message("pairs: %d (path, shape, threads) cases identical to the products alone\n", ran);
    assert_true(ran > 0);
    for (int t = 0; t < 3; t++) tp_free(tp[t]);
    ffree(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_accuracy),
        cmocka_unit_test(test_bf16_paths_agree),
        cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_pair_identical),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
